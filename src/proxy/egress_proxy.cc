#include "proxy/egress_proxy.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <thread>

#include "core/log.h"
#include "proxy/connection.h"

namespace rf::proxy {

namespace asio = boost::asio;
using boost::system::error_code;
using Acceptor = asio::local::stream_protocol::acceptor;

namespace {

// Which proxy's I/O thread this is, if any: waiting for that proxy's own
// threads from one of them would deadlock.
thread_local const void* tl_io_owner = nullptr;

}  // namespace

struct EgressProxy::Impl {
  struct Listener {
    std::shared_ptr<SandboxState> sb;
    std::unique_ptr<Acceptor> acceptor;
    asio::steady_timer retry;  // after EMFILE and the like
    std::string path;          // the socket file we made, if any
    dev_t dev = 0;
    ino_t ino = 0;
    explicit Listener(asio::io_context& io) : retry(io) {}
  };

  std::shared_ptr<ProxyCore> core;
  std::vector<std::unique_ptr<asio::io_context>> ios;
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> threads;
  std::atomic<size_t> next_io{0};
  mutable std::mutex mu;
  std::map<std::string, std::shared_ptr<Listener>> sandboxes;

  ~Impl() {
    std::vector<std::string> ids;
    {
      std::lock_guard lock(mu);
      for (const auto& [id, l] : sandboxes) ids.push_back(id);
    }
    for (const auto& id : ids) remove(id);
    core->stop_edge();  // its reader posts to the I/O threads
    core->resolver.shutdown();
    guards.clear();
    for (auto& io : ios) io->stop();
    for (auto& t : threads) t.join();
  }

  asio::io_context& pick_io() { return *ios[next_io++ % ios.size()]; }

  // Runs `fn` on `io` and waits for it, unless called from an I/O thread.
  void run_on(asio::io_context& io, std::function<void()> fn) {
    if (tl_io_owner == this) {
      asio::post(io, std::move(fn));
      return;
    }
    std::promise<void> done;
    asio::post(io, [&] {
      fn();
      done.set_value();
    });
    done.get_future().wait();
  }

  void accept_next(std::shared_ptr<Listener> l) {
    asio::io_context& io = pick_io();
    using IoSocket =
        asio::basic_stream_socket<asio::local::stream_protocol, asio::io_context::executor_type>;
    l->acceptor->async_accept(io, [this, l, &io](const error_code& ec, IoSocket socket) {
      if (ec == asio::error::operation_aborted || !l->acceptor->is_open()) return;
      if (ec) {
        // Out of fds or memory: say so once per second at most, try again.
        spdlog::warn("egress proxy: accept for sandbox {}: {}", l->sb->id, ec.message());
        l->retry.expires_after(std::chrono::milliseconds(100));
        l->retry.async_wait([this, l](const error_code& e) {
          if (!e) accept_next(l);
        });
        return;
      }
      on_accept(l->sb, io, Connection::ClientSocket(std::move(socket)));
      accept_next(l);
    });
  }

  void on_accept(const std::shared_ptr<SandboxState>& sb, asio::io_context& io,
                 Connection::ClientSocket socket) {
    const int open = sb->open.fetch_add(1, std::memory_order_relaxed) + 1;
    const Admission admission = open > 2 * sb->max_connections + 8 ? Admission::flood
                                : open > sb->max_connections       ? Admission::over_capacity
                                                                   : Admission::admit;
    auto conn = std::make_shared<Connection>(core, sb, io, std::move(socket), admission);
    bool removed = false;
    {
      std::lock_guard lock(sb->mu);
      removed = sb->removed;
      if (!removed) sb->live[conn.get()] = conn;
    }
    if (removed) {
      conn->abort();  // not started: nothing of it runs anywhere else yet
      return;
    }
    asio::post(io, [conn] { conn->start(); });
  }

  Status add(SandboxEgress cfg, UniqueFd fd, std::string path, dev_t dev, ino_t ino) {
    if (cfg.sandbox_id.empty()) return make_error("egress proxy", "sandbox id is empty");
    if (cfg.max_connections < 1) {
      return make_error("egress proxy", "max_connections must be at least 1");
    }
    auto l = std::make_shared<Listener>(*ios[0]);
    l->sb = std::make_shared<SandboxState>(std::move(cfg));
    l->path = std::move(path);
    l->dev = dev;
    l->ino = ino;
    error_code ec;
    l->acceptor = std::make_unique<Acceptor>(*ios[0]);
    l->acceptor->assign(asio::local::stream_protocol(), fd.get(), ec);
    if (ec) return make_error("egress proxy", "listener: " + ec.message());
    fd.release();
    l->acceptor->native_non_blocking(true, ec);
    {
      std::lock_guard lock(mu);
      if (!sandboxes.emplace(l->sb->id, l).second) {
        l->path.clear();  // not ours to remove
        return make_error("egress proxy", "sandbox " + l->sb->id + " is already added");
      }
    }
    asio::post(*ios[0], [this, l] { accept_next(l); });
    return ok_status();
  }

  void remove(const std::string& id) {
    std::shared_ptr<Listener> l;
    {
      std::lock_guard lock(mu);
      auto it = sandboxes.find(id);
      if (it == sandboxes.end()) return;
      l = it->second;
      sandboxes.erase(it);
    }
    bool at_edge = false;
    {
      std::lock_guard lock(l->sb->edge_mu);
      at_edge = l->sb->has_ca || l->sb->creds;
      l->sb->creds.reset();
      l->sb->on_edge_event = nullptr;
    }
    // The helper drops its values and CA and ends its connections.
    if (at_edge) core->tell_edge(edge::Forget{id});
    std::vector<std::shared_ptr<Connection>> conns;
    {
      std::lock_guard lock(l->sb->mu);
      l->sb->removed = true;
      for (auto& [p, w] : l->sb->live) {
        if (auto c = w.lock()) conns.push_back(std::move(c));
      }
    }
    run_on(*ios[0], [l] {
      error_code ec;
      l->acceptor->close(ec);
      l->retry.cancel();
    });
    if (!l->path.empty()) {
      // Only the socket we made: someone may have put another file there since.
      struct stat st {};
      if (::lstat(l->path.c_str(), &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino) {
        ::unlink(l->path.c_str());
      }
    }
    for (auto& c : conns) {
      run_on(c->io(), [c] { c->abort(); });
    }
  }
};

Result<std::unique_ptr<EgressProxy>> EgressProxy::start(ProxyOptions options) {
  if (options.threads < 1 || options.threads > 64) {
    return make_error("egress proxy", "threads must be 1..64");
  }
  auto impl = std::make_unique<Impl>();
  const int n = options.threads;
  impl->core = std::make_shared<ProxyCore>(std::move(options));
  for (int i = 0; i < n; ++i) {
    impl->ios.push_back(std::make_unique<asio::io_context>(1));
    impl->guards.push_back(asio::make_work_guard(*impl->ios.back()));
  }
  for (int i = 0; i < n; ++i) {
    impl->threads.emplace_back([io = impl->ios[i].get(), owner = impl.get()] {
      // splice(2) into a socket whose peer is gone raises SIGPIPE in the
      // calling thread: keep it blocked here (pending, never delivered).
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      pthread_sigmask(SIG_BLOCK, &set, nullptr);
      tl_io_owner = owner;
      for (;;) {
        try {
          io->run();
          return;
        } catch (const std::exception& e) {
          // A handler threw (out of memory, most likely): that connection is
          // lost, the others go on.
          spdlog::error("egress proxy: I/O thread: {}", e.what());
        }
      }
    });
  }
  return std::unique_ptr<EgressProxy>(new EgressProxy(std::move(impl)));
}

EgressProxy::EgressProxy(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EgressProxy::~EgressProxy() = default;

Status EgressProxy::add_sandbox(SandboxEgress sandbox, const std::string& socket_path,
                                std::optional<SocketOwner> owner) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path) {
    return make_error(socket_path, "a unix socket path must be 1.." +
                                       std::to_string(sizeof addr.sun_path - 1) + " bytes");
  }
  socket_path.copy(addr.sun_path, socket_path.size());
  struct stat st {};
  if (::lstat(socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) return make_error(socket_path, "exists and is not a socket");
    if (::unlink(socket_path.c_str()) != 0) return sys_error("unlink " + socket_path);
  }
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd) return sys_error("socket");
  // The mode the socket file is created with (Linux takes it from the socket
  // inode): never a moment when others may connect.
  if (::fchmod(fd.get(), 0600) != 0) return sys_error("fchmod socket");
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return sys_error("bind " + socket_path);
  }
  if (::chmod(socket_path.c_str(), 0600) != 0) {
    const Error e = sys_error("chmod " + socket_path);
    ::unlink(socket_path.c_str());
    return e;
  }
  // Only now may the owner connect: until here, nobody but us could.
  if (owner &&
      ::fchownat(AT_FDCWD, socket_path.c_str(), owner->uid, owner->gid, AT_SYMLINK_NOFOLLOW) != 0) {
    const Error e = sys_error("chown " + socket_path);
    ::unlink(socket_path.c_str());
    return e;
  }
  if (::lstat(socket_path.c_str(), &st) != 0) {
    const Error e = sys_error("lstat " + socket_path);
    ::unlink(socket_path.c_str());
    return e;
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    const Error e = sys_error("listen " + socket_path);
    ::unlink(socket_path.c_str());
    return e;
  }
  Status s = impl_->add(std::move(sandbox), std::move(fd), socket_path, st.st_dev, st.st_ino);
  if (!s) ::unlink(socket_path.c_str());
  return s;
}

Status EgressProxy::add_sandbox(SandboxEgress sandbox, UniqueFd listener) {
  int v = 0;
  socklen_t len = sizeof v;
  if (::getsockopt(listener.get(), SOL_SOCKET, SO_DOMAIN, &v, &len) != 0 || v != AF_UNIX) {
    return make_error("egress proxy", "the listener is not a unix socket");
  }
  len = sizeof v;
  if (::getsockopt(listener.get(), SOL_SOCKET, SO_ACCEPTCONN, &v, &len) != 0 || v == 0) {
    return make_error("egress proxy", "the listener is not listening");
  }
  return impl_->add(std::move(sandbox), std::move(listener), "", 0, 0);
}

void EgressProxy::remove_sandbox(const std::string& sandbox_id) { impl_->remove(sandbox_id); }

namespace {

std::shared_ptr<SandboxState> find_state(EgressProxy::Impl& impl, const std::string& id);

}  // namespace

Result<std::string> EgressProxy::sandbox_ca(const std::string& sandbox_id) {
  auto sb = find_state(*impl_, sandbox_id);
  if (!sb) return make_error("egress proxy", "sandbox " + sandbox_id + " is not added");
  auto link = impl_->core->edge();
  if (!link) return link.take_error();
  auto pem = (*link)->make_ca(sandbox_id, std::chrono::seconds(10));
  if (!pem) return pem.take_error();
  std::lock_guard lock(sb->edge_mu);
  sb->has_ca = true;
  return pem;
}

Status EgressProxy::bind_credentials(const std::string& sandbox_id,
                                     std::vector<net::EdgeCredential> creds,
                                     std::function<void(const net::EdgeEvent&)> on_event) {
  auto sb = find_state(*impl_, sandbox_id);
  if (!sb) return make_error("egress proxy", "sandbox " + sandbox_id + " is not added");
  auto shared = std::make_shared<const std::vector<net::EdgeCredential>>(std::move(creds));
  {
    std::lock_guard lock(sb->edge_mu);
    sb->creds = shared->empty() ? nullptr : shared;
    sb->on_edge_event = std::move(on_event);
  }
  impl_->core->track_credentials(sb);
  auto link = impl_->core->edge();  // a helper started now is told them all
  if (!link) return link.take_error();
  return (*link)->send(edge::Bind{sandbox_id, *shared});
}

std::optional<SandboxStats> EgressProxy::stats(const std::string& sandbox_id) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->sandboxes.find(sandbox_id);
  if (it == impl_->sandboxes.end()) return std::nullopt;
  const SandboxState& sb = *it->second->sb;
  return SandboxStats{sb.open.load(std::memory_order_relaxed), sb.budget.used()};
}

namespace {

std::shared_ptr<SandboxState> find_state(EgressProxy::Impl& impl, const std::string& id) {
  std::lock_guard lock(impl.mu);
  auto it = impl.sandboxes.find(id);
  return it == impl.sandboxes.end() ? nullptr : it->second->sb;
}

}  // namespace

}  // namespace rf::proxy
