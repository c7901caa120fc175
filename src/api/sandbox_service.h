// The sandboxes `ringfence serve` holds for API and MCP clients (issue 14):
// made from the spec JSON the spec parser reads, owned by one project each,
// kept until deleted (or the server stops), used by many requests at once.
// A project never sees another's: find() answers nothing, as for an unknown id.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "core/result.h"
#include "policy/operator_policy.h"
#include "sandbox/sandbox.h"

namespace rf::api {

struct ApiSandbox {
  std::string project;
  std::chrono::system_clock::time_point created;
  std::chrono::microseconds setup{0};
  std::shared_ptr<Sandbox> sandbox;
  std::atomic<int> running{0};  // calls in flight
  const std::string& id() const { return sandbox->id(); }
};

struct ServiceOptions {
  BackendKind backend = BackendKind::kNative;
  bool allow_host_network = false;
  size_t max_per_project = 64;
  // A project's operator policy (policy/load.h); unset: the built-in one.
  // Read again at most once a second per project.
  std::function<Result<policy::OperatorPolicy>(const std::string& project)> policy;
};

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
  using MakeBackend = std::function<Result<std::unique_ptr<Backend>>(BackendKind)>;
  SandboxService(ServiceOptions options, MakeBackend make_backend);
  ~SandboxService();  // destroy_all()

  // `spec_json` is a sandbox spec object (sandbox/spec.h); missing fields take
  // the CLI's defaults, lowered to the operator policy's ceilings. Refused
  // with the field named: host paths (workspace), labels, tls_intercept and
  // the id (the server sets them: an id of the client's would tell it which
  // ids other projects use), a backend this server does not run, network
  // host unless allowed, and what the project's operator policy does not
  // allow (403: a limit above its ceiling, a network, an egress rule).
  ServiceResult<std::shared_ptr<ApiSandbox>> create(const std::string& project,
                                                    const std::string& spec_json);
  // One call in `sandbox`, its timeout bounded by the operator policy (a
  // timeout the client gave above the ceiling is refused). While it runs,
  // `client_gone` is asked every 100 ms: once it says so, the call is killed
  // and the result says why (error "the client went away").
  ServiceResult<ExecResult> exec(ApiSandbox& sandbox, ExecCall call, bool timeout_given,
                                 OutputSink& sink, const std::function<bool()>& client_gone);
  // The project's operator policy, with this server's reserved endpoints.
  Result<policy::OperatorPolicy> policy_of(const std::string& project);
  // Destinations no tenant's egress rule may reach ("HOST:PORT": this
  // server's listener, its store), from now on.
  void reserve(const std::vector<std::string>& endpoints);
  std::vector<std::string> reserved() const;
  std::vector<std::shared_ptr<ApiSandbox>> list(const std::string& project) const;
  // nullptr when unknown or another project's.
  std::shared_ptr<ApiSandbox> find(const std::string& project, const std::string& id) const;
  // false when unknown or another project's.
  Result<bool> destroy(const std::string& project, const std::string& id);
  void destroy_all();

  // For /metrics.
  struct Counts {
    std::map<std::string, size_t> live_by_backend;
    uint64_t created = 0, destroyed = 0, create_failures = 0;
    uint64_t abandoned = 0;        // calls killed because their client went away
    std::vector<double> setup_ms;  // each creation's set-up time, newest last (bounded)
  };
  Counts counts() const;

 private:
  Result<Backend*> backend_for(BackendKind kind);
  struct CachedPolicy {
    std::shared_ptr<const policy::OperatorPolicy> policy;
    std::chrono::steady_clock::time_point fetched;
  };
  std::map<std::string, CachedPolicy> policies_;  // under mu_
  std::vector<std::string> reserved_;             // under mu_

  ServiceOptions options_;
  MakeBackend make_backend_;
  mutable std::mutex mu_;
  std::map<BackendKind, std::unique_ptr<Backend>> backends_;
  std::map<std::string, std::shared_ptr<ApiSandbox>> sandboxes_;  // by id
  uint64_t created_ = 0, destroyed_ = 0, create_failures_ = 0, abandoned_ = 0;
  std::vector<double> setup_ms_;
};

}  // namespace rf::api
