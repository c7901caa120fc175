#include "artifact/workspace.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <set>

#include "core/unique_fd.h"
#include "docker_api/tar_archive.h"

namespace rf::artifact {
namespace {

constexpr size_t kMaxEntries = 100'000;

std::string join(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  return a + "/" + b;
}

Status walk(Sandbox& sb, const std::string& root, const std::string& rel, uint64_t max_bytes,
            const std::vector<std::string>& exclude, Workspace* ws) {
  const std::string dir = rel.empty() ? root : root + "/" + rel;
  auto list = sb.list_dir(dir);
  if (!list) return make_error("workspace " + dir, list.error().to_string());
  for (const auto& e : *list) {
    if (e.name.empty() || e.name == "." || e.name == ".." ||
        e.name.find('/') != std::string::npos) {
      continue;
    }
    if (rel.empty() && std::find(exclude.begin(), exclude.end(), e.name) != exclude.end()) continue;
    const std::string path = join(rel, e.name);
    if (ws->entries.size() >= kMaxEntries) {
      return make_error("workspace " + root, "more than 100,000 entries (at " + path + ")");
    }
    if (e.type == "symlink") {
      ++ws->symlinks_skipped;
      continue;
    }
    if (e.type == "dir") {
      ws->entries.push_back({path, true, "", e.mode & 0777});
      RF_TRY(walk(sb, root, path, max_bytes, exclude, ws));
      continue;
    }
    if (e.type != "file") {
      ++ws->others_skipped;
      continue;
    }
    if (ws->bytes + static_cast<uint64_t>(e.size) > max_bytes) {
      return make_error("workspace " + root, "over the artifact's limit of " +
                                                 std::to_string(max_bytes) + " bytes at " + path);
    }
    auto content = sb.read_file(root + "/" + path);
    if (!content) return make_error("workspace " + root + "/" + path, content.error().to_string());
    ws->bytes += content->size();
    if (ws->bytes > max_bytes) {
      return make_error("workspace " + root, "over the artifact's limit of " +
                                                 std::to_string(max_bytes) + " bytes at " + path);
    }
    ++ws->files;
    ws->entries.push_back({path, false, std::move(*content), e.mode & 0777});
  }
  return ok_status();
}

Status check_rel(const std::string& rel) {
  if (rel.empty() || rel[0] == '/') {
    return make_error("artifact path \"" + rel + "\"", "must be relative to the artifact root");
  }
  size_t start = 0;
  for (size_t i = 0; i <= rel.size(); ++i) {
    if (i == rel.size() || rel[i] == '/') {
      const std::string part = rel.substr(start, i - start);
      if (part.empty() || part == "." || part == "..") {
        return make_error("artifact path \"" + rel + "\"",
                          "no empty, '.' or '..' parts: it stays under the artifact root");
      }
      start = i + 1;
    }
  }
  for (unsigned char c : rel) {
    if (c < 0x20 || c == 0x7f) return make_error("artifact path", "control bytes are not allowed");
  }
  return ok_status();
}

std::string random_suffix() {
  unsigned char b[6];
  randombytes_buf(b, sizeof b);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : b) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  return out;
}

// Opens (making) each directory of `rel` under `root_fd`, never following a symlink.
Result<UniqueFd> open_dirs(int root_fd, const std::string& rel, const std::string& what) {
  UniqueFd cur(::dup(root_fd));
  if (!cur) return sys_error("dup");
  size_t start = 0;
  for (size_t i = 0; i <= rel.size(); ++i) {
    if (i != rel.size() && rel[i] != '/') continue;
    const std::string part = rel.substr(start, i - start);
    start = i + 1;
    if (part.empty()) continue;
    if (::mkdirat(cur.get(), part.c_str(), 0755) != 0 && errno != EEXIST) {
      return sys_error(what + ": mkdir " + part);
    }
    UniqueFd next(::openat(cur.get(), part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) return sys_error(what + ": " + part + " (a symlink or not a directory?)");
    cur = std::move(next);
  }
  return cur;
}

// fsync of the directory `dir_fd` (an O_PATH descriptor) names: its entries on disk.
Status sync_dir(int dir_fd, const std::string& what) {
  UniqueFd d(::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!d || ::fsync(d.get()) != 0) return sys_error(what);
  return ok_status();
}

}  // namespace

Result<Workspace> read_workspace(Sandbox& sandbox, const std::string& root, uint64_t max_bytes,
                                 const std::vector<std::string>& exclude) {
  Workspace ws;
  ws.root = root;
  auto st = sandbox.stat(root);
  if (!st) return make_error("workspace " + root, st.error().to_string());
  if (st->type != "dir") return make_error("workspace " + root, "not a directory");
  RF_TRY(walk(sandbox, root, "", max_bytes, exclude, &ws));
  return ws;
}

Result<std::string> workspace_tar(const Workspace& ws) {
  std::vector<docker::TarEntry> entries;
  entries.reserve(ws.entries.size());
  for (const auto& e : ws.entries) {
    docker::TarEntry t;
    t.path = e.directory ? e.path + "/" : e.path;
    t.directory = e.directory;
    t.content = e.content;
    t.mode = e.mode == 0 ? (e.directory ? 0755 : 0644) : e.mode;
    entries.push_back(std::move(t));
  }
  return docker::write_tar(entries);
}

Result<nlohmann::json> copy_to_local(const Workspace& ws, const std::string& root,
                                     const std::string& project, const std::string& in_project) {
  RF_TRY(check_rel(in_project));
  if (project.empty() || project.find('/') != std::string::npos) {
    return make_error("artifact dest local",
                      "the run's project \"" + project + "\" cannot name a directory");
  }
  RF_TRY(check_rel(project));
  if (root.empty()) {
    return make_error("artifact dest local",
                      "this worker has no --artifact-root (worker start --artifact-root DIR)");
  }
  const std::string rel = project + "/" + in_project;
  const std::string what = "artifact " + root + "/" + rel;
  UniqueFd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd) return sys_error("artifact root " + root);
  const size_t slash = rel.rfind('/');
  const std::string parent = slash == std::string::npos ? "" : rel.substr(0, slash);
  const std::string name = slash == std::string::npos ? rel : rel.substr(slash + 1);
  auto dir = open_dirs(root_fd.get(), parent, what);
  if (!dir) return dir.take_error();
  const std::string tmp = "." + name + ".rf-new-" + random_suffix();
  if (::mkdirat(dir->get(), tmp.c_str(), 0755) != 0) return sys_error(what + ": mkdir");
  auto cleanup = [&](const std::string& n) {
    std::error_code ec;
    std::filesystem::remove_all("/proc/self/fd/" + std::to_string(dir->get()) + "/" + n, ec);
  };
  UniqueFd tmp_fd(::openat(dir->get(), tmp.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!tmp_fd) {
    cleanup(tmp);
    return sys_error(what + ": open " + tmp);
  }
  // Every directory of the new tree, to be synced before it goes into place.
  std::set<std::string> dirs = {""};
  for (const auto& e : ws.entries) {
    const size_t s = e.path.rfind('/');
    const std::string parent_dir = s == std::string::npos ? "" : e.path.substr(0, s);
    dirs.insert(parent_dir);
    auto sub = open_dirs(tmp_fd.get(), parent_dir, what);
    if (!sub) {
      cleanup(tmp);
      return sub.take_error();
    }
    const std::string leaf = s == std::string::npos ? e.path : e.path.substr(s + 1);
    if (e.directory) {
      if (::mkdirat(sub->get(), leaf.c_str(), 0755) != 0 && errno != EEXIST) {
        auto err = sys_error(what + ": mkdir " + e.path);
        cleanup(tmp);
        return err;
      }
      dirs.insert(e.path);
      continue;
    }
    UniqueFd f(::openat(sub->get(), leaf.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        (e.mode & 0777) | 0600));
    if (!f) {
      auto err = sys_error(what + ": create " + e.path);
      cleanup(tmp);
      return err;
    }
    size_t off = 0;
    while (off < e.content.size()) {
      const ssize_t n = ::write(f.get(), e.content.data() + off, e.content.size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        auto err = sys_error(what + ": write " + e.path);
        cleanup(tmp);
        return err;
      }
      off += static_cast<size_t>(n);
    }
    // On disk before the rename: after a crash the new copy is whole, never empty.
    if (::fsync(f.get()) != 0) {
      auto err = sys_error(what + ": fsync " + e.path);
      cleanup(tmp);
      return err;
    }
  }
  for (const auto& d : dirs) {
    auto sub = open_dirs(tmp_fd.get(), d, what);
    Status synced = sub ? sync_dir(sub->get(), what + ": fsync " + (d.empty() ? tmp : d))
                        : Status(sub.take_error());
    if (!synced) {
      cleanup(tmp);
      return synced.take_error();
    }
  }
  // Into place. An existing target swaps with the new copy in one step
  // (RENAME_EXCHANGE), so the target is never missing; the old copy, now
  // under the temporary name, goes after. Only where the file system cannot
  // exchange (EINVAL) does the old copy move aside first.
  struct stat existing {};
  const bool exists = ::fstatat(dir->get(), name.c_str(), &existing, AT_SYMLINK_NOFOLLOW) == 0;
  if (exists) {
    if (::renameat2(dir->get(), tmp.c_str(), dir->get(), name.c_str(), RENAME_EXCHANGE) == 0) {
      auto synced = sync_dir(dir->get(), what + ": fsync its directory");
      cleanup(tmp);
      if (!synced) return synced.take_error();
      return nlohmann::json{{"path", root + "/" + rel}, {"files", ws.files}, {"bytes", ws.bytes}};
    }
    if (errno != EINVAL && errno != ENOSYS) {
      auto err = sys_error(what + ": exchange the new copy with the old");
      cleanup(tmp);
      return err;
    }
  }
  std::string old;
  if (exists) {
    old = "." + name + ".rf-old-" + random_suffix();
    if (::renameat(dir->get(), name.c_str(), dir->get(), old.c_str()) != 0) {
      auto err = sys_error(what + ": move the old copy aside");
      cleanup(tmp);
      return err;
    }
  }
  if (::renameat(dir->get(), tmp.c_str(), dir->get(), name.c_str()) != 0) {
    auto err = sys_error(what + ": rename into place");
    if (!old.empty()) ::renameat(dir->get(), old.c_str(), dir->get(), name.c_str());
    cleanup(tmp);
    return err;
  }
  auto synced = sync_dir(dir->get(), what + ": fsync its directory");
  if (!old.empty()) cleanup(old);
  if (!synced) return synced.take_error();
  return nlohmann::json{{"path", root + "/" + rel}, {"files", ws.files}, {"bytes", ws.bytes}};
}

}  // namespace rf::artifact
