// Sandbox side: `ringfence-tool-runner self-probe`, run by the host as an
// ordinary tool call (so it has exactly what every tool process has), prints
// one JSON object of what the kernel says this process is bound by, read from
// /proc/self and friends, and the outcome of a handful of attacks that must
// fail. The host turns it into the boundary report (proof/boundary_report.h);
// docs/proof.md lists every field. Names of environment variables only, never
// their values.
#pragma once

namespace rf::runner {

// Prints the JSON to stdout; 0 when it was written.
int self_probe_main();

}  // namespace rf::runner
