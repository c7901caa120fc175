#include "sandbox/process_table.h"

#include <signal.h>

#include <algorithm>
#include <system_error>
#include <thread>

namespace rf {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Output of one stream is appended to the newest piece up to this size.
constexpr size_t kPieceBytes = 64 * 1024;

}  // namespace

struct ProcessTable::Entry {
  ProcessInfo info;  // everything under Shared::mu
  uint32_t call_id = 0;
  bool start_known = false;  // its pid came, or its call returned without one
  size_t cap = 0;
  size_t buffered = 0;
  std::deque<OutputPiece> buffer;
  std::condition_variable changed;  // output, its start, its end
};

struct ProcessTable::Shared {
  explicit Shared(Run r) : run(std::move(r)) {}
  Run run;
  mutable std::mutex mu;
  std::map<int, std::shared_ptr<Entry>> by_pid;
  std::deque<std::pair<int, std::weak_ptr<Entry>>> ended;  // oldest first
  size_t kept_ended = 64;
  size_t starting = 0;
  bool closed = false;
  std::string closed_why;
  size_t threads = 0;
  std::condition_variable threads_done;

  size_t running_locked() const {
    size_t n = starting;
    for (const auto& [_, e] : by_pid) n += e->info.running;
    return n;
  }
};

// What the process's call reports, into its entry.
class ProcessTable::Sink final : public OutputSink {
 public:
  Sink(std::shared_ptr<Shared> shared, std::shared_ptr<Entry> entry)
      : shared_(std::move(shared)), entry_(std::move(entry)) {}
  void on_started(uint32_t call_id, int pid) override {
    std::lock_guard lock(shared_->mu);
    entry_->call_id = call_id;
    entry_->info.pid = pid;
    entry_->start_known = true;
    // A pid the sandbox gives again replaces the ended process that had it.
    shared_->by_pid[pid] = entry_;
    entry_->changed.notify_all();
  }
  void on_stdout(std::string_view d) override { append(false, d); }
  void on_stderr(std::string_view d) override { append(true, d); }

 private:
  void append(bool is_stderr, std::string_view d) {
    if (d.empty()) return;
    std::lock_guard lock(shared_->mu);
    Entry& e = *entry_;
    if (!e.buffer.empty() && e.buffer.back().is_stderr == is_stderr &&
        e.buffer.back().data.size() < kPieceBytes) {
      e.buffer.back().data.append(d);
    } else {
      e.buffer.push_back({e.info.output_bytes, is_stderr, std::string(d)});
    }
    e.info.output_bytes += d.size();
    e.buffered += d.size();
    // The oldest bytes fall out first, a piece at a time or its front.
    while (e.buffered > e.cap && !e.buffer.empty()) {
      OutputPiece& front = e.buffer.front();
      const size_t over = e.buffered - e.cap;
      const size_t cut = std::min(over, front.data.size());
      e.buffered -= cut;
      e.info.dropped_bytes += cut;
      if (cut == front.data.size()) {
        e.buffer.pop_front();
      } else {
        front.data.erase(0, cut);
        front.offset += cut;
      }
    }
    e.changed.notify_all();
  }
  std::shared_ptr<Shared> shared_;
  std::shared_ptr<Entry> entry_;
};

ProcessTable::ProcessTable(Sandbox& sandbox, Run run)
    : sandbox_(sandbox), shared_(std::make_shared<Shared>(std::move(run))) {}

ProcessTable::~ProcessTable() {
  close("");
  // An owner that did not destroy its sandbox first: its processes are killed.
  for (const ProcessInfo& p : list()) {
    if (p.running) (void)signal(p.pid, SIGKILL);
  }
  join();
}

Result<ProcessInfo> ProcessTable::start(ExecCall call, std::string tag, const Bounds& bounds) {
  auto e = std::make_shared<Entry>();
  e->info.argv = call.argv;
  e->info.tag = std::move(tag);
  e->info.pty = call.pty;
  e->info.stdin_open = call.pty || call.stdin_stream;
  e->info.started_ms = now_ms();
  e->cap = std::max<size_t>(bounds.buffer_bytes, 1);
  call.background = true;
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->closed) {
      return make_error(ErrorCode::kConflict, "process",
                        "the sandbox is ending: no process starts in it");
    }
    if (shared_->running_locked() >= bounds.max_running) {
      return make_error(ErrorCode::kLimit, "process",
                        "the sandbox runs " + std::to_string(bounds.max_running) +
                            " background processes, the most its project's operator policy "
                            "allows (processes_max); end one first");
    }
    shared_->kept_ended = bounds.kept_ended;
    ++shared_->starting;
    ++shared_->threads;
  }
  try {
    std::thread([shared = shared_, e, call = std::move(call)]() mutable {
      Sink sink(shared, e);
      Result<ExecResult> r = shared->run(std::move(call), sink);
      std::lock_guard lock(shared->mu);
      ProcessInfo& info = e->info;
      info.running = false;
      info.stdin_open = false;
      info.ended_ms = now_ms();
      if (r) {
        info.result = std::move(*r);
      } else {
        info.end_error = shared->closed && !shared->closed_why.empty() ? shared->closed_why
                                                                       : r.error().to_string();
      }
      e->start_known = true;
      if (info.pid != 0) {
        shared->ended.emplace_back(info.pid, e);
        while (shared->ended.size() > shared->kept_ended) {
          auto [pid, weak] = shared->ended.front();
          shared->ended.pop_front();
          auto it = shared->by_pid.find(pid);
          if (it != shared->by_pid.end() && it->second == weak.lock()) shared->by_pid.erase(it);
        }
      }
      e->changed.notify_all();
      --shared->threads;
      shared->threads_done.notify_all();
    }).detach();
  } catch (const std::system_error& ex) {
    std::lock_guard lock(shared_->mu);
    --shared_->starting;
    --shared_->threads;
    return make_error("process", std::string("cannot start a thread for it: ") + ex.what());
  }
  std::unique_lock lock(shared_->mu);
  e->changed.wait(lock, [&] { return e->start_known; });
  --shared_->starting;
  if (e->info.pid == 0) {
    std::string why = e->info.end_error;
    if (e->info.result) {
      why = e->info.result->error.empty() ? "it ended before it started (exit " +
                                                std::to_string(e->info.result->exit_code) + ")"
                                          : e->info.result->error;
    }
    return make_error("argv", why);
  }
  return e->info;
}

std::vector<ProcessInfo> ProcessTable::list() const {
  std::lock_guard lock(shared_->mu);
  std::vector<ProcessInfo> out;
  out.reserve(shared_->by_pid.size());
  for (const auto& [_, e] : shared_->by_pid) out.push_back(e->info);
  return out;
}

std::shared_ptr<ProcessTable::Entry> ProcessTable::entry(int pid) const {
  auto it = shared_->by_pid.find(pid);
  return it == shared_->by_pid.end() ? nullptr : it->second;
}

std::optional<ProcessInfo> ProcessTable::find(int pid) const {
  std::lock_guard lock(shared_->mu);
  auto e = entry(pid);
  if (!e) return std::nullopt;
  return e->info;
}

size_t ProcessTable::running() const {
  std::lock_guard lock(shared_->mu);
  return shared_->running_locked();
}

Result<uint32_t> ProcessTable::running_call(int pid, const char* what) const {
  std::lock_guard lock(shared_->mu);
  auto e = entry(pid);
  const std::string where = std::string(what) + " (process " + std::to_string(pid) + ")";
  if (!e) return make_error(ErrorCode::kNotFound, where, "no process " + std::to_string(pid));
  if (!e->info.running) {
    return make_error(ErrorCode::kConflict, where, "process " + std::to_string(pid) + " has ended");
  }
  return e->call_id;
}

Status ProcessTable::write_stdin(int pid, std::string_view data) {
  uint32_t call = 0;
  {
    auto id = running_call(pid, "stdin");
    if (!id) return id.take_error();
    call = *id;
    std::lock_guard lock(shared_->mu);
    auto e = entry(pid);
    if (!e || !e->info.stdin_open) {
      return make_error(ErrorCode::kConflict, "stdin (process " + std::to_string(pid) + ")",
                        "its stdin is closed (a process keeps it open when started with "
                        "stdin: true, or on a terminal)");
    }
  }
  return sandbox_.write_stdin(call, data);
}

Status ProcessTable::close_stdin(int pid) {
  auto id = running_call(pid, "stdin");
  if (!id) return id.take_error();
  {
    std::lock_guard lock(shared_->mu);
    auto e = entry(pid);
    if (!e || !e->info.stdin_open) return ok_status();
    e->info.stdin_open = false;
  }
  return sandbox_.close_stdin(*id);
}

Status ProcessTable::signal(int pid, int sig) {
  auto id = running_call(pid, "signal");
  if (!id) return id.take_error();
  return sandbox_.send_signal(*id, sig);
}

Status ProcessTable::resize(int pid, int rows, int cols) {
  auto id = running_call(pid, "resize");
  if (!id) return id.take_error();
  {
    std::lock_guard lock(shared_->mu);
    auto e = entry(pid);
    if (e && !e->info.pty) {
      return make_error(ErrorCode::kConflict, "resize (process " + std::to_string(pid) + ")",
                        "it runs without a terminal (start it with pty: true)");
    }
  }
  return sandbox_.resize(*id, rows, cols);
}

std::optional<ProcessRead> ProcessTable::read(int pid, uint64_t from,
                                              std::chrono::milliseconds wait,
                                              size_t max_bytes) const {
  std::unique_lock lock(shared_->mu);
  auto e = entry(pid);
  if (!e) return std::nullopt;
  if (from == kFromNow || from > e->info.output_bytes) from = e->info.output_bytes;
  if (from >= e->info.output_bytes && e->info.running && wait.count() > 0) {
    e->changed.wait_for(lock, wait,
                        [&] { return e->info.output_bytes > from || !e->info.running; });
  }
  ProcessRead r;
  const uint64_t first = e->info.output_bytes - e->buffered;
  if (from < first) {
    r.skipped = first - from;
    from = first;
  }
  size_t room = max_bytes;
  for (const OutputPiece& p : e->buffer) {
    if (room == 0) break;
    const uint64_t end = p.offset + p.data.size();
    if (end <= from) continue;
    const size_t skip = static_cast<size_t>(from - p.offset);
    const size_t take = std::min(room, p.data.size() - skip);
    r.pieces.push_back({from, p.is_stderr, p.data.substr(skip, take)});
    from += take;
    room -= take;
  }
  r.next = from;
  r.ended = !e->info.running && from >= e->info.output_bytes;
  r.info = e->info;
  return r;
}

void ProcessTable::close(std::string why) {
  std::lock_guard lock(shared_->mu);
  if (shared_->closed) return;
  shared_->closed = true;
  shared_->closed_why = std::move(why);
}

void ProcessTable::join() {
  std::unique_lock lock(shared_->mu);
  shared_->threads_done.wait(lock, [&] { return shared_->threads == 0; });
}

}  // namespace rf
