#include "host/janitor.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

namespace rf::host {
namespace {

constexpr int kMaxTracked = 4096;
constexpr int kMaxPath = 256;

// The janitor's whole state: static, so the forked child never allocates.
char g_paths[kMaxTracked][kMaxPath];
bool g_used[kMaxTracked];

void add_path(const char* p) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (!g_used[i]) {
      const size_t n = ::strnlen(p, kMaxPath - 1);
      std::memcpy(g_paths[i], p, n);
      g_paths[i][n] = 0;
      g_used[i] = true;
      return;
    }
  }
}

void remove_path(const char* p) {
  for (int i = 0; i < kMaxTracked; ++i) {
    if (g_used[i] && std::strncmp(g_paths[i], p, kMaxPath) == 0) g_used[i] = false;
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
  for (int i = 0; i < kMaxTracked; ++i) {
    if (g_used[i]) clean(g_paths[i]);
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
