// Host side (above the backends: any sandbox that runs the tool runner): the facts a sandbox's
// boundary report is judged from (proof/boundary_report.h), gathered, never copied from its spec:
//   - `ringfence-tool-runner self-probe` run in the sandbox as an ordinary
//     tool call: namespaces, maps, capabilities, no_new_privs, seccomp mode,
//     rlimits, mounts, interfaces, environment keys, attacks that must fail;
//   - the host's own namespaces, to compare with (when the sandbox's PID 1 is
//     on this kernel);
//   - the sandbox cgroup's limit files, read back by the host;
//   - each seccomp program as the kernel holds it, read from the sandbox's
//     PID 1 with PTRACE_SECCOMP_GET_FILTER (root only), hashed;
//   - the published digests of the profile, and the runner binary's sha256.
// Works for every backend whose sandboxes run the tool runner.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "proof/boundary_report.h"
#include "sandbox/sandbox.h"

namespace rf::proof {

// The self-probe's call, sent ahead (start_self_probe) and gathered later.
struct StartedProbe {
  std::unique_ptr<KeptOutput> output;  // its stdout (the facts), stderr (for an error)
  std::unique_ptr<StartedCall> call;   // null: not started
  Error error;                         // why it could not be (when call is null)
  bool inside_only = false;            // StartProbe::inside_only
};

// The self-probe the sandbox started with (SandboxSpec::probe_at_start,
// Sandbox::take_start_probe) when it has one not yet taken; else sends the
// self-probe's call now (Sandbox::start_exec): started before a sandbox's
// first call, it reaches the runner first and runs beside that call instead
// of behind it. Cheap: it waits for nothing.
StartedProbe start_self_probe(Sandbox& sandbox);
// Gathers the facts, with `probe` when it was started ahead, else starting it.
Result<BoundaryFacts> gather_boundary_facts(Sandbox& sandbox, StartedProbe probe = {});

// SHA-256 (hex) of each program of the named profile, in load order: what
// the profile publishes (docs/proof.md; `ringfence keys show --profile`).
Result<std::vector<std::string>> seccomp_profile_digests(const std::string& profile);

// SHA-256 (hex) of the tool runner binary, read and hashed once per process
// (about 12 ms for its 2 MB with libsodium's portable SHA-256), then cached;
// empty when it cannot be read.
std::string runner_sha256();
// The same, made now, through `cache_file` (under a state dir): a digest
// kept there is used while the binary's path, device, inode, size, mtime and
// ctime are the ones it was made from (a write to the file changes its
// ctime); otherwise the binary is hashed and the file rewritten. For
// short-lived processes (`sandbox exec --receipt`), at their start.
void warm_runner_sha256(const std::string& cache_file);
// Names `cache_file` for whichever thread asks for the digest first, without
// making it: call before starting the threads that may ask (a report's
// thread may ask before the thread that warms it runs).
void keep_runner_sha256_in(const std::string& cache_file);

}  // namespace rf::proof
