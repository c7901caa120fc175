// `rf-cred`: the client processes in a sandbox run to ask the host for a
// credential just in time (sandbox side). The tool runner's binary is also
// rf-cred: it answers to that name (a symlink /.ringfence/bin/rf-cred) and to
// `ringfence-tool-runner cred ...`.
//
//   rf-cred get NAME [--scope SCOPE] [--reason TEXT]
//
// Granted: the value on stdout and nothing else, exit 0. Refused (by the
// policy, a human, a timeout, or because the sandbox takes no JIT requests):
// the reason on stderr, exit 1. Bad usage: exit 2.
#pragma once

namespace rf::runner {

int cred_main(int argc, char** argv);

}  // namespace rf::runner
