// The proxy's resolver: system lookups run on threads the resolver owns, and
// destroying it joins them, with lookups queued and in flight. Only IP
// literals go to getaddrinfo here: it parses them without NSS or DNS.
#include "proxy/resolver.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <memory>
#include <thread>

namespace rf::proxy {
namespace {

// Threads of this process now. A joined thread can still be listed for a
// moment: the kernel wakes pthread_join as the thread releases its memory
// map, before the task is reaped (CI's TSAN run saw it once in 20 rounds).
int thread_count() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(d);
  return n;
}

// The thread count once it has come down to `want`, or after 2 s.
int thread_count_settled(int want) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int n = thread_count();
  while (n != want && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = thread_count();
  }
  return n;
}

TEST(Resolver, SystemLookupsAnswerOnTheIoContext) {
  boost::asio::io_context io;
  Resolver r({}, /*system_dns=*/true, nullptr, 2);
  std::vector<std::string> got;
  for (const char* name : {"127.0.0.1", "::1", "127.0.0.2"}) {
    r.resolve(io, name, [&got](Result<Resolver::Addresses> a) {
      ASSERT_TRUE(a.ok()) << a.error().to_string();
      ASSERT_EQ(a->size(), 1u);
      got.push_back((*a)[0].to_string());
    });
  }
  // `done` runs here, on the io_context's thread; the guard keeps run_one waiting for it.
  auto guard = boost::asio::make_work_guard(io);
  while (got.size() < 3) io.run_one();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<std::string>{"127.0.0.1", "127.0.0.2", "::1"}));
}

TEST(Resolver, ANameNotInTheOverridesWithoutSystemDnsDoesNotResolve) {
  boost::asio::io_context io;
  Resolver r({{"Known.Test.", {*net::parse_ip_literal("127.0.0.1")}}}, /*system_dns=*/false,
             nullptr);
  std::vector<std::string> got;
  for (const char* name : {"known.test", "other.test"}) {
    r.resolve(io, name, [&got](Result<Resolver::Addresses> a) {
      got.push_back(a.ok() ? (*a)[0].to_string() : a.error().to_string());
    });
  }
  io.run();
  EXPECT_EQ(got,
            (std::vector<std::string>{"127.0.0.1",
                                      "resolve: other.test does not resolve: not in the proxy's "
                                      "resolver overrides, and system DNS is off"}));
}

// Destroyed with lookups queued and in flight: every lookup thread has ended
// when the destructor returns, and results still to come are dropped.
TEST(Resolver, DestroyingItJoinsEveryLookupThread) {
  // A first thread, so that helpers started with it are counted in `before`
  // (ThreadSanitizer's runtime starts a thread of its own then).
  std::thread([] {}).join();
  const int before = thread_count();
  ASSERT_GT(before, 0);
  for (int round = 0; round < 20; ++round) {
    auto io = std::make_unique<boost::asio::io_context>();
    auto r = std::make_unique<Resolver>(std::map<std::string, Resolver::Addresses>{},
                                        /*system_dns=*/true, nullptr, 4);
    auto answered = std::make_shared<std::atomic<int>>(0);
    for (int i = 0; i < 64; ++i) {
      r->resolve(*io, "127.0.0." + std::to_string(i + 1),
                 [answered](Result<Resolver::Addresses>) { ++*answered; });
    }
    r.reset();  // joins
    // A thread that is not joined would be left running or blocked; one that
    // was joined leaves the task list within moments. (One that outlived the
    // resolver and touched it is what the TSAN run of this test catches.)
    EXPECT_EQ(thread_count_settled(before), before) << "round " << round;
    io->run();  // what was posted before the shutdown is still answered; nothing after
    EXPECT_LE(answered->load(), 64);
    io.reset();
  }
}

}  // namespace
}  // namespace rf::proxy
