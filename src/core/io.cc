#include "core/io.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace rf {

Status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("write");
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return ok_status();
}

bool send_all_within(int fd, std::string_view data, int timeout_ms) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, timeout_ms);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP))) return false;
      continue;
    }
    return false;
  }
  return true;
}

namespace {

// Reads `path` to EOF, or (`whole_if_short`) until a read that does not fill
// the buffer.
Result<std::string> read_text(const std::string& path, bool whole_if_short) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_error("open " + path);
  std::string out;
  char buf[8192];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_error("read " + path);
    }
    out.append(buf, static_cast<size_t>(n));
    if (n == 0 || (whole_if_short && n < static_cast<ssize_t>(sizeof buf))) return out;
  }
}

}  // namespace

Result<std::string> read_file(const std::string& path) { return read_text(path, false); }

Result<std::string> read_kernel_file(const std::string& path) { return read_text(path, true); }

Status write_file(const std::string& path, std::string_view data) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd) return sys_error("open " + path);
  const ssize_t n = ::write(fd.get(), data.data(), data.size());
  if (n < 0) return sys_error("write " + path);
  if (static_cast<size_t>(n) != data.size()) return make_error("write " + path, "short write");
  return ok_status();
}

Status write_file_atomic(const std::string& path, std::string_view data, int mode) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!fd) return sys_error("open " + tmp);
    // A stale tmp file of an earlier run keeps its mode through O_CREAT.
    if (::fchmod(fd.get(), static_cast<mode_t>(mode)) != 0) {
      ::unlink(tmp.c_str());
      return sys_error("chmod " + tmp);
    }
    if (auto s = write_all(fd.get(), data); !s) {
      ::unlink(tmp.c_str());
      return make_error("write " + tmp, s.error().to_string());
    }
    if (::fsync(fd.get()) != 0) {
      ::unlink(tmp.c_str());
      return sys_error("fsync " + tmp);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return sys_error("rename " + tmp + " to " + path, err);
  }
  return ok_status();
}

Status make_private_dirs(const std::string& dir) {
  if (dir.empty()) return ok_status();
  // Parents first: each component that is missing is made 0700.
  std::string part;
  size_t at = 0;
  while (at != std::string::npos) {
    at = dir.find('/', at + 1);
    part = dir.substr(0, at);
    if (part.empty() || part == "/") continue;
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST)
      return sys_error("create directory " + part);
  }
  return ok_status();
}

}  // namespace rf
