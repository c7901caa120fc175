#include "api/sandbox_service.h"

#include <nlohmann/json.hpp>

#include "core/log.h"

namespace rf::api {
namespace {

constexpr size_t kSetupSamples = 4096;

ServiceError bad(std::string field, std::string message) {
  return ServiceError{400, std::move(field), std::move(message)};
}

}  // namespace

SandboxService::SandboxService(ServiceOptions options, MakeBackend make_backend)
    : options_(std::move(options)), make_backend_(std::move(make_backend)) {}

SandboxService::~SandboxService() { destroy_all(); }

Result<Backend*> SandboxService::backend_for(BackendKind kind) {
  std::lock_guard lock(mu_);
  auto& slot = backends_[kind];
  if (!slot) {
    auto made = make_backend_(kind);
    if (!made) return made.take_error();
    slot = std::move(*made);
  }
  return slot.get();
}

ServiceResult<std::shared_ptr<ApiSandbox>> SandboxService::create(const std::string& project,
                                                                  const std::string& spec_json) {
  const auto j =
      nlohmann::json::parse(spec_json.empty() ? std::string("{}") : spec_json, nullptr, false);
  if (j.is_discarded()) return bad("spec", "the body is not valid JSON");
  if (!j.is_object()) return bad("spec", "expected a JSON object (the sandbox spec)");
  for (const char* field : {"workspace", "labels", "tls_intercept"}) {
    if (j.contains(field)) {
      return bad(field, "is set by the server, not by API clients");
    }
  }
  auto parsed = parse_spec_json(j.dump());
  if (!parsed) return bad(parsed.error().where, parsed.error().message);
  SandboxSpec spec = std::move(*parsed);
  if (!j.contains("backend")) spec.backend = options_.backend;
  if (spec.backend != options_.backend) {
    return bad("backend", "this server runs " + std::string(to_string(options_.backend)) +
                              " sandboxes, not " + std::string(to_string(spec.backend)));
  }
  if (spec.network == NetworkPolicy::kHost && !options_.allow_host_network) {
    return bad("network", "host is not allowed on this server (none or proxy)");
  }
  spec.labels["project"] = project;
  spec.labels["mode"] = "api";
  {
    std::lock_guard lock(mu_);
    if (!spec.id.empty() && sandboxes_.count(spec.id)) {
      return ServiceError{409, "id", "a sandbox " + spec.id + " exists already"};
    }
    size_t mine = 0;
    for (const auto& [_, s] : sandboxes_) mine += s->project == project;
    if (mine >= options_.max_per_project) {
      return ServiceError{429, "",
                          "project " + project + " has " + std::to_string(mine) +
                              " sandboxes, the most this server allows; delete one"};
    }
  }
  if (auto v = validate_spec(spec); !v) return bad(v.error().where, v.error().message);

  auto backend = backend_for(spec.backend);
  if (!backend) {
    std::lock_guard lock(mu_);
    ++create_failures_;
    return ServiceError{503, "backend", backend.error().to_string()};
  }
  const auto start = std::chrono::steady_clock::now();
  auto made = (*backend)->create(spec);
  const auto took = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  if (!made) {
    std::lock_guard lock(mu_);
    ++create_failures_;
    return ServiceError{500, "", made.error().to_string()};
  }
  auto entry = std::make_shared<ApiSandbox>();
  entry->project = project;
  entry->created = std::chrono::system_clock::now();
  entry->setup = took;
  entry->sandbox = std::shared_ptr<Sandbox>(std::move(*made));
  std::lock_guard lock(mu_);
  sandboxes_[entry->id()] = entry;
  ++created_;
  setup_ms_.push_back(static_cast<double>(took.count()) / 1000.0);
  if (setup_ms_.size() > kSetupSamples) setup_ms_.erase(setup_ms_.begin());
  return entry;
}

std::vector<std::shared_ptr<ApiSandbox>> SandboxService::list(const std::string& project) const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<ApiSandbox>> out;
  for (const auto& [_, s] : sandboxes_) {
    if (project.empty() || s->project == project) out.push_back(s);
  }
  return out;
}

std::shared_ptr<ApiSandbox> SandboxService::find(const std::string& project,
                                                 const std::string& id) const {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second->project != project) return nullptr;
  return it->second;
}

Result<bool> SandboxService::destroy(const std::string& project, const std::string& id) {
  std::shared_ptr<ApiSandbox> entry;
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second->project != project) return false;
    entry = it->second;
    sandboxes_.erase(it);
    ++destroyed_;
  }
  // Calls in flight end with the sandbox (their requests answer with how).
  RF_TRY(entry->sandbox->destroy());
  return true;
}

void SandboxService::destroy_all() {
  std::map<std::string, std::shared_ptr<ApiSandbox>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sandboxes_);
    destroyed_ += all.size();
  }
  for (auto& [id, s] : all) {
    warn_unless_ok(s->sandbox->destroy(), "destroy sandbox " + id);
  }
}

SandboxService::Counts SandboxService::counts() const {
  std::lock_guard lock(mu_);
  Counts c;
  for (const auto& [_, s] : sandboxes_)
    ++c.live_by_backend[std::string(to_string(s->sandbox->spec().backend))];
  c.created = created_;
  c.destroyed = destroyed_;
  c.create_failures = create_failures_;
  c.setup_ms = setup_ms_;
  return c;
}

}  // namespace rf::api
