// The sandboxes API and MCP clients hold (issues 14, 39): one interface the
// routes and MCP's tools use, two places they live.
//   WorkerSandboxes  `serve`: on the workers of the store, placed as calls are
//                    (the project's live workers, labels), recorded in the
//                    store, reached through each worker's door
//                    (worker/door.h): serve is a front door, not an engine.
//   LocalSandboxes   `ringfence mcp` on stdio: the local user's own door, as
//                    `sandbox exec` is, in its process.
// A project never sees another's: find() answers nothing, as for an unknown
// id. What a tenant asks for is bounded by its project's operator policy,
// here and again where the sandbox lives.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "api/door_client.h"
#include "calls/abandon_watch.h"
#include "core/result.h"
#include "httpd/http_server.h"
#include "policy/operator_policy.h"
#include "proto/messages.h"
#include "sandbox/port_relay.h"
#include "sandbox/port_request.h"
#include "sandbox/process_request.h"
#include "sandbox/process_table.h"
#include "sandbox/sandbox.h"
#include "store/labels.h"
#include "store/sandbox_lifetimes.h"
#include "store/store.h"

namespace rf::api {

// Why a request failed, with the HTTP status it maps to.
struct ServiceError {
  int status = 400;
  std::string field;  // the spec or request field at fault, when one is
  std::string message;
};

template <class T>
using ServiceResult = std::variant<T, ServiceError>;

class SandboxService {
 public:
  using PolicyOf = std::function<Result<policy::OperatorPolicy>(const std::string& project)>;
  explicit SandboxService(PolicyOf policy) : policy_(std::move(policy)) {}
  virtual ~SandboxService() = default;

  // `spec_json`: a sandbox spec object (sandbox/spec.h); missing fields take
  // the CLI's defaults, lowered to the policy's ceilings. Refused naming the
  // field: id, workspace, labels and tls_intercept (the server's), a backend
  // this server does not run, network host unless allowed, and what the
  // project's operator policy does not allow (403). The answer is the
  // sandbox's JSON (id, project, backend, image, network, created_at, age_s,
  // setup_ms, calls_running, spec, and worker where it lives).
  virtual ServiceResult<nlohmann::json> create(const std::string& project, const std::string& actor,
                                               const std::string& spec_json) = 0;
  // A project's sandboxes ("" = every project's).
  virtual std::vector<nlohmann::json> list(const std::string& project) = 0;
  // nullopt when unknown or another project's.
  virtual std::optional<nlohmann::json> find(const std::string& project, const std::string& id) = 0;
  // false when unknown or another project's.
  virtual ServiceResult<bool> destroy(const std::string& project, const std::string& id,
                                      const std::string& actor) = 0;
  // One call, its timeout bounded by the policy (one the client gave above
  // the ceiling is refused). `client_gone` is asked while it runs: once it
  // says so, the call is killed.
  virtual ServiceResult<ExecResult> exec(const std::string& project, const std::string& id,
                                         const nlohmann::json& call, OutputSink& sink,
                                         const std::function<bool()>& client_gone) = 0;
  virtual ServiceResult<std::string> read_file(const std::string& project, const std::string& id,
                                               const std::string& path) = 0;
  virtual ServiceResult<size_t> write_file(const std::string& project, const std::string& id,
                                           const std::string& path, const std::string& data,
                                           uint32_t mode) = 0;
  // `depth` levels (sandbox/file_tree.h): 1 is the directory itself.
  virtual ServiceResult<std::vector<proto::FileInfo>> list_dir(const std::string& project,
                                                               const std::string& id,
                                                               const std::string& path,
                                                               int depth = 1) = 0;
  // lstat of one path (a symlink is "symlink", not followed).
  virtual ServiceResult<proto::FileInfo> stat(const std::string& project, const std::string& id,
                                              const std::string& path) = 0;
  // Make a directory, remove a path, rename one (sandbox/sandbox.h). Each
  // answers true; an unknown sandbox is a 404 (field id), what the sandbox
  // refuses a 400 naming the path.
  enum class FileOp { kMkdir, kMkdirParents, kRemove, kRemoveRecursive, kMove };
  virtual ServiceResult<bool> change_file(const std::string& project, const std::string& id,
                                          FileOp op, const std::string& path,
                                          const std::string& to = "") = 0;
  // A new lifetime from now (`timeout`: seconds or "10m"), bounded by the
  // project's sandbox_timeout_max; the sandbox's JSON. nullopt: unknown.
  virtual ServiceResult<std::optional<nlohmann::json>> set_timeout(const std::string& project,
                                                                   const std::string& id,
                                                                   const nlohmann::json& body) = 0;
  // Pause or resume sandbox `id` (issue 42; Sandbox::pause): its JSON,
  // "state" "paused" or "running"; nullopt: unknown.
  virtual ServiceResult<std::optional<nlohmann::json>> set_paused(const std::string& project,
                                                                  const std::string& id,
                                                                  bool paused,
                                                                  const std::string& actor) = 0;
  // Background processes (issue 41; sandbox/process_request.h): `request`
  // on sandbox `id`; its answer's JSON (null for a 204). An unknown sandbox
  // or pid, or another project's, is a 404.
  virtual ServiceResult<nlohmann::json> process(const std::string& project, const std::string& id,
                                                const ProcessRequest& request) = 0;
  // A process's output as events (follow_process_output's) from `from`
  // until it ends (true) or `gone` says so (false).
  using ProcessEvent = std::function<void(const char* name, const nlohmann::json& data)>;
  virtual ServiceResult<bool> follow_process(const std::string& project, const std::string& id,
                                             int pid, uint64_t from, const ProcessEvent& emit,
                                             const std::function<bool()>& gone) = 0;
  // A directory watched (issue 41; sandbox/watch_stream.h): its events to
  // `emit` until it ends (true) or `gone` says so (false); an error, before
  // any event, when it cannot be watched.
  virtual ServiceResult<bool> watch_dir(const std::string& project, const std::string& id,
                                        const std::string& path, bool recursive,
                                        const ProcessEvent& emit,
                                        const std::function<bool()>& gone) = 0;
  // A request to a port a process of sandbox `id` listens on (issue 41;
  // sandbox/port_relay.h): `target` as the port sees it ("/" and below),
  // the client's headers and body; the port's answer to `sink` as it comes.
  // An error means `sink` heard nothing (502 when nothing answers there);
  // false: the answer broke off after its head (end the client's connection).
  virtual ServiceResult<bool> port_request(const std::string& project, const std::string& id,
                                           int port, const std::string& method,
                                           const std::string& target, const HeaderList& headers,
                                           const std::string& body, const PortAnswerSink& sink) = 0;
  // The ports processes of sandbox `id` listen on now: {"ports": [{port,
  // address}]}, lowest first.
  virtual ServiceResult<nlohmann::json> ports(const std::string& project,
                                              const std::string& id) = 0;
  // A WebSocket handshake to a port: once the sandbox is known, the
  // client's connection is taken (`take_over`) and relayed both ways until
  // either side closes. An error means nothing was taken (answer it).
  using TakeOver = std::function<Result<httpd::RawConnection>()>;
  virtual ServiceResult<bool> port_upgrade(const std::string& project, const std::string& id,
                                           int port, const std::string& target,
                                           const HeaderList& headers,
                                           const TakeOver& take_over) = 0;
  // A project's named volumes (issue 41; sandbox/volume_request.h): made
  // ({name, size}, bounded by the policy's volume_size_max), listed, shown,
  // deleted (with their data; refused while a sandbox mounts one). Each
  // answers the volume's JSON ({name, size, size_bytes, created_at,
  // created_by, host}); an unknown one is a 404 naming `name`.
  virtual ServiceResult<nlohmann::json> create_volume(const std::string& project,
                                                      const std::string& actor,
                                                      const nlohmann::json& body) = 0;
  virtual ServiceResult<nlohmann::json> volumes(const std::string& project) = 0;
  virtual ServiceResult<nlohmann::json> volume(const std::string& project,
                                               const std::string& name) = 0;
  virtual ServiceResult<bool> delete_volume(const std::string& project, const std::string& name,
                                            const std::string& actor) = 0;
  // Ends every sandbox this process holds (LocalSandboxes); a front door holds none.
  virtual void destroy_all() {}

  // For /metrics.
  struct Counts {
    std::map<std::string, size_t> live_by_backend;
    uint64_t created = 0, destroyed = 0, create_failures = 0;
    std::vector<double> setup_ms;  // each creation's set-up time, newest last (bounded)
    uint64_t abandoned = 0;        // calls killed because their client went away
  };
  virtual Counts counts() = 0;

  // The project's operator policy, with this server's reserved endpoints
  // (read again at most once a second per project).
  Result<policy::OperatorPolicy> policy_of(const std::string& project);
  // Destinations no tenant's egress rule may reach ("HOST:PORT": this
  // server's listener, its store), from now on.
  void reserve(const std::vector<std::string>& endpoints);
  std::vector<std::string> reserved() const;

 protected:
  // The spec a client sent, checked as every door checks it (the fields the
  // server sets, the policy): the spec, and the limits it gave.
  // `allow_host`: this server lets clients ask for network host at all.
  ServiceResult<SandboxSpec> checked_spec(const std::string& project,
                                          const nlohmann::json& spec_json, bool allow_host);
  // A call as the client sent it, its timeout checked against the policy.
  ServiceResult<ExecCall> checked_call(const std::string& project, const nlohmann::json& call);
  void count_setup(double ms);

  mutable std::mutex mu_;
  uint64_t created_ = 0, destroyed_ = 0, create_failures_ = 0, abandoned_ = 0;
  std::vector<double> setup_ms_;

 private:
  struct CachedPolicy {
    std::shared_ptr<const policy::OperatorPolicy> policy;
    std::chrono::steady_clock::time_point fetched;
  };
  PolicyOf policy_;
  std::map<std::string, CachedPolicy> policies_;  // under mu_
  std::vector<std::string> reserved_;             // under mu_
};

// `ringfence mcp`'s sandboxes, in its own process (the local user's door).
struct LocalOptions {
  BackendKind backend = BackendKind::kNative;
  size_t max_per_project = 64;
};

class LocalSandboxes final : public SandboxService {
 public:
  using MakeBackend = std::function<Result<std::unique_ptr<Backend>>(BackendKind)>;
  LocalSandboxes(LocalOptions options, MakeBackend make_backend, PolicyOf policy = {});
  ~LocalSandboxes() override;  // destroy_all()

  ServiceResult<nlohmann::json> create(const std::string& project, const std::string& actor,
                                       const std::string& spec_json) override;
  std::vector<nlohmann::json> list(const std::string& project) override;
  std::optional<nlohmann::json> find(const std::string& project, const std::string& id) override;
  ServiceResult<bool> destroy(const std::string& project, const std::string& id,
                              const std::string& actor) override;
  ServiceResult<ExecResult> exec(const std::string& project, const std::string& id,
                                 const nlohmann::json& call, OutputSink& sink,
                                 const std::function<bool()>& client_gone) override;
  ServiceResult<std::string> read_file(const std::string& project, const std::string& id,
                                       const std::string& path) override;
  ServiceResult<size_t> write_file(const std::string& project, const std::string& id,
                                   const std::string& path, const std::string& data,
                                   uint32_t mode) override;
  ServiceResult<std::vector<proto::FileInfo>> list_dir(const std::string& project,
                                                       const std::string& id,
                                                       const std::string& path,
                                                       int depth = 1) override;
  ServiceResult<proto::FileInfo> stat(const std::string& project, const std::string& id,
                                      const std::string& path) override;
  ServiceResult<bool> change_file(const std::string& project, const std::string& id, FileOp op,
                                  const std::string& path, const std::string& to = "") override;
  ServiceResult<std::optional<nlohmann::json>> set_timeout(const std::string& project,
                                                           const std::string& id,
                                                           const nlohmann::json& body) override;
  ServiceResult<std::optional<nlohmann::json>> set_paused(const std::string& project,
                                                          const std::string& id, bool paused,
                                                          const std::string& actor) override;
  ServiceResult<nlohmann::json> process(const std::string& project, const std::string& id,
                                        const ProcessRequest& request) override;
  ServiceResult<bool> follow_process(const std::string& project, const std::string& id, int pid,
                                     uint64_t from, const ProcessEvent& emit,
                                     const std::function<bool()>& gone) override;
  ServiceResult<bool> watch_dir(const std::string& project, const std::string& id,
                                const std::string& path, bool recursive, const ProcessEvent& emit,
                                const std::function<bool()>& gone) override;
  ServiceResult<nlohmann::json> create_volume(const std::string& project, const std::string& actor,
                                              const nlohmann::json& body) override;
  ServiceResult<nlohmann::json> volumes(const std::string& project) override;
  ServiceResult<bool> port_request(const std::string& project, const std::string& id, int port,
                                   const std::string& method, const std::string& target,
                                   const HeaderList& headers, const std::string& body,
                                   const PortAnswerSink& sink) override;
  ServiceResult<bool> port_upgrade(const std::string& project, const std::string& id, int port,
                                   const std::string& target, const HeaderList& headers,
                                   const TakeOver& take_over) override;
  ServiceResult<nlohmann::json> ports(const std::string& project, const std::string& id) override;
  ServiceResult<nlohmann::json> volume(const std::string& project,
                                       const std::string& name) override;
  ServiceResult<bool> delete_volume(const std::string& project, const std::string& name,
                                    const std::string& actor) override;
  void destroy_all() override;
  Counts counts() override;

 private:
  struct Held {
    std::string project;
    std::chrono::system_clock::time_point created;
    std::chrono::microseconds setup{0};
    std::shared_ptr<Sandbox> sandbox;
    std::atomic<int> running{0};
    std::unique_ptr<ProcessTable> processes;
  };
  std::shared_ptr<Held> held(const std::string& project, const std::string& id);
  static nlohmann::json view(const Held& h);
  Result<Backend*> backend_for(BackendKind kind);

  LocalOptions options_;
  MakeBackend make_backend_;
  calls::ClientWatcher watcher_;
  std::map<BackendKind, std::unique_ptr<Backend>> backends_;  // under mu_
  std::map<std::string, std::shared_ptr<Held>> sandboxes_;    // by id, under mu_
};

// serve's sandboxes: on the workers of the store, through their doors.
struct WorkerSandboxesOptions {
  bool allow_host_network = false;
  size_t max_per_project = 64;
};

class WorkerSandboxes final : public SandboxService {
 public:
  WorkerSandboxes(store::Store& store, WorkerSandboxesOptions options, PolicyOf policy);

  ServiceResult<nlohmann::json> create(const std::string& project, const std::string& actor,
                                       const std::string& spec_json) override;
  std::vector<nlohmann::json> list(const std::string& project) override;
  std::optional<nlohmann::json> find(const std::string& project, const std::string& id) override;
  ServiceResult<bool> destroy(const std::string& project, const std::string& id,
                              const std::string& actor) override;
  ServiceResult<ExecResult> exec(const std::string& project, const std::string& id,
                                 const nlohmann::json& call, OutputSink& sink,
                                 const std::function<bool()>& client_gone) override;
  ServiceResult<std::string> read_file(const std::string& project, const std::string& id,
                                       const std::string& path) override;
  ServiceResult<size_t> write_file(const std::string& project, const std::string& id,
                                   const std::string& path, const std::string& data,
                                   uint32_t mode) override;
  ServiceResult<std::vector<proto::FileInfo>> list_dir(const std::string& project,
                                                       const std::string& id,
                                                       const std::string& path,
                                                       int depth = 1) override;
  ServiceResult<proto::FileInfo> stat(const std::string& project, const std::string& id,
                                      const std::string& path) override;
  ServiceResult<bool> change_file(const std::string& project, const std::string& id, FileOp op,
                                  const std::string& path, const std::string& to = "") override;
  ServiceResult<std::optional<nlohmann::json>> set_timeout(const std::string& project,
                                                           const std::string& id,
                                                           const nlohmann::json& body) override;
  ServiceResult<std::optional<nlohmann::json>> set_paused(const std::string& project,
                                                          const std::string& id, bool paused,
                                                          const std::string& actor) override;
  ServiceResult<nlohmann::json> process(const std::string& project, const std::string& id,
                                        const ProcessRequest& request) override;
  ServiceResult<bool> follow_process(const std::string& project, const std::string& id, int pid,
                                     uint64_t from, const ProcessEvent& emit,
                                     const std::function<bool()>& gone) override;
  ServiceResult<bool> watch_dir(const std::string& project, const std::string& id,
                                const std::string& path, bool recursive, const ProcessEvent& emit,
                                const std::function<bool()>& gone) override;
  ServiceResult<nlohmann::json> create_volume(const std::string& project, const std::string& actor,
                                              const nlohmann::json& body) override;
  ServiceResult<nlohmann::json> volumes(const std::string& project) override;
  ServiceResult<bool> port_request(const std::string& project, const std::string& id, int port,
                                   const std::string& method, const std::string& target,
                                   const HeaderList& headers, const std::string& body,
                                   const PortAnswerSink& sink) override;
  ServiceResult<bool> port_upgrade(const std::string& project, const std::string& id, int port,
                                   const std::string& target, const HeaderList& headers,
                                   const TakeOver& take_over) override;
  ServiceResult<nlohmann::json> ports(const std::string& project, const std::string& id) override;
  ServiceResult<nlohmann::json> volume(const std::string& project,
                                       const std::string& name) override;
  ServiceResult<bool> delete_volume(const std::string& project, const std::string& name,
                                    const std::string& actor) override;
  Counts counts() override;

 private:
  // The door of the worker holding `id` for `project`; nullopt: unknown
  // (or another project's, or ended), as a 404 answers it. Kept a second:
  // every request to a sandbox asks, and a sandbox does not move.
  std::optional<DoorAddress> door_of(const std::string& project, const std::string& id);
  void forget_door(const std::string& id);
  std::optional<DoorAddress> door_from_store(const std::string& project, const std::string& id);
  // A live worker with a door that may serve `project` and has `labels`,
  // the least loaded (calls are routed by the same labels).
  // `host`: only a worker on that host ("": any), where the volumes a
  // sandbox mounts live.
  ServiceResult<DoorAddress> place(const std::string& project, const Labels& labels,
                                   const std::string& host = "");
  static ServiceError error_of(const DoorReply& reply);
  // `method` of /door/v1/sandboxes/{id}{op} at the door holding `id`: the
  // sandbox's JSON it answers (200); nullopt: unknown there.
  ServiceResult<std::optional<nlohmann::json>> sandbox_at_door(const std::string& project,
                                                               const std::string& id,
                                                               const char* method, const char* op,
                                                               const std::string& actor,
                                                               const std::string& body);
  // A door's event stream at `target` below the sandbox, each event to
  // `emit` until it ends (true: its `end` came) or `gone` says so (false).
  ServiceResult<bool> events_from_door(const std::string& project, const std::string& id,
                                       const std::string& target, const ProcessEvent& emit,
                                       const std::function<bool()>& gone);
  static nlohmann::json view_of(const store::SandboxRow& row,
                                const store::SandboxLifetime* lifetime);
  DoorClient::Headers headers(const std::string& project, const std::string& actor) const;

  store::Store& store_;
  WorkerSandboxesOptions options_;
  DoorClient doors_;
  struct KnownDoor {
    std::string project;
    DoorAddress door;
    std::chrono::steady_clock::time_point fetched;
  };
  std::map<std::string, KnownDoor> known_;  // by sandbox id, under mu_
};

// A port's whole answer (for MCP's sandbox_port_fetch, which answers in one
// message): port_request's, kept; an answer over `max` bytes is a 502.
ServiceResult<PortAnswer> fetch_port(SandboxService& sandboxes, const std::string& project,
                                     const std::string& id, int port, const std::string& method,
                                     const std::string& target, const HeaderList& headers,
                                     const std::string& body, size_t max);

}  // namespace rf::api
