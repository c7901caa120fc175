#include "core/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>

#include <cstring>

extern char** environ;

namespace rf {

namespace {

// Variables of ours that hold a credential: read by this process, never
// handed on to a helper (ssh, which runs the user's ProxyCommand and
// config, would pass them to whatever those start).
bool hidden_from_helpers(const char* entry) {
  for (const char* name : kHelperHiddenEnv) {
    const size_t n = std::strlen(name);
    if (std::strncmp(entry, name, n) == 0 && entry[n] == '=') return true;
  }
  return false;
}

}  // namespace

Result<pid_t> spawn_helper(const std::vector<std::string>& argv, const std::vector<SpawnFd>& fds,
                           const std::vector<std::string>* envp, bool search_path) {
  if (argv.empty()) return make_error("spawn", "no program");
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  if (envp != nullptr) {
    for (const auto& e : *envp) env.push_back(const_cast<char*>(e.c_str()));
  } else {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e)
      if (!hidden_from_helpers(*e)) env.push_back(*e);
  }
  env.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  for (const SpawnFd& f : fds) {
    if (f.fd < 0) {
      posix_spawn_file_actions_addopen(&fa, f.as, "/dev/null", O_RDONLY, 0);
    } else {
      posix_spawn_file_actions_adddup2(&fa, f.fd, f.as);
    }
  }
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  pid_t pid = -1;
  const int rc = search_path ? ::posix_spawnp(&pid, args[0], &fa, &attr, args.data(), env.data())
                             : ::posix_spawn(&pid, args[0], &fa, &attr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return sys_error("run " + argv[0], rc);
  return pid;
}

}  // namespace rf
