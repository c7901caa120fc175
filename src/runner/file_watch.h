// A directory watched for the host (file_watch, protocol 0.5; issue 41):
// one inotify descriptor per watch, in the runner's epoll loop. The
// directory, and with `recursive` every directory below it (symlinks never
// followed; directories made later are added as they come), resolve inside
// the sandbox root as every file operation does (FileOps: openat2
// RESOLVE_IN_ROOT), and are watched through that descriptor: a symlink or a
// ".." can never point a watch out of the sandbox. Events are named by the
// sandbox's paths below the path as the host gave it.
//
// Bounds: at most kMaxDirs directories under one watch (a start over it is
// an error naming the bound; a directory made later past it is an
// `overflow` event); the kernel's own queue overflowing is an `overflow`
// event too. The watch ends by itself when its directory is removed or
// moved.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/messages.h"
#include "runner/file_ops.h"

namespace rf::runner {

class DirWatch {
 public:
  static constexpr size_t kMaxDirs = 4096;

  static Result<std::unique_ptr<DirWatch>> start(const FileOps& files, const std::string& path,
                                                 bool recursive);
  int fd() const { return fd_.get(); }

  // What the kernel queued since the last read. `*why` is set when the
  // watch ended (its directory went): nothing more comes then.
  std::vector<proto::FileEvent> read(const FileOps& files, std::string* why);

 private:
  DirWatch(UniqueFd fd, std::string base, bool recursive)
      : fd_(std::move(fd)), base_(std::move(base)), recursive_(recursive) {}
  // Watches `path` and, when recursive, the directories below it.
  // `made` (not null for a directory made after the watch began): gets a
  // create event for every entry already there, which came before its own
  // watch could see it.
  Status add_tree(const FileOps& files, const std::string& path, int depth,
                  std::vector<proto::FileEvent>* made = nullptr);

  UniqueFd fd_;
  std::string base_;  // the sandbox path given, without a trailing '/'
  bool recursive_;
  int root_wd_ = -1;
  std::map<int, std::string> dirs_;  // watch descriptor -> its sandbox path
};

}  // namespace rf::runner
