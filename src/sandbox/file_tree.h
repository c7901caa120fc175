// A directory listed to a depth (issue 41): the entries of `path`, then of
// each directory among them, down to `depth` levels (1 = the directory
// itself), each named by its path relative to `path` ("src/main.c"). Every
// level is one list_dir of the sandbox, so every path resolves inside it as
// list_dir's do; symlinks are listed, never followed. At most
// kMaxListEntries entries: a tree larger than that is an error naming the
// bound, never a silently cut list.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/result.h"
#include "proto/messages.h"
#include "sandbox/sandbox.h"

namespace rf {

inline constexpr int kMaxListDepth = 16;
inline constexpr size_t kMaxListEntries = 10000;

Result<std::vector<proto::FileInfo>> list_tree(Sandbox& sandbox, const std::string& path,
                                               int depth);

// A request's `depth` (text, from a query): 1 to kMaxListDepth, else an
// error whose where is "depth".
Result<int> parse_list_depth(const std::string& text);

}  // namespace rf
