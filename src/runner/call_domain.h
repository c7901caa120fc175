// Sandbox side: each tool call's processes in a Landlock domain of their own.
//
// Every call in a sandbox runs as the one sandbox uid (host::kSandboxUid), and
// the kernel lets a process of a uid read /proc/<pid>/environ and
// /proc/<pid>/mem of any other dumpable process of that uid. So a call could
// read the values injected into another running beside it in the same
// sandbox (a per_run sandbox's identity-scoped steps, JIT grants). Landlock
// adds a check of its own to those reads (ptrace_may_access: environ, mem,
// maps, fd/, and ptrace itself): a process in a domain reaches only processes
// in the same domain or in domains nested inside it. Each command child enters
// a new domain before it execs, so two calls are siblings and neither reaches
// the other (EACCES); a call's own processes reach each other as before, and
// the runner and its supervisors, in no domain, reach every call.
//
// The domain restricts nothing else. Its ruleset handles only two file
// rights, execute and refer (a ruleset must handle something, and a scope
// alone needs ABI 6), and allows both beneath "/", which holds every path of
// the sandbox; files of the kernel's internal mounts (memfd, pipes) are never
// checked. Signals between calls are left alone (no LANDLOCK_SCOPE_SIGNAL):
// `kill` of another call's process still works, as in any shared machine.
//
// What it does not close: calls of one sandbox share its files, so a call that
// can change what another runs (a script in /workspace) can still reach that
// call's environment through it (docs/identity.md, "Injection").
//
// Needs Landlock ABI 2 or later (Linux 5.19; ABI 1 denies every rename across
// directories in a domain) and no_new_privs, as in every native and docker
// sandbox. Without them no call gets a domain, and the boundary report says
// the bound `calls.isolated` is not held.
#pragma once

namespace rf::runner {

// Makes the ruleset every command child of this process enters, once per
// process that starts commands (the runner as PID 1, or each call
// supervisor), after it has closed the descriptors it does not keep. Returns
// the Landlock ABI in use, or 0 when calls get no domain.
int prepare_call_domains();

// In a command child, before exec: enters a new domain. 0, or the errno (the
// child must then not exec: fail closed). Only system calls, as a vfork child
// needs. 0 and nothing done when prepare_call_domains returned 0.
int enter_call_domain();

// The ABI prepare_call_domains found (0: none).
int call_domain_abi();

}  // namespace rf::runner
