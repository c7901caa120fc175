// The tool runner's JIT credential server (sandbox side, protocol 0.2; the
// wire format is in cred_socket.h). Every process of the sandbox may connect
// to the abstract socket and ask for a credential; the server reads the one
// request line, notes the asker's pid (SO_PEERCRED, as the sandbox sees it),
// and hands the request to the runner, which forwards it to the host as a
// cred_request frame. The host's cred_answer comes back through answer(): the
// server writes it, and the granted value, to that connection and closes it.
//
// Nothing is decided here: the host evaluates the policy. A connection that
// goes away before its answer drops it (a late value is never written
// anywhere), and the host is told (cred_withdrawn), so that no human is left
// asked on behalf of a process that is gone. At most kMaxPending requests
// wait at once; more are answered "busy" at once. The value's bytes are wiped
// from the server's buffers once written.
//
// Driven by the runner's epoll loop through a registration hook, like the
// egress bridge; it knows nothing of frames.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "core/result.h"
#include "core/unique_fd.h"
#include "proto/messages.h"

namespace rf::runner {

class CredServer {
 public:
  static constexpr size_t kMaxPending = 16;

  // Sets the epoll interest of `fd` (0 removes it); tags stay below 2^62.
  using WatchFn = std::function<void(int fd, uint64_t tag, uint32_t events)>;
  // Hands a parsed request on (to the host). Returns false when the host
  // takes no requests (it speaks protocol 0.1): the asker is refused at once.
  using ForwardFn = std::function<bool(const proto::CredRequest&)>;
  // Tells the host that the asker of forwarded request `request` left
  // before its answer.
  using WithdrawFn = std::function<void(uint32_t request)>;

  // Listens on `name` ("@ringfence-cred": abstract). An error names it.
  static Result<std::unique_ptr<CredServer>> listen(const std::string& name, WatchFn watch,
                                                    ForwardFn forward, WithdrawFn withdraw);
  ~CredServer();
  CredServer(const CredServer&) = delete;
  CredServer& operator=(const CredServer&) = delete;

  void on_event(uint64_t tag, uint32_t events);
  // The host's answer to request `a.request`; `value` only when granted.
  // Unknown requests (the asker left) are ignored.
  void answer(const proto::CredAnswer& a, std::string_view value);
  size_t connections() const { return conns_.size(); }

 private:
  struct Conn;
  CredServer(WatchFn watch, ForwardFn forward, WithdrawFn withdraw, UniqueFd listener);
  void on_listener();
  void on_conn(uint64_t id, uint32_t events);
  void take_line(uint64_t id, Conn& c);
  void reply(uint64_t id, Conn& c, bool granted, const std::string& message,
             std::string_view value = {});
  bool flush(Conn& c);  // false: the connection is done (written out, or broken)
  void close_conn(uint64_t id);

  WatchFn watch_;
  ForwardFn forward_;
  WithdrawFn withdraw_;
  UniqueFd listener_;
  uint64_t next_id_ = 1;
  uint32_t next_request_ = 1;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<uint32_t, uint64_t> waiting_;  // request -> connection
};

}  // namespace rf::runner
