#include "local/inventory.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <ctime>
#include <optional>
#include <thread>

#include "core/proc_stat.h"
#include "core/unique_fd.h"
#include "local/owner_marker.h"
#include "local/remove_tree.h"

namespace rf::local {
namespace {

using Clock = std::chrono::steady_clock;

// SIGKILL takes effect at once; these only bound how long a stuck process
// (uninterruptible sleep) can hold a reap up.
constexpr std::chrono::milliseconds kRunnerExit{2'000};
constexpr std::chrono::milliseconds kGroupExit{2'000};
constexpr std::string_view kMarkerSuffix = ".owner";

// Sandbox ids are [a-z0-9-] (validate_spec); nothing else under the root is ours.
bool is_id(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

// The id whose marker `name` is, or "" when it is no marker.
std::string marker_id(std::string_view name) {
  if (!name.ends_with(kMarkerSuffix)) return "";
  const std::string_view id = name.substr(0, name.size() - kMarkerSuffix.size());
  return is_id(id) ? std::string(id) : "";
}

Result<std::vector<std::string>> names_in(int dir_fd, const std::string& path) {
  const int dup = ::fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return sys_error("scratch root " + path);
  DIR* dir = ::fdopendir(dup);
  if (dir == nullptr) {
    const int err = errno;
    ::close(dup);
    return sys_error("scratch root " + path, err);
  }
  std::vector<std::string> names;
  errno = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0)
      names.emplace_back(e->d_name);
    errno = 0;
  }
  const int err = errno;
  ::closedir(dir);
  if (err != 0) return sys_error("scratch root " + path + ": readdir", err);
  return names;
}

bool is_dir(int root_fd, const std::string& name) {
  struct stat st {};
  return ::fstatat(root_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

std::chrono::seconds since(int64_t epoch_seconds) {
  return std::chrono::seconds(
      std::max<int64_t>(0, static_cast<int64_t>(std::time(nullptr)) - epoch_seconds));
}

// A directory's age without a marker: its ctime, which only moves forward, so
// the directory can only look younger than it is (and be spared longer).
std::chrono::seconds dir_age(int root_fd, const std::string& name) {
  struct stat st {};
  if (::fstatat(root_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return std::chrono::seconds(0);
  return since(st.st_ctim.tv_sec);
}

struct Found {
  SandboxInfo info;
  std::optional<OwnerMarker> marker;  // empty: missing or unreadable
};

Found describe(int root_fd, const std::string& id) {
  Found f;
  f.info.id = id;
  f.info.backend = "local";
  auto marker = read_owner_marker(root_fd, id);
  if (!marker) {
    f.info.age = dir_age(root_fd, id);
    return f;
  }
  f.marker = *marker;
  f.info.age = since(marker->created_at);
  if (is_running(marker->runner_pid, marker->runner_start)) f.info.pid = marker->runner_pid;
  if (is_running(marker->owner_pid, marker->owner_start)) f.info.owner_pid = marker->owner_pid;
  return f;
}

bool should_reap(const Found& f, std::chrono::seconds older_than) {
  if (!f.marker) return f.info.age >= kSetupGrace;
  return f.info.orphaned() || f.info.age >= older_than;
}

// Waits until `pidfd` is readable (its process exited) or `limit` passes.
void wait_for_exit(int pidfd, std::chrono::milliseconds limit) {
  pollfd p{pidfd, POLLIN, 0};
  const auto deadline = Clock::now() + limit;
  while (Clock::now() < deadline) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const int r = ::poll(&p, 1, static_cast<int>(left.count()) + 1);
    if (r > 0 || (r < 0 && errno != EINTR)) return;
  }
}

// SIGKILL to the runner while the marker's pid still names it (its start time
// is checked after the pidfd is open, so the pidfd holds that very process).
void kill_runner(const OwnerMarker& m) {
  UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, m.runner_pid, 0)));
  if (!pidfd || !is_running(m.runner_pid, m.runner_start)) return;
  if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) != 0) return;
  wait_for_exit(pidfd.get(), kRunnerExit);
}

// The runner's call supervisors are in its process group: with the runner gone
// they kill their calls' trees (each call is a session of its own) and exit.
// What is still in the group after that is killed. The group id is the
// runner's pid; a pid that now names another process means the group is gone
// and the id may be someone else's.
void end_group(const OwnerMarker& m) {
  if (auto st = read_proc_stat(m.runner_pid); st && st->start_time != m.runner_start) return;
  const auto deadline = Clock::now() + kGroupExit;
  while (!group_members(m.runner_pid).empty() && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!group_members(m.runner_pid).empty()) ::kill(-m.runner_pid, SIGKILL);
}

Status reap_one(int root_fd, const std::string& root, const Found& f) {
  if (f.marker) {
    kill_runner(*f.marker);
    end_group(*f.marker);
  }
  RF_TRY(remove_tree_at(root_fd, f.info.id, root + "/" + f.info.id));
  return remove_owner_marker(root_fd, f.info.id);
}

Result<UniqueFd> open_root(const std::string& root) {
  UniqueFd fd(::open(root.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd && errno != ENOENT) return sys_error("scratch root " + root);
  return fd;
}

}  // namespace

Result<std::vector<SandboxInfo>> list_local_sandboxes(const std::string& root) {
  auto root_fd = open_root(root);
  if (!root_fd) return root_fd.take_error();
  std::vector<SandboxInfo> out;
  if (!*root_fd) return out;  // no root: no sandbox was ever made here
  auto names = names_in(root_fd->get(), root);
  if (!names) return names.take_error();
  for (const auto& name : *names) {
    if (is_id(name) && is_dir(root_fd->get(), name))
      out.push_back(describe(root_fd->get(), name).info);
  }
  return out;
}

Result<std::vector<SandboxInfo>> reap_local_sandboxes(const std::string& root,
                                                      std::chrono::seconds older_than,
                                                      bool dry_run) {
  auto root_fd = open_root(root);
  if (!root_fd) return root_fd.take_error();
  std::vector<SandboxInfo> reaped;
  if (!*root_fd) return reaped;
  const int fd = root_fd->get();
  auto names = names_in(fd, root);
  if (!names) return names.take_error();
  std::string failed;
  for (const auto& name : *names) {
    if (!is_id(name) || !is_dir(fd, name)) continue;
    const Found f = describe(fd, name);
    if (!should_reap(f, older_than)) continue;
    if (!dry_run) {
      if (auto s = reap_one(fd, root, f); !s) {
        failed += (failed.empty() ? "" : "; ") + s.error().to_string();
        continue;
      }
    }
    reaped.push_back(f.info);
  }
  // A marker outlives its directory only when a destroy or reap was cut
  // short between the two removals. Its directory is looked up now, not in
  // `names`: a sandbox created meanwhile made its directory before its marker.
  for (const auto& name : *names) {
    const std::string id = marker_id(name);
    if (!dry_run && !id.empty() && !is_dir(fd, id)) (void)remove_owner_marker(fd, id);
  }
  if (!failed.empty()) return make_error("reap", failed);
  return reaped;
}

}  // namespace rf::local
