// Host side: the translation between the Sandbox API and the tool runner's
// protocol that every backend running the tool runner shares: an ExecCall (plus
// the spec's defaults) becomes an ExecRequest, and the runner's ExitStatus
// becomes an ExecResult.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "proto/messages.h"
#include "sandbox/sandbox.h"
#include "sandbox/spec.h"

namespace rf::host {

// The request for `call` in a sandbox made from `spec`. Its environment is
// `base_env`, then (network proxy) the proxy's variables, then the spec's env,
// then the call's (later wins); timeout and
// output cap are the call's when set, else the spec's; cwd is the call's as given.
proto::ExecRequest make_exec_request(const ExecCall& call, const SandboxSpec& spec,
                                     std::map<std::string, std::string> base_env);

// The runner's arguments for spec.probe_at_start: --self-probe-at-start and
// the names of the environment a call with no env of its own gets (the
// values stay out of argv), and with `inside_only` (a host that reads the
// sandbox's PID 1 itself) --self-probe-inside-only; none without it.
std::vector<std::string> start_probe_args(const SandboxSpec& spec, bool inside_only);

// How the call ended, as the runner reported it. Backends add what only they
// know (cgroup counters: oom_killed, "memory", "pids").
ExecResult to_exec_result(const proto::ExitStatus& status);

}  // namespace rf::host
