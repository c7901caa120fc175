// The process table (issue 41 item 2) above a scripted sandbox: a process's
// output kept in a bounded ring buffer and read by offset (from its start,
// from now, what fell out counted), readers woken by output and by its end,
// a start that never ran, the running bound, ended ones kept up to a count,
// and a closing sandbox's reason given to every process it ends. The
// requests every door parses: exact errors naming the field.
#include "sandbox/process_table.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "sandbox/process_request.h"
#include "support/fake_backend.h"

namespace rf::testing {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// What the scripted calls do: each prints argv[1] (if any), then waits for
// `release` (or the table closing) and exits with argv.size().
struct Script {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  bool sandbox_gone = false;
  std::atomic<int> next_pid{10};
  std::atomic<OutputSink*> last_sink{nullptr};

  ProcessTable::Run run() {
    return [this](ExecCall call, OutputSink& sink) -> Result<ExecResult> {
      if (call.argv[0] == "missing") {
        ExecResult r;
        r.exit_code = 127;
        r.error = "missing: command not found";
        return r;
      }
      EXPECT_TRUE(call.background);
      sink.on_started(static_cast<uint32_t>(next_pid.load()), next_pid++);
      last_sink = &sink;
      if (call.argv.size() > 1) sink.on_stdout(call.argv[1]);
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release || sandbox_gone; });
      if (sandbox_gone) return make_error("exec", "the sandbox was destroyed");
      ExecResult r;
      r.exit_code = static_cast<int>(call.argv.size());
      return r;
    };
  }
  void end_all() {
    std::lock_guard lock(mu);
    release = true;
    cv.notify_all();
  }
  void destroy() {
    std::lock_guard lock(mu);
    sandbox_gone = true;
    cv.notify_all();
  }
};

class ProcessTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto fake = std::make_shared<FakeScript>();
    FakeBackend backend(BackendKind::kNative, fake);
    auto made = backend.create(SandboxSpec{});
    ASSERT_TRUE(made.ok());
    sandbox_ = std::move(*made);
    table_ = std::make_unique<ProcessTable>(*sandbox_, script_.run());
  }
  void TearDown() override {
    script_.destroy();
    table_.reset();
  }
  ExecCall call(std::vector<std::string> argv) {
    ExecCall c;
    c.argv = std::move(argv);
    return c;
  }
  Script script_;
  std::unique_ptr<Sandbox> sandbox_;
  std::unique_ptr<ProcessTable> table_;
};

TEST_F(ProcessTableTest, OutputIsKeptNewestFirstAndReadByOffset) {
  ProcessTable::Bounds bounds;
  bounds.buffer_bytes = 8;
  auto p = table_->start(call({"x", "0123"}), "t", bounds);
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_EQ(p->pid, 10);
  EXPECT_EQ(p->tag, "t");
  EXPECT_TRUE(p->running);
  // Its first output comes after its start: waited for.
  auto first = table_->read(10, 0, 10s);
  ASSERT_TRUE(first);
  ASSERT_EQ(first->pieces.size(), 1u);
  EXPECT_EQ(first->pieces[0].data, "0123");
  EXPECT_EQ(first->next, 4u);
  EXPECT_FALSE(first->ended);
  OutputSink* sink = script_.last_sink;
  sink->on_stderr("4567");
  sink->on_stdout("89ab");  // 12 bytes written: the first 4 fell out
  auto all = table_->read(10, 0, 0ms);
  EXPECT_EQ(all->skipped, 4u);
  ASSERT_EQ(all->pieces.size(), 2u);
  EXPECT_TRUE(all->pieces[0].is_stderr);
  EXPECT_EQ(all->pieces[0].data, "4567");
  EXPECT_EQ(all->pieces[0].offset, 4u);
  EXPECT_EQ(all->pieces[1].data, "89ab");
  EXPECT_EQ(all->info.dropped_bytes, 4u);
  // From an offset inside a piece; from beyond the end: from the next byte.
  auto mid = table_->read(10, 6, 0ms);
  EXPECT_EQ(mid->pieces[0].data, "67");
  EXPECT_EQ(table_->read(10, 99, 0ms)->next, 12u);
  // A piece larger than the whole buffer keeps its tail.
  sink->on_stdout(std::string(20, 'z') + "END");
  auto tail = table_->read(10, 0, 0ms);
  ASSERT_EQ(tail->pieces.size(), 1u);
  EXPECT_EQ(tail->pieces[0].data, "zzzzzEND");
  EXPECT_EQ(tail->info.output_bytes, 35u);
  EXPECT_EQ(tail->info.dropped_bytes, 27u);
}

TEST_F(ProcessTableTest, AReaderFromNowIsWokenByOutputAndByTheEnd) {
  ASSERT_TRUE(table_->start(call({"x", "old"}), "", {}).ok());
  // Its first output comes after its start: wait for it, then read from now.
  ASSERT_EQ(table_->read(10, 0, 10s)->next, 3u);
  std::thread writer([&] {
    std::this_thread::sleep_for(50ms);
    script_.last_sink.load()->on_stdout("new");
  });
  auto got = table_->read(10, ProcessTable::kFromNow, 10s);
  writer.join();
  ASSERT_EQ(got->pieces.size(), 1u);
  EXPECT_EQ(got->pieces[0].data, "new") << "nothing older than now";
  std::thread ender([&] {
    std::this_thread::sleep_for(50ms);
    script_.end_all();
  });
  auto end = table_->read(10, got->next, 10s);
  ender.join();
  EXPECT_TRUE(end->ended);
  EXPECT_FALSE(end->info.running);
  ASSERT_TRUE(end->info.result);
  EXPECT_EQ(end->info.result->exit_code, 2);
  EXPECT_GT(end->info.ended_ms, 0);
  // Ended: stdin and signals are refused naming the pid; output stays readable.
  auto late = table_->signal(10, SIGTERM);
  ASSERT_FALSE(late.ok());
  EXPECT_EQ(late.error().code, ErrorCode::kConflict);
  EXPECT_NE(late.error().where.find("process 10"), std::string::npos);
  EXPECT_EQ(table_->read(10, 0, 0ms)->pieces.at(0).data, "oldnew") << "one stream: one piece";
  EXPECT_EQ(table_->write_stdin(99, "x").error().code, ErrorCode::kNotFound);
  EXPECT_FALSE(table_->read(99, 0, 0ms));
}

TEST_F(ProcessTableTest, StartsThatNeverRanAndTheRunningBoundAreErrors) {
  auto missing = table_->start(call({"missing"}), "", {});
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().where, "argv");
  EXPECT_EQ(missing.error().message, "missing: command not found");
  EXPECT_TRUE(table_->list().empty()) << "a start that never ran leaves nothing";
  ProcessTable::Bounds two;
  two.max_running = 2;
  ASSERT_TRUE(table_->start(call({"a"}), "", two).ok());
  ASSERT_TRUE(table_->start(call({"b"}), "", two).ok());
  auto third = table_->start(call({"c"}), "", two);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.error().code, ErrorCode::kLimit);
  EXPECT_NE(third.error().message.find("processes_max"), std::string::npos);
  EXPECT_EQ(table_->running(), 2u);
  // Stdin is open only when asked for.
  auto closed = table_->write_stdin(10, "x");
  EXPECT_EQ(closed.error().code, ErrorCode::kConflict);
  EXPECT_NE(closed.error().message.find("stdin: true"), std::string::npos);
  EXPECT_EQ(table_->resize(10, 10, 10).error().code, ErrorCode::kConflict);
}

TEST_F(ProcessTableTest, EndedOnesAreKeptUpToACountAndAClosingSandboxSaysWhy) {
  ProcessTable::Bounds keep_two;
  keep_two.kept_ended = 2;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table_->start(call({"x"}), "", keep_two).ok());
  script_.end_all();
  // A read comes back with output as soon as there is some, ended or not
  // (under TSAN the output came first): read on until each says ended.
  auto read_to_end = [&](int pid) {
    uint64_t from = 0;
    for (int i = 0; i < 100; ++i) {
      auto r = table_->read(pid, from, 10s);
      if (!r) return false;
      if (r->ended) return true;
      from = r->next;
    }
    return false;
  };
  ASSERT_TRUE(read_to_end(12));
  for (int pid : {10, 11}) (void)read_to_end(pid);  // one of them is gone: kept_ended
  // The oldest to end went; which one ended first is the threads' order.
  EXPECT_EQ(table_->list().size(), 2u);

  {
    std::lock_guard lock(script_.mu);
    script_.release = false;
  }
  auto p = table_->start(call({"x"}), "", {});
  ASSERT_TRUE(p.ok());
  table_->close("its sandbox expired (its timeout ran out)");
  auto refused = table_->start(call({"x"}), "", {});
  EXPECT_EQ(refused.error().code, ErrorCode::kConflict);
  script_.destroy();
  table_->join();
  auto gone = table_->find(p->pid);
  ASSERT_TRUE(gone);
  EXPECT_FALSE(gone->running);
  EXPECT_FALSE(gone->result);
  EXPECT_EQ(gone->end_error, "its sandbox expired (its timeout ran out)");
  EXPECT_EQ(process_json(*gone)["state"], "ended");
}

TEST(ProcessRequest, EveryFieldIsCheckedAndNamed) {
  auto bad = [](std::string_view method, std::vector<std::string> rest, std::string body,
                std::map<std::string, std::string> query = {}) {
    auto r = parse_process_request(method, rest, query, body);
    return std::holds_alternative<ProcessRefusal>(r) ? std::get<ProcessRefusal>(r)
                                                     : ProcessRefusal{0, "", ""};
  };
  EXPECT_EQ(bad("POST", {"processes"}, R"({"cmd":"x","pty":true,"rows":0})").field, "rows");
  EXPECT_EQ(bad("POST", {"processes"}, R"({"cmd":"x","cols":3,"pty":"no"})").field, "cols");
  EXPECT_EQ(bad("POST", {"processes"}, R"({"cmd":"x","tag":"a\nb"})").field, "tag");
  EXPECT_EQ(bad("POST", {"processes"}, R"({"cmd":"x","stdin":1})").field, "stdin");
  EXPECT_EQ(bad("POST", {"processes"}, R"([1])").field, "body");
  EXPECT_EQ(bad("PUT", {"processes"}, "").status, 405);
  EXPECT_EQ(bad("GET", {"processes", "-1"}, "").field, "pid");
  EXPECT_EQ(bad("GET", {"processes", "1", "nope"}, "").status, 404);
  EXPECT_EQ(bad("POST", {"processes", "1", "signal"}, R"({"signal":"TERM","x":1})").field,
            "signal");
  EXPECT_EQ(bad("POST", {"processes", "1", "signal"}, R"({"signal":0})").field, "signal");
  EXPECT_EQ(bad("POST", {"processes", "1", "resize"}, R"({"rows":5})").field, "cols");
  EXPECT_EQ(bad("GET", {"processes", "1", "output"}, "", {{"from", "-3"}}).field, "from");
  EXPECT_EQ(bad("POST", {"processes", "1", "stdin"}, std::string((1 << 20) + 1, 'x')).status, 413);

  auto ok = parse_process_request("POST", {"processes"}, {},
                                  R"({"argv":["sh"],"pty":true,"rows":40,"cols":100,"tag":"t"})");
  ASSERT_TRUE(std::holds_alternative<ProcessRequest>(ok));
  const auto& req = std::get<ProcessRequest>(ok);
  EXPECT_TRUE(req.start.call.pty);
  EXPECT_TRUE(req.start.call.stdin_stream);
  EXPECT_EQ(req.start.call.rows, 40);
  EXPECT_FALSE(req.start.cwd_given);
  // The door's form of it parses back to the same request.
  const ProcessHttp http = process_http(req);
  auto again = parse_process_request(http.method, {"processes"}, {}, http.body);
  ASSERT_TRUE(std::holds_alternative<ProcessRequest>(again));
  EXPECT_EQ(std::get<ProcessRequest>(again).start.call.cols, 100);
  EXPECT_EQ(std::get<ProcessRequest>(again).start.tag, "t");
  for (auto [name, number] : std::vector<std::pair<json, int>>{
           {"TERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"winch", 0}, {9, 9}}) {
    auto sig = parse_signal(name, "signal");
    if (number == 0) {
      EXPECT_FALSE(sig.ok()) << name;
    } else {
      ASSERT_TRUE(sig.ok()) << name;
      EXPECT_EQ(*sig, number) << name;
    }
  }
}

}  // namespace
}  // namespace rf::testing
