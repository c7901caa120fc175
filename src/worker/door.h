// A worker's door (issue 39): where front doors (`ringfence serve`, on this
// host or another of the fleet) reach the sandboxes their clients make on
// this worker (worker/door_sandboxes.h). `serve` is a front door, not a
// second engine: it authenticates its client, checks the principal and the
// operator policy, places the sandbox on a worker and forwards here.
//
// HTTP/1.1 (httpd/), on a unix socket in the state dir (mode 0600), or on
// HOST:PORT (`worker start --door-listen`) for a fleet. The address and a
// key of 256 random bits are written to the worker's row of the store; a
// request without that key (Authorization: Door KEY) gets a 401. Each
// request names the project it acts for (X-Ringfence-Project) and who asked
// (X-Ringfence-Actor), which the front door took from its client's token.
//
//   POST    /door/v1/sandboxes                   the spec (JSON)      201 the sandbox
//   GET     /door/v1/sandboxes/{id}                                   200 the sandbox
//   DELETE  /door/v1/sandboxes/{id}                                   204
//   POST    /door/v1/sandboxes/{id}/exec         the call (JSON)      200 an event stream:
//           started {pid}, stdout/stderr {data}, then exit {result} or error {status, error}
//   GET|PUT /door/v1/sandboxes/{id}/files?path=P[&mode=0644]
//   GET     /door/v1/sandboxes/{id}/files:list?path=P
//   ...     /door/v1/sandboxes/{id}/processes[/{pid}[/OP]] (sandbox/process_request.h);
//           /output with Accept: text/event-stream streams stdout/stderr
//           {data, offset}, skipped {bytes}, then end {process}
//   ANY     /door/v1/sandboxes/{id}/ports/{port}/PATH  relayed to 127.0.0.1:PORT inside
// Errors: {"error", "field", "status"} with the status the API answers.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"
#include "httpd/http_server.h"
#include "worker/door_sandboxes.h"

namespace rf::worker {

struct DoorOptions {
  std::string state_dir;  // the unix socket's directory
  std::string listen;     // HOST:PORT for a fleet; "" = the unix socket
};

// The JSON of a sandbox, as the door and the API answer it.
nlohmann::json door_sandbox_json(const DoorSandbox& s, const std::string& worker_id);

class Door {
 public:
  static Result<std::unique_ptr<Door>> open(DoorSandboxes& sandboxes, const DoorOptions& options,
                                            std::string worker_id);
  ~Door();  // stop()
  Door(const Door&) = delete;
  Door& operator=(const Door&) = delete;

  // "unix:PATH" or "HOST:PORT" as bound, and the key front doors present.
  const std::string& address() const;
  const std::string& key() const { return key_; }
  void stop();

 private:
  Door(DoorSandboxes& sandboxes, std::string worker_id, std::string key)
      : sandboxes_(sandboxes), worker_id_(std::move(worker_id)), key_(std::move(key)) {}
  void handle(const httpd::Request& request, httpd::Responder& out);
  // /door/v1/sandboxes/{id}/ports/{port}/... (sandbox/port_request.h).
  void port(DoorSandbox& sandbox, const std::string& port, const httpd::Request& request,
            httpd::Responder& out);
  // /door/v1/sandboxes/{id}/processes... (sandbox/process_request.h).
  void processes(DoorSandbox& sandbox, const std::vector<std::string>& rest,
                 const std::map<std::string, std::string>& query, const httpd::Request& request,
                 httpd::Responder& out);

  DoorSandboxes& sandboxes_;
  std::string worker_id_;
  std::string key_;
  std::string unix_path_;
  std::unique_ptr<httpd::HttpServer> server_;
};

}  // namespace rf::worker
