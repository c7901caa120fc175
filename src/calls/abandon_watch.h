// Ends a call whose client went away (issue 39): streaming or not, printing
// or silent, the command is killed within about 100 ms of its door seeing
// the connection gone. One ClientWatcher thread asks every watched call's
// door every 100 ms (a thread per call cost as much as the rest of a call's
// bookkeeping); an AbandonWatch is the sink in front of one call's own: it
// learns the call's id when the call starts, and is watched while it runs.
#pragma once

#include <signal.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "sandbox/sandbox.h"

namespace rf::calls {

class AbandonWatch;

class ClientWatcher {
 public:
  ClientWatcher() : thread_([this] { loop(); }) {}
  ~ClientWatcher() {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ClientWatcher(const ClientWatcher&) = delete;
  ClientWatcher& operator=(const ClientWatcher&) = delete;

 private:
  friend class AbandonWatch;
  void add(AbandonWatch* w) {
    std::lock_guard lock(mu_);
    watched_.insert(w);
  }
  // Returns once no check of `w` is under way: it may be destroyed then.
  void remove(AbandonWatch* w) {
    std::unique_lock lock(mu_);
    watched_.erase(w);
    cv_.wait(lock, [&] { return checking_ != w; });
  }
  inline void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::set<AbandonWatch*> watched_;
  AbandonWatch* checking_ = nullptr;
  bool stopping_ = false;
  std::thread thread_;
};

// Kills a call whose client went away: once `gone` says so, sends SIGKILL
// to the call (whose id the sink learns when it starts).
class AbandonWatch final : public OutputSink {
 public:
  AbandonWatch(ClientWatcher& watcher, Sandbox& sandbox, OutputSink& next,
               const std::function<bool()>& gone)
      : watcher_(watcher), sandbox_(sandbox), next_(next), gone_(gone) {
    if (gone_) watcher_.add(this);
  }
  ~AbandonWatch() override {
    if (gone_) watcher_.remove(this);
  }
  AbandonWatch(const AbandonWatch&) = delete;
  AbandonWatch& operator=(const AbandonWatch&) = delete;

  void on_started(uint32_t call_id, int pid) override {
    {
      std::lock_guard lock(mu_);
      call_id_ = call_id;
    }
    if (next_.wants_started()) next_.on_started(call_id, pid);
  }
  void on_stdout(std::string_view d) override { next_.on_stdout(d); }
  void on_stderr(std::string_view d) override { next_.on_stderr(d); }
  bool abandoned() const {
    std::lock_guard lock(mu_);
    return killed_;
  }

 private:
  friend class ClientWatcher;
  // On the watcher's thread.
  void check() {
    uint32_t id;
    {
      std::lock_guard lock(mu_);
      if (killed_ || call_id_ == 0) return;
      id = call_id_;
    }
    if (!gone_()) return;
    {
      std::lock_guard lock(mu_);
      killed_ = true;
    }
    (void)sandbox_.send_signal(id, SIGKILL);
  }

  ClientWatcher& watcher_;
  Sandbox& sandbox_;
  OutputSink& next_;
  const std::function<bool()>& gone_;
  mutable std::mutex mu_;
  uint32_t call_id_ = 0;
  bool killed_ = false;
};

inline void ClientWatcher::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stopping_; });
    if (stopping_) break;
    // One at a time, the lock dropped while a door is asked; one removed
    // meanwhile is skipped (remove() waits for the one being asked).
    const std::vector<AbandonWatch*> all(watched_.begin(), watched_.end());
    for (AbandonWatch* w : all) {
      if (!watched_.count(w)) continue;
      checking_ = w;
      lock.unlock();
      w->check();
      lock.lock();
      checking_ = nullptr;
      cv_.notify_all();
    }
  }
}

}  // namespace rf::calls
