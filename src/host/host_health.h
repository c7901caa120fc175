// `sandbox doctor`'s checks of the host itself, whatever the backend: the
// worker's state dir takes writes, and the file systems it and the scratch
// root live on have room. Both are required: a worker cannot keep its store
// without them, and a full disk fails calls in ways that are hard to read.
#pragma once

#include <cstdint>
#include <string>

#include "sandbox/sandbox.h"

namespace rf::host {

// Creates `dir` (and its parents) if missing, then creates, fsyncs and unlinks
// a probe file in it. A failure names the path and the errno, and says what to
// do about that errno.
HealthCheck check_state_dir_writable(const std::string& dir);

// Free space is low below 1 GiB, or below 5% of the file system.
inline constexpr uint64_t kMinFreeBytes = 1ull << 30;
inline constexpr uint64_t kMinFreePercent = 5;

struct DiskSpace {
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to unprivileged users (statvfs f_bavail)
};

// statvfs of `path`, or of its nearest ancestor that exists (a state dir not
// made yet lives on its parent's file system). `name` is the check's name,
// e.g. "free disk (state dir)".
HealthCheck check_free_disk(const std::string& name, const std::string& path);

// The verdict on `space` measured at `path`: what check_free_disk reports.
HealthCheck free_disk_verdict(const std::string& name, const std::string& path, DiskSpace space);

}  // namespace rf::host
