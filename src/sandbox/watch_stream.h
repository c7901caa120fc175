// A directory watch followed as a stream (issue 41 item 3), for every door:
// the watch waits for its runner's frames on a thread of its own while the
// caller's thread writes what comes, so that a client who left is noticed
// (every 100 ms) and the watch is ended inside the sandbox at once, however
// quiet the directory is. The events, each to `emit` (name, data):
//   watching {path, recursive}           once it runs
//   fs {type, path, dir}                 each thing that happened
//   end {reason}                         it ended ("unwatched" is never seen:
//                                        the client left first)
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "core/result.h"
#include "sandbox/sandbox.h"

namespace rf {

using WatchEmit = std::function<void(const char* name, const nlohmann::json& data)>;

// Follows a watch of `path` in `sandbox` until it ends or `gone` says so.
// An error (nothing emitted) when it never began: the path is not a
// directory, is outside what the runner may watch, or the runner is too old.
// Otherwise true when it ended by itself (its `end` emitted), false when the
// client left.
Result<bool> follow_watch(Sandbox& sandbox, const std::string& path, bool recursive,
                          const WatchEmit& emit, const std::function<bool()>& gone);

}  // namespace rf
