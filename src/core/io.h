// Small, errno-preserving I/O helpers used on the host side.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace rf {

// Writes all of `data`, retrying on EINTR and short writes.
Status write_all(int fd, std::string_view data);
// All of `data` to socket `fd` without blocking in send (MSG_NOSIGNAL |
// MSG_DONTWAIT, waiting in poll between sends); false once a send fails or
// the peer reads nothing for `timeout_ms`.
bool send_all_within(int fd, std::string_view data, int timeout_ms);
Result<std::string> read_file(const std::string& path);
// A small /proc, sysfs or cgroup file: the kernel makes its text whole with
// one show() when it is read from 0, so a read short of the buffer has all of
// it (one read() instead of read_file's second, for EOF).
Result<std::string> read_kernel_file(const std::string& path);
// Writes `data` to an existing file (cgroup and proc files): open, write, close.
Status write_file(const std::string& path, std::string_view data);
// Creates or replaces a regular file atomically (write to a temp name, rename).
Status write_file_atomic(const std::string& path, std::string_view data, int mode = 0644);

// Makes `dir` and any missing parent, each new one mode 0700 (state that may
// hold secrets: readable by its owner only); existing ones are left as they are.
Status make_private_dirs(const std::string& dir);

}  // namespace rf
