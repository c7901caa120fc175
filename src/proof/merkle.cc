#include "proof/merkle.h"

#include <sodium.h>

#include "proof/digest.h"

namespace rf::proof {
namespace {

using Leaves = std::vector<std::string>;

std::string prefixed_hash(unsigned char prefix, std::string_view a, std::string_view b) {
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  crypto_hash_sha256_update(&st, &prefix, 1);
  crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(a.data()), a.size());
  crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(b.data()), b.size());
  std::string md(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256_final(&st, reinterpret_cast<unsigned char*>(md.data()));
  return md;
}

// The largest power of two smaller than n (n > 1).
uint64_t split(uint64_t n) {
  uint64_t k = 1;
  while (k << 1 < n) k <<= 1;
  return k;
}

// MTH(D[begin, end)).
std::string mth(const Leaves& d, uint64_t begin, uint64_t end) {
  const uint64_t n = end - begin;
  if (n == 0) return sha256("");
  if (n == 1) return d[begin];
  const uint64_t k = split(n);
  return node_hash(mth(d, begin, begin + k), mth(d, begin + k, end));
}

// PATH(m, D[begin, end)).
void path(const Leaves& d, uint64_t m, uint64_t begin, uint64_t end, Leaves& out) {
  const uint64_t n = end - begin;
  if (n <= 1) return;
  const uint64_t k = split(n);
  if (m < k) {
    path(d, m, begin, begin + k, out);
    out.push_back(mth(d, begin + k, end));
  } else {
    path(d, m - k, begin + k, end, out);
    out.push_back(mth(d, begin, begin + k));
  }
}

// SUBPROOF(m, D[begin, end), b).
void subproof(const Leaves& d, uint64_t m, uint64_t begin, uint64_t end, bool b, Leaves& out) {
  const uint64_t n = end - begin;
  if (m == n) {
    if (!b) out.push_back(mth(d, begin, end));
    return;
  }
  const uint64_t k = split(n);
  if (m <= k) {
    subproof(d, m, begin, begin + k, b, out);
    out.push_back(mth(d, begin + k, end));
  } else {
    subproof(d, m - k, begin + k, end, false, out);
    out.push_back(mth(d, begin, begin + k));
  }
}

Error mismatch(const std::string& what) { return make_error("merkle proof", what); }

}  // namespace

std::string leaf_hash(std::string_view data) { return prefixed_hash(0x00, data, {}); }
std::string node_hash(std::string_view left, std::string_view right) {
  return prefixed_hash(0x01, left, right);
}

std::string tree_root(const Leaves& leaves, uint64_t size) { return mth(leaves, 0, size); }

Leaves inclusion_proof(const Leaves& leaves, uint64_t index, uint64_t size) {
  Leaves out;
  if (index < size && size <= leaves.size()) path(leaves, index, 0, size, out);
  return out;
}

Leaves consistency_proof(const Leaves& leaves, uint64_t old_size, uint64_t size) {
  Leaves out;
  if (old_size > 0 && old_size <= size && size <= leaves.size())
    subproof(leaves, old_size, 0, size, true, out);
  return out;
}

Status verify_inclusion(uint64_t index, uint64_t size, std::string_view leaf, const Leaves& proof,
                        std::string_view root) {
  if (index >= size) {
    return mismatch("leaf " + std::to_string(index) + " is outside a tree of " +
                    std::to_string(size) + " leaves");
  }
  uint64_t fn = index, sn = size - 1;
  std::string r(leaf);
  for (const auto& p : proof) {
    if (p.size() != kHashBytes) return mismatch("a hash of the inclusion path is not 32 bytes");
    if (sn == 0) return mismatch("the inclusion path is longer than the tree is deep");
    if ((fn & 1) != 0 || fn == sn) {
      r = node_hash(p, r);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      r = node_hash(r, p);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return mismatch("the inclusion path is shorter than the tree is deep");
  if (r != root) {
    return mismatch("the inclusion path of leaf " + std::to_string(index) +
                    " does not lead to the checkpoint's root: the entry or the path was changed");
  }
  return ok_status();
}

Status verify_consistency(uint64_t old_size, uint64_t size, std::string_view old_root,
                          std::string_view root, const Leaves& proof) {
  if (old_size > size) return mismatch("the old tree is larger than the new one");
  if (old_size == size) {
    if (!proof.empty()) return mismatch("a consistency proof between equal sizes must be empty");
    if (old_root != root) return mismatch("two trees of the same size with different roots");
    return ok_status();
  }
  if (old_size == 0) return ok_status();  // the empty tree is a prefix of every tree
  if (proof.empty()) return mismatch("the consistency proof is empty");
  Leaves path = proof;
  if ((old_size & (old_size - 1)) == 0) path.insert(path.begin(), std::string(old_root));
  uint64_t fn = old_size - 1, sn = size - 1;
  while ((fn & 1) != 0) {
    fn >>= 1;
    sn >>= 1;
  }
  std::string fr = path[0], sr = path[0];
  for (size_t i = 1; i < path.size(); ++i) {
    const std::string& c = path[i];
    if (c.size() != kHashBytes) return mismatch("a hash of the consistency proof is not 32 bytes");
    if (sn == 0) return mismatch("the consistency proof is too long");
    if ((fn & 1) != 0 || fn == sn) {
      fr = node_hash(c, fr);
      sr = node_hash(c, sr);
      if ((fn & 1) == 0) {
        while ((fn & 1) == 0 && fn != 0) {
          fn >>= 1;
          sn >>= 1;
        }
      }
    } else {
      sr = node_hash(sr, c);
    }
    fn >>= 1;
    sn >>= 1;
  }
  if (sn != 0) return mismatch("the consistency proof is too short");
  if (fr != old_root) return mismatch("the consistency proof does not lead to the old root");
  if (sr != root) return mismatch("the consistency proof does not lead to the new root");
  return ok_status();
}

}  // namespace rf::proof
