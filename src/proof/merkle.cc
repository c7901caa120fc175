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

// log2(n) when n is a power of two.
unsigned level_of(uint64_t n) {
  unsigned l = 0;
  while ((uint64_t{1} << l) < n) ++l;
  return l;
}

bool power_of_two(uint64_t n) { return n != 0 && (n & (n - 1)) == 0; }

// MTH(D[begin, end)). In RFC 6962's recursion a range of 2^l leaves always
// starts at a multiple of 2^l: a complete subtree, one node.
std::string mth(MerkleNodes& d, uint64_t begin, uint64_t end) {
  const uint64_t n = end - begin;
  if (n == 0) return sha256("");
  if (power_of_two(n)) {
    const unsigned l = level_of(n);
    return d.node(l, begin >> l);
  }
  const uint64_t k = split(n);
  return node_hash(mth(d, begin, begin + k), mth(d, begin + k, end));
}

// PATH(m, D[begin, end)).
void path(MerkleNodes& d, uint64_t m, uint64_t begin, uint64_t end, Leaves& out) {
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
void subproof(MerkleNodes& d, uint64_t m, uint64_t begin, uint64_t end, bool b, Leaves& out) {
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

// Complete subtrees computed from the leaves themselves (O(n) in all).
class LeafNodes final : public MerkleNodes {
 public:
  explicit LeafNodes(const Leaves& leaves) : leaves_(leaves) {}
  std::string node(unsigned level, uint64_t index) override {
    if (level == 0) return leaves_[index];
    return node_hash(node(level - 1, 2 * index), node(level - 1, 2 * index + 1));
  }

 private:
  const Leaves& leaves_;
};

// Records which nodes are read; the hashes it gives are placeholders.
class NodeRecorder final : public MerkleNodes {
 public:
  std::string node(unsigned level, uint64_t index) override {
    refs.push_back({level, index});
    return std::string(kHashBytes, '\0');
  }
  std::vector<NodeRef> refs;
};

Error mismatch(const std::string& what) { return make_error("merkle proof", what); }

}  // namespace

std::string leaf_hash(std::string_view data) { return prefixed_hash(0x00, data, {}); }
std::string node_hash(std::string_view left, std::string_view right) {
  return prefixed_hash(0x01, left, right);
}

std::vector<NodeRef> nodes_for_root(uint64_t size) {
  NodeRecorder r;
  (void)tree_root(r, size);
  return std::move(r.refs);
}

std::vector<NodeRef> nodes_for_inclusion(uint64_t index, uint64_t size) {
  NodeRecorder r;
  (void)inclusion_proof(r, index, size);
  return std::move(r.refs);
}

std::vector<NodeRef> nodes_for_consistency(uint64_t old_size, uint64_t size) {
  NodeRecorder r;
  (void)consistency_proof(r, old_size, size);
  return std::move(r.refs);
}

std::string tree_root(MerkleNodes& nodes, uint64_t size) { return mth(nodes, 0, size); }

Leaves inclusion_proof(MerkleNodes& nodes, uint64_t index, uint64_t size) {
  Leaves out;
  if (index < size) path(nodes, index, 0, size, out);
  return out;
}

Leaves consistency_proof(MerkleNodes& nodes, uint64_t old_size, uint64_t size) {
  Leaves out;
  if (old_size > 0 && old_size <= size) subproof(nodes, old_size, 0, size, true, out);
  return out;
}

std::string tree_root(const Leaves& leaves, uint64_t size) {
  if (size > leaves.size()) return sha256("");
  LeafNodes nodes(leaves);
  return tree_root(nodes, size);
}

Leaves inclusion_proof(const Leaves& leaves, uint64_t index, uint64_t size) {
  if (size > leaves.size()) return {};
  LeafNodes nodes(leaves);
  return inclusion_proof(nodes, index, size);
}

Leaves consistency_proof(const Leaves& leaves, uint64_t old_size, uint64_t size) {
  if (size > leaves.size()) return {};
  LeafNodes nodes(leaves);
  return consistency_proof(nodes, old_size, size);
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
