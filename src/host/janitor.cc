#include "host/janitor.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "host/uid_slots.h"

namespace rf::host {
namespace {

// Every cgroup directory of every live sandbox: up to five per sandbox (one
// per v1 hierarchy: memory, pids, cpu, cpuacct, and the freezer where it is
// mounted) for as many sandboxes as there are uid slots.
constexpr int kMaxTracked = 5 * static_cast<int>(kSlotCount);
constexpr int kMaxPath = 256;
// A power of two, at most half full.
constexpr uint32_t kTableSize = std::bit_ceil(2u * static_cast<uint32_t>(kMaxTracked));
static_assert((kTableSize & (kTableSize - 1)) == 0);

// The janitor's whole state: static, so the forked child never allocates.
// Entries are used densely (pages are touched only as sandboxes come), found
// through an open-addressing table: thousands of live sandboxes stay cheap.
char g_paths[kMaxTracked][kMaxPath];
int g_free[kMaxTracked];  // entries given back, reused first
int g_free_count = 0;
int g_high = 0;                // entries [0, g_high) have been used
uint32_t g_table[kTableSize];  // 0: empty; else an entry index + 1 (linear probing)

uint32_t hash(const char* p) {
  uint32_t h = 2166136261u;  // FNV-1a
  for (; *p; ++p) h = (h ^ static_cast<unsigned char>(*p)) * 16777619u;
  return h & (kTableSize - 1);
}

// Where `p` is in the table, or the empty place where it would go.
uint32_t find(const char* p) {
  uint32_t i = hash(p);
  while (g_table[i] != 0 && std::strncmp(g_paths[g_table[i] - 1], p, kMaxPath) != 0)
    i = (i + 1) & (kTableSize - 1);
  return i;
}

void add_path(const char* p) {
  const uint32_t at = find(p);
  if (g_table[at] != 0) return;  // tracked already
  int entry = -1;
  if (g_free_count > 0) {
    entry = g_free[--g_free_count];
  } else if (g_high < kMaxTracked) {
    entry = g_high++;
  } else {
    return;  // more than the uid slots allow
  }
  const size_t n = ::strnlen(p, kMaxPath - 1);
  std::memcpy(g_paths[entry], p, n);
  g_paths[entry][n] = 0;
  g_table[at] = static_cast<uint32_t>(entry) + 1;
}

void remove_path(const char* p) {
  uint32_t hole = find(p);
  if (g_table[hole] == 0) return;
  const int entry = static_cast<int>(g_table[hole] - 1);
  g_paths[entry][0] = 0;  // no longer tracked (add_path never stores an empty path)
  g_free[g_free_count++] = entry;
  g_table[hole] = 0;
  // Backward-shift deletion: later members of the probe run move up into the
  // hole unless their home lies cyclically in (hole, j].
  for (uint32_t j = (hole + 1) & (kTableSize - 1); g_table[j] != 0;
       j = (j + 1) & (kTableSize - 1)) {
    const uint32_t home = hash(g_paths[g_table[j] - 1]);
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    g_table[hole] = g_table[j];
    g_table[j] = 0;
    hole = j;
  }
}

// SIGKILLs every pid listed in <dir>/cgroup.procs; returns how many were listed.
int kill_listed(const char* dir) {
  static constexpr char kProcs[] = "/cgroup.procs";
  char path[kMaxPath + sizeof kProcs];
  const size_t n_dir = ::strnlen(dir, kMaxPath - 1);
  std::memcpy(path, dir, n_dir);
  std::memcpy(path + n_dir, kProcs, sizeof kProcs);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[4096];
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  int count = 0;
  for (char* p = buf; *p;) {
    const long pid = std::strtol(p, &p, 10);
    if (pid > 0) {
      ::kill(static_cast<pid_t>(pid), SIGKILL);
      ++count;
    }
    while (*p == '\n') ++p;
  }
  return count;
}

void clean(const char* dir) {
  for (int attempt = 0; attempt < 500; ++attempt) {  // ~5 s at most
    kill_listed(dir);
    if (::rmdir(dir) == 0 || errno == ENOENT) return;
    ::usleep(10'000);
  }
}

[[noreturn]] void janitor_main(int fd) {
  ::setsid();  // a ^C to the host process's group must not take the janitor with it
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGTSTP}) ::signal(sig, SIG_IGN);
  ::prctl(PR_SET_NAME, "rf-janitor", 0, 0, 0);
  if (fd != 3) {
    ::dup2(fd, 3);
    fd = 3;
  }
  ::syscall(SYS_close_range, 4, ~0U, 0);
  const int devnull = ::open("/dev/null", O_RDWR);
  for (int i = 0; i <= 2 && devnull >= 0; ++i) ::dup2(devnull, i);
  char line[kMaxPath + 2];
  size_t len = 0;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] != '\n') {
        if (len < sizeof line - 1) line[len++] = buf[i];
        continue;
      }
      line[len] = 0;
      if (len > 1 && line[0] == '+') add_path(line + 1);
      if (len > 1 && line[0] == '-') remove_path(line + 1);
      len = 0;
    }
  }
  // The entries used, not the whole table: a host process that tracked four
  // directories costs four looks here, not 131,072 (issue 10: every `sandbox
  // exec` ends its janitor).
  for (int e = 0; e < g_high; ++e) {
    if (g_paths[e][0] != 0) clean(g_paths[e]);
  }
  _exit(0);
}

}  // namespace

Result<Janitor*> Janitor::get() {
  static std::mutex mu;
  static Janitor* instance = nullptr;
  std::lock_guard lock(mu);
  if (instance != nullptr) return instance;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("start janitor: pipe");
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return sys_error("start janitor: fork", err);
  }
  if (pid == 0) {
    ::close(fds[1]);
    janitor_main(fds[0]);
  }
  ::close(fds[0]);
  instance = new Janitor(fds[1]);  // lives as long as the process, by design
  return instance;
}

void Janitor::send(char op, const std::string& dir) {
  if (dir.size() >= kMaxPath) return;
  std::string line;
  line.reserve(dir.size() + 2);
  line.push_back(op);
  line += dir;
  line.push_back('\n');
  // One write of less than PIPE_BUF bytes is atomic: no lock needed between threads.
  while (::write(fd_, line.data(), line.size()) < 0 && errno == EINTR) {
  }
}

void Janitor::track(const std::string& dir) { send('+', dir); }
void Janitor::untrack(const std::string& dir) { send('-', dir); }

}  // namespace rf::host
