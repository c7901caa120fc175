#include "runner/call_handoff.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/fd_passing.h"
#include "core/io.h"

namespace rf::runner {
namespace {

constexpr uint32_t kMagic = 0x52464331;  // "RFC1"
constexpr int kFds = 3;                  // in, out, err

constexpr uint32_t kPty = 1, kSelfProbe = 2;  // Header::flags

struct Header {
  uint32_t magic = kMagic;
  uint32_t flags = 0;
  uint32_t counts[3] = {};  // argv, env, candidates
  uint64_t bytes = 0;       // the strings that follow, each NUL-terminated
};

void put(std::string* out, const char* s) { out->append(s, std::strlen(s) + 1); }

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
  h.flags = (a.pty ? kPty : 0) | (a.self_probe ? kSelfProbe : 0);
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

  // One sendmsg for the header, the strings and the descriptors (with the
  // first byte); what a full socket did not take follows as plain bytes.
  // (The runner ignores SIGPIPE: a supervisor gone is an error here.)
  strings.insert(0, reinterpret_cast<const char*>(&h), sizeof h);
  const int fds[kFds] = {a.in, a.out, a.err};
  auto sent = send_with_fds(sock, strings, fds, "hand a call to its supervisor");
  if (!sent) return sent.take_error();
  if (*sent == strings.size()) return ok_status();
  if (Status w = write_all(sock, std::string_view(strings).substr(*sent)); !w) {
    return make_error("hand a call to its supervisor", w.error().to_string());
  }
  return ok_status();
}

Result<std::optional<ReceivedCall>> receive_call(int sock) {
  // Most calls come whole in the first read (the supervisor is single-threaded:
  // one buffer serves them all); a longer one is read on.
  static char first[16384];
  auto got = receive_with_fds(sock, std::span(first, sizeof first), "supervisor: receive a call");
  if (!got) return got.take_error();
  if (got->bytes == 0) return std::optional<ReceivedCall>();
  const size_t n = got->bytes;
  // The environment may hold credentials: not kept here past this call's start.
  struct Wipe {
    size_t n;
    ~Wipe() { ::explicit_bzero(first, n); }
  } wipe{n};
  if (got->cut || got->fds.size() != kFds) {
    return make_error("supervisor: receive a call", "expected " + std::to_string(kFds) +
                                                        " descriptors, got " +
                                                        std::to_string(got->fds.size()));
  }
  ReceivedCall call;
  UniqueFd* slots[kFds] = {&call.in, &call.out, &call.err};
  for (int i = 0; i < kFds; ++i) *slots[i] = std::move(got->fds[static_cast<size_t>(i)]);
  Header h;
  std::memcpy(&h, first, std::min(n, sizeof h));
  if (n < sizeof h) {
    auto rest = read_exact(sock, reinterpret_cast<char*>(&h) + n, sizeof h - n);
    if (!rest) return rest.take_error();
    if (!*rest) return make_error("supervisor: receive a call", "the runner closed mid-call");
  }
  if (h.magic != kMagic || h.bytes > (uint64_t{256} << 20) ||
      uint64_t{h.counts[0]} + h.counts[1] + h.counts[2] >= h.bytes ||
      (n > sizeof h && n - sizeof h > h.bytes)) {
    return make_error("supervisor: receive a call", "bad header");
  }
  std::string strings(h.bytes, '\0');
  const size_t have = n > sizeof h ? n - sizeof h : 0;
  std::memcpy(strings.data(), first + sizeof h, have);
  auto body = read_exact(sock, strings.data() + have, strings.size() - have);
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
  call.pty = (h.flags & kPty) != 0;
  call.self_probe = (h.flags & kSelfProbe) != 0;
  return std::optional<ReceivedCall>(std::move(call));
}

ChildArgs ReceivedCall::args() {
  ChildArgs a;
  a.pty = pty;
  a.self_probe = self_probe;
  a.in = in.get();
  a.out = out.get();
  a.err = err.get();
  for (auto& s : argv) a.argv.push_back(s.data());
  a.argv.push_back(nullptr);
  for (auto& s : env) a.envp.push_back(s.data());
  a.envp.push_back(nullptr);
  for (const auto& s : candidates) a.candidates.push_back(s.c_str());
  a.cwd = cwd.c_str();
  return a;
}

}  // namespace rf::runner
