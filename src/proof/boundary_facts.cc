#include "proof/boundary_facts.h"

#include <linux/filter.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/io.h"
#include "host/runner_binary.h"
#include "host/seccomp_profile.h"
#include "proof/digest.h"

namespace rf::proof {
namespace {

constexpr const char* kRunnerInSandbox = "/.ringfence/tool-runner";

std::string program_digest(const sock_filter* insns, size_t count) {
  return sha256_hex(
      std::string_view(reinterpret_cast<const char*>(insns), count * sizeof(sock_filter)));
}

std::once_flag runner_once;
std::string runner_digest;

// What identifies the binary's bytes without reading them: a write to the
// file changes its ctime, which no process can set back.
std::string file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ctim.tv_sec) + "." +
         std::to_string(st.st_ctim.tv_nsec);
}

void hash_runner(const std::string& cache_file) {
  auto path = host::find_runner_binary();
  if (!path) return;
  const std::string identity = file_identity(*path);
  const std::string key = *path + "\n" + identity + "\n";
  if (!cache_file.empty() && !identity.empty()) {
    if (auto cached = read_file(cache_file);
        cached && cached->size() == key.size() + 64 && cached->compare(0, key.size(), key) == 0) {
      runner_digest = cached->substr(key.size());
      return;
    }
  }
  auto bytes = read_file(*path);
  if (!bytes) return;
  runner_digest = sha256_hex(*bytes);
  // Kept only when the file did not change while it was read.
  if (!cache_file.empty() && !identity.empty() && file_identity(*path) == identity)
    (void)::rf::write_file_atomic(cache_file, key + runner_digest, 0600);
}

}  // namespace

std::string runner_sha256() {
  std::call_once(runner_once, [] { hash_runner(""); });
  return runner_digest;
}

void warm_runner_sha256(const std::string& cache_file) {
  std::call_once(runner_once, [&] { hash_runner(cache_file); });
}

std::map<std::string, uint64_t> namespace_inodes(int pid) {
  std::map<std::string, uint64_t> out;
  for (const char* n : {"user", "mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    const std::string path =
        (pid == 0 ? std::string("/proc/self") : "/proc/" + std::to_string(pid)) + "/ns/" + n;
    char buf[64];
    const ssize_t len = ::readlink(path.c_str(), buf, sizeof buf - 1);
    if (len <= 0) continue;
    buf[len] = '\0';
    if (const char* open = std::strchr(buf, '[')) out[n] = std::strtoull(open + 1, nullptr, 10);
  }
  return out;
}

Result<std::vector<std::string>> seccomp_profile_digests(const std::string& profile) {
  auto filters = host::build_seccomp_profile(profile);
  if (!filters) return filters.take_error();
  return std::vector<std::string>{
      program_digest(filters->allowlist.data(), filters->allowlist.size()),
      program_digest(filters->arg_rules.data(), filters->arg_rules.size())};
}

Result<std::vector<std::string>> read_seccomp_digests(int pid) {
  const std::string where = "read seccomp filters of pid " + std::to_string(pid);
  if (pid <= 0) return make_error(where, "no process");
  if (::ptrace(PTRACE_SEIZE, pid, nullptr, nullptr) != 0) return sys_error(where + ": attach");
  struct Detach {
    int pid;
    ~Detach() { ::ptrace(PTRACE_DETACH, pid, nullptr, nullptr); }
  } detach{pid};
  if (::ptrace(PTRACE_INTERRUPT, pid, nullptr, nullptr) != 0) return sys_error(where + ": stop");
  int status = 0;
  for (;;) {
    const pid_t w = ::waitpid(pid, &status, __WALL);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) return sys_error(where + ": wait");
  }
  if (!WIFSTOPPED(status)) return make_error(where, "the process ended");
  std::vector<std::string> out;
  for (unsigned long i = 0;; ++i) {
    const long n = ::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), nullptr);
    if (n < 0) {
      if (errno == ENOENT) break;  // past the last program
      return sys_error(where + ": PTRACE_SECCOMP_GET_FILTER");
    }
    std::vector<sock_filter> insns(static_cast<size_t>(n));
    if (::ptrace(PTRACE_SECCOMP_GET_FILTER, pid, reinterpret_cast<void*>(i), insns.data()) != n)
      return sys_error(where + ": PTRACE_SECCOMP_GET_FILTER");
    out.push_back(program_digest(insns.data(), insns.size()));
  }
  return out;
}

namespace {

// What the host reads of a sandbox by itself, without the self-probe: PID 1's
// namespaces, id maps and seccomp programs, the cgroup limit files, and the
// digests of the profile the spec names.
void read_host_side(const Sandbox& sandbox, BoundaryFacts& f) {
  const int pid = sandbox.init_pid();
  if (pid > 0) {
    // Only a PID 1 on this kernel can be compared with this host's namespaces.
    // This process's own are read once: it never moves to others.
    static const std::map<std::string, uint64_t> host_ns = namespace_inodes(0);
    f.host_ns = host_ns;
    f.pid1_ns = namespace_inodes(pid);
    const std::string proc = "/proc/" + std::to_string(pid);
    if (auto m = read_file(proc + "/uid_map")) f.pid1_uid_map = std::move(*m);
    if (auto m = read_file(proc + "/gid_map")) f.pid1_gid_map = std::move(*m);
    auto loaded = read_seccomp_digests(pid);
    if (loaded) {
      f.seccomp_loaded = std::move(*loaded);
    } else {
      f.seccomp_readback_error = loaded.error().to_string();
    }
  } else {
    f.seccomp_readback_error =
        "the sandbox's PID 1 is not on this host (a remote daemon): its programs cannot be read";
  }
  f.cgroup = sandbox.cgroup_limit_files();
  if (auto digests = seccomp_profile_digests(f.spec.seccomp))
    f.seccomp_profile = std::move(*digests);
  // A short-lived process hashes the runner binary beside the sandbox's
  // start (cli/proof_session.h); this waits for it.
  f.runner_sha256 = runner_sha256();
}

}  // namespace

void StartedProbe::Output::on_stdout(std::string_view d) {
  if (out.size() < (4u << 20)) out.append(d);
}
void StartedProbe::Output::on_stderr(std::string_view d) {
  if (err.size() < 4096) err.append(d);
}

StartedProbe start_self_probe(Sandbox& sandbox) {
  StartedProbe p;
  // An ordinary call, so it has exactly what tools have.
  ExecCall call;
  if (sandbox.spec().backend == BackendKind::kLocal) {
    auto runner = host::find_runner_binary();
    if (!runner) {
      p.error = runner.take_error();
      return p;
    }
    call.argv = {*runner, "self-probe"};
  } else {
    call.argv = {kRunnerInSandbox, "self-probe"};
  }
  call.timeout = std::chrono::seconds(10);
  p.output = std::make_unique<StartedProbe::Output>();
  p.call = sandbox.start_exec(call, *p.output);
  return p;
}

Result<BoundaryFacts> gather_boundary_facts(Sandbox& sandbox, StartedProbe probe) {
  BoundaryFacts f;
  f.spec = sandbox.spec();
  f.backend = std::string(to_string(f.spec.backend));
  f.image = f.spec.image;
  f.image_digest = sandbox.image_digest();
  f.runner_version = sandbox.runner_version();
  f.made_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                     std::chrono::system_clock::now().time_since_epoch())
                     .count();

  if (!probe.call) probe = start_self_probe(sandbox);
  if (!probe.call) return make_error("boundary report: self-probe", probe.error.to_string());
  // The host's own reads need nothing from the probe: they run beside it
  // (about half a millisecond here, mostly stopping PID 1 to read its
  // seccomp programs), so the report waits for the slower of the two only.
  std::thread host_side([&sandbox, &f] { read_host_side(sandbox, f); });
  auto ran = probe.call->wait();
  host_side.join();
  const StartedProbe::Output& sink = *probe.output;
  if (!ran) return make_error("boundary report: self-probe", ran.error().to_string());
  if (ran->exit_code != 0) {
    return make_error("boundary report: self-probe",
                      "exited " + std::to_string(ran->exit_code) + ": " + sink.err);
  }
  f.inside = nlohmann::json::parse(sink.out, nullptr, false);
  if (!f.inside.is_object())
    return make_error("boundary report: self-probe", "its output is not a JSON object");
  return f;
}

}  // namespace rf::proof
