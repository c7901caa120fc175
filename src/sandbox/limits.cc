#include "sandbox/limits.h"

#include <array>
#include <limits>
#include <sstream>

#include "core/units.h"

namespace rf {
namespace {

Error expected(std::string_view what, std::string_view text) {
  return make_error("", "expected " + std::string(what) + ", got \"" + std::string(text) + "\"");
}

Result<double> cpus_of(std::string_view text) {
  auto n = parse_decimal(text);
  if (!n) return expected("a number of cpus such as 1.5", text);
  return *n;
}

Result<uint64_t> size_of(std::string_view text) {
  auto n = parse_size(text);
  if (!n) return expected("a size such as 512m", text);
  return *n;
}

Result<uint64_t> count_of(std::string_view text) {
  auto n = parse_whole_number(text);
  if (!n) return expected("a whole number", text);
  return *n;
}

Result<std::chrono::milliseconds> duration_of(std::string_view text) {
  auto d = parse_duration(text);
  if (!d) return expected("a duration such as 30s", text);
  return *d;
}

std::string cpus_text(double cpus) {
  std::ostringstream out;
  out << cpus;
  return out.str();
}

Status between(uint64_t v, uint64_t lo, uint64_t hi) {
  if (v < lo || v > hi) {
    return make_error("", "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                              ", got " + std::to_string(v));
  }
  return ok_status();
}

Status size_between(uint64_t v, uint64_t lo, uint64_t hi) {
  if (v < lo || v > hi) {
    return make_error("", "must be between " + format_size(lo) + " and " + format_size(hi) +
                              ", got " + format_size(v));
  }
  return ok_status();
}

Status at_least_size(uint64_t v, uint64_t lo) {
  if (v < lo)
    return make_error("", "must be at least " + format_size(lo) + ", got " + format_size(v));
  return ok_status();
}

double amount_of(double v) { return v; }
double amount_of(uint64_t v) { return static_cast<double>(v); }
double amount_of(std::chrono::milliseconds v) { return static_cast<double>(v.count()); }
// 0 is no cap: more than any cap.
double uncapped_if_zero(uint64_t v) {
  return v == 0 ? std::numeric_limits<double>::infinity() : static_cast<double>(v);
}

// A field whose value is `Limits::*member`, read by `parse` and shown by `show`.
#define RF_LIMIT(NAME, JSON, HELP, KIND, MEMBER, PARSE, SHOW, CHECK) \
  RF_LIMIT_AMOUNT(NAME, JSON, HELP, KIND, MEMBER, PARSE, SHOW, CHECK, amount_of)
#define RF_LIMIT_AMOUNT(NAME, JSON, HELP, KIND, MEMBER, PARSE, SHOW, CHECK, AMOUNT) \
  LimitField {                                                                      \
    NAME, JSON, HELP, KIND,                                                         \
        [](Limits& l, std::string_view text) -> Status {                            \
          auto v = PARSE(text);                                                     \
          if (!v) return v.take_error();                                            \
          l.MEMBER = *v;                                                            \
          return ok_status();                                                       \
        },                                                                          \
        [](const Limits& l) -> std::string { return SHOW(l.MEMBER); },              \
        [](const Limits& l) -> Status { return CHECK(l.MEMBER); },                  \
        [](const Limits& l) -> double { return AMOUNT(l.MEMBER); }                  \
  }

std::string count_text(uint64_t n) { return std::to_string(n); }

const std::array<LimitField, 9> kFields = {
    RF_LIMIT("cpu", "cpus", "CPUs (cpu time per wall second)", LimitKind::kCpus, cpus, cpus_of,
             cpus_text,
             [](double v) -> Status {
               if (!(v >= 0.01 && v <= 1024)) {
                 return make_error("", "must be between 0.01 and 1024, got " + cpus_text(v));
               }
               return ok_status();
             }),
    RF_LIMIT("mem", "memory", "Memory limit", LimitKind::kSize, memory_bytes, size_of, format_size,
             [](uint64_t v) { return at_least_size(v, 8ull << 20); }),
    RF_LIMIT("pids", "pids", "Process limit", LimitKind::kCount, pids, count_of, count_text,
             [](uint64_t v) { return between(v, 8, 1'000'000); }),
    RF_LIMIT("disk", "disk", "Size of /workspace and of /tmp", LimitKind::kSize, disk_bytes,
             size_of, format_size, [](uint64_t v) { return at_least_size(v, 1ull << 20); }),
    RF_LIMIT("timeout", "timeout", "Per-call timeout", LimitKind::kDuration, timeout, duration_of,
             format_duration,
             [](std::chrono::milliseconds v) -> Status {
               if (v.count() <= 0) return make_error("", "must be positive");
               return ok_status();
             }),
    RF_LIMIT("output_limit", "output", "stdout+stderr cap per call", LimitKind::kSize, output_bytes,
             size_of, format_size, [](uint64_t v) { return size_between(v, 1024, 1ull << 32); }),
    RF_LIMIT("nofile", "nofile", "Open files per process (RLIMIT_NOFILE)", LimitKind::kCount,
             nofile, count_of, count_text, [](uint64_t v) { return between(v, 16, 1u << 20); }),
    RF_LIMIT("egress_connections", "egress_connections",
             "With network proxy: connections open at once", LimitKind::kCount, egress_connections,
             count_of, count_text, [](uint64_t v) { return between(v, 1, 65536); }),
    RF_LIMIT_AMOUNT(
        "egress_bytes", "egress_bytes",
        "With network proxy: bytes the sandbox may send (0: no cap)", LimitKind::kSize,
        egress_bytes, size_of, format_size, [](uint64_t) { return ok_status(); }, uncapped_if_zero),
};

#undef RF_LIMIT
#undef RF_LIMIT_AMOUNT

std::string dashed(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    if (c == '_') c = '-';
  }
  return out;
}

}  // namespace

std::string LimitField::exec_flag() const { return "--" + dashed(name); }
std::string LimitField::worker_flag() const { return "--sandbox-" + dashed(name); }
std::string LimitField::config_key() const { return "sandbox." + std::string(name); }
std::string LimitField::spec_field() const { return "limits." + std::string(json_key); }

std::span<const LimitField> limit_fields() { return kFields; }

const LimitField* find_limit(std::string_view name) {
  for (const auto& f : kFields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

const LimitField* find_limit_by_json(std::string_view json_key) {
  for (const auto& f : kFields) {
    if (f.json_key == json_key) return &f;
  }
  return nullptr;
}

const LimitField* limit_of_spec_error(const Error& e) {
  for (const auto& f : kFields) {
    if (e.where == f.spec_field()) return &f;
  }
  return nullptr;
}

}  // namespace rf
