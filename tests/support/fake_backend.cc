#include "support/fake_backend.h"

#include <atomic>
#include <thread>

namespace rf::testing {
namespace {

std::atomic<int> next_id{1};

class FakeSandbox : public Sandbox {
 public:
  FakeSandbox(std::string id, SandboxSpec spec, std::shared_ptr<FakeScript> script)
      : id_(std::move(id)), spec_(std::move(spec)), script_(std::move(script)) {}
  ~FakeSandbox() override { (void)destroy(); }

  const std::string& id() const override { return id_; }
  const SandboxSpec& spec() const override { return spec_; }
  int init_pid() const override { return 0; }
  const std::vector<StepTiming>& setup_timings() const override { return timings_; }

  Result<ExecResult> exec(const ExecCall& call, OutputSink& sink) override {
    // The worker's boundary report asks the runner what binds it: a fake has
    // no kernel to read, and its answer is no tool call the tests count.
    if (call.argv.size() == 2 && call.argv[1] == "self-probe") {
      sink.on_stdout("{}\n");
      return ExecResult{};
    }
    FakeScript& s = *script_;
    std::function<Result<ExecResult>(const ExecCall&, OutputSink&)> fn;
    {
      std::unique_lock lock(s.mu);
      if (destroyed_) return make_error("exec", "sandbox " + id_ + " is destroyed");
      ++s.execs;
      ++s.execs_running;
      s.most_execs_running = std::max(s.most_execs_running, s.execs_running);
      s.changed.notify_all();
      if (!call.argv.empty() && call.argv[0] == "wait")
        s.changed.wait(lock, [&] { return !s.gate_closed || destroyed_; });
      fn = s.exec;
    }
    auto done = [&](Result<ExecResult> r) {
      std::lock_guard lock(s.mu);
      --s.execs_running;
      s.changed.notify_all();
      return r;
    };
    if (is_destroyed())
      return done(make_error("sandbox ended", "fake sandbox " + id_ + " was destroyed"));
    sink.on_started(1, 0);
    if (fn) return done(fn(call, sink));
    std::string line;
    for (const auto& a : call.argv) line += (line.empty() ? "" : " ") + a;
    sink.on_stdout(line + "\n");
    return done(ExecResult{});
  }
  Status write_stdin(uint32_t, std::string_view) override { return ok_status(); }
  Status close_stdin(uint32_t) override { return ok_status(); }
  Status send_signal(uint32_t, int) override { return ok_status(); }
  Status resize(uint32_t, int, int) override { return ok_status(); }

  Result<std::string> read_file(const std::string& path) override {
    std::lock_guard lock(script_->mu);
    auto it = files_.find(path);
    if (it == files_.end()) return sys_error("read " + path, ENOENT);
    return it->second;
  }
  Status write_file(const std::string& path, std::string_view data, uint32_t) override {
    std::lock_guard lock(script_->mu);
    files_[path] = std::string(data);
    return ok_status();
  }
  Result<std::vector<proto::FileInfo>> list_dir(const std::string& path) override {
    return make_error("list " + path, "the fake sandbox has no directories");
  }
  Result<proto::FileInfo> stat(const std::string& path) override {
    return make_error("stat " + path, "the fake sandbox has no directories");
  }
  Status set_env(const std::map<std::string, std::string>&) override { return ok_status(); }
  Result<proto::ProbeResult> probe() override {
    std::lock_guard lock(script_->mu);
    if (destroyed_) return make_error("probe", "sandbox " + id_ + " is destroyed");
    ++script_->probes;
    script_->changed.notify_all();
    if (script_->fail_probes > 0) {
      --script_->fail_probes;
      return make_error("probe", "fake: the runner did not answer");
    }
    return proto::ProbeResult{};
  }
  Status destroy() override {
    std::lock_guard lock(script_->mu);
    if (destroyed_) return ok_status();
    destroyed_ = true;
    ++script_->destroyed;
    script_->destroyed_ids.push_back(id_);
    script_->changed.notify_all();
    return ok_status();
  }

 private:
  bool is_destroyed() const {
    std::lock_guard lock(script_->mu);
    return destroyed_;
  }

  const std::string id_;
  const SandboxSpec spec_;
  std::shared_ptr<FakeScript> script_;
  std::vector<StepTiming> timings_;
  std::map<std::string, std::string> files_;  // under script_->mu
  bool destroyed_ = false;                    // under script_->mu
};

}  // namespace

void FakeScript::open_gate() {
  std::lock_guard lock(mu);
  gate_closed = false;
  changed.notify_all();
}

bool FakeScript::wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu);
  return changed.wait_for(lock, timeout, pred);
}

Result<std::unique_ptr<Sandbox>> FakeBackend::create(const SandboxSpec& spec) {
  std::chrono::milliseconds delay;
  {
    std::lock_guard lock(script_->mu);
    ++script_->creates_tried;
    script_->specs.push_back(spec);
    delay = script_->create_delay;
  }
  if (delay.count() > 0) std::this_thread::sleep_for(delay);
  std::lock_guard lock(script_->mu);
  script_->changed.notify_all();
  if (script_->fail_every_create || script_->fail_creates > 0) {
    if (script_->fail_creates > 0) --script_->fail_creates;
    return make_error("sandbox setup failed at step \"fake\"", script_->create_error);
  }
  const std::string id = "fake-" + std::string(to_string(kind_)) + "-" + std::to_string(next_id++);
  ++script_->created;
  script_->created_ids.push_back(id);
  return std::unique_ptr<Sandbox>(new FakeSandbox(id, spec, script_));
}

std::vector<HealthCheck> FakeBackend::health() {
  std::lock_guard lock(script_->mu);
  return script_->health;
}

void register_fake_backend(BackendKind kind, std::shared_ptr<FakeScript> script) {
  register_backend(kind, [kind, script]() -> Result<std::unique_ptr<Backend>> {
    return std::unique_ptr<Backend>(new FakeBackend(kind, script));
  });
}

}  // namespace rf::testing
