// The HTTP server's connection handling, in process on loopback: idle
// connections hold no thread, silent ones are closed, floods of idle
// connections evict their own oldest instead of keeping others out, and
// keep-alive, pipelining, client_gone() and stop() still work. Every wait has
// a generous deadline and no test decides on how long something took.
#include "httpd/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/fd_limit.h"
#include "core/unique_fd.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using httpd::Request;
using httpd::Responder;
using httpd::ServerLimits;
using Clock = std::chrono::steady_clock;

// Loaded shared machines: long enough for anything that is going to happen.
constexpr auto kPatience = 20s;

size_t threads_now() {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    n += !e.path().empty();
  }
  return n;
}

// Waits for `done` until kPatience has passed; its last answer.
template <class Pred>
bool eventually(Pred done) {
  const auto end = Clock::now() + kPatience;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

// A test needs `fds` descriptors of its own and as many for the server's side.
bool room_for(size_t fds) {
  auto limit = raise_fd_limit();
  return limit.ok() && *limit >= 2 * fds + 256;
}

uint16_t port_of(const httpd::HttpServer& server) {
  const std::string& a = server.address();
  return static_cast<uint16_t>(std::atoi(a.substr(a.rfind(':') + 1).c_str()));
}

// A loopback connection to `port`, from `source` (any 127/8 address is this host).
UniqueFd connect_to(uint16_t port, const char* source = "127.0.0.1") {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) return fd;
  // The port is picked at connect(), as without a bind: a bind would want one
  // that no socket holds, and thousands linger after each test.
  const int one = 1;
  ::setsockopt(fd.get(), IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  // Closed with a reset: no TIME_WAIT left behind on a shared machine.
  const linger abort_on_close{1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &abort_on_close, sizeof abort_on_close);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) return UniqueFd();
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) return UniqueFd();
  return fd;
}

UniqueFd connect_unix(const std::string& path) {
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path.c_str());
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return UniqueFd();
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

std::string get(const std::string& target, bool close = false) {
  return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + (close ? "Connection: close\r\n" : "") +
         "\r\n";
}

// Appends what arrives on `fd` before `deadline`; false on EOF, error or timeout.
bool receive(int fd, std::string& buffer, Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  if (left.count() <= 0) return false;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
  char buf[4096];
  const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  if (n <= 0) return false;
  buffer.append(buf, static_cast<size_t>(n));
  return true;
}

struct Reply {
  int status = 0;
  std::string body;
};

// One reply with a Content-Length body; what follows it stays in `buffer`.
std::optional<Reply> read_reply(int fd, std::string& buffer) {
  const auto deadline = Clock::now() + kPatience;
  while (true) {
    const size_t end = buffer.find("\r\n\r\n");
    if (end != std::string::npos && buffer.rfind("HTTP/1.1 ", 0) == 0) {
      std::string head = buffer.substr(0, end);
      for (auto& ch : head) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      const size_t at = head.find("content-length: ");
      const size_t length = at == std::string::npos ? 0 : std::stoul(head.substr(at + 16));
      if (buffer.size() >= end + 4 + length) {
        Reply r{std::atoi(buffer.c_str() + 9), buffer.substr(end + 4, length)};
        buffer.erase(0, end + 4 + length);
        return r;
      }
    }
    if (!receive(fd, buffer, deadline)) return std::nullopt;
  }
}

std::optional<Reply> ask(int fd, const std::string& target) {
  if (!send_all(fd, get(target))) return std::nullopt;
  std::string buffer;
  return read_reply(fd, buffer);
}

// True once the server has closed `fd` (EOF or reset); what it sent is skipped.
bool closed_by_server(int fd) {
  const auto deadline = Clock::now() + kPatience;
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return true;
  }
  return false;
}

// True while the server has not closed `fd`.
bool still_open(int fd) {
  char c;
  const ssize_t n = ::recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return n < 0 && errno == EAGAIN;
}

void echo_target(const Request& req, Responder& res) {
  (void)res.respond(200, "text/plain", std::string(req.target()));
}

// The suite: a server on 127.0.0.1 with a port of its own.
class HttpServer : public ::testing::Test {
 protected:
  httpd::HttpServer& start(ServerLimits limits, httpd::Handler handler = echo_target) {
    auto server = httpd::HttpServer::listen(httpd::ListenAddress{false, "127.0.0.1", 0}, limits,
                                            std::move(handler));
    EXPECT_TRUE(server.ok()) << server.error().to_string();
    server_ = std::move(*server);
    port_ = port_of(*server_);
    return *server_;
  }
  // A request on a connection of its own; its status, 0 when none came.
  int status_of_one_request(const char* source = "127.0.0.1") {
    UniqueFd fd = connect_to(port_, source);
    if (!fd) return 0;
    auto reply = ask(fd.get(), "/ping");
    return reply ? reply->status : 0;
  }

  std::unique_ptr<httpd::HttpServer> server_;
  uint16_t port_ = 0;
};

// A handler that holds a request until its client goes (or the test lets it
// go); /quick is answered at once.
struct Holder {
  std::atomic<int> entered{0};
  std::atomic<int> saw_gone{0};
  std::atomic<bool> release{false};

  httpd::Handler handler() {
    return [this](const Request& req, Responder& res) {
      if (req.target() == "/quick") {
        (void)res.respond(200, "text/plain", "quick");
        return;
      }
      ++entered;
      const auto end = Clock::now() + kPatience;
      while (!release.load() && Clock::now() < end) {
        if (res.client_gone()) {
          ++saw_gone;
          return;
        }
        std::this_thread::sleep_for(5ms);
      }
      (void)res.respond(200, "text/plain", "released");
    };
  }
};

TEST_F(HttpServer, IdleConnectionsHoldNoThread) {
  constexpr size_t kIdle = 2000;
  if (!room_for(kIdle)) GTEST_SKIP() << "the fd limit is too low for " << kIdle << " connections";
  ServerLimits limits;
  limits.max_connections_per_address = kIdle + 16;
  auto& server = start(limits);
  ASSERT_EQ(status_of_one_request(), 200) << "a handler thread exists before the count";
  ASSERT_TRUE(eventually([&] { return server.open_connections() == 0; }));
  const size_t before = threads_now();

  std::vector<UniqueFd> idle;
  for (size_t i = 0; i < kIdle; ++i) {
    idle.push_back(connect_to(port_));
    ASSERT_TRUE(idle.back()) << "connection " << i << ": " << std::strerror(errno);
  }
  ASSERT_TRUE(eventually([&] { return server.open_connections() == kIdle; }))
      << server.open_connections() << " open";
  EXPECT_LE(threads_now(), before + 4) << "idle connections hold threads";
  EXPECT_EQ(status_of_one_request(), 200);
  size_t open = 0;
  for (const auto& fd : idle) open += still_open(fd.get());
  EXPECT_EQ(open, kIdle);
}

TEST_F(HttpServer, ASilentNewConnectionIsClosedAfterTheHeadTimeout) {
  ServerLimits limits;
  limits.head_timeout = 300ms;
  limits.idle_timeout = 1h;  // not this one
  auto& server = start(limits);
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(fd);
  EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST_F(HttpServer, AKeptAliveConnectionWaitsForTheIdleTimeoutNotTheHeadTimeout) {
  ServerLimits limits;
  limits.head_timeout = 300ms;
  limits.idle_timeout = 1h;
  start(limits);
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(fd);
  auto first = ask(fd.get(), "/one");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->status, 200);
  // Past the head timeout a few times over: a slow machine can only make this pass.
  std::this_thread::sleep_for(1s);
  EXPECT_TRUE(still_open(fd.get())) << "closed after the head timeout";
  auto second = ask(fd.get(), "/two");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->body, "/two");
}

TEST_F(HttpServer, AKeptAliveConnectionIsClosedAfterTheIdleTimeout) {
  ServerLimits limits;
  limits.head_timeout = 1h;  // not this one
  limits.idle_timeout = 300ms;
  auto& server = start(limits);
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(fd);
  auto reply = ask(fd.get(), "/one");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_TRUE(eventually([&] { return server.open_connections() == 0; }));
}

TEST_F(HttpServer, ARequestHeadThatNeverEndsGets408) {
  ServerLimits limits;
  limits.head_timeout = 300ms;
  start(limits);
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(send_all(fd.get(), "GET /slow HTTP/1.1\r\nHost: x\r\n"));
  std::string buffer;
  auto reply = read_reply(fd.get(), buffer);
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 408);
}

TEST_F(HttpServer, AnIdleFloodFromOneAddressEvictsItsOwnOldestNotANewClient) {
  constexpr size_t kFlood = 4100;
  if (!room_for(kFlood)) GTEST_SKIP() << "the fd limit is too low for " << kFlood << " connections";
  ServerLimits limits;
  limits.max_connections_per_address = 64;
  auto& server = start(limits);
  std::vector<UniqueFd> flood;
  for (size_t i = 0; i < kFlood; ++i) {
    flood.push_back(connect_to(port_));
    ASSERT_TRUE(flood.back()) << "connection " << i << ": " << std::strerror(errno);
  }
  EXPECT_EQ(status_of_one_request("127.0.0.1"), 200);
  EXPECT_TRUE(closed_by_server(flood.front().get())) << "the oldest idle one was closed";
  EXPECT_TRUE(still_open(flood.back().get())) << "the newest idle one stays";
  EXPECT_TRUE(eventually([&] { return server.open_connections() <= 64; }))
      << server.open_connections() << " open";
}

TEST_F(HttpServer, AnIdleFloodFillingTheServerEvictsTheOldestIdleOfAnotherAddress) {
  ServerLimits limits;
  limits.max_connections = 64;
  auto& server = start(limits);
  std::vector<UniqueFd> flood;
  flood.push_back(connect_to(port_, "127.0.0.2"));
  if (!flood.back()) GTEST_SKIP() << "no 127.0.0.2 here: " << std::strerror(errno);
  for (size_t i = 1; i < 500; ++i) {
    flood.push_back(connect_to(port_, "127.0.0.2"));
    ASSERT_TRUE(flood.back()) << "connection " << i << ": " << std::strerror(errno);
  }
  EXPECT_EQ(status_of_one_request("127.0.0.1"), 200);
  EXPECT_TRUE(closed_by_server(flood.front().get()));
  EXPECT_TRUE(eventually([&] { return server.open_connections() <= 64; }));
}

TEST_F(HttpServer, BusyConnectionsAreNotEvictedAndANewOneIsRefused) {
  Holder holder;
  ServerLimits limits;
  limits.max_connections = 2;
  start(limits, holder.handler());
  std::vector<UniqueFd> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(connect_to(port_));
    ASSERT_TRUE(send_all(busy.back().get(), get("/hold")));
  }
  ASSERT_TRUE(eventually([&] { return holder.entered.load() == 2; }));
  UniqueFd third = connect_to(port_);
  ASSERT_TRUE(third);
  std::string buffer;
  auto refused = read_reply(third.get(), buffer);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 503);
  EXPECT_NE(refused->body.find("too many connections"), std::string::npos) << refused->body;
  holder.release = true;
  for (auto& fd : busy) {
    std::string b;
    auto reply = read_reply(fd.get(), b);
    ASSERT_TRUE(reply);
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, "released");
  }
}

TEST_F(HttpServer, KeepAliveServesSeveralRequestsOnOneConnection) {
  auto& server = start({});
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(fd);
  for (int i = 0; i < 5; ++i) {
    const std::string target = "/n" + std::to_string(i);
    auto reply = ask(fd.get(), target);
    ASSERT_TRUE(reply) << i;
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, target);
  }
  EXPECT_EQ(server.open_connections(), 1u);
}

TEST_F(HttpServer, PipelinedRequestsGetTheirAnswersInOrder) {
  start({});
  UniqueFd fd = connect_to(port_);
  ASSERT_TRUE(send_all(fd.get(), get("/first") + get("/second") + get("/third", true)));
  std::string buffer;
  for (const char* want : {"/first", "/second", "/third"}) {
    auto reply = read_reply(fd.get(), buffer);
    ASSERT_TRUE(reply) << want;
    EXPECT_EQ(reply->status, 200);
    EXPECT_EQ(reply->body, want);
  }
  EXPECT_TRUE(closed_by_server(fd.get())) << "the third asked to close";
}

TEST_F(HttpServer, HandlerThreadsAreReused) {
  std::mutex mu;
  std::set<pid_t> threads;
  start({}, [&](const Request& req, Responder& res) {
    {
      std::lock_guard lock(mu);
      threads.insert(::gettid());
    }
    echo_target(req, res);
  });
  for (int i = 0; i < 50; ++i) ASSERT_EQ(status_of_one_request(), 200) << i;
  std::lock_guard lock(mu);
  EXPECT_LE(threads.size(), 10u) << "a thread per request";
}

TEST_F(HttpServer, AClientThatHangsUpMidHandlerIsSeenGone) {
  Holder holder;
  start({}, holder.handler());
  {
    UniqueFd fd = connect_to(port_);
    ASSERT_TRUE(send_all(fd.get(), get("/hold")));
    ASSERT_TRUE(eventually([&] { return holder.entered.load() == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return holder.saw_gone.load() == 1; }));
}

TEST_F(HttpServer, StopEndsIdleAndBusyConnectionsAndJoinsEveryThread) {
  const size_t threads_before = threads_now();
  Holder holder;
  auto& server = start({}, holder.handler());
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(connect_to(port_));
  auto kept = ask(idle.back().get(), "/quick");  // idle again, kept alive
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->status, 200);
  std::vector<UniqueFd> busy;
  for (int i = 0; i < 2; ++i) {
    busy.push_back(connect_to(port_));
    ASSERT_TRUE(send_all(busy.back().get(), get("/hold")));
  }
  ASSERT_TRUE(eventually([&] { return holder.entered.load() == 2; }));

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    server.stop();
    stopped = true;
  });
  const bool returned = eventually([&] { return stopped.load(); });
  EXPECT_TRUE(returned) << "stop() did not return";
  if (!returned) holder.release = true;  // so the test ends
  stopper.join();
  EXPECT_EQ(server.open_connections(), 0u);
  EXPECT_EQ(holder.saw_gone.load(), 2) << "busy handlers saw their client go";
  for (auto& fd : idle) EXPECT_TRUE(closed_by_server(fd.get()));
  for (auto& fd : busy) EXPECT_TRUE(closed_by_server(fd.get()));
  EXPECT_TRUE(eventually([&] { return threads_now() <= threads_before; }))
      << threads_now() << " threads, " << threads_before << " before";
  server.stop();  // again: nothing to do
}

TEST_F(HttpServer, UnixSocketClientsCountAsOneAddress) {
  const std::string path = "/tmp/rf-http-test-" + std::to_string(::getpid()) + ".sock";
  ServerLimits limits;
  limits.max_connections_per_address = 4;
  auto server = httpd::HttpServer::listen(httpd::ListenAddress{true, path, 0}, limits, echo_target);
  ASSERT_TRUE(server.ok()) << server.error().to_string();
  EXPECT_EQ((*server)->address(), "unix:" + path);
  std::vector<UniqueFd> idle;
  for (int i = 0; i < 10; ++i) {
    idle.push_back(connect_unix(path));
    ASSERT_TRUE(idle.back()) << i;
  }
  UniqueFd client = connect_unix(path);
  ASSERT_TRUE(client);
  auto reply = ask(client.get(), "/over-unix");
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->status, 200);
  EXPECT_EQ(reply->body, "/over-unix");
  EXPECT_TRUE(closed_by_server(idle.front().get())) << "the oldest idle one was closed";
  (*server)->stop();
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace rf::testing
