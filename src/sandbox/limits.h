// One table of a sandbox's limits. It drives the flags of `sandbox exec`
// (--mem), the worker's flags and config file (--sandbox-mem, sandbox.mem),
// the spec's JSON (limits.memory), their defaults, help, formatting, and the
// bounds validate_spec() enforces: a limit is added here once and every surface
// has it.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/result.h"

namespace rf {

struct Limits {
  double cpus = 1.0;                          // cpu time per wall second
  uint64_t memory_bytes = 512ull << 20;       // cgroup memory limit
  uint64_t pids = 256;                        // cgroup pids limit
  uint64_t disk_bytes = 1ull << 30;           // size of /workspace and of /tmp (each)
  std::chrono::milliseconds timeout{30'000};  // per call
  uint64_t output_bytes = 16ull << 20;        // stdout+stderr per call
  uint64_t nofile = 1024;                     // RLIMIT_NOFILE
  // network proxy: connections open at once through the proxy, and bytes the
  // sandbox may send through it over its life (0: unlimited).
  uint64_t egress_connections = 64;
  uint64_t egress_bytes = 0;
};

// The inodes of each writable tmpfs (/tmp, /workspace, /dev/shm) of a
// sandbox with `disk_bytes` of disk, on every backend: one per 4 KiB page,
// at least 4096. Without a cap, empty files take no size and exhaust the
// host's memory.
inline uint64_t tmpfs_inodes(uint64_t disk_bytes) {
  return disk_bytes / 4096 > 4096 ? disk_bytes / 4096 : 4096;
}

// How a limit's text reads, which also says what a bad one should have been.
enum class LimitKind {
  kCpus,      // "1.5"
  kSize,      // "512m"
  kCount,     // "256"
  kDuration,  // "30s"
};

struct LimitField {
  // The flag and setting name: --NAME on `sandbox exec`, --sandbox-NAME on the
  // worker (with '-' for '_'), sandbox.NAME in worker.yaml.
  std::string_view name;
  std::string_view json_key;  // limits.KEY in the spec's JSON and validate_spec's errors
  std::string_view help;
  LimitKind kind;
  // Parses `text` into `limits`. The error has only a message ("expected a
  // size such as 512m, got \"lots\""); the caller says where.
  Status (*set)(Limits& limits, std::string_view text);
  // The value, formatted as it parses back ("512m", "30s", "1.5").
  std::string (*get)(const Limits& limits);
  // Bounds. The error has only a message ("must be at least 8m, got 1m").
  Status (*check)(const Limits& limits);
  // How much, to compare two values of the field (bytes, ms, a count, cpus).
  // A size of 0 where 0 means no cap (egress_bytes) is infinite.
  double (*amount)(const Limits& limits);

  std::string exec_flag() const;    // "--output-limit"
  std::string worker_flag() const;  // "--sandbox-output-limit"
  std::string config_key() const;   // "sandbox.output_limit"
  std::string spec_field() const;   // "limits.output"
};

// Every limit, in the order help and `worker config` list them.
std::span<const LimitField> limit_fields();
const LimitField* find_limit(std::string_view name);              // by name
const LimitField* find_limit_by_json(std::string_view json_key);  // by json_key
// The limit a validate_spec() error is about ("limits.memory: ..."), if any.
const LimitField* limit_of_spec_error(const Error& e);

}  // namespace rf
