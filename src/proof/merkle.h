// The audit log as a Merkle tree, as RFC 6962 / RFC 9162 define it:
//   leaf hash  = SHA-256(0x00 || leaf data)
//   node hash  = SHA-256(0x01 || left || right)
//   MTH({})    = SHA-256("")
// The leaves are the audit events in seq order; a leaf's data is its event's
// hash (32 raw bytes; store/audit_log.h says what that hash covers). All
// hashes here are 32 raw bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::proof {

std::string leaf_hash(std::string_view data);
std::string node_hash(std::string_view left, std::string_view right);

// The hashes of the tree's complete subtrees, wherever they are kept:
// node(level, index) is MTH of leaves [index << level, (index + 1) << level),
// so node(0, i) is leaf hash i. Every subtree RFC 6962's recursion names is
// complete or splits into complete ones, so a root or a proof needs O(log n)
// of them, not the leaves.
class MerkleNodes {
 public:
  virtual ~MerkleNodes() = default;
  virtual std::string node(unsigned level, uint64_t index) = 0;
};

// The nodes a root or a proof reads, in the order it reads them: to fetch
// them from a store in one query before computing with them.
struct NodeRef {
  unsigned level = 0;
  uint64_t index = 0;
  bool operator<(const NodeRef& o) const {
    return level != o.level ? level < o.level : index < o.index;
  }
};
std::vector<NodeRef> nodes_for_root(uint64_t size);
std::vector<NodeRef> nodes_for_inclusion(uint64_t index, uint64_t size);
std::vector<NodeRef> nodes_for_consistency(uint64_t old_size, uint64_t size);

std::string tree_root(MerkleNodes& nodes, uint64_t size);
std::vector<std::string> inclusion_proof(MerkleNodes& nodes, uint64_t index, uint64_t size);
std::vector<std::string> consistency_proof(MerkleNodes& nodes, uint64_t old_size, uint64_t size);

// MTH of the first `size` leaf hashes (size <= leaves.size()).
std::string tree_root(const std::vector<std::string>& leaves, uint64_t size);
// The audit path of leaf `index` in the tree of the first `size` leaves.
std::vector<std::string> inclusion_proof(const std::vector<std::string>& leaves, uint64_t index,
                                         uint64_t size);
// The proof that the tree of `old_size` leaves is a prefix of the tree of
// `size` leaves (0 < old_size <= size).
std::vector<std::string> consistency_proof(const std::vector<std::string>& leaves,
                                           uint64_t old_size, uint64_t size);

// RFC 9162 2.1.3.2 and 2.1.4.2; the error says what did not match.
Status verify_inclusion(uint64_t index, uint64_t size, std::string_view leaf,
                        const std::vector<std::string>& proof, std::string_view root);
Status verify_consistency(uint64_t old_size, uint64_t size, std::string_view old_root,
                          std::string_view root, const std::vector<std::string>& proof);

}  // namespace rf::proof
