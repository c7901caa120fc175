#include "core/proc_stat.h"

#include <dirent.h>

#include <cstdlib>
#include <string>

#include "core/io.h"

namespace rf {

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  auto text = read_kernel_file("/proc/" + std::to_string(pid) + "/stat");
  if (!text) return std::nullopt;
  // "pid (comm) state ppid pgrp ..."; comm may hold spaces and ')', so parse
  // from the last ')'.
  const auto close = text->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  // Fields 3.. after ')', space-separated: state, ppid, pgrp, ..., starttime
  // is field 22. By hand, not a stream: the static tool runner reads it too.
  ProcStat st;
  const char* p = text->c_str() + close + 1;
  for (int n = 3; n <= 22; ++n) {
    while (*p == ' ') ++p;
    if (*p == '\0' || *p == '\n') return std::nullopt;
    if (n == 3) st.state = *p;
    if (n == 4) st.ppid = static_cast<pid_t>(std::strtol(p, nullptr, 10));
    if (n == 5) st.pgrp = static_cast<pid_t>(std::strtol(p, nullptr, 10));
    if (n == 22) {
      st.start_time = std::strtoull(p, nullptr, 10);
      return st;
    }
    while (*p != ' ' && *p != '\0' && *p != '\n') ++p;
  }
  return std::nullopt;
}

uint64_t start_time_of(pid_t pid) {
  auto st = read_proc_stat(pid);
  return st ? st->start_time : 0;
}

bool is_running(pid_t pid, uint64_t start_time) {
  auto st = read_proc_stat(pid);
  return st && start_time != 0 && st->start_time == start_time && st->state != 'Z' &&
         st->state != 'X';
}

std::vector<pid_t> group_members(pid_t pgrp) {
  std::vector<pid_t> out;
  if (pgrp <= 0) return out;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    auto st = read_proc_stat(static_cast<pid_t>(pid));
    if (st && st->pgrp == pgrp && st->state != 'Z' && st->state != 'X') {
      out.push_back(static_cast<pid_t>(pid));
    }
  }
  ::closedir(proc);
  return out;
}

}  // namespace rf
