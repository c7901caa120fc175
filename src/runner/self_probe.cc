#include "runner/self_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/io.h"

extern char** environ;

namespace rf::runner {
namespace {

using json = nlohmann::json;

std::string read_or_empty(const char* path) {
  auto text = rf::read_file(path);
  return text ? *text : std::string();
}

// "mnt:[4026531840]" -> 4026531840; 0 when unreadable.
uint64_t ns_inode(const std::string& name) {
  char buf[64];
  const std::string path = "/proc/self/ns/" + name;
  const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* open = std::strchr(buf, '[');
  return open != nullptr ? std::strtoull(open + 1, nullptr, 10) : 0;
}

// The lines of `text`, each without its '\n'. Parsed by hand, not with
// streams: the probe runs once per sandbox, on the way to its report.
std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// The whitespace-separated words of `line`.
std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

json status_fields() {
  static constexpr std::string_view kKeep[] = {"CapInh", "CapPrm",     "CapEff",  "CapBnd",
                                               "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters",
                                               "Uid",    "Gid",        "Groups"};
  json out = json::object();
  const std::string text = read_or_empty("/proc/self/status");
  for (const std::string_view line : lines_of(text)) {
    const auto colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    if (std::find(std::begin(kKeep), std::end(kKeep), key) == std::end(kKeep)) continue;
    std::string_view rest = line.substr(colon + 1);
    const auto b = rest.find_first_not_of(" \t");
    std::string value(b == std::string_view::npos ? std::string_view() : rest.substr(b));
    for (char& c : value)
      if (c == '\t') c = ' ';
    out[std::string(key)] = std::move(value);
  }
  return out;
}

json rlimits() {
  static const std::pair<const char*, int> kLimits[] = {
      {"core", RLIMIT_CORE},   {"nofile", RLIMIT_NOFILE},  {"fsize", RLIMIT_FSIZE},
      {"nproc", RLIMIT_NPROC}, {"as", RLIMIT_AS},          {"cpu", RLIMIT_CPU},
      {"stack", RLIMIT_STACK}, {"memlock", RLIMIT_MEMLOCK}};
  json out = json::object();
  for (const auto& [name, res] : kLimits) {
    rlimit rl{};
    if (::getrlimit(res, &rl) != 0) continue;
    auto v = [](rlim_t x) -> json {
      return x == RLIM_INFINITY ? json("unlimited") : json(static_cast<uint64_t>(x));
    };
    out[name] = {v(rl.rlim_cur), v(rl.rlim_max)};
  }
  return out;
}

// /proc/self/mountinfo: "36 35 98:0 /root /mnt opts opt-fields - fstype source super-opts".
json mounts() {
  json out = json::array();
  const std::string text = read_or_empty("/proc/self/mountinfo");
  for (const std::string_view line : lines_of(text)) {
    const std::vector<std::string_view> w = words_of(line);
    const auto dash = std::find(w.begin(), w.end(), "-");
    if (dash == w.end()) continue;
    const size_t d = static_cast<size_t>(dash - w.begin());
    if (d < 6 || d + 1 >= w.size()) continue;
    json m = json::object();
    m["mount_point"] = w[4];
    m["root"] = w[3];
    m["options"] = w[5];
    m["fstype"] = w[d + 1];
    m["source"] = d + 2 < w.size() ? w[d + 2] : std::string_view();
    m["super_options"] = d + 3 < w.size() ? w[d + 3] : std::string_view();
    out.push_back(std::move(m));
  }
  return out;
}

json interfaces() {
  std::vector<std::string> names;
  const std::string text = read_or_empty("/proc/self/net/dev");
  const std::vector<std::string_view> lines = lines_of(text);
  for (size_t i = 2; i < lines.size(); ++i) {  // after two header lines
    const auto colon = lines[i].find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = lines[i].substr(0, colon);
    const auto b = name.find_first_not_of(' ');
    names.emplace_back(b == std::string_view::npos ? std::string_view() : name.substr(b));
  }
  std::sort(names.begin(), names.end());
  return names;
}

// The cgroup limits as this process sees them, when a cgroup filesystem is
// mounted (docker mounts one with a cgroup namespace; native mounts none, and
// the host reads the files itself).
json cgroup_files() {
  // v2 files at the top, then v1's, each under its controller: named without it.
  static const char* kFiles[] = {"memory.max",
                                 "memory.swap.max",
                                 "pids.max",
                                 "cpu.max",
                                 "memory/memory.limit_in_bytes",
                                 "pids/pids.max",
                                 "cpu/cpu.cfs_quota_us",
                                 "cpu/cpu.cfs_period_us"};
  json out = json::object();
  for (const char* f : kFiles) {
    auto text = rf::read_file(std::string("/sys/fs/cgroup/") + f);
    if (!text) continue;
    std::string v = *text;
    while (!v.empty() && v.back() == '\n') v.pop_back();
    const char* slash = std::strchr(f, '/');
    out[slash != nullptr ? slash + 1 : f] = v;
  }
  return out;
}

json env_keys() {
  std::vector<std::string> keys;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    keys.emplace_back(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

const char* errno_name(int e) {
  switch (e) {
    case 0:
      return "";
    case EPERM:
      return "EPERM";
    case EACCES:
      return "EACCES";
    case EROFS:
      return "EROFS";
    case ENOENT:
      return "ENOENT";
    case ENOSYS:
      return "ENOSYS";
    case EINVAL:
      return "EINVAL";
    case EAFNOSUPPORT:
      return "EAFNOSUPPORT";
    case ENOTDIR:
      return "ENOTDIR";
    case EBUSY:
      return "EBUSY";
    default:
      return "other";
  }
}

// One attack: returns 0 when it succeeded (the bound did NOT hold), else errno.
struct Attack {
  const char* name;
  const char* what;
  std::function<int()> run;
};

int result_of(long rc) { return rc < 0 ? errno : 0; }

// Creates (and removes again) a file at `path`: 0 when it could, else errno.
int create_file(const char* path) {
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(path);
  return 0;
}

std::vector<Attack> attacks() {
  return {
      {"mount", "mount a tmpfs over /tmp",
       [] {
         const int rc = ::mount("rf-probe", "/tmp", "tmpfs", 0, nullptr);
         if (rc == 0) ::umount2("/tmp", MNT_DETACH);
         return result_of(rc);
       }},
      {"unshare_user", "unshare(CLONE_NEWUSER): a user namespace of its own",
       [] { return result_of(::unshare(CLONE_NEWUSER)); }},
      {"setuid_root", "setuid(0)", [] { return result_of(::setuid(0)); }},
      {"write_root", "create a file in /", [] { return create_file("/.rf-self-probe"); }},
      {"write_usr", "create a file in /usr", [] { return create_file("/usr/.rf-self-probe"); }},
      {"sysrq", "open /proc/sysrq-trigger for writing",
       [] {
         const int fd = ::open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);
         if (fd >= 0) ::close(fd);
         return fd >= 0 ? 0 : errno;
       }},
      {"raw_socket", "socket(AF_PACKET, SOCK_RAW)",
       [] {
         const int fd = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, 0);
         if (fd >= 0) ::close(fd);
         return fd >= 0 ? 0 : errno;
       }},
      {"chroot", "chroot(\"/tmp\")", [] { return result_of(::chroot("/tmp")); }},
      {"bpf", "bpf(BPF_PROG_LOAD)",
       [] {
         bpf_attr attr{};
         return result_of(::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr));
       }},
      {"kexec", "kexec_load",
       [] { return result_of(::syscall(SYS_kexec_load, 0, 0, nullptr, 0)); }},
      {"init_module", "init_module",
       [] { return result_of(::syscall(SYS_init_module, nullptr, 0, "")); }},
      {"runner_environ", "read the tool runner's (PID 1's) environment",
       [] {
         const int fd = ::open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
         if (fd < 0) return errno;
         char c;
         const ssize_t n = ::read(fd, &c, 1);
         const int err = errno;
         ::close(fd);
         return n >= 0 ? 0 : err;
       }},
  };
}

json run_attacks() {
  json out = json::array();
  for (const Attack& a : attacks()) {
    errno = 0;
    const int err = a.run();
    out.push_back({{"attack", a.name},
                   {"what", a.what},
                   {"failed", err != 0},
                   {"errno", err},
                   {"error", errno_name(err)}});
  }
  return out;
}

}  // namespace

int self_probe_main() {
  json j = {{"pid", ::getpid()},
            {"uid", ::getuid()},
            {"gid", ::getgid()},
            {"no_new_privs", ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1}};
  json ns = json::object();
  for (const char* n : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) ns[n] = ns_inode(n);
  j["ns"] = ns;
  j["uid_map"] = read_or_empty("/proc/self/uid_map");
  j["gid_map"] = read_or_empty("/proc/self/gid_map");
  j["status"] = status_fields();
  j["rlimits"] = rlimits();
  j["mounts"] = mounts();
  j["interfaces"] = interfaces();
  j["cgroup"] = cgroup_files();
  j["env_keys"] = env_keys();
  // Whether the paths a sandbox masks exist at all on this kernel.
  json exists = json::object();
  for (const char* p : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/kallsyms"})
    exists[p] = ::access(p, F_OK) == 0;
  j["exists"] = exists;
  j["attacks"] = run_attacks();  // last: nothing above may see their effects
  const std::string out = j.dump() + "\n";
  return rf::write_all(STDOUT_FILENO, out) ? 0 : 1;
}

}  // namespace rf::runner
