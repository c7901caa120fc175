#include "calls/call_output.h"

#include <iterator>
#include <utility>

#include "core/log.h"

namespace rf::calls {

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
    bool cut = false;
    if (stored_max_ != 0) {
      if (stored_ >= stored_max_) return;
      cut = data.size() >= stored_max_ - stored_;
      if (cut) data = data.substr(0, stored_max_ - stored_);
      stored_ += data.size();
    }
    first = held_.empty();
    if (first) held_since_ = std::chrono::steady_clock::now();
    if (!first && held_.back().stream == stream) {
      held_.back().data.append(data);
    } else {
      held_.push_back({stream, std::string(data)});
    }
    held_bytes_ += data.size();
    if (cut) {
      held_.push_back({store::Stream::err,
                       "\n[ringfence: the store keeps the first " + std::to_string(stored_max_) +
                           " bytes of this background process's output; its buffer keeps the "
                           "newest]\n"});
    }
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
  return !held_.empty() && call_id_ != 0 && now >= retry_after_ && now - held_since_ >= delay;
}

bool CallOutput::waiting() const {
  std::lock_guard lock(mu_);
  return !held_.empty();
}

void CallOutput::said_unavailable(const Error& e) {
  if (std::exchange(said_unavailable_, true)) return;
  spdlog::warn(
      "call {}: the store is unreachable ({}); its output is kept and written when "
      "it is back",
      call_id_, e.to_string());
}

void CallOutput::flush() {
  std::lock_guard writing(write_mu_);
  std::vector<store::PendingChunk> chunks;
  {
    std::lock_guard lock(mu_);
    if (closed_ || held_.empty() || call_id_ == 0) return;
    // The store was unreachable a moment ago: not again yet (the output
    // stays held; the sandbox's output limit bounds it).
    if (std::chrono::steady_clock::now() < retry_after_) return;
    chunks.swap(held_);
    held_bytes_ = 0;
  }
  auto r = store_.append_outputs(call_id_, worker_id_, chunks);
  if (r) return;
  if (r.error().code != ErrorCode::kUnavailable) {
    // The call is no longer this worker's (its lease ran out, it was fenced):
    // the store refuses its output for good, and the call's state says why.
    spdlog::warn("call {}: output not written: {}", call_id_, r.error().to_string());
    return;
  }
  said_unavailable(r.error());
  // Kept, in order, before what arrived meanwhile; tried again in a while.
  std::lock_guard lock(mu_);
  for (const auto& c : chunks) held_bytes_ += c.data.size();
  chunks.insert(chunks.end(), std::make_move_iterator(held_.begin()),
                std::make_move_iterator(held_.end()));
  held_.swap(chunks);
  retry_after_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
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
      } else if (o->waiting()) {
        pending_ = true;  // held, not due yet: look again
      }
    }
    lock.unlock();
    for (const auto& o : due) o->flush();
    lock.lock();
  }
}

}  // namespace rf::calls
