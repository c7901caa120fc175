#include "proxy/edge_link.h"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/fd_passing.h"
#include "core/helper_binary.h"
#include "core/log.h"
#include "core/spawn.h"

namespace rf::proxy {

Result<std::unique_ptr<EdgeLink>> EdgeLink::start(const EdgeLinkOptions& options, OnDone on_done) {
  std::string helper = options.helper;
  if (helper.empty()) {
    auto found = find_helper_binary("ringfence-egress-tls", "RINGFENCE_EGRESS_TLS");
    if (!found) return found.take_error();
    helper = *found;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return sys_error("egress TLS: socketpair");
  }
  UniqueFd ours(sv[0]), theirs(sv[1]);
  std::vector<std::string> args{helper, "--control-fd", "3"};
  if (!options.ca_file.empty()) args.insert(args.end(), {"--ca-file", options.ca_file});
  if (options.run_as) {
    args.insert(args.end(), {"--uid", std::to_string(options.run_as->first), "--gid",
                             std::to_string(options.run_as->second)});
  }
  // Nothing of the worker's environment but where OpenSSL finds the system's CAs.
  std::vector<std::string> env;
  for (const char* name : {"SSL_CERT_FILE", "SSL_CERT_DIR"}) {
    if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  }
  // The socket at fd 3, stdin /dev/null, stdout and stderr the worker's (the
  // helper says only what went wrong, never a value).
  auto pid = spawn_helper(args, {{-1, 0}, {theirs.get(), 3}}, &env);
  if (!pid) return make_error("egress TLS", pid.error().to_string());
  std::unique_ptr<EdgeLink> link(new EdgeLink(std::move(ours), *pid, std::move(on_done)));
  link->reader_ = std::thread([l = link.get()] { l->read_loop(); });
  return link;
}

EdgeLink::EdgeLink(UniqueFd fd, pid_t pid, OnDone on_done)
    : fd_(std::move(fd)), pid_(pid), on_done_(std::move(on_done)) {}

EdgeLink::~EdgeLink() {
  ::shutdown(fd_.get(), SHUT_RDWR);
  if (reader_.joinable()) reader_.join();
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

bool EdgeLink::alive() const {
  std::lock_guard lock(mu_);
  return !dead_;
}

Status EdgeLink::send_bytes(const std::string& bytes, const int* fds, size_t nfds) {
  std::lock_guard lock(send_mu_);
  // A datagram socket: the message goes whole or not at all.
  auto sent = send_with_fds(fd_.get(), bytes, std::span(fds, nfds), "egress TLS: send");
  if (!sent) return sent.take_error();
  return ok_status();
}

Status EdgeLink::send(const edge::Message& message) {
  if (!alive()) return make_error("egress TLS", "ringfence-egress-tls is not running");
  return send_bytes(edge::encode(message), nullptr, 0);
}

Status EdgeLink::hand_over(const edge::Conn& conn, int client_fd, int upstream_fd) {
  {
    std::lock_guard lock(mu_);
    if (dead_) return make_error("egress TLS", "ringfence-egress-tls is not running");
    in_flight_.insert(conn.id);
  }
  const int fds[2] = {client_fd, upstream_fd};
  Status s = send_bytes(edge::encode(conn), fds, 2);
  if (!s) {
    std::lock_guard lock(mu_);
    in_flight_.erase(conn.id);
  }
  return s;
}

Result<std::string> EdgeLink::make_ca(const std::string& sandbox,
                                      std::chrono::milliseconds timeout) {
  RF_TRY(send(edge::CaRequest{sandbox}));
  std::unique_lock lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return dead_ || ca_answers_.count(sandbox) != 0; })) {
    return make_error("egress TLS", "no CA for sandbox " + sandbox + " within " +
                                        std::to_string(timeout.count()) + " ms");
  }
  auto it = ca_answers_.find(sandbox);
  if (it == ca_answers_.end()) {
    return make_error("egress TLS", "ringfence-egress-tls exited before making the CA");
  }
  edge::CaAnswer answer = std::move(it->second);
  ca_answers_.erase(it);
  if (!answer.error.empty()) return make_error("egress TLS: sandbox CA", answer.error);
  return answer.pem;
}

void EdgeLink::read_loop() {
  std::vector<char> buf(edge::kMaxMessage + 1);
  for (;;) {
    const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    auto m = edge::decode(std::string_view(buf.data(), static_cast<size_t>(n)));
    if (!m) {
      spdlog::warn("egress TLS: {}", m.error().to_string());
      continue;
    }
    if (auto* done = std::get_if<edge::Done>(&*m)) {
      {
        std::lock_guard lock(mu_);
        if (in_flight_.erase(done->id) == 0) continue;  // not one of ours
      }
      on_done_(*done);
    } else if (auto* ca = std::get_if<edge::CaAnswer>(&*m)) {
      {
        std::lock_guard lock(mu_);
        ca_answers_[ca->sandbox] = std::move(*ca);
      }
      cv_.notify_all();
    } else {
      spdlog::warn("egress TLS: ringfence-egress-tls sent a message only it takes; dropped");
    }
  }
  std::set<uint64_t> lost;
  {
    std::lock_guard lock(mu_);
    dead_ = true;
    lost.swap(in_flight_);
  }
  cv_.notify_all();
  for (uint64_t id : lost) {
    edge::Done d;
    d.id = id;
    d.outcome = "upstream_failed";
    d.error = "ringfence-egress-tls exited";
    on_done_(d);
  }
}

}  // namespace rf::proxy
