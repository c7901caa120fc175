// A project's named volumes on this host (issue 41), host side: each one a
// file system of its own, so that its size is a real bound (a write past it
// fails with ENOSPC inside the sandbox, as on a full disk) and nothing a
// sandbox writes there can fill the host. An ext4 image (sparse: it takes
// the host's disk only as it fills) under the worker's state dir,
//   <state>/volumes/<project>/<name>.img
// loop-mounted (nosuid, nodev, noexec off) at
//   <state>/volumes/<project>/<name>/
// when a sandbox first needs it, and kept mounted while this process lives;
// a mount left by a process that died is found and used again. The image's
// root belongs to host root, which a sandbox's idmapped mount shows as its
// own user (host/idmapped_tree.h).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "core/result.h"

namespace rf::host {

class VolumeDisks {
 public:
  explicit VolumeDisks(std::string state_dir) : root_(std::move(state_dir) + "/volumes") {}
  // Unmounts what this process mounted.
  ~VolumeDisks();
  VolumeDisks(const VolumeDisks&) = delete;
  VolumeDisks& operator=(const VolumeDisks&) = delete;

  // The directory the volume's file system is mounted at: made (mkfs.ext4
  // of `size_bytes`) on its first use, mounted if it is not.
  Result<std::string> mounted(const std::string& project, const std::string& name,
                              uint64_t size_bytes);
  // Unmounts it and removes its image: its data is gone.
  Status remove(const std::string& project, const std::string& name);
  // Whether this host has what volumes need (mkfs.ext4, loop devices), and why not.
  static Status available();

 private:
  std::string image_of(const std::string& project, const std::string& name) const;
  std::string dir_of(const std::string& project, const std::string& name) const;

  std::string root_;
  std::mutex mu_;
  std::map<std::string, bool> mounted_;  // dir -> mounted by this process
};

}  // namespace rf::host
