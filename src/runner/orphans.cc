#include "runner/orphans.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "runner/supervisor.h"

namespace rf::runner {

namespace {

// The pipe inodes among `pid`'s descriptors ("pipe:[N]").
std::vector<ino_t> pipes_held_by(pid_t pid) {
  std::vector<ino_t> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char target[64];
    const ssize_t n = ::readlinkat(::dirfd(d), e->d_name, target, sizeof target - 1);
    if (n <= 6) continue;
    target[n] = '\0';
    if (std::string_view(target, 6) != "pipe:[") continue;
    out.push_back(static_cast<ino_t>(std::strtoull(target + 6, nullptr, 10)));
  }
  ::closedir(d);
  return out;
}

}  // namespace

bool OrphanLedger::open() {
  // /proc must be this PID namespace's own, or the pids it lists are not ours.
  char self[32] = {};
  if (::readlink("/proc/self", self, sizeof self - 1) <= 0 ||
      std::string(self) != std::to_string(::getpid())) {
    return false;
  }
  children_.reset(::open("/proc/thread-self/children", O_RDONLY | O_CLOEXEC));
  return static_cast<bool>(children_);
}

void OrphanLedger::sweep(const std::vector<DirectCall>& live, const PipesOf& pipes_of) {
  if (!children_) return;
  // One pread from the start regenerates the list: no open and close per sweep.
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::pread(children_.get(), buf, sizeof buf, static_cast<off_t>(text.size()));
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
    if (static_cast<size_t>(n) < sizeof buf) break;
  }
  const char* p = text.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    const long v = std::strtol(p, &end, 10);
    if (end == p) break;
    p = end;
    const auto pid = static_cast<pid_t>(v);
    const bool command = std::any_of(live.begin(), live.end(), [&](const DirectCall& c) {
      return !c.command_ended && c.pgid == pid;
    });
    if (pid <= 0 || command || orphans_.count(pid) != 0) continue;
    Orphan o;
    o.pgid = ::getpgid(pid);
    o.calls = owners(pid, o.pgid, live, pipes_of);
    orphans_.emplace(pid, std::move(o));
  }
}

std::vector<uint32_t> OrphanLedger::owners(pid_t pid, pid_t pgid,
                                           const std::vector<DirectCall>& live,
                                           const PipesOf& pipes_of) const {
  if (pgid > 0) {
    for (const DirectCall& c : live) {
      if (c.pgid == pgid) return {c.id};
    }
    for (const auto& [other, o] : orphans_) {
      if (o.pgid == pgid) return o.calls;
    }
  }
  if (live.size() > 1) {
    const std::vector<ino_t> held = pipes_held_by(pid);
    for (const DirectCall& c : live) {
      for (ino_t ino : pipes_of(c.id)) {
        if (std::find(held.begin(), held.end(), ino) != held.end()) return {c.id};
      }
    }
  }
  std::vector<uint32_t> all;
  for (const DirectCall& c : live) all.push_back(c.id);
  return all;
}

void OrphanLedger::kill_settled(const std::vector<DirectCall>& live) {
  for (auto& [pid, o] : orphans_) {
    if (o.killed) continue;
    std::erase_if(o.calls, [&](uint32_t id) {
      return std::none_of(live.begin(), live.end(),
                          [&](const DirectCall& c) { return c.id == id; });
    });
    const bool settled = std::all_of(o.calls.begin(), o.calls.end(), [&](uint32_t id) {
      return std::any_of(live.begin(), live.end(),
                         [&](const DirectCall& c) { return c.id == id && c.command_ended; });
    });
    if (!settled) continue;
    kill_tree(pid);
    o.killed = true;
  }
}

bool OrphanLedger::holds(uint32_t call) const {
  return std::any_of(orphans_.begin(), orphans_.end(), [&](const auto& entry) {
    const Orphan& o = entry.second;
    const bool of_call = std::find(o.calls.begin(), o.calls.end(), call) != o.calls.end();
    return of_call && (o.calls.size() == 1 || o.killed);
  });
}

void OrphanLedger::kill_all() {
  for (auto& [pid, o] : orphans_) {
    kill_tree(pid);
    o.killed = true;
  }
}

}  // namespace rf::runner
