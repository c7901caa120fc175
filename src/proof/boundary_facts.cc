#include "proof/boundary_facts.h"

#include <linux/filter.h>
#include <sys/resource.h>  // RLIM_INFINITY
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/io.h"
#include "core/json_input.h"
#include "host/pid1_readback.h"
#include "host/runner_binary.h"
#include "host/seccomp_profile.h"
#include "proof/digest.h"
#include "proto/probe_facts.h"

namespace rf::proof {
namespace {

constexpr const char* kRunnerInSandbox = "/.ringfence/tool-runner";

std::string program_digest(const sock_filter* insns, size_t count) {
  return sha256_hex(
      std::string_view(reinterpret_cast<const char*>(insns), count * sizeof(sock_filter)));
}

std::once_flag runner_once;
std::string runner_digest;
// Where the digest is kept, named before any thread asks for the digest:
// the first to ask, whichever it is, uses it.
std::mutex runner_cache_mu;
std::string runner_cache_file;

std::string named_runner_cache() {
  std::lock_guard<std::mutex> lock(runner_cache_mu);
  return runner_cache_file;
}

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
  std::call_once(runner_once, [] { hash_runner(named_runner_cache()); });
  return runner_digest;
}

void keep_runner_sha256_in(const std::string& cache_file) {
  std::lock_guard<std::mutex> lock(runner_cache_mu);
  runner_cache_file = cache_file;
}

void warm_runner_sha256(const std::string& cache_file) {
  keep_runner_sha256_in(cache_file);
  (void)runner_sha256();
}

Result<std::vector<std::string>> seccomp_profile_digests(const std::string& profile) {
  auto filters = host::build_seccomp_profile(profile);
  if (!filters) return filters.take_error();
  return std::vector<std::string>{
      program_digest(filters->allowlist.data(), filters->allowlist.size()),
      program_digest(filters->arg_rules.data(), filters->arg_rules.size())};
}

namespace {

// What the host reads of a sandbox by itself, without the self-probe: PID 1's
// namespaces, id maps and seccomp programs, the cgroup limit files, and the
// digests of the profile the spec names.
// What the host reads by itself, without the self-probe: PID 1 as `pid1`
// says (null: not on this kernel), the cgroup limit files, and the digests
// of the profile the spec names.
void read_host_side(const Sandbox& sandbox, const StartReadback* pid1, BoundaryFacts& f) {
  if (pid1 != nullptr) {
    // Only a PID 1 on this kernel can be compared with this host's namespaces.
    // This process's own are read once: it never moves to others.
    static const std::map<std::string, uint64_t> host_ns = host::namespace_inodes(0);
    f.host_ns = host_ns;
    f.pid1_ns = pid1->ns;
    f.pid1_uid_map = pid1->uid_map;
    f.pid1_gid_map = pid1->gid_map;
    for (const std::string& p : pid1->seccomp_programs) f.seccomp_loaded.push_back(sha256_hex(p));
    f.seccomp_readback_error = pid1->seccomp_error;
  } else {
    f.seccomp_readback_error =
        "the sandbox's PID 1 is not on this host (a remote daemon): its programs cannot be read";
  }
  // Now, not as it started: the host may change a limit.
  f.cgroup = sandbox.cgroup_limit_files();
  if (auto digests = seccomp_profile_digests(f.spec.seccomp))
    f.seccomp_profile = std::move(*digests);
  // A short-lived process hashes the runner binary beside the sandbox's
  // start (cli/proof_session.h); this waits for it.
  f.runner_sha256 = runner_sha256();
}

// What every process of the sandbox shares with its PID 1, as the host read
// it there, for a probe that left it out (runner/self_probe.h,
// "Inside only"), in the probe's own form (proto/probe_facts.h).
nlohmann::json shared_facts(const StartReadback& r) {
  using nlohmann::json;
  json out = json::object();
  if (!r.uid_map.empty() && !r.gid_map.empty()) {
    out["uid_map"] = r.uid_map;
    out["gid_map"] = r.gid_map;
  }
  if (!r.status.empty()) {
    json kept = json::object();
    for (const proto::StatusField& s : proto::kept_status_fields(r.status))
      kept[std::string(s.name)] = s.value;
    out["status"] = std::move(kept);
  }
  if (!r.rlimits.empty()) {
    json limits = json::object();
    for (const StartReadback::Rlimit& l : r.rlimits) {
      json pair = json::array();
      for (const uint64_t x : {l.cur, l.max}) {
        if (x == static_cast<uint64_t>(RLIM_INFINITY)) {
          pair.push_back("unlimited");
        } else {
          pair.push_back(x);
        }
      }
      limits[l.name] = std::move(pair);
    }
    out["rlimits"] = std::move(limits);
  }
  if (!r.mountinfo.empty()) out["mountinfo"] = r.mountinfo;
  if (!r.net_dev.empty()) {
    json names = json::array();
    for (const auto n : proto::net_dev_interfaces(r.net_dev)) names.push_back(n);
    out["interfaces"] = std::move(names);
  }
  return out;
}

}  // namespace

StartedProbe start_self_probe(Sandbox& sandbox) {
  StartedProbe p;
  if (StartProbe started = sandbox.take_start_probe(); started.call) {
    p.output = std::move(started.output);
    p.call = std::move(started.call);
    p.inside_only = started.inside_only;
    return p;
  }
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
  p.output = std::make_unique<KeptOutput>();
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
  // The host's own reads need nothing from the probe. Made as the sandbox
  // started (StartReadback), what is left of them is quick: done here. Else
  // PID 1 is read now, beside the probe (about half a millisecond here,
  // mostly stopping PID 1 to read its seccomp programs), so the report
  // waits for the slower of the two only.
  const int pid = sandbox.init_pid();
  const StartReadback* pid1 = sandbox.start_readback();
  StartReadback now;
  nlohmann::json shared;
  const auto read_host = [&, inside_only = probe.inside_only] {
    if (pid1 == nullptr && pid > 0) {
      now = host::read_back_pid1(pid, /*shared_files=*/inside_only);
      pid1 = &now;
    }
    read_host_side(sandbox, pid1, f);
    if (inside_only && pid1 != nullptr) shared = shared_facts(*pid1);
  };
  std::thread host_side;
  if (pid1 != nullptr) {
    read_host();
  } else {
    host_side = std::thread(read_host);
  }
  auto ran = probe.call->wait();
  if (host_side.joinable()) host_side.join();
  const KeptOutput& sink = *probe.output;
  if (!ran) return make_error("boundary report: self-probe", ran.error().to_string());
  if (ran->exit_code != 0) {
    return make_error("boundary report: self-probe",
                      "exited " + std::to_string(ran->exit_code) + ": " + sink.err);
  }
  f.inside = rf::parse_json_or_discarded(sink.out);
  if (!f.inside.is_object())
    return make_error("boundary report: self-probe", "its output is not a JSON object");
  // What an inside-only probe left out, as the host read it from PID 1
  // (named in "read_by_host"); a key the probe printed after all is its own.
  if (f.inside.value("scope", "") == "inside_only" && shared.is_object()) {
    nlohmann::json by_host = nlohmann::json::array();
    for (auto& [k, v] : shared.items()) {
      if (f.inside.contains(k)) continue;
      by_host.push_back(k);
      f.inside[k] = std::move(v);
    }
    f.inside["read_by_host"] = std::move(by_host);
  }
  return f;
}

}  // namespace rf::proof
