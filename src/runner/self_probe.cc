#include "runner/self_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/capability.h>
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
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/io.h"
#include "proto/probe_facts.h"
#include "runner/call_domain.h"

extern char** environ;

namespace rf::runner {
namespace {

// The probe's JSON, written as it goes (no tree: the probe runs once per
// sandbox on the way to its report, and building then dumping a tree was
// most of its own time). Strings are escaped as JSON needs; a byte that is
// not part of valid UTF-8 is written as \u00XX so the host's parser always
// takes the output. By hand: nlohmann's serializer for each string (with
// U+FFFD for such bytes) made the probe 30-170 us slower (300 probes, timed).
class JsonOut {
 public:
  std::string text;

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }
  void key(std::string_view k) {
    comma();
    text += '"';
    escape(k);
    text += "\":";
    after_key_ = true;
  }
  void string(std::string_view v) {
    comma();
    text += '"';
    escape(v);
    text += '"';
  }
  void number(long long v) {
    comma();
    text += std::to_string(v);
  }
  void unsigned_number(unsigned long long v) {
    comma();
    text += std::to_string(v);
  }
  void boolean(bool v) {
    comma();
    text += v ? "true" : "false";
  }

 private:
  bool first_ = true, after_key_ = false;

  void open(char c) {
    comma();
    text += c;
    first_ = true;
  }
  void close(char c) {
    text += c;
    first_ = false;
  }
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) text += ',';
    first_ = false;
  }
  // The length of the valid UTF-8 sequence at `s` (0 when it is not one).
  static size_t utf8_length(std::string_view s) {
    const auto b = [&](size_t i) { return static_cast<unsigned char>(s[i]); };
    const auto cont = [&](size_t i) { return i < s.size() && (b(i) & 0xC0) == 0x80; };
    const unsigned char c = b(0);
    if (c >= 0xC2 && c <= 0xDF) return cont(1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      if (!cont(1) || !cont(2)) return 0;
      if (c == 0xE0 && b(1) < 0xA0) return 0;   // overlong
      if (c == 0xED && b(1) >= 0xA0) return 0;  // a surrogate
      return 3;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      if (!cont(1) || !cont(2) || !cont(3)) return 0;
      if (c == 0xF0 && b(1) < 0x90) return 0;   // overlong
      if (c == 0xF4 && b(1) >= 0x90) return 0;  // past U+10FFFF
      return 4;
    }
    return 0;
  }
  void escape(std::string_view v) {
    static constexpr char kHex[] = "0123456789abcdef";
    for (size_t i = 0; i < v.size();) {
      const auto c = static_cast<unsigned char>(v[i]);
      if (c == '"' || c == '\\') {
        text += '\\';
        text += static_cast<char>(c);
      } else if (c == '\n') {
        text += "\\n";
      } else if (c == '\t') {
        text += "\\t";
      } else if (c >= 0x20 && c < 0x80) {
        text += static_cast<char>(c);
      } else if (const size_t n = c >= 0x80 ? utf8_length(v.substr(i)) : 0; n > 0) {
        text.append(v.substr(i, n));
        i += n;
        continue;
      } else {
        text += "\\u00";
        text += kHex[c >> 4];
        text += kHex[c & 15];
      }
      ++i;
    }
  }
};

std::string read_or_empty(const char* path) {
  auto text = rf::read_file(path);
  return text ? *text : std::string();
}

// "mnt:[4026531840]" -> 4026531840, read in `dir` (/proc/self/ns); 0 when
// unreadable. One path walk from /proc for the seven.
uint64_t ns_inode(int dir, const char* name) {
  char buf[64];
  const ssize_t n = ::readlinkat(dir, name, buf, sizeof buf - 1);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* open = std::strchr(buf, '[');
  return open != nullptr ? std::strtoull(open + 1, nullptr, 10) : 0;
}

void status_fields(JsonOut& out) {
  out.begin_object();
  const std::string text = read_or_empty("/proc/self/status");
  for (const proto::StatusField& f : proto::kept_status_fields(text)) {
    out.key(f.name);
    out.string(f.value);
  }
  out.end_object();
}

void rlimits(JsonOut& out) {
  out.begin_object();
  for (const auto& [name, res] : proto::kReportedRlimits) {
    rlimit rl{};
    if (::getrlimit(res, &rl) != 0) continue;
    out.key(name);
    out.begin_array();
    for (const rlim_t x : {rl.rlim_cur, rl.rlim_max}) {
      if (x == RLIM_INFINITY) {
        out.string("unlimited");
      } else {
        out.unsigned_number(x);
      }
    }
    out.end_array();
  }
  out.end_object();
}

void interfaces(JsonOut& out) {
  const std::string text = read_or_empty("/proc/self/net/dev");
  out.begin_array();
  for (const auto n : proto::net_dev_interfaces(text)) out.string(n);
  out.end_array();
}

// The cgroup limits as this process sees them, when a cgroup filesystem is
// mounted (docker mounts one with a cgroup namespace; native mounts none, and
// the host reads the files itself).
void cgroup_files(JsonOut& out) {
  // v2 files at the top, then v1's, each under its controller: named without it.
  static const char* kFiles[] = {"memory.max",
                                 "memory.swap.max",
                                 "pids.max",
                                 "cpu.max",
                                 "memory/memory.limit_in_bytes",
                                 "pids/pids.max",
                                 "cpu/cpu.cfs_quota_us",
                                 "cpu/cpu.cfs_period_us"};
  out.begin_object();
  for (const char* f : kFiles) {
    auto text = rf::read_file(std::string("/sys/fs/cgroup/") + f);
    if (!text) continue;
    std::string_view v = *text;
    while (!v.empty() && v.back() == '\n') v.remove_suffix(1);
    const char* slash = std::strchr(f, '/');
    out.key(slash != nullptr ? slash + 1 : f);
    out.string(v);
  }
  out.end_object();
}

void env_keys(JsonOut& out) {
  std::vector<std::string_view> keys;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    keys.emplace_back(*e, eq != nullptr ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  std::sort(keys.begin(), keys.end());
  out.begin_array();
  for (const auto k : keys) out.string(k);
  out.end_array();
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

// One attack: returns 0 when it succeeded (the bound did NOT hold), else
// errno; not_tried(errno) when something kept it from being tried at all.
struct Attack {
  const char* name;
  const char* what;
  std::function<int()> run;
};

int result_of(long rc) { return rc < 0 ? errno : 0; }
int not_tried(int err) { return -err; }

// Creates a file in `dir` (which ends in '/') and lets it go again: 0 when
// it could, else errno. An unnamed one (O_TMPFILE): a probe ended between
// the two leaves nothing behind. The kernel checks the file system's read-only flag and
// the directory's permissions before it asks whether the file system has
// unnamed files at all (EOPNOTSUPP): only then is a named one made, named
// after the probe's pid, so two probes on one file system (local
// sandboxes) never meet at one name, where EEXIST would read as refused.
int create_file(const char* dir) {
  int fd = ::open(dir, O_WRONLY | O_TMPFILE | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return 0;
  }
  if (errno != EOPNOTSUPP) return errno;
  const std::string path = std::string(dir) + ".rf-self-probe-" + std::to_string(::getpid());
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return errno;
  ::close(fd);
  ::unlink(path.c_str());
  return 0;
}

// The mount attack. Where it can succeed (a process with CAP_SYS_ADMIN: the
// local backend run as root, a deliberately weak sandbox), it must do so
// out of everyone else's sight. Its target is an empty directory the probe
// makes for it (in /tmp, else in its working directory), so that wherever
// the tmpfs lands it covers nothing of anyone's; and it goes into a mount
// namespace of the probe's own, every mount in it private, when the probe
// may make one. Until 2026-11-28 it covered /tmp itself: run in the host's
// namespace it hid the host's /tmp for a few milliseconds, and processes
// beside it lost their files there; and where unshare is refused but mount
// is not (a seccomp filter or a service manager that forbids namespaces to
// a root process) it still would have. In a sandbox both are refused
// (EPERM). A directory that cannot be made at all: not tried.
int mount_attack() {
  if (::unshare(CLONE_NEWNS) == 0) {
    // Private first: a shared mount would carry the tmpfs back out.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return errno;
  }
  std::string target;
  int err = 0;
  for (const char* tmpl : {"/tmp/.rf-self-probe-mount-XXXXXX", ".rf-self-probe-mount-XXXXXX"}) {
    std::string t = tmpl;
    if (::mkdtemp(t.data()) != nullptr) {
      target = std::move(t);
      break;
    }
    err = errno;
  }
  if (target.empty()) return not_tried(err);
  const int rc = ::mount("rf-probe", target.c_str(), "tmpfs", 0, nullptr);
  const int got = result_of(rc);
  if (rc == 0) ::umount2(target.c_str(), MNT_DETACH);
  ::rmdir(target.c_str());
  return got;
}

// An attack on a call that would change the machine if it got through is
// asked with an argument the kernel refuses only after its permission
// check: that refusal (`past_check`) then means the attack got through.
int past_check(long rc, int refusal) {
  if (rc >= 0) return 0;
  return errno == refusal ? 0 : errno;
}

// Whether kexec_load's permission check could let this process through:
// CAP_SYS_BOOT in its effective set, in the host's user namespace (whose
// uid map is the whole identity). When it cannot tell: yes.
bool could_pass_kexec_check() {
  if (auto map = read_file("/proc/self/uid_map")) {
    unsigned long inside = 1, outside = 1, count = 0;
    if (std::sscanf(map->c_str(), "%lu %lu %lu", &inside, &outside, &count) == 3 &&
        !(inside == 0 && outside == 0 && count == 4294967295UL))
      return false;
  }
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (::syscall(SYS_capget, &header, data) != 0) return true;
  return (data[CAP_SYS_BOOT / 32].effective & (1U << (CAP_SYS_BOOT % 32))) != 0;
}

// The kexec attack. Each call the permission check lets through spends one
// load of a finite kernel.kexec_load_limit_reboot (Linux 6.6+), even one
// the kernel then refuses for its segments. Those loads are the host's:
// where the call could get through and the limit is finite, it is not tried.
int kexec_attack() {
  if (auto limit = read_file("/proc/sys/kernel/kexec_load_limit_reboot");
      limit && std::strtol(limit->c_str(), nullptr, 10) >= 0 && could_pass_kexec_check())
    return not_tried(ECANCELED);
  // With no segments, kexec_load unloads the loaded kernel: one segment
  // more than the kernel takes is refused (EINVAL) after the check instead.
  return past_check(::syscall(SYS_kexec_load, 0, 17, nullptr, 0), EINVAL);
}

// In this order: the attacks that change the probe itself when they get
// through (its namespaces, its user, its root) come last, ordered so that
// one getting through never makes another fail.
std::vector<Attack> attacks() {
  return {
      {"write_root", "create a file in /", [] { return create_file("/"); }},
      {"write_usr", "create a file in /usr", [] { return create_file("/usr/"); }},
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
      {"bpf", "bpf(BPF_PROG_LOAD)",
       [] {
         bpf_attr attr{};
         return result_of(::syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr));
       }},
      {"kexec", "kexec_load", kexec_attack},
      // A module of no bytes is no ELF file: ENOEXEC once loading is allowed.
      {"init_module", "init_module",
       [] { return past_check(::syscall(SYS_init_module, nullptr, 0, ""), ENOEXEC); }},
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
      {"mount", "mount a tmpfs (over an empty directory of the probe's own)", mount_attack},
      {"setuid_root", "setuid(0)", [] { return result_of(::setuid(0)); }},
      {"unshare_user", "unshare(CLONE_NEWUSER): a user namespace of its own",
       [] { return result_of(::unshare(CLONE_NEWUSER)); }},
      // Last: once chrooted, unshare(CLONE_NEWUSER) is refused (EPERM) for
      // that reason alone. A user namespace of its own lets it chroot, which
      // is then true of the process too.
      {"chroot", "chroot(\"/tmp\")", [] { return result_of(::chroot("/tmp")); }},
  };
}

void run_attacks(JsonOut& out) {
  out.begin_array();
  for (const Attack& a : attacks()) {
    errno = 0;
    const int got = a.run();
    // Not tried: not counted as failed (so not as a bound held), and said.
    const int err = got < 0 ? -got : got;
    out.begin_object();
    out.key("attack");
    out.string(a.name);
    out.key("what");
    out.string(a.what);
    out.key("failed");
    out.boolean(got > 0);
    if (got < 0) {
      out.key("tried");
      out.boolean(false);
    }
    out.key("errno");
    out.number(err);
    out.key("error");
    out.string(errno_name(err));
    out.end_object();
  }
  out.end_array();
}

// What every process of the sandbox shares with its PID 1, which the host
// reads there itself when it can (ProbeScope::kInsideOnly).
void shared_facts(JsonOut& j) {
  j.key("uid_map");
  j.string(read_or_empty("/proc/self/uid_map"));
  j.key("gid_map");
  j.string(read_or_empty("/proc/self/gid_map"));
  j.key("status");
  status_fields(j);
  j.key("rlimits");
  rlimits(j);
  // As the kernel prints it: the host parses it (proof/mount_table.h).
  j.key("mountinfo");
  j.string(read_or_empty("/proc/self/mountinfo"));
  j.key("interfaces");
  interfaces(j);
  j.key("cgroup");
  cgroup_files(j);
}

}  // namespace

ProbeScope probe_scope(int argc, const char* const* argv, bool* ok) {
  *ok = true;
  if (argc == 2) return ProbeScope::kAll;
  if (argc == 3 && std::strcmp(argv[2], "--inside-only") == 0) return ProbeScope::kInsideOnly;
  *ok = false;
  return ProbeScope::kAll;
}

int self_probe_main(ProbeStart start, ProbeScope scope) {
  JsonOut j;
  j.text.reserve(8192);
  j.begin_object();
  j.key("start");
  j.string(start == ProbeStart::kForked ? "fork" : "exec");
  j.key("pid");
  j.number(::getpid());
  j.key("uid");
  j.unsigned_number(::getuid());
  j.key("gid");
  j.unsigned_number(::getgid());
  j.key("no_new_privs");
  j.boolean(::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1);
  // 0 in a fork of the runner, which must stay unreadable to the sandbox.
  j.key("dumpable");
  j.number(::prctl(PR_GET_DUMPABLE, 0, 0, 0, 0));
  // The Landlock domain of this call (runner/call_domain.h). Known only in a
  // fork: this process is then the command child that entered it (a child
  // that cannot enter it never runs); an exec'd probe leaves the key out.
  if (start == ProbeStart::kForked) {
    j.key("call_domain");
    j.begin_object();
    j.key("landlock_abi");
    j.number(call_domain_abi());
    j.key("entered");
    j.boolean(call_domain_abi() > 0);
    j.end_object();
  }
  j.key("ns");
  j.begin_object();
  // O_PATH: a non-dumpable process (a fork of the runner) may search its
  // /proc/self/ns but not list it.
  const int ns_dir = ::open("/proc/self/ns", O_PATH | O_DIRECTORY | O_CLOEXEC);
  for (const char* n : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    j.key(n);
    j.unsigned_number(ns_dir >= 0 ? ns_inode(ns_dir, n) : 0);
  }
  if (ns_dir >= 0) ::close(ns_dir);
  j.end_object();
  if (scope == ProbeScope::kInsideOnly) {
    j.key("scope");
    j.string("inside_only");
  } else {
    shared_facts(j);
  }
  j.key("env_keys");
  env_keys(j);
  // Whether the paths a sandbox masks exist at all on this kernel.
  j.key("exists");
  j.begin_object();
  for (const char* p : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/kallsyms"}) {
    j.key(p);
    j.boolean(::access(p, F_OK) == 0);
  }
  j.end_object();
  j.key("attacks");
  run_attacks(j);  // last: nothing above may see their effects
  j.end_object();
  j.text += '\n';
  return rf::write_all(STDOUT_FILENO, j.text) ? 0 : 1;
}

}  // namespace rf::runner
