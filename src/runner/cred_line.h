// The one request line a process in the sandbox writes to the credential
// socket (cred_socket.h), parsed (sandbox side). Untrusted bytes: fuzzed
// (fuzz/jit_request_fuzz.cc). An error's message is what the asker is told.
#pragma once

#include <string>

#include "core/result.h"
#include "proto/messages.h"

namespace rf::runner {

// `line` without its newline: {"name": "...", "scope": "...", "reason": "..."},
// every field a string, name required, within the protocol's bounds. The
// request number and pid are left for the server to fill in.
Result<proto::CredRequest> parse_cred_line(const std::string& line);

}  // namespace rf::runner
