// A tool call's output on its way into the store (worker side). Every write
// to the store is a transaction that all writers take turns for, so output is
// held back briefly and written in batches: what is left when the call ends
// goes in with its result, in one transaction. A call that prints and ends
// within the delay costs no output write at all.
//
// Held-back output is written when it reaches `max_bytes`, or by the worker's
// OutputFlusher once the oldest byte has waited `delay`, so a long-running
// call still streams.
//
// When the store cannot be reached (ErrorCode::kUnavailable: PostgreSQL
// restarting), nothing is dropped: the output stays held and goes with the
// next write, and the call's end (close) is tried again with backoff for up
// to `retry_for`; past it, or when the call is no longer this worker's (its
// lease ran out meanwhile), the error is said loudly and the call's state in
// the store tells the client (interrupted).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "sandbox/sandbox.h"
#include "store/store.h"

namespace rf::calls {

class OutputFlusher;

class CallOutput : public OutputSink {
 public:
  CallOutput(store::Store& store, int64_t call_id, std::string worker_id, OutputFlusher* flusher,
             size_t max_bytes = 64 * 1024);
  bool wants_started() const override { return false; }
  void on_stdout(std::string_view data) override { hold(store::Stream::out, data); }
  void on_stderr(std::string_view data) override { hold(store::Stream::err, data); }

  // The call's record is made (its id was 0: output is held until then).
  void set_call_id(int64_t id) { call_id_ = id; }
  // Writes what is held back now.
  void flush();
  // True when output has waited at least `delay` (the flusher asks), and no
  // retry after an unreachable store is pending.
  bool due(std::chrono::steady_clock::time_point now, std::chrono::milliseconds delay) const;
  // Output is held back (due or not).
  bool waiting() const;
  // Ends the stream: `write` gets what is still held back and writes it with
  // the call's result (finish_call / fail_call); no flush runs after. A
  // write the store could not take (kUnavailable) is tried again.
  template <class Write>
  Status close(Write&& write) {
    std::lock_guard writing(write_mu_);
    std::vector<store::PendingChunk> rest;
    {
      std::lock_guard lock(mu_);
      rest.swap(held_);
      held_bytes_ = 0;
      closed_ = true;
    }
    const auto give_up = std::chrono::steady_clock::now() + retry_for_;
    auto pause = std::chrono::milliseconds(50);
    for (;;) {
      Status written = write(rest);
      if (written.ok() || written.error().code != ErrorCode::kUnavailable ||
          std::chrono::steady_clock::now() + pause > give_up) {
        return written;
      }
      said_unavailable(written.error());
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(1000));
    }
  }
  // How long close() keeps trying while the store is unreachable.
  void set_retry_for(std::chrono::milliseconds d) { retry_for_ = d; }
  // Stores at most `bytes` of the call's output (0: all), then one line
  // saying the rest was not stored: a background process that prints for
  // hours keeps its newest output in its ring buffer, not in the store.
  void set_stored_max(uint64_t bytes) { stored_max_ = bytes; }

 private:
  void hold(store::Stream stream, std::string_view data);
  void said_unavailable(const Error& e);  // once per call

  store::Store& store_;
  std::atomic<int64_t> call_id_;  // 0 until the call is recorded
  const std::string worker_id_;
  OutputFlusher* flusher_;
  const size_t max_bytes_;
  std::mutex write_mu_;  // one store write at a time, so chunks keep their order
  mutable std::mutex mu_;
  std::vector<store::PendingChunk> held_;
  size_t held_bytes_ = 0;
  std::chrono::steady_clock::time_point held_since_;
  std::chrono::steady_clock::time_point retry_after_;  // the store was unreachable
  bool closed_ = false;
  bool said_unavailable_ = false;
  uint64_t stored_max_ = 0;  // 0: all
  uint64_t stored_ = 0;      // under mu_
  std::chrono::milliseconds retry_for_{30'000};
};

// One thread per worker: writes output held back longer than `delay`.
class OutputFlusher {
 public:
  explicit OutputFlusher(std::chrono::milliseconds delay);
  ~OutputFlusher();
  void add(std::shared_ptr<CallOutput> output);
  void remove(const std::shared_ptr<CallOutput>& output);
  // A call has output waiting: look again within `delay`.
  void wake();

 private:
  void loop();

  const std::chrono::milliseconds delay_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::set<std::shared_ptr<CallOutput>> outputs_;
  bool pending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace rf::calls
