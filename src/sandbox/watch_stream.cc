#include "sandbox/watch_stream.h"

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace rf {

Result<bool> follow_watch(Sandbox& sandbox, const std::string& path, bool recursive,
                          const WatchEmit& emit, const std::function<bool()>& gone) {
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    uint32_t id = 0;
    bool began = false, over = false;
    std::optional<Error> failed;
    std::string why;
    std::deque<std::vector<proto::FileEvent>> batches;
  } st;
  std::thread waiter([&] {
    auto r = sandbox.watch(
        path, recursive,
        [&](uint32_t id) {
          std::lock_guard lock(st.mu);
          st.id = id;
          st.began = true;
          st.cv.notify_all();
        },
        [&](std::vector<proto::FileEvent>&& events) {
          std::lock_guard lock(st.mu);
          st.batches.push_back(std::move(events));
          st.cv.notify_all();
        });
    std::lock_guard lock(st.mu);
    st.over = true;
    if (r) {
      st.why = std::move(*r);
    } else {
      st.failed = r.error();
    }
    st.cv.notify_all();
  });
  std::unique_lock lock(st.mu);
  st.cv.wait(lock, [&] { return st.began || st.over; });
  if (!st.began) {
    lock.unlock();
    waiter.join();
    return *st.failed;
  }
  emit("watching", {{"path", path}, {"recursive", recursive}});
  bool unwatched = false, left = false;
  for (;;) {
    st.cv.wait_for(lock, std::chrono::milliseconds(100),
                   [&] { return !st.batches.empty() || st.over; });
    while (!st.batches.empty()) {
      auto batch = std::move(st.batches.front());
      st.batches.pop_front();
      lock.unlock();
      if (!left) {
        for (const auto& e : batch) {
          emit("fs", {{"type", e.type}, {"path", e.path}, {"dir", e.dir}});
        }
      }
      lock.lock();
    }
    if (st.over) break;
    if (!unwatched && gone()) {
      // Ended inside the sandbox now; its end comes back and ends the wait.
      left = unwatched = true;
      const uint32_t id = st.id;
      lock.unlock();
      (void)sandbox.unwatch(id);
      lock.lock();
    }
  }
  const std::string why = st.failed ? st.failed->to_string() : st.why;
  lock.unlock();
  waiter.join();
  if (left) return false;
  emit("end", {{"reason", why}});
  return true;
}

}  // namespace rf
