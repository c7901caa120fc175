// The facts every process of a sandbox shares with its PID 1, in one form
// for both readers: the self-probe inside, for itself (runner/self_probe.h),
// and the host, from the sandbox's PID 1 when the probe left them out
// ("Inside only"; proof/boundary_facts.h). Plain parsing, no allocation of
// a JSON tree: the probe runs on the way to every report.
#pragma once

#include <sys/resource.h>

#include <string>
#include <string_view>
#include <vector>

namespace rf::proto {

// The /proc/PID/status lines a report keeps.
inline constexpr std::string_view kStatusFields[] = {
    "CapInh",  "CapPrm",          "CapEff", "CapBnd", "CapAmb", "NoNewPrivs",
    "Seccomp", "Seccomp_filters", "Uid",    "Gid",    "Groups"};

// The rlimits a report keeps, by the name it gives them.
struct NamedRlimit {
  const char* name;
  int resource;
};
inline constexpr NamedRlimit kReportedRlimits[] = {
    {"core", RLIMIT_CORE},   {"nofile", RLIMIT_NOFILE},  {"fsize", RLIMIT_FSIZE},
    {"nproc", RLIMIT_NPROC}, {"as", RLIMIT_AS},          {"cpu", RLIMIT_CPU},
    {"stack", RLIMIT_STACK}, {"memlock", RLIMIT_MEMLOCK}};

// The lines of `text`, each without its '\n'.
std::vector<std::string_view> lines_of(std::string_view text);

// The kept fields of a status text, in its order: name and value (from its
// first non-blank, tabs made spaces).
struct StatusField {
  std::string_view name;
  std::string value;
};
std::vector<StatusField> kept_status_fields(std::string_view status);

// The interface names of a /proc/PID/net/dev text, sorted.
std::vector<std::string_view> net_dev_interfaces(std::string_view net_dev);

}  // namespace rf::proto
