#include "runner/cred_server.h"

#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "runner/cred_line.h"
#include "runner/cred_socket.h"

namespace rf::runner {
namespace {

using nlohmann::json;

constexpr uint64_t kListenerTag = 0;
constexpr int kAcceptBatch = 16;

// An abstract name ("@x") or a path, as a sockaddr.
bool make_addr(const std::string& name, sockaddr_un* a, socklen_t* len) {
  *a = {};
  a->sun_family = AF_UNIX;
  if (name.empty() || name.size() >= sizeof a->sun_path) return false;
  std::memcpy(a->sun_path, name.data(), name.size());
  if (name.front() == '@') a->sun_path[0] = '\0';
  *len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
  return true;
}

void wipe(std::string& s) {
  if (!s.empty()) ::explicit_bzero(s.data(), s.size());
  s.clear();
}

}  // namespace

struct CredServer::Conn {
  UniqueFd fd;
  int pid = 0;
  std::string in;
  std::string out;  // the answer line and the value: wiped once written
  size_t out_off = 0;
  uint32_t request = 0;  // forwarded, waiting for the host
  bool replying = false;
  ~Conn() { wipe(out); }
};

Result<std::unique_ptr<CredServer>> CredServer::listen(const std::string& name, WatchFn watch,
                                                       ForwardFn forward, WithdrawFn withdraw) {
  const std::string where = "--cred-socket " + name;
  sockaddr_un addr;
  socklen_t len = 0;
  if (!make_addr(name, &addr, &len)) {
    return make_error(where, "not a unix socket name (\"@name\" or a path, at most 107 bytes)");
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error(where + ": socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return sys_error(where + ": bind");
  }
  if (::listen(fd.get(), 64) != 0) return sys_error(where + ": listen");
  std::unique_ptr<CredServer> s(
      new CredServer(std::move(watch), std::move(forward), std::move(withdraw), std::move(fd)));
  s->watch_(s->listener_.get(), kListenerTag, EPOLLIN);
  return s;
}

CredServer::CredServer(WatchFn watch, ForwardFn forward, WithdrawFn withdraw, UniqueFd listener)
    : watch_(std::move(watch)),
      forward_(std::move(forward)),
      withdraw_(std::move(withdraw)),
      listener_(std::move(listener)) {}

CredServer::~CredServer() {
  for (auto& [id, c] : conns_) watch_(c->fd.get(), 0, 0);
  watch_(listener_.get(), kListenerTag, 0);
}

void CredServer::on_event(uint64_t tag, uint32_t events) {
  if (tag == kListenerTag) return on_listener();
  on_conn(tag, events);
}

void CredServer::on_listener() {
  for (int i = 0; i < kAcceptBatch; ++i) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fd) return;  // EAGAIN, or a transient error: the next event tries again
    auto c = std::make_unique<Conn>();
    ucred cred{};
    socklen_t clen = sizeof cred;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) c->pid = cred.pid;
    c->fd = std::move(fd);
    const uint64_t id = next_id_++;
    watch_(c->fd.get(), id, EPOLLIN);
    conns_.emplace(id, std::move(c));
  }
}

void CredServer::on_conn(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.replying) {
    if (!flush(c)) close_conn(id);
    return;
  }
  if (c.request != 0) {
    // Waiting for the host: the only thing the asker can still say is goodbye.
    char probe[64];
    const ssize_t n = ::recv(c.fd.get(), probe, sizeof probe, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (events & EPOLLHUP)) {
      close_conn(id);
    }
    return;
  }
  char buf[2048];
  for (;;) {
    const ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) return close_conn(id);  // gone before asking
    c.in.append(buf, static_cast<size_t>(n));
    if (c.in.find('\n') != std::string::npos) return take_line(id, c);
    if (c.in.size() >= kMaxCredLine) {
      return reply(
          id, c, false,
          "rf-cred: the request is longer than " + std::to_string(kMaxCredLine) + " bytes");
    }
  }
}

void CredServer::take_line(uint64_t id, Conn& c) {
  const std::string line = c.in.substr(0, c.in.find('\n'));
  wipe(c.in);
  auto parsed = parse_cred_line(line);
  if (!parsed) return reply(id, c, false, parsed.error().message);
  proto::CredRequest r = std::move(*parsed);
  if (waiting_.size() >= kMaxPending) {
    return reply(id, c, false,
                 "rf-cred: " + std::to_string(kMaxPending) +
                     " requests of this sandbox are waiting already; try again later");
  }
  r.request = next_request_++;
  if (next_request_ == 0) next_request_ = 1;
  r.pid = c.pid;
  if (!forward_(r)) {
    return reply(id, c, false,
                 "rf-cred: this sandbox's host takes no credential requests (protocol 0.1)");
  }
  c.request = r.request;
  waiting_[r.request] = id;
}

void CredServer::answer(const proto::CredAnswer& a, std::string_view value) {
  auto w = waiting_.find(a.request);
  if (w == waiting_.end()) return;  // the asker left: the value goes nowhere
  const uint64_t id = w->second;
  waiting_.erase(w);
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  reply(id, *it->second, a.granted, a.message, a.granted ? value : std::string_view{});
}

void CredServer::reply(uint64_t id, Conn& c, bool granted, const std::string& message,
                       std::string_view value) {
  c.request = 0;
  c.replying = true;
  c.out = json{{"granted", granted}, {"message", message}}.dump(-1, ' ', false,
                                                                json::error_handler_t::replace);
  c.out.push_back('\n');
  c.out.append(value);
  c.out_off = 0;
  if (!flush(c)) return close_conn(id);
  watch_(c.fd.get(), id, EPOLLOUT);
}

bool CredServer::flush(Conn& c) {
  while (c.out_off < c.out.size()) {
    const ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    if (n < 0) return false;
    c.out_off += static_cast<size_t>(n);
  }
  return false;  // all written: done
}

void CredServer::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  const uint32_t request = it->second->request;  // 0 once answered
  watch_(it->second->fd.get(), 0, 0);
  conns_.erase(it);
  if (request == 0) return;
  // Gone while the host decides: the host stops asking a human for it.
  waiting_.erase(request);
  if (withdraw_) withdraw_(request);
}

}  // namespace rf::runner
