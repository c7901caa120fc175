// Sandbox side: `ringfence-tool-runner self-probe`, run by the host as an
// ordinary tool call (so it has exactly what every tool process has), prints
// one JSON object of what the kernel says this process is bound by, read from
// /proc/self and friends, and the outcome of a handful of attacks that must
// fail. The host turns it into the boundary report (proof/boundary_report.h);
// docs/proof.md lists every field. Names of environment variables only, never
// their values.
//
// In a fork: a call whose command is this very binary's self-probe (the
// same file, by device and inode, as the runner's /proc/self/exe) is not
// exec'd. Its command child, forked from the runner (or from the call's
// supervisor where the runner is not PID 1) and set up
// exactly as for an exec (process group, stdio, signals, descriptors, cwd,
// the call's environment as `environ`), runs self_probe_main itself. An exec
// would only start the same code again: glibc's start alone is ~0.3 ms of
// cpuid exits on a VM. What an exec changes and the fork keeps: the
// capability sets an exec would clear to the ambient set (the probe reports
// its parent's own, never fewer than a command has, so a bound can only
// look weaker), and the non-dumpable flag (it holds a copy of the runner's
// memory, which no other process of the sandbox may read). "start" in the
// output says which way it ran, "dumpable" that the fork stayed unreadable.
//
// At the start: with --self-probe-at-start the runner starts the probe
// itself, before its hello, as call proto::kStartProbeCallId (forked as
// above, its environment the names the host passed, values empty), and
// waits for its end right after the handshake, before any call: its facts
// are the first frames the host gets.
//
// Inside only (`self-probe --inside-only`, which the host asks for when it
// reads the sandbox's PID 1 on its own kernel, proof/boundary_facts.h):
// what PID 1's /proc says as well as this process's (the id maps, status,
// rlimits, mount table, interfaces and cgroup files, all shared by every
// process of the sandbox) is left to the host, which reads it there, where
// nothing inside can tamper with it. What stays is what only a tool's own
// process shows: its ids, namespaces, call domain, environment, and the
// attacks: 100-150 us inside a fresh sandbox whose namespaces the host has
// read already, against 450-650 us for the whole probe (timed inside).
#pragma once

namespace rf::runner {

enum class ProbeStart { kExec, kForked };
enum class ProbeScope { kAll, kInsideOnly };

// Prints the JSON to stdout; 0 when it was written.
int self_probe_main(ProbeStart start, ProbeScope scope = ProbeScope::kAll);
// The scope `argc`/`argv` ask for (argv[0] the program, argv[1]
// "self-probe", then nothing or --inside-only); *ok false for anything else.
ProbeScope probe_scope(int argc, const char* const* argv, bool* ok);

}  // namespace rf::runner
