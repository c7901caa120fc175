// `ringfence call` with no worker, a busy worker, a worker pinned to another
// project, and --wait-timeout: the real binary against a store in a temp
// state dir, with real `ringfence worker start` processes (mode none needs no
// root; the per_worker case runs native sandboxes).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "support/ci_skip.h"
#include "support/cli_process.h"
#include "worker/worker.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class CallCli : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rf-call-cli-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (auto& w : workers_) {
      w->signal(SIGTERM);
      w->wait();
    }
    workers_.clear();
    std::filesystem::remove_all(dir_);
  }
  std::vector<std::string> call_args(const std::string& run, std::vector<std::string> extra,
                                     std::vector<std::string> command,
                                     const std::string& project = "p") {
    std::vector<std::string> a{"call", "--state-dir", dir_, "--project", project, "--run", run};
    a.insert(a.end(), extra.begin(), extra.end());
    a.push_back("--");
    a.insert(a.end(), command.begin(), command.end());
    return a;
  }
  std::unique_ptr<store::Store> store() {
    auto s = store::Store::open(worker::store_path(dir_));
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    return std::move(*s);
  }
  // `worker start` with these flags; returns once the store lists it as serving `project`.
  Cli& start_worker(std::vector<std::string> flags, const std::string& project = "p") {
    std::vector<std::string> a{"worker", "start", "--state-dir", dir_};
    a.insert(a.end(), flags.begin(), flags.end());
    workers_.push_back(std::make_unique<Cli>(a));
    auto s = store();
    const auto end = Clock::now() + 20s;
    while (Clock::now() < end) {
      auto w = s->workers_serving(project, store::now_ms() - 10'000);
      if (w && !w->empty()) break;
      std::this_thread::sleep_for(20ms);
    }
    return *workers_.back();
  }
  // The call's state; nullopt while it does not exist yet.
  std::optional<store::CallState> state_of(int64_t call) {
    auto v = store()->call(call);
    return v ? std::optional(v->state) : std::nullopt;
  }
  std::string notice(int64_t call, const std::string& project = "p") {
    return "ringfence: call " + std::to_string(call) + " waits: no live worker serves project " +
           project + " in store " + dir_ + "/ringfence.db; it runs when one starts";
  }
  std::string start_line() {
    return "ringfence: start one with: ringfence worker start --state-dir " + dir_ +
           " --project-environment development\n";
  }

  std::string dir_;
  std::vector<std::unique_ptr<Cli>> workers_;
};

TEST_F(CallCli, WithNoWorkerANoticeNamesTheStoreAndTheFixThenTheCallRunsWhenOneStarts) {
  Cli call(call_args("r1", {}, {"echo", "served late"}));
  // Due after 1 s of waiting; "about 2 s" is the promise.
  ASSERT_TRUE(call.stderr_shows(start_line(), 3s)) << call.err();
  EXPECT_EQ(call.err(), notice(1) + " (no --wait-timeout: it waits until then)\n" + start_line());
  EXPECT_TRUE(call.running());  // it keeps waiting after the notice
  EXPECT_EQ(state_of(1), store::CallState::queued);
  start_worker({});
  EXPECT_EQ(call.wait(), 0) << call.err();
  EXPECT_EQ(call.out(), "served late\n");
  EXPECT_EQ(state_of(1), store::CallState::done);
}

// A call refused for its flags writes nothing: before, the project was made
// (with the --environment given, for good) and then the call refused.
TEST_F(CallCli, ARefusedCallLeavesNoProjectBehind) {
  Cli zero(call_args("r1", {"--timeout", "0", "--environment", "production"}, {"true"}, "newp"));
  EXPECT_EQ(zero.wait(), 2);
  EXPECT_EQ(zero.err(), "ringfence: --timeout \"0\": must be more than 0\n");
  Cli user(call_args("r1", {"--user", "u"}, {"true"}, "newp"));
  EXPECT_EQ(user.wait(), 2);
  EXPECT_EQ(user.err(), "ringfence: --workflow and --user go with --identity\n");
  Cli bad_run(call_args("", {}, {"true"}, "newp"));
  EXPECT_EQ(bad_run.wait(), 2);
  EXPECT_FALSE(store()->project("newp").ok());
}

// A command that cannot start exits 127 or 126, and the client says why.
TEST_F(CallCli, ACommandThatCannotStartSaysWhy) {
  start_worker({});
  Cli missing(call_args("r1", {}, {"no-such-command"}));
  EXPECT_EQ(missing.wait(), 127) << missing.err();
  EXPECT_EQ(missing.err().rfind("ringfence: call 1: ", 0), 0u) << missing.err();
  EXPECT_NE(missing.err().find("command not found"), std::string::npos) << missing.err();
  Cli not_executable(call_args("r1", {}, {"/etc/hostname"}));
  EXPECT_EQ(not_executable.wait(), 126) << not_executable.err();
  EXPECT_EQ(not_executable.err().rfind("ringfence: call 2: ", 0), 0u) << not_executable.err();
  // A command that started and exited 127 itself is not explained.
  Cli itself(call_args("r1", {}, {"sh", "-c", "exit 127"}));
  EXPECT_EQ(itself.wait(), 127);
  EXPECT_EQ(itself.err(), "");
}

TEST_F(CallCli, ABusyWorkerServingTheProjectGetsNoNotice) {
  start_worker({"--concurrency", "1"});
  // The one executor is busy for 3 s: the next call waits queued that long.
  Cli busy(call_args("r1", {}, {"sleep", "3"}));
  auto s = store();
  const auto end = Clock::now() + 10s;
  while (state_of(1) != store::CallState::running && Clock::now() < end)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(state_of(1), store::CallState::running);
  Cli queued(call_args("r2", {"--wait-timeout", "20s"}, {"echo", "b"}));
  EXPECT_EQ(queued.wait(), 0) << queued.err();
  EXPECT_EQ(queued.out(), "b\n");
  EXPECT_EQ(queued.err(), "");  // no notice: a live worker serves the project
  // It did wait queued past the moment the notice would have come.
  auto v = s->call(2);
  ASSERT_TRUE(v.ok() && v->claimed_at.has_value());
  EXPECT_GE(*v->claimed_at - v->enqueued_at, 1'000);
  EXPECT_EQ(busy.wait(), 0) << busy.err();
}

TEST_F(CallCli, WaitTimeoutCancelsTheCallWhichNeverRunsLater) {
  const std::string marker = dir_ + "/ran";
  Cli call(call_args("r1", {"--wait-timeout", "2s"}, {"touch", marker}));
  EXPECT_EQ(call.wait(), 124);
  // The notice at 1 s, then the give-up at 2 s.
  EXPECT_EQ(call.err(), notice(1) + " (or is cancelled after --wait-timeout 2s)\n" + start_line() +
                            "ringfence: call 1 cancelled: no worker claimed it within "
                            "--wait-timeout 2s; it never runs\n");
  Cli show({"run", "show", "r1", "--state-dir", dir_, "--json"});
  ASSERT_EQ(show.wait(), 0) << show.err();
  auto j = nlohmann::json::parse(show.out());
  ASSERT_EQ(j["calls"].size(), 1u);
  EXPECT_EQ(j["calls"][0]["state"], "cancelled");
  EXPECT_EQ(j["calls"][0]["error"], "no worker claimed it within --wait-timeout 2s");
  // A worker that starts afterwards serves the run's next call, never the cancelled one.
  start_worker({});
  Cli next(call_args("r1", {}, {"echo", "next"}));
  EXPECT_EQ(next.wait(), 0) << next.err();
  EXPECT_EQ(next.out(), "next\n");
  EXPECT_EQ(state_of(1), store::CallState::cancelled);
  EXPECT_FALSE(std::filesystem::exists(marker));
  // A worker that claims first wins: the timeout then no longer applies.
  Cli slow(call_args("r1", {"--wait-timeout", "1s"}, {"sh", "-c", "sleep 2; echo slow"}));
  EXPECT_EQ(slow.wait(), 0) << slow.err();
  EXPECT_EQ(slow.out(), "slow\n");
  // A malformed timeout is a usage error.
  Cli bad(call_args("r1", {"--wait-timeout", "soon"}, {"true"}));
  EXPECT_EQ(bad.wait(), 2);
}

// A per_worker worker claims only its own project's calls: for another
// project it is no live worker, and the notice says so before the worker
// fails the call it will not take.
TEST_F(CallCli, AWorkerPinnedToAnotherProjectDoesNotServe) {
  if (::geteuid() != 0) RF_SKIP() << "per_worker runs native sandboxes, which need root";
  start_worker({"--sandbox-mode", "per_worker", "--project", "acme"}, "acme");
  Cli call(call_args("r1", {}, {"echo", "never"}, "intruder"));
  ASSERT_TRUE(call.stderr_shows(start_line(), 3s)) << call.err();
  EXPECT_EQ(call.wait(), 125);
  EXPECT_EQ(call.out(), "");
  EXPECT_EQ(call.err().rfind(notice(1, "intruder"), 0), 0u) << call.err();
  EXPECT_NE(call.err().find("call 1 failed: project intruder: no worker took this call"),
            std::string::npos)
      << call.err();
  // Its own project's calls are served, without a notice.
  Cli own(call_args("r2", {}, {"echo", "mine"}, "acme"));
  EXPECT_EQ(own.wait(), 0) << own.err();
  EXPECT_EQ(own.out(), "mine\n");
  EXPECT_EQ(own.err(), "");
}

}  // namespace
}  // namespace rf::testing
