// The JIT credential socket's wire format (sandbox side, protocol 0.2), shared
// by the tool runner that serves it (cred_server.h) and `rf-cred`, the client
// processes in the sandbox run (cred_client.h).
//
// The socket is an abstract unix socket of the sandbox's own network
// namespace, so nothing outside the sandbox can reach it. One request per
// connection:
//   client -> runner  one line: {"name": "...", "scope": "...", "reason": "..."}\n
//                     at most kMaxCredLine bytes with the newline
//   runner -> client  one line: {"granted": true|false, "message": "..."}\n
//                     then, when granted, the value's bytes; then EOF
#pragma once

#include <cstddef>

#include "proto/messages.h"

namespace rf::runner {

using proto::kCredSocketName;
inline constexpr size_t kMaxCredLine = 8192;

}  // namespace rf::runner
