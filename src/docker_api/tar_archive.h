// In-memory tar archives for the Docker archive API (PUT/GET
// /containers/{id}/archive), written and read with libarchive.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf::docker {

struct TarEntry {
  std::string path;      // relative, no leading "/": "ringfence/ringfence-tool-runner"
  std::string content;   // regular files
  uint32_t mode = 0644;  // permission bits
  bool directory = false;
  uint32_t uid = 0, gid = 0;
};

// A POSIX (pax) tar of the entries, in order.
Result<std::string> write_tar(const std::vector<TarEntry>& entries);

// The entries of a tar (regular files and directories; others are skipped).
// Errors name the entry. At most `max_bytes` of content in all.
Result<std::vector<TarEntry>> read_tar(const std::string& archive, uint64_t max_bytes);

}  // namespace rf::docker
