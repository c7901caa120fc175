#include "runner/call_handoff.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace rf::runner {
namespace {

constexpr uint32_t kMagic = 0x52464331;  // "RFC1"
constexpr int kFds = 5;                  // in, out, err, report, ctl

struct Header {
  uint32_t magic = kMagic;
  uint32_t pty = 0;
  uint32_t counts[3] = {};  // argv, env, candidates
  uint64_t bytes = 0;       // the strings that follow, each NUL-terminated
};

void put(std::string* out, const char* s) { out->append(s, std::strlen(s) + 1); }

Status write_all_blocking(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return sys_error("hand a call to its supervisor");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return ok_status();
}

// Reads exactly `n` bytes; false on EOF before them.
Result<bool> read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return sys_error("supervisor: read a call");
    if (r == 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

Status send_call(int sock, const ChildArgs& a) {
  Header h;
  h.pty = a.pty ? 1 : 0;
  std::string strings;
  put(&strings, a.cwd);
  // argv and envp end with their nullptr, which is not sent.
  for (size_t i = 0; i + 1 < a.argv.size(); ++i) put(&strings, a.argv[i]);
  for (size_t i = 0; i + 1 < a.envp.size(); ++i) put(&strings, a.envp[i]);
  for (const char* c : a.candidates) put(&strings, c);
  h.counts[0] = static_cast<uint32_t>(a.argv.size() - 1);
  h.counts[1] = static_cast<uint32_t>(a.envp.size() - 1);
  h.counts[2] = static_cast<uint32_t>(a.candidates.size());
  h.bytes = strings.size();

  const int fds[kFds] = {a.in, a.out, a.err, a.report, a.ctl};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{&h, sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t n;
  while ((n = ::sendmsg(sock, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (n < 0) return sys_error("hand a call to its supervisor");
  // The descriptors went with the first byte; the rest of the header and the
  // strings follow as plain bytes.
  RF_TRY(write_all_blocking(sock, reinterpret_cast<const char*>(&h) + n, sizeof h - n));
  return write_all_blocking(sock, strings.data(), strings.size());
}

Result<std::optional<ReceivedCall>> receive_call(int sock) {
  Header h;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kFds)] = {};
  iovec iov{&h, sizeof h};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n < 0) return sys_error("supervisor: receive a call");
  if (n == 0) return std::optional<ReceivedCall>();
  ReceivedCall call;
  UniqueFd* slots[kFds] = {&call.in, &call.out, &call.err, &call.report, &call.ctl};
  int got = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (got < kFds) {
        slots[got++]->reset(fd);
      } else {
        ::close(fd);
      }
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || got != kFds) {
    return make_error("supervisor: receive a call", "expected " + std::to_string(kFds) +
                                                        " descriptors, got " + std::to_string(got));
  }
  auto rest = read_exact(sock, reinterpret_cast<char*>(&h) + n, sizeof h - static_cast<size_t>(n));
  if (!rest) return rest.take_error();
  if (!*rest || h.magic != kMagic || h.bytes > (uint64_t{256} << 20) ||
      uint64_t{h.counts[0]} + h.counts[1] + h.counts[2] >= h.bytes) {
    return make_error("supervisor: receive a call", "bad header");
  }
  std::string strings(h.bytes, '\0');
  auto body = read_exact(sock, strings.data(), strings.size());
  if (!body) return body.take_error();
  if (!*body) return make_error("supervisor: receive a call", "the runner closed mid-call");

  size_t at = 0;
  auto next = [&](std::string* out) {
    const size_t end = strings.find('\0', at);
    if (end == std::string::npos) return false;
    out->assign(strings, at, end - at);
    at = end + 1;
    return true;
  };
  bool ok = next(&call.cwd);
  std::vector<std::string>* lists[3] = {&call.argv, &call.env, &call.candidates};
  for (int l = 0; l < 3 && ok; ++l) {
    lists[l]->resize(h.counts[l]);
    for (auto& s : *lists[l]) ok = ok && next(&s);
  }
  if (!ok || at != strings.size()) return make_error("supervisor: receive a call", "bad strings");
  call.pty = h.pty != 0;
  return std::optional<ReceivedCall>(std::move(call));
}

ChildArgs ReceivedCall::args() {
  ChildArgs a;
  a.pty = pty;
  a.in = in.get();
  a.out = out.get();
  a.err = err.get();
  a.report = report.get();
  a.ctl = ctl.get();
  for (auto& s : argv) a.argv.push_back(s.data());
  a.argv.push_back(nullptr);
  for (auto& s : env) a.envp.push_back(s.data());
  a.envp.push_back(nullptr);
  for (const auto& s : candidates) a.candidates.push_back(s.c_str());
  a.cwd = cwd.c_str();
  return a;
}

}  // namespace rf::runner
