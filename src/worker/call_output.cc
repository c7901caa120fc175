#include "worker/call_output.h"

#include "core/log.h"

namespace rf::worker {

CallOutput::CallOutput(store::Store& store, int64_t call_id, std::string worker_id,
                       OutputFlusher* flusher, size_t max_bytes)
    : store_(store),
      call_id_(call_id),
      worker_id_(std::move(worker_id)),
      flusher_(flusher),
      max_bytes_(max_bytes) {}

void CallOutput::hold(store::Stream stream, std::string_view data) {
  bool full = false, first = false;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;  // the exec is over; nothing arrives after close
    first = held_.empty();
    if (first) held_since_ = std::chrono::steady_clock::now();
    if (!first && held_.back().stream == stream) {
      held_.back().data.append(data);
    } else {
      held_.push_back({stream, std::string(data)});
    }
    held_bytes_ += data.size();
    full = held_bytes_ >= max_bytes_;
  }
  if (full) {
    flush();
  } else if (first && flusher_ != nullptr) {
    flusher_->wake();
  }
}

bool CallOutput::due(std::chrono::steady_clock::time_point now,
                     std::chrono::milliseconds delay) const {
  std::lock_guard lock(mu_);
  return !held_.empty() && now - held_since_ >= delay;
}

void CallOutput::flush() {
  std::lock_guard writing(write_mu_);
  std::vector<store::PendingChunk> chunks;
  {
    std::lock_guard lock(mu_);
    if (closed_ || held_.empty()) return;
    chunks.swap(held_);
    held_bytes_ = 0;
  }
  if (auto r = store_.append_outputs(call_id_, worker_id_, chunks); !r) {
    spdlog::warn("call {}: output lost: {}", call_id_, r.error().to_string());
  }
}

OutputFlusher::OutputFlusher(std::chrono::milliseconds delay)
    : delay_(delay), thread_([this] { loop(); }) {}

OutputFlusher::~OutputFlusher() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void OutputFlusher::add(std::shared_ptr<CallOutput> output) {
  std::lock_guard lock(mu_);
  outputs_.insert(std::move(output));
}

void OutputFlusher::remove(const std::shared_ptr<CallOutput>& output) {
  std::lock_guard lock(mu_);
  outputs_.erase(output);
}

void OutputFlusher::wake() {
  {
    std::lock_guard lock(mu_);
    pending_ = true;
  }
  cv_.notify_all();
}

void OutputFlusher::loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // Asleep while no call has output waiting; then a look every delay/2.
    cv_.wait(lock, [&] { return stopping_ || pending_; });
    cv_.wait_for(lock, delay_ / 2, [&] { return stopping_; });
    if (stopping_) break;
    pending_ = false;
    std::vector<std::shared_ptr<CallOutput>> due;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& o : outputs_) {
      if (o->due(now, delay_)) {
        due.push_back(o);
      } else if (o->due(now, std::chrono::milliseconds(0))) {
        pending_ = true;  // held, not due yet: look again
      }
    }
    lock.unlock();
    for (const auto& o : due) o->flush();
    lock.lock();
  }
}

}  // namespace rf::worker
