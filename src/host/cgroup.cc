// Layout detection, the v1/v2 dispatch and the helpers both versions share.
#include "host/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <iterator>
#include <set>
#include <sstream>
#include <thread>

#include "core/io.h"
#include "core/unique_fd.h"
#include "host/cgroup_internal.h"

namespace rf::host {

namespace {

using cgroup_internal::kV1Controllers;
constexpr const char* kNeededV2[] = {"memory", "pids", "cpu"};

struct CgroupMounts {
  std::string v2_root;                           // first cgroup2 mount, "" if none
  std::map<std::string, std::string> v1_mounts;  // first mount of each controller
};

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool octal = s[i] == '\\' && i + 3 < s.size() &&
                       std::all_of(s.begin() + i + 1, s.begin() + i + 4,
                                   [](char c) { return c >= '0' && c <= '7'; });
    if (octal) {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

// One line: "id parent maj:min root mount_point opts [optional...] - fstype source superopts".
void parse_mount_line(std::string_view line, CgroupMounts* mounts) {
  const std::vector<std::string> f = split(line, ' ');
  const auto dash = std::find(f.begin(), f.end(), "-");
  if (f.size() < 5 || dash == f.end() || f.end() - dash < 4) return;
  const std::string& fstype = dash[1];
  const std::string mount_point = unescape_octal(f[4]);
  if (fstype == "cgroup2") {
    if (mounts->v2_root.empty()) mounts->v2_root = mount_point;
  } else if (fstype == "cgroup") {
    for (const std::string& opt : split(dash[3], ',')) {
      if (std::find(std::begin(kV1Controllers), std::end(kV1Controllers), opt) !=
              std::end(kV1Controllers) ||
          std::find(std::begin(cgroup_internal::kV1Optional),
                    std::end(cgroup_internal::kV1Optional),
                    opt) != std::end(cgroup_internal::kV1Optional)) {
        mounts->v1_mounts.emplace(opt, mount_point);
      }
    }
  }
}

CgroupMounts parse_mountinfo(std::string_view text) {
  CgroupMounts mounts;
  for (const std::string& line : split(text, '\n')) parse_mount_line(line, &mounts);
  return mounts;
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : " ") + p;
  return out;
}

std::vector<std::string> missing_v2(const std::string& controllers_text) {
  const std::set<std::string> have = cgroup_internal::words(controllers_text);
  std::vector<std::string> missing;
  for (const char* c : kNeededV2) {
    if (!have.contains(c)) missing.emplace_back(c);
  }
  return missing;
}

std::vector<std::string> missing_v1(const CgroupMounts& mounts) {
  std::vector<std::string> missing;
  for (const char* c : kV1Controllers) {
    if (!mounts.v1_mounts.contains(c)) missing.emplace_back(c);
  }
  return missing;
}

Result<CgroupLayout> choose_layout(const CgroupMounts& mounts, const std::string& v2_controllers) {
  CgroupLayout layout;
  if (!mounts.v2_root.empty() && missing_v2(v2_controllers).empty()) {
    layout.version = CgroupVersion::kV2;
    layout.v2_root = mounts.v2_root;
    return layout;
  }
  const std::vector<std::string> missing = missing_v1(mounts);
  if (missing.empty()) {
    layout.version = CgroupVersion::kV1;
    layout.v1_mounts = mounts.v1_mounts;
    return layout;
  }
  // A host with v1 controllers is fixed by mounting the missing v1 ones (the
  // kernel cannot offer them on v2 while v1 holds them); otherwise report v2.
  if (!mounts.v1_mounts.empty()) {
    return make_error("cgroup v1", "controllers not mounted: " + join(missing));
  }
  if (!mounts.v2_root.empty()) {
    return make_error("cgroup v2 at " + mounts.v2_root,
                      "controllers not available: " + join(missing_v2(v2_controllers)));
  }
  return make_error("cgroups", "no cgroup file system mounted");
}

// Text-only detection: a controller no v1 hierarchy holds is taken to be on v2.
std::string controllers_not_on_v1(const CgroupMounts& mounts) {
  std::vector<std::string> free;
  for (const char* c : kNeededV2) {
    if (!mounts.v1_mounts.contains(c)) free.emplace_back(c);
  }
  return join(free);
}

bool valid_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

bool valid_parent(const std::string& parent) {
  const auto parts = split(parent, '/');
  return !parts.empty() && parent[0] != '/' && std::all_of(parts.begin(), parts.end(), valid_name);
}

Result<std::vector<std::string>> list_subdirs(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) {
    if (errno == ENOENT) return std::vector<std::string>{};
    return sys_error("opendir " + dir);
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (::fstatat(::dirfd(d.get()), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
      names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<CgroupLayout> detect_cgroup_layout(std::string_view mountinfo,
                                          const V2ControllersReader& v2_controllers) {
  const CgroupMounts mounts = parse_mountinfo(mountinfo);
  const std::string controllers = mounts.v2_root.empty() ? "" : v2_controllers(mounts.v2_root);
  return choose_layout(mounts, controllers);
}

Result<CgroupLayout> detect_cgroup_layout(std::string_view mountinfo) {
  const CgroupMounts mounts = parse_mountinfo(mountinfo);
  return choose_layout(mounts, controllers_not_on_v1(mounts));
}

Result<CgroupLayout> detect_cgroup_layout() {
  auto mountinfo = read_file("/proc/self/mountinfo");
  if (!mountinfo) return mountinfo.take_error();
  return detect_cgroup_layout(*mountinfo, [](const std::string& root) {
    auto text = read_file(root + "/cgroup.controllers");
    return text ? *text : std::string();
  });
}

Result<std::unique_ptr<Cgroup>> create_cgroup(const CgroupLayout& layout, const std::string& parent,
                                              const std::string& name) {
  if (!valid_parent(parent)) return make_error("cgroup parent", "invalid: \"" + parent + "\"");
  if (!valid_name(name)) return make_error("cgroup name", "invalid: \"" + name + "\"");
  if (layout.version == CgroupVersion::kV2) {
    return cgroup_internal::create_cgroup_v2(layout, parent, name);
  }
  return cgroup_internal::create_cgroup_v1(layout, parent, name);
}

Result<std::unique_ptr<Cgroup>> open_cgroup(const CgroupLayout& layout, const std::string& parent,
                                            const std::string& name) {
  if (!valid_parent(parent)) return make_error("cgroup parent", "invalid: \"" + parent + "\"");
  if (!valid_name(name)) return make_error("cgroup name", "invalid: \"" + name + "\"");
  if (layout.version == CgroupVersion::kV2) {
    return cgroup_internal::open_cgroup_v2(layout, parent, name);
  }
  return cgroup_internal::open_cgroup_v1(layout, parent, name);
}

Result<std::vector<std::string>> list_cgroups(const CgroupLayout& layout,
                                              const std::string& parent) {
  if (!valid_parent(parent)) return make_error("cgroup parent", "invalid: \"" + parent + "\"");
  if (layout.version == CgroupVersion::kV2) return list_subdirs(layout.v2_root + "/" + parent);
  const auto memory = layout.v1_mounts.find("memory");
  if (memory == layout.v1_mounts.end()) return make_error("cgroup v1", "memory not mounted");
  return list_subdirs(memory->second + "/" + parent);
}

namespace cgroup_internal {

Status write_value(const std::string& path, std::string_view value, bool fake) {
  const int flags = O_WRONLY | O_CLOEXEC | (fake ? O_CREAT | O_TRUNC : 0);
  UniqueFd fd(::open(path.c_str(), flags, 0644));
  if (!fd) return sys_error("open " + path);
  // One write(): cgroup files take a value per write call.
  const ssize_t n = ::write(fd.get(), value.data(), value.size());
  if (n < 0) return sys_error("write " + path);
  if (static_cast<size_t>(n) != value.size()) return make_error("write " + path, "short write");
  return ok_status();
}

std::set<std::string> words(std::string_view text) {
  std::istringstream in{std::string(text)};
  return {std::istream_iterator<std::string>(in), std::istream_iterator<std::string>()};
}

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

Result<uint64_t> parse_number(const std::string& path, std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "max") return UINT64_MAX;
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) {
    return make_error(path, "not a number: \"" + std::string(text) + "\"");
  }
  return v;
}

Result<std::string> pread_text(int fd, const std::string& path) {
  char buf[1024];  // the longest, v2's memory.events, is ~100 bytes
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
    if (n >= 0) return std::string(buf, static_cast<size_t>(n));
    if (errno != EINTR) return sys_error("read " + path);
  }
}

std::optional<std::string> read_trimmed(const std::string& path) {
  auto text = read_file(path);
  if (!text) return std::nullopt;
  std::string v = std::move(*text);
  while (!v.empty() && (v.back() == '\n' || v.back() == ' ')) v.pop_back();
  return v;
}

Result<std::string> CounterFile::text() const {
  if (!keep_open_) return read_kernel_file(path_);
  std::call_once(opened_, [this] {
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd_) open_errno_ = errno;
  });
  if (!fd_) return sys_error("open " + path_, open_errno_);
  return pread_text(fd_.get(), path_);
}

Result<uint64_t> CounterFile::number() const {
  auto text = this->text();
  if (!text) return text.take_error();
  return parse_number(path_, *text);
}

Result<uint64_t> CounterFile::keyed(std::string_view key) const {
  auto text = this->text();
  if (!text) return text.take_error();
  for (const std::string& line : split(*text, '\n')) {
    const size_t space = line.find(' ');
    if (space != std::string::npos && std::string_view(line).substr(0, space) == key) {
      return parse_number(path_, std::string_view(line).substr(space + 1));
    }
  }
  return uint64_t{0};
}

Status store(uint64_t* out, Result<uint64_t> value) {
  if (!value) return value.take_error();
  *out = *value;
  return ok_status();
}

Result<std::vector<pid_t>> read_procs(const std::vector<std::string>& dirs) {
  std::set<pid_t> pids;
  for (const auto& dir : dirs) {
    const std::string path = dir + "/cgroup.procs";
    auto text = read_file(path);
    if (!text) {
      if (text.error().sys_errno == ENOENT) continue;
      return text.take_error();
    }
    for (const std::string& line : split(*text, '\n')) {
      auto pid = parse_number(path, line);
      if (!pid) return pid.take_error();
      pids.insert(static_cast<pid_t>(*pid));
    }
  }
  return std::vector<pid_t>(pids.begin(), pids.end());
}

Status kill_until_empty(const std::vector<std::string>& dirs, const std::string& kill_file,
                        bool fake) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    auto pids = read_procs(dirs);
    if (!pids) return pids.take_error();
    if (pids->empty()) return ok_status();
    if (std::chrono::steady_clock::now() >= deadline) {
      return make_error("kill " + dirs.front(),
                        std::to_string(pids->size()) + " processes still there after 1s");
    }
    if (!kill_file.empty()) {
      RF_TRY(write_value(kill_file, "1", fake));
    } else {
      for (pid_t pid : *pids) {
        if (::kill(pid, SIGKILL) != 0 && errno != ESRCH) {
          return sys_error("kill " + std::to_string(pid));
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Status make_dirs(const std::string& root, const std::string& rel) {
  std::string path = root;
  for (const std::string& part : split(rel, '/')) {
    path += "/" + part;
    if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) return sys_error("mkdir " + path);
  }
  return ok_status();
}

Status make_dir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) != 0) return sys_error("mkdir " + path);
  return ok_status();
}

namespace {

// Fake trees only: a real cgroup directory's files go with its rmdir.
Status delete_files(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), ::closedir);
  if (!d) return errno == ENOENT ? ok_status() : Status(sys_error("opendir " + dir));
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    if (::unlinkat(::dirfd(d.get()), e->d_name, 0) != 0 && errno != EISDIR) {
      return sys_error("unlink " + dir + "/" + name);
    }
  }
  return ok_status();
}

}  // namespace

Status remove_dir(const std::string& dir, bool fake) {
  if (fake) RF_TRY(delete_files(dir));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return ok_status();
    if (errno != EBUSY || std::chrono::steady_clock::now() >= deadline) {
      return sys_error("rmdir " + dir);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status remove_dirs(const std::vector<std::string>& dirs, bool fake) {
  Status first;
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    if (auto s = remove_dir(*it, fake); !s && first.ok()) first = std::move(s);
  }
  return first;
}

std::optional<int64_t> cpu_quota_us(double cpus) {
  if (!(cpus > 0)) return std::nullopt;
  // The kernel rejects quotas under 1ms.
  return std::max<int64_t>(1000, std::llround(cpus * kCpuPeriodUs));
}

}  // namespace cgroup_internal

}  // namespace rf::host
