#include "httpd/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/status.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <limits>
#include <list>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>

#include "core/fd_limit.h"
#include "core/log.h"
#include "core/unique_fd.h"

namespace rf::httpd {
namespace http = boost::beast::http;
using Clock = std::chrono::steady_clock;

Result<ListenAddress> parse_listen_address(std::string_view text) {
  ListenAddress a;
  if (text.rfind("unix:", 0) == 0) {
    a.unix_socket = true;
    a.host = std::string(text.substr(5));
    if (a.host.empty()) return make_error("--listen", "unix: needs a path (unix:/run/rf.sock)");
    if (a.host.size() >= sizeof(sockaddr_un::sun_path)) {
      return make_error("--listen", "the socket path is too long: " + a.host);
    }
    return a;
  }
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) {
    return make_error("--listen",
                      "expected HOST:PORT or unix:PATH, got \"" + std::string(text) + "\"");
  }
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  const std::string port(text.substr(colon + 1));
  char* end = nullptr;
  const long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return make_error("--listen", "bad port \"" + port + "\" in \"" + std::string(text) + "\"");
  }
  a.host = host;
  a.port = static_cast<uint16_t>(p);
  return a;
}

namespace {

// Waits until `fd` is ready for `events` or `deadline` passes; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline, int stop_fd = -1) {
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fds[2] = {{fd, events, 0}, {stop_fd, POLLIN, 0}};
    const int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) return false;
    if (stop_fd >= 0 && (fds[1].revents & POLLIN)) return false;
    return true;
  }
}

std::string reason(int status) {
  return std::string(http::obsolete_reason(static_cast<http::status>(status)));
}

// The simplest answer, for requests that never reached a handler.
void refuse(int fd, int status, std::string_view message) {
  std::string body = "{\"error\":\"" + std::string(message) + "\"}\n";
  std::string out =
      "HTTP/1.1 " + std::to_string(status) + " " + reason(status) +
      "\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
      "\r\nConnection: close\r\n\r\n" + body;
  (void)::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

enum class ReadEnd { kRequest, kClosed, kTimeout, kHeadTooLarge, kBodyTooLarge, kBad, kStopped };

struct ReadOutcome {
  ReadEnd end = ReadEnd::kClosed;
  std::string detail;
};

// Reads one request into `parser`, from `pending` (bytes already received)
// and then the socket, within the limits' deadlines. The poller sends a
// connection here when bytes arrive, so the head's deadline starts now.
ReadOutcome read_request(int fd, int stop_fd, const ServerLimits& limits, std::string& pending,
                         http::request_parser<http::string_body>& parser) {
  parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
  parser.body_limit(limits.body_bytes);
  parser.eager(true);
  bool started = !pending.empty();
  auto deadline = Clock::now() + limits.head_timeout;
  bool head_done = false;
  char buf[16 * 1024];
  while (true) {
    if (!pending.empty()) {
      boost::system::error_code ec;
      const size_t used = parser.put(boost::asio::buffer(pending), ec);
      pending.erase(0, used);
      if (!head_done && parser.is_header_done()) {
        head_done = true;
        deadline = Clock::now() + limits.body_timeout;
      }
      if (parser.is_done()) return {ReadEnd::kRequest, {}};
      if (ec == http::error::need_more) {
        if (used > 0) continue;
      } else if (ec == http::error::header_limit) {
        return {ReadEnd::kHeadTooLarge,
                "the request head is over " + std::to_string(limits.header_bytes) + " bytes"};
      } else if (ec == http::error::body_limit) {
        return {ReadEnd::kBodyTooLarge,
                "the request body is over " + std::to_string(limits.body_bytes) + " bytes"};
      } else if (ec) {
        return {ReadEnd::kBad, ec.message()};
      } else if (used > 0) {
        continue;
      }
    }
    if (!wait_for(fd, POLLIN, deadline, stop_fd)) {
      // Stopped, or the deadline passed (readable yet silent: closed as idle).
      pollfd s{stop_fd, POLLIN, 0};
      if (::poll(&s, 1, 0) > 0) return {ReadEnd::kStopped, {}};
      return {started ? ReadEnd::kTimeout : ReadEnd::kClosed, {}};
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      if (!started) return {ReadEnd::kClosed, {}};
      return {ReadEnd::kBad, "the connection closed mid-request"};
    }
    if (!started) {
      started = true;
      deadline = Clock::now() + limits.head_timeout;
    }
    pending.append(buf, static_cast<size_t>(n));
  }
}

// The answer to a request that could not be read; none when the client left
// or the server stops.
void refuse_unread(int fd, const ReadOutcome& got) {
  switch (got.end) {
    case ReadEnd::kTimeout:
      refuse(fd, 408, "the request did not arrive in time");
      break;
    case ReadEnd::kHeadTooLarge:
      refuse(fd, 431, got.detail);
      break;
    case ReadEnd::kBodyTooLarge:
      refuse(fd, 413, got.detail);
      break;
    case ReadEnd::kBad:
      refuse(fd, 400, "malformed HTTP request: " + got.detail);
      break;
    default:
      break;
  }
}

enum class Arrived { kNothing, kBytes, kClosed };

// Appends to `pending` what the client has sent already, without waiting.
Arrived read_arrived(int fd, std::string& pending) {
  char buf[16 * 1024];
  while (true) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      pending.append(buf, static_cast<size_t>(n));
      return Arrived::kBytes;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Arrived::kNothing;
    return Arrived::kClosed;
  }
}

// The address a connection counts against. An IPv6 host is given a whole /64,
// so counting its single addresses would let one client take every slot; all
// unix socket clients are one address, as they have none.
std::string peer_key(const sockaddr_storage& from) {
  char text[INET6_ADDRSTRLEN] = {};
  if (from.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(from);
    ::inet_ntop(AF_INET, &v4.sin_addr, text, sizeof text);
    return text;
  }
  if (from.ss_family == AF_INET6) {
    in6_addr a = reinterpret_cast<const sockaddr_in6&>(from).sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      ::inet_ntop(AF_INET, &a.s6_addr[12], text, sizeof text);
      return text;
    }
    std::memset(&a.s6_addr[8], 0, 8);
    ::inet_ntop(AF_INET6, &a, text, sizeof text);
    return std::string(text) + "/64";
  }
  return "unix";
}

// Descriptors the process needs besides connections (store, logs, sandboxes).
constexpr rlim_t kFdHeadroom = 256;

// Every connection holds a descriptor, and the usual soft limit (1024) would
// turn clients away long before max_connections: raised to the hard limit.
void ensure_fd_room(size_t connections) {
  const rlim_t wanted = static_cast<rlim_t>(connections) + kFdHeadroom;
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 &&
      (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= wanted)) {
    return;
  }
  auto raised = raise_fd_limit();
  if (!raised) {
    spdlog::warn("serve: {}", raised.error().to_string());
  } else if (*raised != RLIM_INFINITY && *raised < wanted) {
    spdlog::warn(
        "serve: {} descriptors allowed (ulimit -n) for up to {} connections: past that, "
        "new connections close idle ones or are refused",
        static_cast<unsigned long long>(*raised), connections);
  }
}

// Threads for handlers. A handler may block for minutes (a tool call, an SSE
// stream), so a fixed number of threads would let a few slow calls stall every
// other client: a thread is made whenever none is free, up to `max_threads`,
// and one that has had no work for `linger` ends. Every thread is joined, by
// run() once it has ended or by stop(), so none outlives the pool.
class HandlerPool {
 public:
  HandlerPool(size_t max_threads, std::chrono::milliseconds linger)
      : max_threads_(std::max<size_t>(max_threads, 1)), linger_(linger) {}
  ~HandlerPool() { stop(); }
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Runs `job` on a free thread, on a new one, or (at the cap) on the first
  // to free up. An error when there is no thread at all and none can be made.
  Status run(std::function<void()> job);
  // Lets queued and running jobs finish, then joins every thread. Idempotent.
  void stop();

 private:
  using Threads = std::list<std::thread>;
  Status start_thread();
  void work(Threads::iterator self);

  const size_t max_threads_;
  const std::chrono::milliseconds linger_;
  std::mutex mu_;
  std::condition_variable has_work_;
  std::condition_variable all_ended_;
  std::deque<std::function<void()>> jobs_;
  Threads threads_;                 // running; each erases itself as it ends
  std::vector<std::thread> ended_;  // to join
  size_t waiting_ = 0;              // threads waiting for a job
  bool stopping_ = false;
};

Status HandlerPool::run(std::function<void()> job) {
  std::vector<std::thread> ended;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return make_error("handler pool", "stopping");
    jobs_.push_back(std::move(job));
    // A job queued for each waiting thread already: this one needs a new thread.
    if (jobs_.size() > waiting_ && threads_.size() < max_threads_) {
      Status made = start_thread();
      if (!made && threads_.empty()) {
        jobs_.pop_back();
        return made;
      }
      if (!made) spdlog::warn("serve: {} (the request waits for a busy one)", made.error().message);
    }
    has_work_.notify_one();
    ended.swap(ended_);
  }
  for (auto& t : ended) t.join();
  return ok_status();
}

// With mu_ held: the new thread's first step waits for it.
Status HandlerPool::start_thread() {
  const auto self = threads_.emplace(threads_.end());
  try {
    *self = std::thread([this, self] { work(self); });
  } catch (const std::system_error& e) {
    threads_.erase(self);
    return make_error("start a handler thread", e.what());
  }
  return ok_status();
}

void HandlerPool::work(Threads::iterator self) {
  std::unique_lock lock(mu_);
  while (true) {
    if (jobs_.empty()) {
      if (stopping_) break;
      ++waiting_;
      const bool woken =
          has_work_.wait_for(lock, linger_, [&] { return !jobs_.empty() || stopping_; });
      --waiting_;
      if (!woken) break;  // no work for linger_: the thread is not needed
      continue;
    }
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // its captures go without the lock held
    lock.lock();
  }
  ended_.push_back(std::move(*self));
  threads_.erase(self);
  if (threads_.empty()) all_ended_.notify_all();
}

void HandlerPool::stop() {
  std::vector<std::thread> ended;
  {
    std::unique_lock lock(mu_);
    stopping_ = true;
    has_work_.notify_all();
    all_ended_.wait(lock, [&] { return threads_.empty(); });
    ended.swap(ended_);
  }
  for (auto& t : ended) t.join();
}

// One client connection. The poller thread holds it while it is idle, one
// handler thread while a request is read and answered.
struct Conn {
  uint64_t id = 0;  // epoll's key: never reused, so a late event finds nothing
  UniqueFd fd;
  std::string peer;       // peer_key()
  std::string pending;    // bytes read past the last request (pipelined)
  bool in_epoll = false;  // added once; re-armed after each request
};

// The connections waiting for the first byte of a request: the poller
// thread's alone. When each is to be closed, and which has waited longest, in
// all and per address (eviction closes those first).
class IdleSet {
 public:
  void add(Conn* c, Clock::time_point deadline);
  // Removes and returns the connection; nullptr when it is not idle.
  Conn* take(uint64_t id);
  Conn* oldest() const { return order_.empty() ? nullptr : order_.front(); }
  Conn* oldest_of(const std::string& peer) const;
  // A connection whose deadline is at or before `now`, or nullptr.
  Conn* expired(Clock::time_point now) const;
  std::optional<Clock::time_point> next_deadline() const;

 private:
  struct Entry {
    Conn* conn;
    std::multimap<Clock::time_point, Conn*>::iterator deadline;
    std::list<Conn*>::iterator in_order;
    std::list<Conn*>::iterator in_peer_order;
  };
  std::unordered_map<uint64_t, Entry> entries_;
  std::multimap<Clock::time_point, Conn*> deadlines_;
  std::list<Conn*> order_;                                     // oldest first
  std::unordered_map<std::string, std::list<Conn*>> by_peer_;  // oldest first
};

void IdleSet::add(Conn* c, Clock::time_point deadline) {
  auto& mine = by_peer_[c->peer];
  entries_.emplace(c->id, Entry{c, deadlines_.emplace(deadline, c), order_.insert(order_.end(), c),
                                mine.insert(mine.end(), c)});
}

Conn* IdleSet::take(uint64_t id) {
  const auto it = entries_.find(id);
  if (it == entries_.end()) return nullptr;
  const Entry e = it->second;
  entries_.erase(it);
  deadlines_.erase(e.deadline);
  order_.erase(e.in_order);
  const auto mine = by_peer_.find(e.conn->peer);
  mine->second.erase(e.in_peer_order);
  if (mine->second.empty()) by_peer_.erase(mine);
  return e.conn;
}

Conn* IdleSet::oldest_of(const std::string& peer) const {
  const auto it = by_peer_.find(peer);
  return it == by_peer_.end() ? nullptr : it->second.front();
}

Conn* IdleSet::expired(Clock::time_point now) const {
  if (deadlines_.empty() || deadlines_.begin()->first > now) return nullptr;
  return deadlines_.begin()->second;
}

std::optional<Clock::time_point> IdleSet::next_deadline() const {
  if (deadlines_.empty()) return std::nullopt;
  return deadlines_.begin()->first;
}

// epoll keys of the poller's own descriptors; connections count from kFirstConnId.
constexpr uint64_t kListenId = 0, kStopId = 1, kWakeId = 2, kFirstConnId = 3;
// Connections accepted per turn, so the idle ones' events are not starved.
constexpr int kAcceptBatch = 64;
// With no descriptor left and no idle connection to close, accepting waits.
constexpr std::chrono::milliseconds kAcceptPause{50};
// A handler thread with no work for this long ends.
constexpr std::chrono::milliseconds kThreadLinger{3000};

Status watch_fd(int epoll_fd, int fd, uint64_t id) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = id;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) return sys_error("epoll_ctl");
  return ok_status();
}

}  // namespace

// ---- Responder

Responder::Responder(int fd, const Request& request, const ServerLimits& limits,
                     std::string* pending, int stop_fd)
    : fd_(fd),
      limits_(limits),
      keep_alive_(request.keep_alive()),
      head_request_(request.method() == http::verb::head),
      pending_(pending),
      stop_fd_(stop_fd) {}

Result<RawConnection> Responder::take_over() {
  if (answered_) return make_error("take over", "this request was answered already");
  answered_ = true;
  keep_alive_ = false;
  RawConnection raw;
  raw.fd = fd_;
  raw.stop_fd = stop_fd_;
  if (pending_ != nullptr) raw.early = std::exchange(*pending_, std::string());
  return raw;
}

bool Responder::client_gone() const {
  pollfd p{fd_, POLLRDHUP, 0};
  return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

Status Responder::send(std::string_view bytes) {
  std::string_view parts[1] = {bytes};
  return send_parts(parts);
}

std::string Responder::head(int status, std::string_view content_type,
                            const std::vector<std::pair<std::string, std::string>>& headers) const {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\n";
  if (!content_type.empty()) out += "Content-Type: " + std::string(content_type) + "\r\n";
  for (const auto& [k, v] : headers) out += k + ": " + v + "\r\n";
  out += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  return out;
}

Status Responder::respond(int status, std::string_view content_type, std::string_view body,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return make_error("respond", "this request was answered already");
  answered_ = true;
  std::string out = head(status, content_type, headers);
  // 204 and 304 carry no body and no Content-Length (RFC 9110, 8.6).
  if (status != 204 && status != 304) {
    out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  }
  out += "\r\n";
  if (!head_request_ && status != 204 && status != 304) out += body;
  return send(out);
}

Status Responder::begin_stream(int status, std::string_view content_type,
                               const std::vector<std::pair<std::string, std::string>>& headers) {
  if (answered_) return make_error("respond", "this request was answered already");
  answered_ = true;
  streaming_ = true;
  std::string out = head(status, content_type, headers);
  out += "Transfer-Encoding: chunked\r\nCache-Control: no-store\r\n\r\n";
  return send(out);
}

Status Responder::write_chunk(std::string_view data) {
  if (!streaming_) return make_error("write chunk", "no stream was begun");
  if (data.empty()) return ok_status();
  char size[32];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  // Its size line, its bytes and its end in one sendmsg: a large chunk (a
  // port's streamed answer) is not copied to be framed.
  std::string_view parts[3] = {std::string_view(size, static_cast<size_t>(n)), data, "\r\n"};
  return send_parts(parts);
}

Status Responder::send_parts(std::span<std::string_view> parts) {
  auto deadline = Clock::now() + limits_.write_timeout;
  size_t first = 0;
  while (first < parts.size()) {
    iovec iov[4];
    size_t count = 0;
    for (size_t i = first; i < parts.size() && count < 4; ++i) {
      iov[count].iov_base = const_cast<char*>(parts[i].data());
      iov[count].iov_len = parts[i].size();
      ++count;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      size_t sent = static_cast<size_t>(n);
      while (first < parts.size() && sent >= parts[first].size()) {
        sent -= parts[first].size();
        ++first;
      }
      if (first < parts.size()) parts[first].remove_prefix(sent);
      deadline = Clock::now() + limits_.write_timeout;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(fd_, POLLOUT, deadline)) {
        keep_alive_ = false;
        return make_error(
            "write response",
            "the client read nothing for " + std::to_string(limits_.write_timeout.count()) + " ms");
      }
      continue;
    }
    keep_alive_ = false;
    return sys_error("write response");
  }
  return ok_status();
}

Status Responder::end_stream() {
  if (!streaming_) return make_error("end stream", "no stream was begun");
  streaming_ = false;
  return send("0\r\n\r\n");
}

// ---- HttpServer

struct HttpServer::Impl {
  Impl(ServerLimits l, Handler h)
      : limits(l), handler(std::move(h)), pool(l.max_handler_threads, kThreadLinger) {}

  const ServerLimits limits;
  const Handler handler;
  UniqueFd listen_fd;
  UniqueFd stop_fd;   // eventfd: readable once stopping
  UniqueFd wake_fd;   // eventfd: a handler gave a connection back
  UniqueFd epoll_fd;  // the poller's
  std::string unix_path;
  std::thread poller;
  HandlerPool pool;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};

  // Every connection, idle or busy (stop() ends them all), and the counts the
  // bounds are checked against.
  std::mutex mu;
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns;
  std::unordered_map<std::string, size_t> per_peer;
  std::vector<Conn*> returned;  // kept alive after an answer: for the poller to watch

  // The poller thread's alone.
  IdleSet idle;
  uint64_t next_id = kFirstConnId;
  bool accept_paused = false;
  Clock::time_point resume_accept_at;
  Clock::time_point last_accept_warning;

  // ---- The poller thread

  void poll_loop() {
    epoll_event events[128];
    while (true) {
      take_back_returned();
      const int n = ::epoll_wait(epoll_fd.get(), events, 128, wait_ms());
      if (n < 0 && errno != EINTR) {
        spdlog::error("serve: epoll_wait: {}", std::strerror(errno));
        return;
      }
      for (int i = 0; i < n; ++i) {
        const uint64_t id = events[i].data.u64;
        if (id == kStopId) return;
        if (id == kWakeId) {
          uint64_t count = 0;
          (void)!::read(wake_fd.get(), &count, sizeof count);
        } else if (id == kListenId) {
          accept_new();
        } else {
          dispatch(id, events[i].events);
        }
      }
      const auto now = Clock::now();
      close_expired(now);
      if (accept_paused && now >= resume_accept_at) set_accepting(true);
    }
  }

  // Idle connections past their deadline are closed without a word.
  void close_expired(Clock::time_point now) {
    while (evict(idle.expired(now))) {
    }
  }

  // Until the next idle deadline (or the end of a pause in accepting).
  int wait_ms() const {
    std::optional<Clock::time_point> next = idle.next_deadline();
    if (accept_paused && (!next || resume_accept_at < *next)) next = resume_accept_at;
    if (!next) return -1;
    const auto left = *next - Clock::now();
    if (left <= Clock::duration::zero()) return 0;
    // Rounded up: waking before the deadline would spin until it.
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    return static_cast<int>(std::min<int64_t>(ms, std::numeric_limits<int>::max()));
  }

  void take_back_returned() {
    std::vector<Conn*> back;
    {
      std::lock_guard lock(mu);
      back.swap(returned);
    }
    const auto deadline = Clock::now() + limits.idle_timeout;
    for (Conn* c : back) watch(c, deadline);
  }

  void accept_new() {
    for (int i = 0; i < kAcceptBatch; ++i) {
      sockaddr_storage from{};
      socklen_t len = sizeof from;
      UniqueFd fd(
          ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC));
      if (fd) {
        admit(std::move(fd), peer_key(from));
        continue;
      }
      const int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      // A connection that failed before it was accepted: the next one may not.
      if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EPERM) continue;
      // Out of descriptors: an idle connection gives its own up.
      if ((err == EMFILE || err == ENFILE) && evict(idle.oldest())) continue;
      if (Clock::now() - last_accept_warning > std::chrono::seconds(10)) {
        last_accept_warning = Clock::now();
        spdlog::warn("serve: accept: {}", std::strerror(err));
      }
      set_accepting(false);
      return;
    }
  }

  // Pauses accepting for kAcceptPause (the listener stays readable, so the
  // poller would spin on it), or resumes.
  void set_accepting(bool on) {
    epoll_event ev{};
    ev.events = on ? static_cast<uint32_t>(EPOLLIN) : 0u;
    ev.data.u64 = kListenId;
    ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_MOD, listen_fd.get(), &ev);
    accept_paused = !on;
    if (!on) resume_accept_at = Clock::now() + kAcceptPause;
  }

  void admit(UniqueFd fd, std::string peer) {
    if (unix_path.empty()) {
      const int one = 1;
      ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (!make_room(peer)) {
      refuse(fd.get(), 503, "too many connections");
      return;
    }
    auto owned = std::make_unique<Conn>();
    Conn* c = owned.get();
    c->id = next_id++;
    c->fd = std::move(fd);
    c->peer = std::move(peer);
    {
      std::lock_guard lock(mu);
      ++per_peer[c->peer];
      conns.emplace(c->id, std::move(owned));
      ++open;
    }
    // A new connection that sends nothing is a slow head: head_timeout.
    watch(c, Clock::now() + limits.head_timeout);
  }

  // Closes the oldest idle connections until one more from `peer` fits both
  // bounds: those of `peer` first, as only they help its own bound and a flood
  // then pays for itself; false when the ones in the way are all busy.
  bool make_room(const std::string& peer) {
    while (true) {
      const auto [over_peer, over_all] = over_bounds(peer);
      if (!over_peer && !over_all) return true;
      Conn* victim = idle.oldest_of(peer);
      if (victim == nullptr && !over_peer) victim = idle.oldest();
      if (!evict(victim)) return false;
    }
  }

  std::pair<bool, bool> over_bounds(const std::string& peer) {
    std::lock_guard lock(mu);
    const auto it = per_peer.find(peer);
    const size_t mine = it == per_peer.end() ? 0 : it->second;
    return {mine >= limits.max_connections_per_address, conns.size() >= limits.max_connections};
  }

  // Closes an idle connection; false when there is none.
  bool evict(Conn* c) {
    if (c == nullptr) return false;
    idle.take(c->id);
    close_conn(c);
    return true;
  }

  // Holds `c` until a byte arrives or `deadline` passes.
  void watch(Conn* c, Clock::time_point deadline) {
    epoll_event ev{};
    // One-shot: once dispatched, the connection is its handler thread's alone.
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = c->id;
    const int op = c->in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (::epoll_ctl(epoll_fd.get(), op, c->fd.get(), &ev) != 0) {
      spdlog::warn("serve: epoll_ctl: {}", std::strerror(errno));
      close_conn(c);
      return;
    }
    c->in_epoll = true;
    idle.add(c, deadline);
  }

  void dispatch(uint64_t id, uint32_t events) {
    Conn* c = idle.take(id);
    if (c == nullptr) return;  // closed earlier in this turn
    // Reset, or an error: there is nothing to read.
    if (events & (EPOLLHUP | EPOLLERR)) {
      close_conn(c);
      return;
    }
    const Status queued = pool.run([this, c] { serve(c); });
    if (!queued) {
      spdlog::warn("serve: {}", queued.error().to_string());
      refuse(c->fd.get(), 503, "no thread is free");
      close_conn(c);
    }
  }

  // ---- Handler threads

  void serve(Conn* c) {
    if (serve_requests(*c)) {
      give_back(c);
      return;
    }
    ::shutdown(c->fd.get(), SHUT_RDWR);
    close_conn(c);
  }

  // Serves requests on `c` while their bytes are at hand; true when it stays
  // open, waiting for the next.
  bool serve_requests(Conn& c) {
    while (!stopping.load()) {
      http::request_parser<http::string_body> parser;
      const ReadOutcome got = read_request(c.fd.get(), stop_fd.get(), limits, c.pending, parser);
      if (got.end != ReadEnd::kRequest) {
        refuse_unread(c.fd.get(), got);
        return false;
      }
      const Request request = parser.release();
      if (!answer(c.fd.get(), request, c.pending)) return false;
      // A pipelined request that is here already is served now, by this thread.
      if (c.pending.empty()) {
        const Arrived more = read_arrived(c.fd.get(), c.pending);
        if (more == Arrived::kNothing) return true;
        if (more == Arrived::kClosed) return false;
      }
    }
    return false;
  }

  // Runs the handler; true when the connection is kept alive after the answer.
  bool answer(int fd, const Request& request, std::string& pending) {
    Responder responder(fd, request, limits, &pending, stop_fd.get());
    try {
      handler(request, responder);
    } catch (const std::exception& e) {
      spdlog::error("serve: {} {}: {}", std::string(request.method_string()),
                    std::string(request.target()), e.what());
      if (!responder.answered()) {
        (void)responder.respond(500, "application/json", "{\"error\":\"internal error\"}\n");
      }
      return false;
    }
    if (!responder.answered()) {
      (void)responder.respond(500, "application/json", "{\"error\":\"no answer\"}\n");
    }
    return responder.keep_alive();
  }

  void give_back(Conn* c) {
    {
      std::lock_guard lock(mu);
      if (!stopping.load()) {
        returned.push_back(c);
        c = nullptr;
      }
    }
    if (c != nullptr) {
      close_conn(c);
      return;
    }
    const uint64_t one = 1;
    (void)!::write(wake_fd.get(), &one, sizeof one);
  }

  // ---- Any thread

  // Forgets `c` and closes its socket.
  void close_conn(Conn* c) {
    std::unique_ptr<Conn> gone;  // declared first: closed after the lock is let go
    std::lock_guard lock(mu);
    const auto it = conns.find(c->id);
    if (it == conns.end()) return;
    gone = std::move(it->second);
    conns.erase(it);
    const auto mine = per_peer.find(gone->peer);
    if (mine != per_peer.end() && --mine->second == 0) per_peer.erase(mine);
    --open;
  }

  void stop() {
    const uint64_t one = 1;
    (void)!::write(stop_fd.get(), &one, sizeof one);
    if (poller.joinable()) poller.join();
    {
      // Handlers blocked in a tool call see their client go; readers see stop_fd.
      std::lock_guard lock(mu);
      for (auto& [id, c] : conns) ::shutdown(c->fd.get(), SHUT_RDWR);
    }
    pool.stop();
    std::unordered_map<uint64_t, std::unique_ptr<Conn>> left;  // the idle ones
    {
      std::lock_guard lock(mu);
      left.swap(conns);
      per_peer.clear();
      returned.clear();
      open = 0;
    }
    if (!unix_path.empty()) ::unlink(unix_path.c_str());
  }
};

HttpServer::HttpServer(std::string address, std::unique_ptr<Impl> impl)
    : address_(std::move(address)), impl_(std::move(impl)) {}

HttpServer::~HttpServer() { stop(); }

size_t HttpServer::open_connections() const { return impl_->open.load(); }

Result<UniqueFd> bind_listener(const ListenAddress& address, std::string* bound) {
  UniqueFd fd;
  if (address.unix_socket) {
    fd = UniqueFd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, address.host.c_str(), address.host.size());
    ::unlink(address.host.c_str());
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
      return sys_error("listen on unix:" + address.host);
    }
    *bound = "unix:" + address.host;
  } else {
    sockaddr_storage ss{};
    socklen_t len = 0;
    int family = AF_INET;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    const std::string host = address.host.empty() ? "127.0.0.1" : address.host;
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
      v4->sin_family = AF_INET;
      v4->sin_port = htons(address.port);
      len = sizeof *v4;
    } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
      family = AF_INET6;
      v6->sin6_family = AF_INET6;
      v6->sin6_port = htons(address.port);
      len = sizeof *v6;
    } else {
      return make_error("--listen", "\"" + host + "\" is not an IP address");
    }
    fd = UniqueFd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) return sys_error("socket");
    const int one = 1;
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&ss), len) != 0) {
      return sys_error("listen on " + host + ":" + std::to_string(address.port));
    }
    sockaddr_storage got{};
    socklen_t got_len = sizeof got;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&got), &got_len);
    const uint16_t port =
        ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&got)->sin_port
                                : reinterpret_cast<sockaddr_in6*>(&got)->sin6_port);
    *bound = (family == AF_INET6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
  }
  if (::listen(fd.get(), 1024) != 0) return sys_error("listen on " + *bound);
  return fd;
}

Result<std::unique_ptr<HttpServer>> HttpServer::listen(const ListenAddress& address,
                                                       ServerLimits limits, Handler handler) {
  auto impl = std::make_unique<Impl>(limits, std::move(handler));
  std::string bound;
  auto fd = bind_listener(address, &bound);
  if (!fd) return fd.take_error();
  impl->listen_fd = std::move(*fd);
  if (address.unix_socket) impl->unix_path = address.host;
  // Non-blocking: the poller accepts until the backlog is empty.
  const int flags = ::fcntl(impl->listen_fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(impl->listen_fd.get(), F_SETFL, flags | O_NONBLOCK) != 0) {
    return sys_error("fcntl O_NONBLOCK on " + bound);
  }
  impl->stop_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  impl->wake_fd = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl->stop_fd || !impl->wake_fd) return sys_error("eventfd");
  impl->epoll_fd = UniqueFd(::epoll_create1(EPOLL_CLOEXEC));
  if (!impl->epoll_fd) return sys_error("epoll_create1");
  RF_TRY(watch_fd(impl->epoll_fd.get(), impl->listen_fd.get(), kListenId));
  RF_TRY(watch_fd(impl->epoll_fd.get(), impl->stop_fd.get(), kStopId));
  RF_TRY(watch_fd(impl->epoll_fd.get(), impl->wake_fd.get(), kWakeId));
  ensure_fd_room(limits.max_connections);
  Impl* raw = impl.get();
  impl->poller = std::thread([raw] { raw->poll_loop(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(bound), std::move(impl)));
}

void HttpServer::stop() {
  if (!impl_ || impl_->stopping.exchange(true)) return;
  impl_->stop();
}

}  // namespace rf::httpd
