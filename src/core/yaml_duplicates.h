// Keys given twice in a YAML mapping (header-only: for the targets that link
// yaml-cpp). YAML leaves them to the reader, and yaml-cpp keeps both: a
// lookup (`node["k"]`) finds the first and a loop over the map sees the last,
// so `verdict: deny` then `verdict: allow` meant allow to one reader and deny
// to another. Every file ringfence reads refuses them instead.
#pragma once

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>
#include <string>

namespace rf {

struct DuplicateKey {
  std::string path;  // "steps[0].run"
  int line = 0;      // 1-based, the second one
  int first_line = 0;
  // "FILE:LINE: PATH" and "duplicate key (first at line N)".
  std::string where(const std::string& file) const {
    return file + ":" + std::to_string(line) + ": " + path;
  }
  std::string message() const {
    return "duplicate key (first at line " + std::to_string(first_line) + ")";
  }
};

namespace yaml_detail {

// `budget` bounds the walk: aliases make a tree of a few lines as large as
// 2^N nodes, and what a walk cannot finish it leaves to the reader's own.
inline std::optional<DuplicateKey> find_duplicate(const YAML::Node& node, const std::string& path,
                                                  long* budget) {
  if (--*budget < 0) return std::nullopt;
  if (node.IsMap()) {
    std::map<std::string, int> seen;
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (!it->first.IsScalar()) continue;
      const std::string& key = it->first.Scalar();
      const std::string at = path.empty() ? key : path + "." + key;
      const int line = it->first.Mark().line + 1;
      const auto [first, fresh] = seen.emplace(key, line);
      if (!fresh) return DuplicateKey{at, line, first->second};
      if (auto d = find_duplicate(it->second, at, budget)) return d;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      if (auto d = find_duplicate(node[i], path + "[" + std::to_string(i) + "]", budget)) return d;
    }
  }
  return std::nullopt;
}

}  // namespace yaml_detail

// The first key given twice in any mapping under `node`, in document order.
inline std::optional<DuplicateKey> find_duplicate_key(const YAML::Node& node) {
  long budget = 100'000;
  return yaml_detail::find_duplicate(node, "", &budget);
}

// A YAML document nested deeper than `max_depth`, or with more than
// `max_nodes` nodes once its aliases are followed (a few lines of anchors
// make 2^N of them): what is wrong, in a sentence, or nullopt. Every reader
// of a file or body from outside checks this before it walks the document,
// so that neither the walk's recursion nor its size is the sender's to pick.
namespace yaml_detail {
inline bool too_large(const YAML::Node& node, int depth, int max_depth, long* budget) {
  if (--*budget < 0 || depth > max_depth) return true;
  if (node.IsMap()) {
    for (auto it = node.begin(); it != node.end(); ++it) {
      if (too_large(it->first, depth + 1, max_depth, budget) ||
          too_large(it->second, depth + 1, max_depth, budget)) {
        return true;
      }
    }
  } else if (node.IsSequence()) {
    for (const auto& v : node) {
      if (too_large(v, depth + 1, max_depth, budget)) return true;
    }
  }
  return false;
}
}  // namespace yaml_detail

inline std::optional<std::string> yaml_too_large(const YAML::Node& root, int max_depth = 64,
                                                 long max_nodes = 200'000) {
  long budget = max_nodes;
  if (!yaml_detail::too_large(root, 0, max_depth, &budget)) return std::nullopt;
  if (budget < 0) {
    return "the document has more than " + std::to_string(max_nodes) + " nodes (aliases included)";
  }
  return "the document is nested deeper than " + std::to_string(max_depth) + " levels";
}

}  // namespace rf
