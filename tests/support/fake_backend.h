// A Backend with no kernel work behind it, for fast tests of the logic above
// the sandbox (the worker's router, pool, fallback and claim hand-over). What
// it does is scripted through a shared FakeScript: creation failures and
// delays, health checks, what exec writes and returns, and gates that hold an
// exec until the test opens them. It counts what was asked of it.
//
// Register it in place of a backend kind so that the worker's place() picks it
// (settings.backend = kNative): register_fake_backend(BackendKind::kNative, script).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sandbox/sandbox.h"

namespace rf::testing {

struct FakeScript {
  // ---- creation
  // The next `fail_creates` creations fail with `create_error`; with
  // `fail_every_create`, every one does until it is cleared.
  int fail_creates = 0;
  bool fail_every_create = false;
  std::string create_error = "fake: creation refused";
  std::chrono::milliseconds create_delay{0};

  // The next `fail_probes` probes fail (a runner that died at once).
  int fail_probes = 0;

  // ---- health
  std::vector<HealthCheck> health = {{"fake engine", true, "scripted", "", true}};

  // ---- calls
  // What a call does; by default it writes argv joined by spaces (and a
  // newline) to stdout and exits 0. Runs on the exec thread.
  std::function<Result<ExecResult>(const ExecCall&, OutputSink&)> exec;
  // While set, a call whose argv[0] is "wait" waits until the gate opens or its
  // sandbox is destroyed (then it fails as a killed sandbox would).
  bool gate_closed = false;

  // ---- what happened (read under mu)
  int creates_tried = 0;
  int created = 0;
  int destroyed = 0;
  int probes = 0;
  int execs = 0;
  int execs_running = 0;  // at this moment
  int most_execs_running = 0;
  std::vector<std::string> created_ids;
  std::vector<std::string> destroyed_ids;
  std::vector<SandboxSpec> specs;  // of every creation tried

  mutable std::mutex mu;
  std::condition_variable changed;  // every count above, and the gate

  void open_gate();
  // Waits until pred() (called under mu) holds or `timeout` passes.
  bool wait_until(const std::function<bool()>& pred,
                  std::chrono::milliseconds timeout = std::chrono::seconds(10));
  template <class F>
  auto locked(F&& f) {
    std::lock_guard lock(mu);
    return f();
  }
};

class FakeBackend : public Backend {
 public:
  FakeBackend(BackendKind kind, std::shared_ptr<FakeScript> script)
      : kind_(kind), script_(std::move(script)) {}
  BackendKind kind() const override { return kind_; }
  Result<std::unique_ptr<Sandbox>> create(const SandboxSpec& spec) override;
  std::vector<HealthCheck> health() override;

 private:
  BackendKind kind_;
  std::shared_ptr<FakeScript> script_;
};

// Registers the fake as `kind` in the backend registry (make_backend,
// place()), standing in for that backend: every backend it makes shares `script`.
void register_fake_backend(BackendKind kind, std::shared_ptr<FakeScript> script);

}  // namespace rf::testing
