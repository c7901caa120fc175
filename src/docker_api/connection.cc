#include "docker_api/connection.h"

#include <algorithm>
#include <cstring>

#include "docker_api/socket_connection.h"
#include "docker_api/ssh_connection.h"
#include "docker_api/tls_relay.h"

namespace rf::docker {
namespace {

using std::chrono::milliseconds;

// What an HTTP parser read past a response head, then the stream after it.
class PrefixConnection : public Connection {
 public:
  PrefixConnection(std::unique_ptr<Connection> inner, std::string prefix)
      : inner_(std::move(inner)), prefix_(std::move(prefix)) {}
  Result<size_t> read_some(char* buf, size_t n, milliseconds timeout) override {
    if (off_ < prefix_.size()) {
      const size_t k = std::min(n, prefix_.size() - off_);
      std::memcpy(buf, prefix_.data() + off_, k);
      off_ += k;
      if (off_ == prefix_.size()) {
        std::string().swap(prefix_);
        off_ = 0;
      }
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

}  // namespace

Result<std::unique_ptr<Connection>> open_connection(const DockerHost& host, milliseconds timeout) {
  switch (host.kind) {
    case DockerHost::Kind::kUnix: {
      auto fd = connect_unix(host, timeout);
      if (!fd) return fd.take_error();
      return std::unique_ptr<Connection>(std::make_unique<FdConnection>(std::move(*fd)));
    }
    case DockerHost::Kind::kTcp: {
      // TLS in a relay process (src/docker_tls): OpenSSL stays out of this one.
      if (host.tls) return spawn_tls_relay(host, timeout);
      auto fd = connect_tcp(host, timeout);
      if (!fd) return fd.take_error();
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
