// A client's request relayed to a port inside a sandbox, its answer relayed
// back as it comes (issue 41 item 5): the one path under serve's and the
// worker door's port routes. Nothing is buffered whole: an answer of any
// size streams (its body at most the runner's queue and the host's per-call
// bound ahead of the client), and a WebSocket keeps the connection open
// both ways until either side closes it.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "sandbox/port_request.h"
#include "sandbox/sandbox.h"

namespace rf {

// Where an answer goes: its head once (status, passing headers), then its
// body's pieces. Each says false when the client is gone (the port's
// connection is closed then).
struct PortAnswerSink {
  std::function<bool(int status, HeaderList&& headers)> head;
  std::function<bool(std::string_view bytes)> body;
};

// `request` (port_request_text's) to `port`, its answer to `sink`. An
// error before the head was told means the client got nothing (answer it
// 502); after, the answer broke off midway (end the client's connection).
// `*head_told` says which.
Status relay_port_answer(Sandbox& sandbox, int port, const std::string& request, bool head_request,
                         const PortAnswerSink& sink, bool* head_told);

// A connection taken over from HTTP (an Upgrade), relayed to `port`:
// `request` (port_upgrade_request_text's) first, then the client's bytes
// (`early` ones first) to the port and the port's (its 101 head first) to
// the client, until either closes, `stop_fd` is readable, or the client
// reads nothing for `write_timeout_ms`. The sandbox's runner carries the
// traffic; the sandbox gets no route.
Status relay_port_upgrade(Sandbox& sandbox, int port, const std::string& request, int client_fd,
                          std::string early, int stop_fd, int write_timeout_ms = 30'000);

// The ports a process listens on inside (its /proc/net/tcp and tcp6, read
// through the runner), each once, lowest first.
Result<std::vector<ListeningPort>> listening_ports(Sandbox& sandbox);

}  // namespace rf
