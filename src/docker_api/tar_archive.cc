// read_tar, with libarchive (write_tar is tar_write.cc).
#include "docker_api/tar_archive.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

namespace rf::docker {
namespace {

struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

// libarchive's last error, never a null pointer.
std::string why(archive* a, const char* fallback = "failed") {
  const char* m = archive_error_string(a);
  return m != nullptr && *m != '\0' ? std::string(m) : std::string(fallback);
}

}  // namespace

Result<std::vector<TarEntry>> read_tar(const std::string& data, uint64_t max_bytes) {
  std::unique_ptr<archive, ArchiveReadFree> a(archive_read_new());
  if (!a) return make_error("tar", "archive_read_new failed");
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_none(a.get());
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return make_error("tar", why(a.get()));
  }
  std::vector<TarEntry> out;
  std::string last;  // the path of the last entry read, to place a bad header
  uint64_t total = 0;
  for (size_t index = 0;; ++index) {
    archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(a.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {  // ARCHIVE_RETRY too: a damaged header
      std::string where = "tar entry " + std::to_string(index);
      if (!last.empty()) where += " (after \"" + last + "\")";
      return make_error(where, why(a.get(), "unreadable header"));
    }
    const char* name = archive_entry_pathname(entry);
    TarEntry e;
    e.path = name != nullptr ? name : "";
    last = e.path;
    const std::string where = "tar entry \"" + e.path + "\"";
    const auto type = archive_entry_filetype(entry);
    if (type != AE_IFREG && type != AE_IFDIR) continue;  // links, devices: skipped
    e.directory = type == AE_IFDIR;
    // pax and docker write "dir/": the entry is "dir", as it was written.
    while (e.directory && e.path.size() > 1 && e.path.back() == '/') e.path.pop_back();
    e.mode = static_cast<uint32_t>(archive_entry_perm(entry)) & 07777;
    e.uid = static_cast<uint32_t>(archive_entry_uid(entry));
    e.gid = static_cast<uint32_t>(archive_entry_gid(entry));
    if (!e.directory) {
      // The header says how big it is: refuse before reading when it is too much.
      const la_int64_t size = archive_entry_size_is_set(entry) ? archive_entry_size(entry) : 0;
      if (size < 0 || static_cast<uint64_t>(size) > max_bytes - total) {
        return make_error(
            where, "more than " + std::to_string(max_bytes) + " bytes of content in the archive");
      }
      e.content.reserve(static_cast<size_t>(size));
      char buf[65536];
      for (;;) {
        const la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
        if (n < 0) return make_error(where, why(a.get(), "unreadable data"));
        if (n == 0) break;
        total += static_cast<uint64_t>(n);
        if (total > max_bytes) {
          return make_error(
              where, "more than " + std::to_string(max_bytes) + " bytes of content in the archive");
        }
        e.content.append(buf, static_cast<size_t>(n));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rf::docker
