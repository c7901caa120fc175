// In-memory tar archives for the Docker archive API (PUT/GET
// /containers/{id}/archive): written by our own ustar writer (tar_write.cc),
// read with libarchive (tar_archive.cc). Writing is all the CLI and the worker
// do, so the static `ringfence` links no libarchive (issue 10: libarchive.a
// pulls every archive format, libxml2 and ICU with them).
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
  std::string symlink;  // non-empty: a symbolic link to this target (write_tar only)
};

// A POSIX ustar archive of the entries, in order, ending with two zero blocks.
// Refused, naming the entry: an empty path or one with a NUL byte, a regular
// file whose path ends in "/", a path that no ustar name/prefix split holds
// (at most 100 bytes after the last "/" used, 155 before it), a uid or gid
// above 07777777, a file of 8 GiB or more, a link target over 100 bytes or
// a link with content.
Result<std::string> write_tar(const std::vector<TarEntry>& entries);

// The entries of a tar (regular files and directories; others are skipped).
// Errors name the entry. At most `max_bytes` of content in all.
Result<std::vector<TarEntry>> read_tar(const std::string& archive, uint64_t max_bytes);

}  // namespace rf::docker
