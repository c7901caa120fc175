#include "docker/tar_archive.h"

#include <archive.h>
#include <archive_entry.h>

#include <memory>

namespace rf::docker {
namespace {

struct ArchiveWriteFree {
  void operator()(archive* a) const { archive_write_free(a); }
};
struct ArchiveReadFree {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct EntryFree {
  void operator()(archive_entry* e) const { archive_entry_free(e); }
};

la_ssize_t append(archive*, void* out, const void* buf, size_t n) {
  static_cast<std::string*>(out)->append(static_cast<const char*>(buf), n);
  return static_cast<la_ssize_t>(n);
}

}  // namespace

Result<std::string> write_tar(const std::vector<TarEntry>& entries) {
  std::string out;
  std::unique_ptr<archive, ArchiveWriteFree> a(archive_write_new());
  if (!a) return make_error("tar", "archive_write_new failed");
  archive_write_set_format_pax_restricted(a.get());
  archive_write_set_bytes_in_last_block(a.get(), 1);
  if (archive_write_open(a.get(), &out, nullptr, append, nullptr) != ARCHIVE_OK) {
    return make_error("tar", archive_error_string(a.get()));
  }
  for (const auto& e : entries) {
    std::unique_ptr<archive_entry, EntryFree> entry(archive_entry_new());
    archive_entry_set_pathname(entry.get(), e.path.c_str());
    archive_entry_set_filetype(entry.get(), e.directory ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(entry.get(), e.mode & 07777);
    archive_entry_set_uid(entry.get(), e.uid);
    archive_entry_set_gid(entry.get(), e.gid);
    archive_entry_set_size(entry.get(),
                           e.directory ? 0 : static_cast<la_int64_t>(e.content.size()));
    archive_entry_set_mtime(entry.get(), 0, 0);
    if (archive_write_header(a.get(), entry.get()) != ARCHIVE_OK) {
      return make_error("tar " + e.path, archive_error_string(a.get()));
    }
    if (!e.directory && !e.content.empty() &&
        archive_write_data(a.get(), e.content.data(), e.content.size()) !=
            static_cast<la_ssize_t>(e.content.size())) {
      return make_error("tar " + e.path, archive_error_string(a.get()));
    }
  }
  if (archive_write_close(a.get()) != ARCHIVE_OK) {
    return make_error("tar", archive_error_string(a.get()));
  }
  return out;
}

Result<std::vector<TarEntry>> read_tar(const std::string& data, uint64_t max_bytes) {
  std::unique_ptr<archive, ArchiveReadFree> a(archive_read_new());
  if (!a) return make_error("tar", "archive_read_new failed");
  archive_read_support_format_tar(a.get());
  if (archive_read_open_memory(a.get(), data.data(), data.size()) != ARCHIVE_OK) {
    return make_error("tar", archive_error_string(a.get()));
  }
  std::vector<TarEntry> out;
  uint64_t total = 0;
  for (;;) {
    archive_entry* entry = nullptr;
    const int rc = archive_read_next_header(a.get(), &entry);
    if (rc == ARCHIVE_EOF) break;
    if (rc != ARCHIVE_OK && rc != ARCHIVE_WARN) {
      const char* msg = archive_error_string(a.get());
      return make_error("tar entry " + std::to_string(out.size()), msg ? msg : "unreadable");
    }
    const char* name = archive_entry_pathname(entry);
    TarEntry e;
    e.path = name ? name : "";
    const auto type = archive_entry_filetype(entry);
    if (type != AE_IFREG && type != AE_IFDIR) continue;
    e.directory = type == AE_IFDIR;
    e.mode = static_cast<uint32_t>(archive_entry_perm(entry));
    e.uid = static_cast<uint32_t>(archive_entry_uid(entry));
    e.gid = static_cast<uint32_t>(archive_entry_gid(entry));
    if (!e.directory) {
      char buf[65536];
      for (;;) {
        const la_ssize_t n = archive_read_data(a.get(), buf, sizeof buf);
        if (n < 0) return make_error("tar " + e.path, archive_error_string(a.get()));
        if (n == 0) break;
        total += static_cast<uint64_t>(n);
        if (total > max_bytes) {
          return make_error("tar " + e.path,
                            "more than " + std::to_string(max_bytes) + " bytes of content");
        }
        e.content.append(buf, static_cast<size_t>(n));
      }
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace rf::docker
