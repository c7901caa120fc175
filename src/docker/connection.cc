#include "docker/connection.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "core/unique_fd.h"

namespace rf::docker {
namespace {

using std::chrono::milliseconds;

// Waits for `events` on fd; 0 ms means forever. ETIMEDOUT when the time ran out.
Status wait_fd(int fd, short events, milliseconds timeout) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, timeout.count() > 0 ? static_cast<int>(timeout.count()) : -1);
    if (r > 0) return ok_status();
    if (r == 0) return sys_error("docker connection: wait", ETIMEDOUT);
    if (errno != EINTR) return sys_error("docker connection: poll");
  }
}

Status connect_with_timeout(int fd, const sockaddr* addr, socklen_t len, milliseconds timeout,
                            const std::string& what) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  if (::connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) return sys_error("connect " + what);
    if (auto s = wait_fd(fd, POLLOUT, timeout); !s) return sys_error("connect " + what, ETIMEDOUT);
    int err = 0;
    socklen_t elen = sizeof err;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
    if (err != 0) return sys_error("connect " + what, err);
  }
  ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return ok_status();
}

// A plain socket (unix or TCP), or our end of the socketpair to ssh.
class FdConnection : public Connection {
 public:
  explicit FdConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    for (;;) {
      RF_TRY(wait_fd(fd_.get(), POLLIN, timeout));
      const ssize_t r = ::read(fd_.get(), buf, n);
      if (r >= 0) return static_cast<size_t>(r);
      if (errno == EINTR || errno == EAGAIN) continue;
      return sys_error("docker connection: read");
    }
  }
  Status write_all(std::string_view data) override {
    while (!data.empty()) {
      const ssize_t r = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) return sys_error("docker connection: write");
      data.remove_prefix(static_cast<size_t>(r));
    }
    return ok_status();
  }
  Status shutdown_write() override {
    if (::shutdown(fd_.get(), SHUT_WR) != 0 && errno != ENOTCONN) {
      return sys_error("docker connection: shutdown");
    }
    return ok_status();
  }
  bool has_buffered() const override { return false; }
  int fd() const override { return fd_.get(); }

 protected:
  UniqueFd fd_;
};

// ssh: the socket is our end of a socketpair whose other end is ssh's stdin
// and stdout. What ssh says on stderr is kept for errors.
class SshConnection : public FdConnection {
 public:
  SshConnection(UniqueFd fd, pid_t pid, UniqueFd err)
      : FdConnection(std::move(fd)), pid_(pid), err_(std::move(err)) {}
  ~SshConnection() override {
    fd_.reset();
    ::kill(pid_, SIGTERM);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    auto r = FdConnection::read_some(buf, n, timeout);
    if (r && *r == 0) {
      const std::string why = ssh_said();
      if (!why.empty()) return make_error("ssh", why);
    }
    return r;
  }

 private:
  // The last line ssh wrote on stderr, if it wrote anything yet.
  std::string ssh_said() {
    char buf[4096];
    ::fcntl(err_.get(), F_SETFL, O_NONBLOCK);
    const ssize_t n = ::read(err_.get(), buf, sizeof buf);
    if (n <= 0) return {};
    std::string text(buf, static_cast<size_t>(n));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    const auto nl = text.rfind('\n');
    return nl == std::string::npos ? text : text.substr(nl + 1);
  }
  pid_t pid_;
  UniqueFd err_;
};

class TlsConnection : public Connection {
 public:
  TlsConnection(UniqueFd fd, SSL_CTX* ctx, SSL* ssl) : fd_(std::move(fd)), ctx_(ctx), ssl_(ssl) {}
  ~TlsConnection() override {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    for (;;) {
      if (SSL_pending(ssl_) == 0) RF_TRY(wait_fd(fd_.get(), POLLIN, timeout));
      const int r = SSL_read(ssl_, buf, static_cast<int>(std::min<size_t>(n, 1 << 30)));
      if (r > 0) return static_cast<size_t>(r);
      const int e = SSL_get_error(ssl_, r);
      if (e == SSL_ERROR_ZERO_RETURN) return size_t{0};
      if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) continue;
      if (e == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) return size_t{0};  // EOF
      return make_error("docker TLS: read", ERR_error_string(ERR_get_error(), nullptr));
    }
  }
  Status write_all(std::string_view data) override {
    while (!data.empty()) {
      const int r =
          SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
      if (r <= 0) {
        return make_error("docker TLS: write", ERR_error_string(ERR_get_error(), nullptr));
      }
      data.remove_prefix(static_cast<size_t>(r));
    }
    return ok_status();
  }
  // TLS has no half-close: the TCP write side is shut after the data is out,
  // which the daemon reads as the end of stdin.
  Status shutdown_write() override {
    ::shutdown(fd_.get(), SHUT_WR);
    return ok_status();
  }
  bool has_buffered() const override { return SSL_pending(ssl_) > 0; }
  int fd() const override { return fd_.get(); }

 private:
  UniqueFd fd_;
  SSL_CTX* ctx_;
  SSL* ssl_;
};

class PrefixConnection : public Connection {
 public:
  PrefixConnection(std::unique_ptr<Connection> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    if (off_ < prefix_.size()) {
      const size_t k = std::min(n, prefix_.size() - off_);
      std::memcpy(buf, prefix_.data() + off_, k);
      off_ += k;
      return k;
    }
    return inner_->read_some(buf, n, timeout);
  }
  Status write_all(std::string_view data) override { return inner_->write_all(data); }
  Status shutdown_write() override { return inner_->shutdown_write(); }
  bool has_buffered() const override { return off_ < prefix_.size() || inner_->has_buffered(); }
  int fd() const override { return inner_->fd(); }

 private:
  std::unique_ptr<Connection> inner_;
  std::string prefix_;
  size_t off_ = 0;
};

Result<UniqueFd> connect_unix(const DockerHost& h, milliseconds timeout) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return sys_error("socket");
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (h.path.size() >= sizeof addr.sun_path) return make_error(h.url, "socket path too long");
  std::memcpy(addr.sun_path, h.path.c_str(), h.path.size() + 1);
  RF_TRY(connect_with_timeout(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr, timeout,
                              h.path));
  return fd;
}

Result<UniqueFd> connect_tcp(const DockerHost& h, milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port = std::to_string(h.port);
  const int rc = ::getaddrinfo(h.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0) return make_error("resolve " + h.host, ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  Error last = make_error("connect " + h.host, "no address");
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
      last = sys_error("socket");
      continue;
    }
    auto s =
        connect_with_timeout(fd.get(), a->ai_addr, a->ai_addrlen, timeout, h.host + ":" + port);
    if (!s) {
      last = s.take_error();
      continue;
    }
    const int one = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
  }
  return last;
}

std::string ssl_error(const std::string& what) {
  const unsigned long e = ERR_get_error();
  return what + ": " + (e != 0 ? ERR_error_string(e, nullptr) : "failed");
}

Result<std::unique_ptr<Connection>> wrap_tls(UniqueFd fd, const DockerHost& h,
                                             milliseconds timeout) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) return make_error("docker TLS", ssl_error("SSL_CTX_new"));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  auto fail = [&](const std::string& what) -> Error {
    SSL_CTX_free(ctx);
    return make_error("docker TLS " + h.url, ssl_error(what));
  };
  const std::string dir = h.cert_dir;
  if (h.tls_verify) {
    if (SSL_CTX_load_verify_locations(ctx, (dir + "/ca.pem").c_str(), nullptr) != 1) {
      return fail("load " + dir + "/ca.pem");
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (::access((dir + "/cert.pem").c_str(), R_OK) == 0) {
    if (SSL_CTX_use_certificate_chain_file(ctx, (dir + "/cert.pem").c_str()) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, (dir + "/key.pem").c_str(), SSL_FILETYPE_PEM) != 1) {
      return fail("load " + dir + "/cert.pem and key.pem");
    }
  }
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) return fail("SSL_new");
  SSL_set_fd(ssl, fd.get());
  SSL_set_tlsext_host_name(ssl, h.host.c_str());
  if (h.tls_verify) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    if (X509_VERIFY_PARAM_set1_ip_asc(param, h.host.c_str()) != 1) {
      X509_VERIFY_PARAM_set1_host(param, h.host.c_str(), 0);
    }
  }
  for (;;) {
    const int r = SSL_connect(ssl);
    if (r == 1) break;
    const int e = SSL_get_error(ssl, r);
    if (e == SSL_ERROR_WANT_READ && wait_fd(fd.get(), POLLIN, timeout)) continue;
    if (e == SSL_ERROR_WANT_WRITE && wait_fd(fd.get(), POLLOUT, timeout)) continue;
    SSL_free(ssl);
    return fail("handshake");
  }
  return std::unique_ptr<Connection>(std::make_unique<TlsConnection>(std::move(fd), ctx, ssl));
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

Result<std::unique_ptr<Connection>> spawn_ssh(const DockerHost& h, milliseconds timeout) {
  std::vector<std::string> args = {
      "ssh", "-o", "BatchMode=yes", "-o",
      "ConnectTimeout=" + std::to_string(std::max<int64_t>(1, timeout.count() / 1000))};
  if (h.port != 0) {
    args.push_back("-p");
    args.push_back(std::to_string(h.port));
  }
  if (!h.user.empty()) {
    args.push_back("-l");
    args.push_back(h.user);
  }
  if (const char* extra = std::getenv("RINGFENCE_SSH_OPTIONS")) {
    for (auto& w : split_words(extra)) args.push_back(std::move(w));
  }
  args.push_back("--");
  args.push_back(h.host);
  args.push_back("docker");
  args.push_back("system");
  args.push_back("dial-stdio");
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return sys_error("socketpair");
  UniqueFd ours(sv[0]), theirs(sv[1]);
  int ep[2];
  if (::pipe2(ep, O_CLOEXEC) != 0) return sys_error("pipe");
  UniqueFd err_read(ep[0]), err_write(ep[1]);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return sys_error("fork ssh");
  if (pid == 0) {
    // The child: stdin and stdout are the socket, stderr the pipe; nothing else is inherited.
    ::dup2(theirs.get(), 0);
    ::dup2(theirs.get(), 1);
    ::dup2(err_write.get(), 2);
    ::setsid();
    ::execvp("ssh", argv.data());
    _exit(127);
  }
  return std::unique_ptr<Connection>(
      std::make_unique<SshConnection>(std::move(ours), pid, std::move(err_read)));
}

}  // namespace

Result<std::unique_ptr<Connection>> open_connection(const DockerHost& host, milliseconds timeout) {
  switch (host.kind) {
    case DockerHost::Kind::kUnix: {
      auto fd = connect_unix(host, timeout);
      if (!fd) return fd.take_error();
      return std::unique_ptr<Connection>(std::make_unique<FdConnection>(std::move(*fd)));
    }
    case DockerHost::Kind::kTcp: {
      auto fd = connect_tcp(host, timeout);
      if (!fd) return fd.take_error();
      if (host.tls) return wrap_tls(std::move(*fd), host, timeout);
      return std::unique_ptr<Connection>(std::make_unique<FdConnection>(std::move(*fd)));
    }
    case DockerHost::Kind::kSsh:
      return spawn_ssh(host, timeout);
  }
  return make_error(host.url, "unknown kind");
}

std::unique_ptr<Connection> with_prefix(std::unique_ptr<Connection> inner, std::string prefix) {
  if (prefix.empty()) return inner;
  return std::make_unique<PrefixConnection>(std::move(inner), std::move(prefix));
}

}  // namespace rf::docker
