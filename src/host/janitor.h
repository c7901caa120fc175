// The janitor (host side): a small process forked once per host process that
// outlives it only to clean up. The sandbox's processes die with their creator
// (parent-death signal, then the PID namespace), its mounts with its mount
// namespace, its uid slot with its socket; the cgroup directories are the one
// trace the kernel leaves, so the janitor is told of each one and removes those
// still listed when its pipe from the host process reaches EOF (kill -9
// included).
#pragma once

#include <string>

#include "core/result.h"

namespace rf::host {

class Janitor {
 public:
  // The process-wide janitor, forked on first use.
  static Result<Janitor*> get();
  void track(const std::string& dir);
  void untrack(const std::string& dir);

 private:
  explicit Janitor(int fd) : fd_(fd) {}
  void send(char op, const std::string& dir);
  int fd_;
};

}  // namespace rf::host
