#include "api/sandbox_service.h"

#include <signal.h>

#include <condition_variable>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "core/json_input.h"
#include "core/log.h"
#include "policy/host_capacity.h"

namespace rf::api {
namespace {

constexpr size_t kSetupSamples = 4096;

ServiceError bad(std::string field, std::string message) {
  return ServiceError{400, std::move(field), std::move(message)};
}

// A refusal of the operator policy is a 403; anything else wrong, a 400.
ServiceError refused(const Error& e) {
  return ServiceError{e.code == ErrorCode::kDenied ? 403 : 400, e.where, e.message};
}

constexpr auto kPolicyCache = std::chrono::seconds(1);

// Kills a call whose client went away: asks `gone` every 100 ms while the
// call runs, and once it says so, sends SIGKILL to the call (whose id the
// sink learns when it starts).
class AbandonWatch final : public OutputSink {
 public:
  AbandonWatch(Sandbox& sandbox, OutputSink& next, const std::function<bool()>& gone)
      : sandbox_(sandbox), next_(next), gone_(gone) {
    if (gone_) thread_ = std::thread([this] { watch(); });
  }
  ~AbandonWatch() override {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void on_started(uint32_t call_id, int pid) override {
    {
      std::lock_guard lock(mu_);
      call_id_ = call_id;
    }
    cv_.notify_all();
    if (next_.wants_started()) next_.on_started(call_id, pid);
  }
  void on_stdout(std::string_view d) override { next_.on_stdout(d); }
  void on_stderr(std::string_view d) override { next_.on_stderr(d); }
  bool abandoned() const {
    std::lock_guard lock(mu_);
    return killed_;
  }

 private:
  void watch() {
    std::unique_lock lock(mu_);
    while (!done_) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      if (done_) break;
      const uint32_t id = call_id_;
      lock.unlock();
      const bool gone = gone_();
      lock.lock();
      if (gone && id != 0 && !killed_) {
        killed_ = true;
        lock.unlock();
        (void)sandbox_.send_signal(id, SIGKILL);
        lock.lock();
      }
    }
  }
  Sandbox& sandbox_;
  OutputSink& next_;
  const std::function<bool()>& gone_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint32_t call_id_ = 0;
  bool killed_ = false, done_ = false;
  std::thread thread_;
};

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
  auto parsed_json =
      parse_json(spec_json.empty() ? std::string_view("{}") : std::string_view(spec_json), "spec");
  if (!parsed_json) return bad("spec", "the body is " + parsed_json.error().message);
  const nlohmann::json& j = *parsed_json;
  if (!j.is_object()) return bad("spec", "expected a JSON object (the sandbox spec)");
  for (const char* field : {"id", "workspace", "labels", "tls_intercept"}) {
    if (j.contains(field)) {
      return bad(field, "is set by the server, not by API clients");
    }
  }
  auto parsed = parse_spec_json(j.dump());
  if (!parsed) return bad(parsed.error().where, parsed.error().message);
  SandboxSpec spec = std::move(*parsed);
  // This server's own bound comes before any project's policy.
  if (spec.network == NetworkPolicy::kHost && !options_.allow_host_network) {
    return bad("network", "host is not allowed on this server (none or proxy)");
  }
  // What the project's operator allows: limits the client gave above their
  // ceilings are refused, the defaults lowered to them.
  auto policy = policy_of(project);
  if (!policy) return ServiceError{503, "", policy.error().to_string()};
  std::set<std::string> given;
  if (j.contains("limits") && j["limits"].is_object()) {
    for (auto it = j["limits"].begin(); it != j["limits"].end(); ++it) given.insert(it.key());
  }
  if (auto checked = policy->check_spec(spec, given); !checked) return refused(checked.error());
  if (!j.contains("backend")) spec.backend = options_.backend;
  if (spec.backend != options_.backend) {
    return bad("backend", "this server runs " + std::string(to_string(options_.backend)) +
                              " sandboxes, not " + std::string(to_string(spec.backend)));
  }
  spec.labels["project"] = project;
  spec.labels["mode"] = "api";
  {
    std::lock_guard lock(mu_);
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

Result<policy::OperatorPolicy> SandboxService::policy_of(const std::string& project) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = policies_.find(project);
    if (it != policies_.end() && now - it->second.fetched < kPolicyCache) return *it->second.policy;
  }
  Result<policy::OperatorPolicy> loaded =
      options_.policy ? options_.policy(project)
                      : Result<policy::OperatorPolicy>(policy::OperatorPolicy::resolve(
                            project, nullptr, nullptr, policy::host_capacity()));
  if (!loaded) return loaded;
  loaded->reserve(reserved());
  std::lock_guard lock(mu_);
  if (policies_.size() > 4096) policies_.clear();
  policies_[project] = CachedPolicy{std::make_shared<const policy::OperatorPolicy>(*loaded), now};
  return loaded;
}

void SandboxService::reserve(const std::vector<std::string>& endpoints) {
  std::lock_guard lock(mu_);
  reserved_.insert(reserved_.end(), endpoints.begin(), endpoints.end());
  policies_.clear();
}

std::vector<std::string> SandboxService::reserved() const {
  std::lock_guard lock(mu_);
  return reserved_;
}

ServiceResult<ExecResult> SandboxService::exec(ApiSandbox& sandbox, ExecCall call,
                                               bool timeout_given, OutputSink& sink,
                                               const std::function<bool()>& client_gone) {
  auto policy = policy_of(sandbox.project);
  if (!policy) return ServiceError{503, "", policy.error().to_string()};
  // The sandbox's own timeout was bounded when it was made.
  if (call.timeout.count() > 0) {
    if (auto s = policy->bound_timeout(call.timeout, timeout_given, "timeout"); !s)
      return refused(s.error());
  }
  ++sandbox.running;
  struct Done {
    ApiSandbox& s;
    ~Done() { --s.running; }
  } done{sandbox};
  AbandonWatch watch(*sandbox.sandbox, sink, client_gone);
  auto result = sandbox.sandbox->exec(call, watch);
  if (watch.abandoned()) {
    {
      std::lock_guard lock(mu_);
      ++abandoned_;
    }
    spdlog::info("sandbox {}: a call of project {} was killed: its client went away", sandbox.id(),
                 sandbox.project);
    if (result) result->error = "the client went away: the call was killed";
  }
  if (!result) {
    // The sandbox was deleted under the call, or its runner is gone.
    return ServiceError{find(sandbox.project, sandbox.id()) ? 500 : 409, "",
                        result.error().to_string()};
  }
  return std::move(*result);
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
  c.abandoned = abandoned_;
  c.setup_ms = setup_ms_;
  return c;
}

}  // namespace rf::api
