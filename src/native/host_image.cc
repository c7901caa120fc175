#include "native/host_image.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "host/uid_slots.h"

namespace rf::native {
namespace {

using Kind = MountOp::Kind;

std::string host_path(const HostImageOptions& o, const std::string& path) {
  if (o.host_root == "/") return path;
  return o.host_root + path;
}

std::string old_root(const std::string& path) { return std::string(kOldRoot) + path; }

// An empty directory that masks host directories under /proc.
constexpr const char* kEmptyDir = "/.ringfence/empty";

MountOp op(Kind kind, std::string target) {
  MountOp m;
  m.kind = kind;
  m.target = std::move(target);
  return m;
}

MountOp bind(std::string source, std::string target, bool readonly) {
  MountOp m = op(Kind::kBind, std::move(target));
  m.source = std::move(source);
  m.readonly = readonly;
  return m;
}

MountOp symlink(std::string link_target, std::string path) {
  MountOp m = op(Kind::kSymlink, std::move(path));
  m.source = std::move(link_target);
  return m;
}

MountOp tmpfs(std::string target, std::string data, bool noexec = false) {
  MountOp m = op(Kind::kTmpfs, std::move(target));
  m.data = std::move(data);
  m.noexec = noexec;
  return m;
}

MountOp write_file(std::string target, std::string content, mode_t mode = 0644) {
  MountOp m = op(Kind::kWriteFile, std::move(target));
  m.content = std::move(content);
  m.mode = mode;
  return m;
}

// Mirrors a host path: symlinks are recreated, directories and files bound
// read-only (a file bind needs an empty file as its mount point).
void mirror(MountPlan& plan, const HostImageOptions& o, const std::string& path) {
  struct stat st {};
  const std::string hp = host_path(o, path);
  if (::lstat(hp.c_str(), &st) != 0) return;
  if (S_ISLNK(st.st_mode)) {
    char buf[4096];
    const ssize_t n = ::readlink(hp.c_str(), buf, sizeof buf);
    if (n > 0) plan.ops.push_back(symlink(std::string(buf, static_cast<size_t>(n)), path));
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    plan.ops.push_back(op(Kind::kDir, path));
  } else if (S_ISREG(st.st_mode)) {
    plan.ops.push_back(op(Kind::kFile, path));
  } else {
    return;
  }
  plan.ops.push_back(bind(old_root(path), path, /*readonly=*/true));
}

void add_root_dirs(MountPlan& plan, const HostImageOptions& o) {
  // Merged-/usr hosts have /bin -> usr/bin; older ones have real directories.
  mirror(plan, o, "/usr");
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"})
    mirror(plan, o, top);
  plan.ops.push_back(op(Kind::kDir, "/var"));
  plan.ops.push_back(symlink("../tmp", "/var/tmp"));
}

void add_etc(MountPlan& plan, const HostImageOptions& o, const SandboxSpec& spec) {
  plan.ops.push_back(op(Kind::kDir, "/etc"));
  plan.ops.push_back(op(Kind::kDir, "/etc/ssl"));
  for (const auto& path : curated_etc_paths()) mirror(plan, o, path);
  const std::string uid = std::to_string(host::kSandboxUid);
  plan.ops.push_back(
      write_file("/etc/passwd",
                 "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                 "sandbox:x:" +
                     uid + ":" + uid +
                     ":sandbox:/workspace:/bin/bash\n"
                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"));
  plan.ops.push_back(
      write_file("/etc/group", "root:x:0:\nsandbox:x:" + uid + ":\nnogroup:x:65534:\n"));
  const bool host_network = spec.network == NetworkPolicy::kHost;
  plan.ops.push_back(write_file(
      "/etc/nsswitch.conf",
      std::string("passwd: files\ngroup: files\nhosts: files") + (host_network ? " dns\n" : "\n")));
  plan.ops.push_back(write_file("/etc/hostname", o.sandbox_id + "\n"));
  plan.ops.push_back(
      write_file("/etc/hosts", "127.0.0.1 localhost " + o.sandbox_id + "\n::1 localhost\n"));
  // No resolver inside: with network none there is nothing to resolve, and
  // with a proxy only the proxy resolves names. The host's network uses the
  // host's resolver.
  if (host_network) {
    mirror(plan, o, "/etc/resolv.conf");
  } else {
    plan.ops.push_back(write_file("/etc/resolv.conf", ""));
  }
}

void add_proc(MountPlan& plan) {
  plan.ops.push_back(op(Kind::kDir, "/proc"));
  plan.ops.push_back(op(Kind::kProc, "/proc"));
  // Kernel memory, keyrings and timers leak host state: hide them behind /dev/null.
  for (const char* f : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
                        "/proc/latency_stats", "/proc/timer_stats", "/proc/kallsyms"}) {
    MountOp m = bind(old_root("/dev/null"), f, /*readonly=*/true);
    m.optional = true;
    m.allow_dev = true;
    plan.ops.push_back(m);
  }
  // Host hardware directories: covered by an empty read-only directory of the
  // root tmpfs, bound, not by a tmpfs each. Every superblock costs each memory
  // cgroup on the host a slot in its shrinker map (~1 KiB per 64 superblocks
  // per cgroup), so with thousands of sandboxes each superblock a sandbox
  // mounts costs every other sandbox memory too (docs/PERFORMANCE.md, density).
  plan.ops.push_back(op(Kind::kDir, "/.ringfence"));
  MountOp empty = op(Kind::kDir, kEmptyDir);
  empty.mode = 0555;
  plan.ops.push_back(empty);
  for (const char* d : {"/proc/acpi", "/proc/scsi", "/proc/asound"}) {
    MountOp m = bind(kEmptyDir, d, /*readonly=*/true);
    m.noexec = true;
    m.optional = true;
    plan.ops.push_back(m);
  }
  // Host-global knobs stay visible but read-only.
  for (const char* p : {"/proc/sys", "/proc/sysrq-trigger", "/proc/bus", "/proc/fs", "/proc/irq"}) {
    MountOp m = bind(p, p, /*readonly=*/true);
    m.optional = true;
    plan.ops.push_back(m);
  }
}

void add_dev(MountPlan& plan, const SandboxSpec& spec) {
  // A directory of the root tmpfs (read-only with it at the end), not a tmpfs
  // of its own: one superblock less per sandbox (see add_proc).
  plan.ops.push_back(op(Kind::kDir, "/dev"));
  // Device nodes cannot be created in a user namespace; bind the host's harmless ones.
  for (const char* dev : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string path = std::string("/dev/") + dev;
    plan.ops.push_back(op(Kind::kFile, path));
    MountOp m = bind(old_root(path), path, /*readonly=*/false);
    m.allow_dev = true;
    m.noexec = true;
    plan.ops.push_back(m);
  }
  plan.ops.push_back(op(Kind::kDir, "/dev/pts"));
  MountOp pts = op(Kind::kDevpts, "/dev/pts");
  pts.data = "newinstance,ptmxmode=0666,mode=0620";
  plan.ops.push_back(pts);
  plan.ops.push_back(symlink("pts/ptmx", "/dev/ptmx"));
  plan.ops.push_back(op(Kind::kDir, "/dev/shm"));
  const uint64_t shm = std::min<uint64_t>(spec.limits.disk_bytes, 64ull << 20);
  plan.ops.push_back(tmpfs("/dev/shm",
                           "mode=1777,size=" + std::to_string(shm) +
                               ",nr_inodes=" + std::to_string(tmpfs_inodes(spec.limits.disk_bytes)),
                           /*noexec=*/true));
  plan.ops.push_back(symlink("/proc/self/fd", "/dev/fd"));
  plan.ops.push_back(symlink("/proc/self/fd/0", "/dev/stdin"));
  plan.ops.push_back(symlink("/proc/self/fd/1", "/dev/stdout"));
  plan.ops.push_back(symlink("/proc/self/fd/2", "/dev/stderr"));
}

void add_writable(MountPlan& plan, const SandboxSpec& spec) {
  const std::string size = "size=" + std::to_string(spec.limits.disk_bytes);
  const std::string inodes = ",nr_inodes=" + std::to_string(tmpfs_inodes(spec.limits.disk_bytes));
  plan.ops.push_back(op(Kind::kDir, "/tmp"));
  plan.ops.push_back(tmpfs("/tmp", "mode=1777," + size + inodes));
  plan.ops.push_back(op(Kind::kDir, "/workspace"));
  if (spec.workspace_dir.empty()) {
    const std::string uid = std::to_string(host::kSandboxUid);
    plan.ops.push_back(
        tmpfs("/workspace", "mode=0755," + size + inodes + ",uid=" + uid + ",gid=" + uid));
  } else {
    // The host prepared an idmapped tree of the directory (host/idmapped_tree.h).
    plan.ops.push_back(op(Kind::kAttachTree, "/workspace"));
  }
  // Volumes (issue 41), each a tree the host prepared, at its path: the
  // directories on the way made first (the root is still writable here).
  for (size_t i = 0; i < spec.volumes.size(); ++i) {
    const std::string& path = spec.volumes[i].path;
    for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
      plan.ops.push_back(op(Kind::kDir, path.substr(0, at)));
    }
    plan.ops.push_back(op(Kind::kDir, path));
    MountOp attach = op(Kind::kAttachTree, path);
    attach.tree = static_cast<int>(i) + 1;
    plan.ops.push_back(attach);
  }
}

void add_runner(MountPlan& plan, const HostImageOptions& o) {
  plan.ops.push_back(op(Kind::kDir, "/.ringfence"));
  // rf-cred, the JIT client, is the runner under another name: a link in the
  // root tmpfs (no mount), on the PATH of JIT calls.
  plan.ops.push_back(op(Kind::kDir, kCredBinDirInSandbox));
  plan.ops.push_back(symlink("../tool-runner", std::string(kCredBinDirInSandbox) + "/rf-cred"));
  plan.ops.push_back(op(Kind::kFile, kRunnerPathInSandbox));
  plan.ops.push_back(bind(old_root(o.runner_path), kRunnerPathInSandbox, /*readonly=*/true));
  if (!o.proxy_socket.empty()) {
    // Read-only still connects: the kernel refuses writes to regular files,
    // directories and links on a read-only mount, not connects to sockets.
    plan.ops.push_back(op(Kind::kFile, kProxySocketInSandbox));
    plan.ops.push_back(bind(old_root(o.proxy_socket), kProxySocketInSandbox, /*readonly=*/true));
  }
}

// tls_intercept: the sandbox trusts its own CA, in a bundle bound over the
// image's (so clients that read no variable trust it too). After /etc: the
// mount point is the host's bundle in the mirrored /etc/ssl/certs.
void add_trust(MountPlan& plan, const HostImageOptions& o) {
  if (o.trust_bundle.empty()) return;
  MountOp bundle = bind(old_root(o.trust_bundle), kTrustBundleInSandbox, /*readonly=*/true);
  bundle.noexec = true;
  plan.ops.push_back(bundle);
}

}  // namespace

const std::vector<std::string>& curated_etc_paths() {
  static const std::vector<std::string> kPaths = {
      "/etc/ld.so.cache",  "/etc/ssl/certs",  "/etc/ssl/openssl.cnf", "/etc/ca-certificates",
      "/etc/alternatives", "/etc/localtime",  "/etc/timezone",        "/etc/protocols",
      "/etc/services",     "/etc/os-release", "/etc/debian_version",  "/etc/bash.bashrc",
      "/etc/inputrc",      "/etc/terminfo",   "/etc/python3",         "/etc/python3.11",
      "/etc/host.conf",    "/etc/gai.conf",   "/etc/mime.types",
  };
  return kPaths;
}

MountPlan build_host_image_plan(const SandboxSpec& spec, const HostImageOptions& o) {
  MountPlan plan;
  add_root_dirs(plan, o);
  add_etc(plan, o, spec);
  add_proc(plan);
  add_dev(plan, spec);
  add_writable(plan, spec);
  add_runner(plan, o);
  add_trust(plan, o);
  return plan;
}

}  // namespace rf::native
