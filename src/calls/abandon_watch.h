// Ends a call whose client went away (issue 39): streaming or not, printing
// or silent, the command is killed within about 100 ms of its door seeing
// the connection gone. A sink in front of the call's own: it learns the
// call's id when the call starts, and a thread of its own asks `gone` every
// 100 ms while the call runs.
#pragma once

#include <signal.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "sandbox/sandbox.h"

namespace rf::calls {

// Kills a call whose client went away: asks `gone` every 100 ms while the
// call runs, and once it says so, sends SIGKILL to the call (whose id the
// sink learns when it starts).
class AbandonWatch final : public OutputSink {
 public:
  AbandonWatch(Sandbox& sandbox, OutputSink& next, const std::function<bool()>& gone)
      : sandbox_(sandbox), next_(next), gone_(gone) {
    if (gone_) thread_ = std::thread([this] { watch(); });
  }
  ~AbandonWatch() override {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void on_started(uint32_t call_id, int pid) override {
    {
      std::lock_guard lock(mu_);
      call_id_ = call_id;
    }
    cv_.notify_all();
    if (next_.wants_started()) next_.on_started(call_id, pid);
  }
  void on_stdout(std::string_view d) override { next_.on_stdout(d); }
  void on_stderr(std::string_view d) override { next_.on_stderr(d); }
  bool abandoned() const {
    std::lock_guard lock(mu_);
    return killed_;
  }

 private:
  void watch() {
    std::unique_lock lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (done_) break;
      const uint32_t id = call_id_;
      lock.unlock();
      const bool gone = gone_();
      lock.lock();
      if (gone && id != 0 && !killed_) {
        killed_ = true;
        lock.unlock();
        (void)sandbox_.send_signal(id, SIGKILL);
        lock.lock();
      }
    }
  }
  Sandbox& sandbox_;
  OutputSink& next_;
  const std::function<bool()>& gone_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t call_id_ = 0;
  bool killed_ = false, done_ = false;
  std::thread thread_;
};

}  // namespace rf::calls
