#include "proxy/tunnel.h"

#include <fcntl.h>
#include <sys/socket.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cstring>

namespace rf::proxy {

namespace {

// Bytes one direction moves before it lets the other connections of its
// thread have a turn.
constexpr uint64_t kYieldBytes = 4 << 20;

}  // namespace

uint64_t ByteBudget::reserve(uint64_t want) {
  if (cap_ == 0) return want;
  uint64_t used = used_.load(std::memory_order_relaxed);
  for (;;) {
    if (used >= cap_) return 0;
    const uint64_t grant = std::min(want, cap_ - used);
    if (used_.compare_exchange_weak(used, used + grant, std::memory_order_relaxed)) return grant;
  }
}

Tunnel::Tunnel(boost::asio::local::stream_protocol::socket& client,
               boost::asio::ip::tcp::socket& upstream, ByteBudget* up_budget, TunnelOptions options)
    : client_(client), upstream_(upstream), opts_(options), idle_timer_(client.get_executor()) {
  up_.src = client_.native_handle();
  up_.dst = upstream_.native_handle();
  up_.budget = up_budget;
  down_.src = upstream_.native_handle();
  down_.dst = client_.native_handle();
}

void Tunnel::start(std::shared_ptr<void> keep, std::string initial_up, Done done) {
  keep_ = std::move(keep);
  done_ = std::move(done);
  last_activity_ = std::chrono::steady_clock::now();
  for (Dir* d : {&up_, &down_}) {
    if (opts_.splice) {
      int p[2];
      if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0) {
        const int err = errno;
        boost::asio::post(client_.get_executor(), [this, k = keep_, err] {
          finish(End::error, std::string("pipe: ") + std::strerror(err));
        });
        return;
      }
      d->pipe_r.reset(p[0]);
      d->pipe_w.reset(p[1]);
      (void)::fcntl(p[1], F_SETPIPE_SZ, static_cast<int>(opts_.pipe_size));  // best effort
      const int size = ::fcntl(p[1], F_GETPIPE_SZ);
      d->chunk = size > 0 ? static_cast<size_t>(size) : 65536;
    } else {
      d->chunk = opts_.pipe_size;
      d->buf.resize(d->chunk);
    }
  }
  arm_idle();
  drive(false);
  if (initial_up.empty()) {
    drive(true);
    return;
  }
  // Bytes the client sent after its request head (or the rewritten head of a
  // plain HTTP request) go first, and count against the cap like any others.
  const uint64_t granted = up_.budget ? up_.budget->reserve(initial_up.size()) : initial_up.size();
  if (granted < initial_up.size()) {
    up_.budget->refund(granted);
    boost::asio::post(client_.get_executor(), [this, k = keep_] { finish(End::byte_cap, ""); });
    return;
  }
  initial_ = std::move(initial_up);
  boost::asio::async_write(upstream_, boost::asio::buffer(initial_),
                           [this, k = keep_](const boost::system::error_code& ec, size_t n) {
                             if (stopped_) return;
                             up_.bytes += n;
                             if (ec) {
                               finish(End::error, ec.message());
                               return;
                             }
                             last_activity_ = std::chrono::steady_clock::now();
                             drive(true);
                           });
}

void Tunnel::stop() {
  stopped_ = true;
  idle_timer_.cancel();
  keep_.reset();  // the owner's callers hold their own reference
}

Tunnel::Step Tunnel::run(Dir& d) {
  uint64_t moved = 0;
  for (;;) {
    while (d.pending > 0) {
      const ssize_t n = opts_.splice ? ::splice(d.pipe_r.get(), nullptr, d.dst, nullptr, d.pending,
                                                SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
                                     : ::send(d.dst, d.buf.data() + d.buf_off, d.pending,
                                              MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        d.pending -= static_cast<size_t>(n);
        d.buf_off += static_cast<size_t>(n);
        d.bytes += static_cast<uint64_t>(n);
        moved += static_cast<uint64_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return Step::wait_write;
      d.err = n < 0 ? errno : EPIPE;
      return Step::error;
    }
    if (moved > 0) last_activity_ = std::chrono::steady_clock::now();
    if (moved >= kYieldBytes) return Step::yield;

    uint64_t want = d.chunk;
    if (d.budget != nullptr) {
      want = d.budget->reserve(want);
      if (want == 0) {
        // Cap reached: if the sandbox has more to send, cut; a clean EOF is not a cut.
        char c;
        const ssize_t p = ::recv(d.src, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        if (p > 0) return Step::cap;
        if (p == 0) return Step::eof;
        if (errno == EINTR) continue;
        if (errno == EAGAIN) return Step::wait_read;
        d.err = errno;
        return Step::error;
      }
    }
    const ssize_t n = opts_.splice ? ::splice(d.src, nullptr, d.pipe_w.get(), nullptr, want,
                                              SPLICE_F_MOVE | SPLICE_F_NONBLOCK)
                                   : ::recv(d.src, d.buf.data(), want, MSG_DONTWAIT);
    if (d.budget != nullptr) d.budget->refund(want - static_cast<uint64_t>(n > 0 ? n : 0));
    if (n > 0) {
      d.pending = static_cast<size_t>(n);
      d.buf_off = 0;
      continue;
    }
    if (n == 0) return Step::eof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN) return Step::wait_read;
    d.err = errno;
    return Step::error;
  }
}

template <class Socket>
void Tunnel::wait(Socket& s, bool read, bool up) {
  s.async_wait(read ? Socket::wait_read : Socket::wait_write,
               [this, k = keep_, up](const boost::system::error_code& ec) {
                 if (stopped_) return;
                 if (ec) {
                   finish(End::error, ec.message());
                   return;
                 }
                 drive(up);
               });
}

void Tunnel::drive(bool up) {
  if (stopped_) return;
  Dir& d = up ? up_ : down_;
  switch (run(d)) {
    case Step::wait_read:
      if (up) {
        wait(client_, true, up);
      } else {
        wait(upstream_, true, up);
      }
      return;
    case Step::wait_write:
      if (up) {
        wait(upstream_, false, up);
      } else {
        wait(client_, false, up);
      }
      return;
    case Step::yield:
      boost::asio::post(client_.get_executor(), [this, k = keep_, up] { drive(up); });
      return;
    case Step::cap:
      finish(End::byte_cap, "");
      return;
    case Step::error:
      finish(End::error, std::strerror(d.err));
      return;
    case Step::eof:
      d.eof = true;
      if (!up && opts_.end_on_down_eof) {
        finish(End::closed, "");
        return;
      }
      ::shutdown(d.dst, SHUT_WR);
      if (up_.eof && down_.eof) finish(End::closed, "");
      return;
  }
}

void Tunnel::arm_idle() {
  const auto deadline = last_activity_ + opts_.idle_timeout;
  idle_timer_.expires_at(deadline);
  idle_timer_.async_wait([this, k = keep_](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    if (std::chrono::steady_clock::now() - last_activity_ >= opts_.idle_timeout) {
      finish(End::idle, "");
      return;
    }
    arm_idle();
  });
}

void Tunnel::finish(End e, std::string error) {
  if (stopped_) return;
  auto done = std::move(done_);
  stop();
  if (done) done(e, std::move(error));
}

}  // namespace rf::proxy
