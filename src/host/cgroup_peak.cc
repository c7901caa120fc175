// The peak memory of one call in its sandbox's cgroup (PeakWatch), for v1
// and v2 alike: they differ only in the file and what a reset writes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "core/unique_fd.h"
#include "host/cgroup_internal.h"

namespace rf::host::cgroup_internal {

// One call's descriptor and the peak it reached before other calls' resets.
class PeakWatch::Call final : public CallPeak {
 public:
  Call(std::shared_ptr<PeakWatch> watch, UniqueFd fd)
      : watch_(std::move(watch)), fd_(std::move(fd)) {}
  ~Call() override { watch_->forget(this); }
  Result<uint64_t> finish() override { return watch_->finish(this); }

 private:
  friend class PeakWatch;
  Result<uint64_t> read() const {
    auto text = pread_text(fd_.get(), watch_->path_);
    if (!text) return text.take_error();
    return parse_number(watch_->path_, *text);
  }

  std::shared_ptr<PeakWatch> watch_;
  UniqueFd fd_;
  uint64_t so_far_ = 0;  // guarded by watch_->mu_
};

namespace {

// A shortage of descriptors or memory passes; any other failure is the
// kernel (or the cgroup's permissions) saying no, which will not change.
bool passing(int err) { return err == EMFILE || err == ENFILE || err == ENOMEM || err == EINTR; }

}  // namespace

Result<std::shared_ptr<CallPeak>> PeakWatch::start() {
  std::lock_guard lock(mu_);
  if (refused_errno_ != 0) return sys_error("reset " + path_ + " (refused before)", refused_errno_);
  UniqueFd fd(::open(path_.c_str(), O_RDWR | O_CLOEXEC));
  if (!fd) return refused(sys_error("open " + path_));
  keep_peaks_so_far();
  // One write(): cgroup files take a value per write call.
  const ssize_t n = ::write(fd.get(), reset_text_.data(), reset_text_.size());
  if (n < 0) return refused(sys_error("write " + path_));
  if (static_cast<size_t>(n) != reset_text_.size()) {
    return make_error("write " + path_, "short write");
  }
  // A fake tree's file holds what was written last, as write_value leaves it.
  if (fake_ && ::ftruncate(fd.get(), n) != 0) return sys_error("truncate " + path_);
  auto call = std::make_shared<Call>(shared_from_this(), std::move(fd));
  running_.push_back(call.get());
  return std::shared_ptr<CallPeak>(std::move(call));
}

// Under mu_. A call whose read fails keeps what it had: its finish() will
// fail the same way, and its result fall back to its own ru_maxrss.
void PeakWatch::keep_peaks_so_far() {
  for (Call* call : running_) {
    if (auto peak = call->read()) call->so_far_ = std::max(call->so_far_, *peak);
  }
}

Result<uint64_t> PeakWatch::finish(Call* call) {
  std::lock_guard lock(mu_);
  const auto it = std::find(running_.begin(), running_.end(), call);
  if (it == running_.end()) return make_error(path_, "this call's peak was already read");
  running_.erase(it);
  auto peak = call->read();
  if (!peak) return peak.take_error();
  return std::max(call->so_far_, *peak);
}

void PeakWatch::forget(Call* call) {
  std::lock_guard lock(mu_);
  std::erase(running_, call);
}

Error PeakWatch::refused(Error e) {
  if (!passing(e.sys_errno)) refused_errno_ = e.sys_errno;
  return e;
}

}  // namespace rf::host::cgroup_internal
