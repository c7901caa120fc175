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
  // the CLI's defaults. Refused with the field named: host paths
  // (workspace), labels and tls_intercept (the server sets them), a backend
  // this server does not run, network host unless allowed.
  ServiceResult<std::shared_ptr<ApiSandbox>> create(const std::string& project,
                                                    const std::string& spec_json);
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
    std::vector<double> setup_ms;  // each creation's set-up time, newest last (bounded)
  };
  Counts counts() const;

 private:
  Result<Backend*> backend_for(BackendKind kind);

  ServiceOptions options_;
  MakeBackend make_backend_;
  mutable std::mutex mu_;
  std::map<BackendKind, std::unique_ptr<Backend>> backends_;
  std::map<std::string, std::shared_ptr<ApiSandbox>> sandboxes_;  // by id
  uint64_t created_ = 0, destroyed_ = 0, create_failures_ = 0;
  std::vector<double> setup_ms_;
};

}  // namespace rf::api
