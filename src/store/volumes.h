// A project's named volumes (issue 41): records of the store, so that every
// serve of the fleet lists the same ones and a sandbox is placed where its
// volumes live. A volume's data is on one host (host/volume_disk.h): the
// host of the worker that first mounted it, recorded then.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "store/store.h"

namespace rf::store {

struct Volume {
  std::string project;
  std::string name;
  uint64_t size_bytes = 0;
  int64_t created_at = 0;  // ms since the epoch
  std::string created_by;
  std::string host_id;  // "" until a worker first made its disk
};

class Volumes {
 public:
  explicit Volumes(Store& store) : store_(store) {}
  // ErrorCode::kConflict (writing nothing) when the project has one of that name.
  Status create(const Volume& volume);
  Result<std::vector<Volume>> list(const std::string& project);
  Result<std::optional<Volume>> find(const std::string& project, const std::string& name);
  // Where its disk was made (once: a host already recorded stays).
  Status set_host(const std::string& project, const std::string& name, const std::string& host);
  // False when there was none.
  Result<bool> remove(const std::string& project, const std::string& name);

 private:
  Store& store_;
};

}  // namespace rf::store
