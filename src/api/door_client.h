// serve's side of a worker's door (worker/door.h): HTTP/1.1 to the worker
// that holds a sandbox, on its unix socket or HOST:PORT, with the key the
// store gives for it. Connections are kept per door for the next request. An
// event stream (a call's output) comes event by event; when the client of
// the front door goes away, the connection to the door is closed, which ends
// the call at the worker.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "core/result.h"
#include "core/unique_fd.h"

namespace rf::api {

struct DoorAddress {
  std::string worker;   // its id, for errors
  std::string address;  // "unix:PATH" or "HOST:PORT"
  std::string key;
};

struct DoorReply {
  int status = 0;
  std::string content_type;
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // all of them, as sent
};

class DoorClient {
 public:
  using Headers = std::map<std::string, std::string>;
  DoorClient();
  ~DoorClient();  // closes every kept connection
  DoorClient(const DoorClient&) = delete;
  DoorClient& operator=(const DoorClient&) = delete;
  // One exchange. Errors (ErrorCode::kUnavailable) say the door could not be
  // reached or answered nothing whole within `timeout`.
  Result<DoorReply> call(const DoorAddress& door, std::string_view method,
                         const std::string& target, const Headers& headers, std::string_view body,
                         std::chrono::milliseconds timeout = std::chrono::seconds(60));
  // An exchange answered with an event stream: each event to `on_event`
  // (name, data) as it comes. `gone` is asked every 100 ms; once it says so,
  // the connection is closed and the result is an error. Returns the status
  // (a non-200 answer's body is in `*body`).
  Result<int> stream(const DoorAddress& door, std::string_view method, const std::string& target,
                     const Headers& headers, std::string_view body,
                     const std::function<void(std::string_view, std::string_view)>& on_event,
                     const std::function<bool()>& gone, std::string* error_body);
  // An exchange whose answer is relayed as it comes (a port's, which may be
  // any size): its status and every header to `on_head` once, its body's
  // pieces to `on_body`; either says false when its client left, and the
  // connection is closed. A new connection each time, closed after.
  Status relay(
      const DoorAddress& door, std::string_view method, const std::string& target,
      const Headers& headers, std::string_view body,
      const std::function<bool(int, std::vector<std::pair<std::string, std::string>>&&)>& on_head,
      const std::function<bool(std::string_view)>& on_body);
  // A WebSocket handshake (GET `target`, `headers` with Upgrade) to the
  // door, then the bytes of `client_fd` (a connection taken over from HTTP;
  // `early` first) and of the door's connection to each other until either
  // closes or `stop_fd` is readable.
  Status splice(const DoorAddress& door, const std::string& target, const Headers& headers,
                int client_fd, std::string early, int stop_fd);

 private:
  Result<UniqueFd> connect(const DoorAddress& door);
  UniqueFd take_idle(const std::string& address);
  void give_back(const std::string& address, UniqueFd fd);

  // Kept connections unused for 2 s are closed: a burst of requests leaves
  // no descriptors behind once it is over.
  void prune_loop();

  struct Kept {
    UniqueFd fd;
    std::chrono::steady_clock::time_point since;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::map<std::string, std::vector<Kept>> idle_;  // by address
  std::thread pruner_;
};

}  // namespace rf::api
