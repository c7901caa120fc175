// libFuzzer target for the tar archives a Docker daemon returns from GET
// /containers/{id}/archive (untrusted when the daemon is remote): read_tar
// never crashes, never returns more content than its limit, and what it
// returns survives a write_tar/read_tar round trip.
//
//   CC=clang CXX=clang++ cmake -S . -B build-fuzz -DRF_FUZZ=ON -DRF_TESTS=OFF -DRF_BENCH=OFF
//   make -C build-fuzz docker_tar_fuzz && build-fuzz/fuzz/docker_tar_fuzz -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "docker_api/tar_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kLimit = 64 << 10;
  const std::string archive(reinterpret_cast<const char*>(data), size);
  auto entries = rf::docker::read_tar(archive, kLimit);
  if (!entries.ok()) return 0;
  uint64_t total = 0;
  for (const auto& e : *entries) {
    if (e.directory && !e.content.empty()) std::abort();
    if (e.mode > 07777) std::abort();
    total += e.content.size();
  }
  if (total > kLimit) std::abort();
  // Entries with a usable path go back into a tar and come out the same.
  std::vector<rf::docker::TarEntry> usable;
  for (const auto& e : *entries) {
    if (!e.path.empty() && e.path.find('\0') == std::string::npos) usable.push_back(e);
  }
  auto again = rf::docker::write_tar(usable);
  if (!again.ok()) return 0;  // a path libarchive will not write (too odd): fine
  auto back = rf::docker::read_tar(*again, kLimit);
  if (!back.ok() || back->size() != usable.size()) std::abort();
  for (size_t i = 0; i < usable.size(); ++i) {
    const auto& a = usable[i];
    const auto& b = (*back)[i];
    if (a.content != b.content || a.directory != b.directory || a.mode != b.mode) std::abort();
  }
  return 0;
}
