#include "sandbox/file_tree.h"

#include <cstdlib>
#include <deque>

namespace rf {

Result<std::vector<proto::FileInfo>> list_tree(Sandbox& sandbox, const std::string& path,
                                               int depth) {
  if (depth < 1 || depth > kMaxListDepth) {
    return make_error("depth", "expected 1 to " + std::to_string(kMaxListDepth) + ", got " +
                                   std::to_string(depth));
  }
  std::vector<proto::FileInfo> out;
  struct Level {
    std::string relative;  // "" for `path` itself
    int depth;
  };
  std::deque<Level> todo{{"", 1}};
  const std::string base =
      path.size() > 1 && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  while (!todo.empty()) {
    const Level level = todo.front();
    todo.pop_front();
    auto entries = sandbox.list_dir(
        level.relative.empty() ? path : (base == "/" ? "" : base) + "/" + level.relative);
    if (!entries) return entries.take_error();
    for (auto& e : *entries) {
      if (!level.relative.empty()) e.name = level.relative + "/" + e.name;
      if (e.type == "dir" && level.depth < depth) todo.push_back({e.name, level.depth + 1});
      out.push_back(std::move(e));
      if (out.size() > kMaxListEntries) {
        return make_error("depth", "more than " + std::to_string(kMaxListEntries) +
                                       " entries under " + path + " to depth " +
                                       std::to_string(depth) +
                                       ": list a smaller depth or a directory further down");
      }
    }
  }
  return out;
}

Result<int> parse_list_depth(const std::string& text) {
  char* end = nullptr;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || v < 1 || v > kMaxListDepth)
    return make_error("depth", "expected a number from 1 to " + std::to_string(kMaxListDepth));
  return static_cast<int>(v);
}

}  // namespace rf
