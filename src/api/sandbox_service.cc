#include "api/sandbox_service.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "calls/abandon_watch.h"
#include "core/json_input.h"
#include "core/log.h"
#include "core/units.h"
#include "httpd/request_target.h"
#include "policy/host_capacity.h"
#include "sandbox/exec_json.h"
#include "sandbox/file_tree.h"
#include "sandbox/lifetime_request.h"
#include "sandbox/result_json.h"
#include "sandbox/volume_request.h"
#include "sandbox/watch_stream.h"
#include "store/audit_log.h"
#include "store/volumes.h"

namespace rf::api {
using httpd::query_escaped;
namespace {

using nlohmann::json;

constexpr size_t kSetupSamples = 4096;
constexpr auto kPolicyCache = std::chrono::seconds(1);

ServiceError bad(std::string field, std::string message) {
  return ServiceError{400, std::move(field), std::move(message)};
}

// A refusal of the operator policy is a 403; anything else wrong, a 400.
ServiceError refused(const Error& e) {
  return ServiceError{e.code == ErrorCode::kDenied ? 403 : 400, e.where, e.message};
}

ServiceError unknown(const std::string& id) { return ServiceError{404, "id", "no sandbox " + id}; }

Result<std::vector<proto::FileInfo>> entries_of(const json& j) {
  if (!j.is_object() || !j.contains("entries") || !j["entries"].is_array()) {
    return make_error("entries", "expected an array");
  }
  std::vector<proto::FileInfo> out;
  for (const auto& e : j["entries"]) {
    proto::FileInfo f;
    f.name = e.value("name", "");
    f.type = e.value("type", "");
    f.size = e.value("size", int64_t{0});
    f.mode = e.value("mode", uint32_t{0});
    f.mtime = e.value("mtime", int64_t{0});
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

// ---- what both share: the policy, the checks every door makes

Result<policy::OperatorPolicy> SandboxService::policy_of(const std::string& project) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = policies_.find(project);
    if (it != policies_.end() && now - it->second.fetched < kPolicyCache) return *it->second.policy;
  }
  Result<policy::OperatorPolicy> loaded =
      policy_ ? policy_(project)
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

ServiceResult<SandboxSpec> SandboxService::checked_spec(const std::string& project, const json& j,
                                                        bool allow_host) {
  if (!j.is_object()) return bad("spec", "expected a JSON object (the sandbox spec)");
  // An id of the client's would tell it which ids other projects use.
  for (const char* field : {"id", "workspace", "labels", "tls_intercept"}) {
    if (j.contains(field)) return bad(field, "is set by the server, not by API clients");
  }
  auto parsed = parse_spec_json(j.dump());
  if (!parsed) return bad(parsed.error().where, parsed.error().message);
  SandboxSpec spec = std::move(*parsed);
  // This server's own bound comes before any project's policy.
  if (spec.network == NetworkPolicy::kHost && !allow_host) {
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
  if (auto s = policy->check_spec(spec, given); !s) return refused(s.error());
  if (auto v = validate_spec(spec); !v) return bad(v.error().where, v.error().message);
  return spec;
}

ServiceResult<ExecCall> SandboxService::checked_call(const std::string& project, const json& j) {
  auto call = parse_exec_json(j);
  if (!call) return bad(call.error().where, call.error().message);
  if (call->timeout.count() > 0) {
    auto policy = policy_of(project);
    if (!policy) return ServiceError{503, "", policy.error().to_string()};
    if (auto s = policy->bound_timeout(call->timeout, j.contains("timeout"), "timeout"); !s)
      return refused(s.error());
  }
  return std::move(*call);
}

void SandboxService::count_setup(double ms) {
  std::lock_guard lock(mu_);
  ++created_;
  setup_ms_.push_back(ms);
  if (setup_ms_.size() > kSetupSamples) setup_ms_.erase(setup_ms_.begin());
}

// ---- LocalSandboxes: `ringfence mcp`'s, in its own process

LocalSandboxes::LocalSandboxes(LocalOptions options, MakeBackend make_backend, PolicyOf policy)
    : SandboxService(std::move(policy)),
      options_(options),
      make_backend_(std::move(make_backend)) {}

LocalSandboxes::~LocalSandboxes() { destroy_all(); }

Result<Backend*> LocalSandboxes::backend_for(BackendKind kind) {
  std::lock_guard lock(mu_);
  auto& slot = backends_[kind];
  if (!slot) {
    auto made = make_backend_(kind);
    if (!made) return made.take_error();
    slot = std::move(*made);
  }
  return slot.get();
}

json LocalSandboxes::view(const Held& h) {
  const SandboxSpec& spec = h.sandbox->spec();
  const auto age = std::chrono::duration_cast<std::chrono::seconds>(
      std::chrono::system_clock::now() - h.created);
  return {
      {"id", h.sandbox->id()},
      {"project", h.project},
      {"backend", std::string(to_string(spec.backend))},
      {"image", spec.image},
      {"network", std::string(to_string(spec.network))},
      {"created_at",
       std::chrono::duration_cast<std::chrono::milliseconds>(h.created.time_since_epoch()).count()},
      {"age_s", age.count()},
      {"setup_ms", static_cast<double>(h.setup.count()) / 1000.0},
      {"calls_running", h.running.load()},
      {"spec", spec_json(spec)}};
}

ServiceResult<json> LocalSandboxes::create(const std::string& project, const std::string&,
                                           const std::string& spec_json) {
  auto parsed =
      parse_json(spec_json.empty() ? std::string_view("{}") : std::string_view(spec_json), "spec");
  if (!parsed) return bad("spec", "the body is " + parsed.error().message);
  // The local user's own door may name its sandbox.
  std::string id;
  if (parsed->is_object() && parsed->contains("id")) {
    if (!(*parsed)["id"].is_string()) return bad("id", "expected a string");
    id = (*parsed)["id"].get<std::string>();
    parsed->erase("id");
  }
  // Lifetimes are a front door's (serve's workers); the local user's
  // sandboxes live as long as this process.
  for (const char* field : {"timeout", "idle_timeout", "name", "metadata", "cwd"}) {
    if (parsed->is_object() && parsed->contains(field)) {
      return ServiceError{400, field,
                          "lifetimes, names and metadata are served by `ringfence serve`, not "
                          "by a local door"};
    }
  }
  auto checked = checked_spec(project, *parsed, /*allow_host=*/false);
  if (auto* e = std::get_if<ServiceError>(&checked)) return *e;
  SandboxSpec spec = std::get<SandboxSpec>(std::move(checked));
  spec.id = id;
  if (auto v = validate_spec(spec); !v) return bad(v.error().where, v.error().message);
  if (!parsed->contains("backend")) spec.backend = options_.backend;
  if (spec.backend != options_.backend) {
    return bad("backend", "this server runs " + std::string(to_string(options_.backend)) +
                              " sandboxes, not " + std::string(to_string(spec.backend)));
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
  auto entry = std::make_shared<Held>();
  entry->project = project;
  entry->created = std::chrono::system_clock::now();
  entry->setup = took;
  entry->sandbox = std::shared_ptr<Sandbox>(std::move(*made));
  {
    std::weak_ptr<Sandbox> weak = entry->sandbox;
    entry->processes = std::make_unique<ProcessTable>(
        *entry->sandbox, [weak](ExecCall call, OutputSink& sink) -> Result<ExecResult> {
          auto sandbox = weak.lock();
          if (!sandbox) return make_error("process", "its sandbox is gone");
          return sandbox->exec(call, sink);
        });
  }
  count_setup(static_cast<double>(took.count()) / 1000.0);
  std::lock_guard lock(mu_);
  sandboxes_[entry->sandbox->id()] = entry;
  return view(*entry);
}

std::shared_ptr<LocalSandboxes::Held> LocalSandboxes::held(const std::string& project,
                                                           const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sandboxes_.find(id);
  if (it == sandboxes_.end() || it->second->project != project) return nullptr;
  return it->second;
}

std::vector<json> LocalSandboxes::list(const std::string& project) {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  for (const auto& [_, s] : sandboxes_) {
    if (project.empty() || s->project == project) out.push_back(view(*s));
  }
  return out;
}

std::optional<json> LocalSandboxes::find(const std::string& project, const std::string& id) {
  auto h = held(project, id);
  if (!h) return std::nullopt;
  return view(*h);
}

ServiceResult<bool> LocalSandboxes::destroy(const std::string& project, const std::string& id,
                                            const std::string&) {
  std::shared_ptr<Held> entry;
  {
    std::lock_guard lock(mu_);
    auto it = sandboxes_.find(id);
    if (it == sandboxes_.end() || it->second->project != project) return false;
    entry = it->second;
    sandboxes_.erase(it);
    ++destroyed_;
  }
  // Calls in flight end with the sandbox (their requests answer with how).
  entry->processes->close("its sandbox was deleted");
  Status gone = entry->sandbox->destroy();
  entry->processes->join();
  if (!gone) return ServiceError{500, "", gone.error().to_string()};
  return true;
}

void LocalSandboxes::destroy_all() {
  std::map<std::string, std::shared_ptr<Held>> all;
  {
    std::lock_guard lock(mu_);
    all.swap(sandboxes_);
    destroyed_ += all.size();
  }
  for (auto& [id, s] : all) {
    s->processes->close("its server stopped");
    warn_unless_ok(s->sandbox->destroy(), "destroy sandbox " + id);
    s->processes->join();
  }
}

ServiceResult<ExecResult> LocalSandboxes::exec(const std::string& project, const std::string& id,
                                               const json& j, OutputSink& sink,
                                               const std::function<bool()>& client_gone) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto call = checked_call(project, j);
  if (auto* e = std::get_if<ServiceError>(&call)) return *e;
  ++h->running;
  struct Done {
    Held& h;
    ~Done() { --h.running; }
  } done{*h};
  calls::AbandonWatch watch(watcher_, *h->sandbox, sink, client_gone);
  auto result = h->sandbox->exec(std::get<ExecCall>(call), watch);
  if (watch.abandoned()) {
    std::lock_guard lock(mu_);
    ++abandoned_;
  }
  if (!result) {
    // The sandbox was deleted under the call, or its runner is gone.
    return ServiceError{held(project, id) ? 500 : 409, "", result.error().to_string()};
  }
  return std::move(*result);
}

ServiceResult<std::string> LocalSandboxes::read_file(const std::string& project,
                                                     const std::string& id,
                                                     const std::string& path) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto data = h->sandbox->read_file(path);
  if (!data) return ServiceError{404, "path", data.error().to_string()};
  return std::move(*data);
}

ServiceResult<size_t> LocalSandboxes::write_file(const std::string& project, const std::string& id,
                                                 const std::string& path, const std::string& data,
                                                 uint32_t mode) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  if (auto s = h->sandbox->write_file(path, data, mode); !s)
    return ServiceError{400, "path", s.error().to_string()};
  return data.size();
}

namespace {
// list_tree's errors: its bounds are the request's (400, depth), anything
// else the path's (404).
ServiceError tree_error(const Error& e) {
  if (e.where == "depth") return ServiceError{400, "depth", e.message};
  return ServiceError{404, "path", e.to_string()};
}
}  // namespace

ServiceResult<std::vector<proto::FileInfo>> LocalSandboxes::list_dir(const std::string& project,
                                                                     const std::string& id,
                                                                     const std::string& path,
                                                                     int depth) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto entries = list_tree(*h->sandbox, path, depth);
  if (!entries) return tree_error(entries.error());
  return std::move(*entries);
}

ServiceResult<bool> LocalSandboxes::change_file(const std::string& project, const std::string& id,
                                                FileOp op, const std::string& path,
                                                const std::string& to) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  Sandbox& sb = *h->sandbox;
  Status s = op == FileOp::kMkdir             ? sb.make_dir(path, false)
             : op == FileOp::kMkdirParents    ? sb.make_dir(path, true)
             : op == FileOp::kRemove          ? sb.remove(path, false)
             : op == FileOp::kRemoveRecursive ? sb.remove(path, true)
                                              : sb.move(path, to);
  if (!s) return ServiceError{400, "path", s.error().to_string()};
  return true;
}

ServiceResult<proto::FileInfo> LocalSandboxes::stat(const std::string& project,
                                                    const std::string& id,
                                                    const std::string& path) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto info = h->sandbox->stat(path);
  if (!info) return ServiceError{404, "path", info.error().to_string()};
  return std::move(*info);
}

SandboxService::Counts LocalSandboxes::counts() {
  std::lock_guard lock(mu_);
  Counts c;
  for (const auto& [_, s] : sandboxes_)
    ++c.live_by_backend[std::string(to_string(s->sandbox->spec().backend))];
  c.created = created_;
  c.destroyed = destroyed_;
  c.create_failures = create_failures_;
  c.setup_ms = setup_ms_;
  c.abandoned = abandoned_;
  return c;
}

// ---- WorkerSandboxes: serve's, on the workers, through their doors

WorkerSandboxes::WorkerSandboxes(store::Store& store, WorkerSandboxesOptions options,
                                 PolicyOf policy)
    : SandboxService(std::move(policy)), store_(store), options_(options) {}

DoorClient::Headers WorkerSandboxes::headers(const std::string& project,
                                             const std::string& actor) const {
  DoorClient::Headers h = {{"X-Ringfence-Project", project}};
  if (!actor.empty()) h["X-Ringfence-Actor"] = actor;
  return h;
}

ServiceError WorkerSandboxes::error_of(const DoorReply& reply) {
  const json j = parse_json_or_discarded(reply.body);
  ServiceError e{reply.status, "", "the worker answered " + std::to_string(reply.status)};
  if (j.is_object()) {
    if (j.contains("error") && j["error"].is_string()) e.message = j["error"];
    if (j.contains("field") && j["field"].is_string()) e.field = j["field"];
  }
  return e;
}

ServiceResult<std::optional<json>> LocalSandboxes::set_timeout(const std::string&,
                                                               const std::string&, const json&) {
  return ServiceError{501, "timeout",
                      "lifetimes are served by `ringfence serve`, not by a local door"};
}

ServiceResult<std::optional<json>> WorkerSandboxes::set_timeout(const std::string& project,
                                                                const std::string& id,
                                                                const json& body) {
  if (!body.is_object() || !body.contains("timeout"))
    return bad("timeout", "expected {\"timeout\": seconds or a duration such as \"10m\"}");
  for (auto it = body.begin(); it != body.end(); ++it) {
    if (it.key() != "timeout") return bad(it.key(), "unknown field (allowed: timeout)");
  }
  auto timeout = parse_lifetime_timeout(body["timeout"], "timeout");
  if (!timeout) return bad("timeout", timeout.error().message);
  return sandbox_at_door(project, id, "PUT", "/timeout", "", body.dump());
}

ServiceResult<std::optional<json>> WorkerSandboxes::sandbox_at_door(
    const std::string& project, const std::string& id, const char* method, const char* op,
    const std::string& actor, const std::string& body) {
  auto door = door_of(project, id);
  if (!door) return std::optional<json>();
  auto reply = doors_.call(*door, method, "/door/v1/sandboxes/" + query_escaped(id) + op,
                           headers(project, actor), body);
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status == 404) {
    forget_door(id);
    return std::optional<json>();
  }
  if (reply->status != 200) return error_of(*reply);
  json j = parse_json_or_discarded(reply->body);
  if (!j.is_object()) return ServiceError{502, "", "the worker's answer is not JSON"};
  return std::optional<json>(std::move(j));
}

ServiceResult<std::optional<json>> LocalSandboxes::set_paused(const std::string& project,
                                                              const std::string& id, bool paused,
                                                              const std::string&) {
  auto h = held(project, id);
  if (!h) return std::optional<json>();
  Status s = paused ? h->sandbox->pause() : h->sandbox->resume();
  if (!s) return ServiceError{409, "", s.error().to_string()};
  auto j = find(project, id);
  if (!j) return std::optional<json>();
  (*j)["state"] = h->sandbox->paused() ? "paused" : "running";
  return j;
}

ServiceResult<std::optional<json>> WorkerSandboxes::set_paused(const std::string& project,
                                                               const std::string& id, bool paused,
                                                               const std::string& actor) {
  return sandbox_at_door(project, id, "POST", paused ? "/pause" : "/resume", actor, "");
}

json WorkerSandboxes::view_of(const store::SandboxRow& row, const store::SandboxLifetime* l) {
  const json spec = row.spec_json ? parse_json_or_discarded(*row.spec_json) : json();
  const int64_t now = store::now_ms();
  json j = {{"id", row.id},
            {"project", row.project_id.value_or("")},
            {"backend", row.backend},
            {"created_at", row.created_at},
            {"age_s", (now - row.created_at) / 1000},
            {"worker", row.worker_id.value_or("")}};
  if (spec.is_object()) {
    j["image"] = spec.value("image", "");
    j["network"] = spec.value("network", "none");
    j["spec"] = spec;
  }
  // As the worker's door shows it (worker/door.cc).
  j["name"] = l != nullptr && !l->name.empty() ? json(l->name) : json(nullptr);
  j["metadata"] = l != nullptr ? json(l->metadata) : json::object();
  j["expires_at"] = l != nullptr && l->expires_at ? json(*l->expires_at) : json(nullptr);
  j["idle_timeout_s"] = l != nullptr && l->idle_timeout_ms > 0
                            ? json(static_cast<double>(l->idle_timeout_ms) / 1000)
                            : json(nullptr);
  return j;
}

void WorkerSandboxes::forget_door(const std::string& id) {
  std::lock_guard lock(mu_);
  known_.erase(id);
}

std::optional<DoorAddress> WorkerSandboxes::door_of(const std::string& project,
                                                    const std::string& id) {
  const auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu_);
    auto it = known_.find(id);
    if (it != known_.end() && now - it->second.fetched < std::chrono::seconds(1)) {
      if (it->second.project != project) return std::nullopt;
      return it->second.door;
    }
  }
  auto found = door_from_store(project, id);
  std::lock_guard lock(mu_);
  if (known_.size() > 65536) known_.clear();
  if (found) {
    known_[id] = KnownDoor{project, *found, now};
  } else {
    known_.erase(id);
  }
  return found;
}

std::optional<DoorAddress> WorkerSandboxes::door_from_store(const std::string& project,
                                                            const std::string& id) {
  auto row = store_.sandbox(id);
  if (!row || !*row) return std::nullopt;
  const store::SandboxRow& sb = **row;
  if (sb.mode != "api" || sb.state != store::SandboxState::active || sb.project_id != project ||
      !sb.worker_id) {
    return std::nullopt;
  }
  auto worker = store_.worker(*sb.worker_id);
  if (!worker || !*worker || !(*worker)->door || !(*worker)->door_key) return std::nullopt;
  return DoorAddress{*sb.worker_id, *(*worker)->door, *(*worker)->door_key};
}

ServiceResult<DoorAddress> WorkerSandboxes::place(const std::string& project, const Labels& labels,
                                                  const std::string& host) {
  const int64_t now = store::now_ms();
  auto workers = store_.workers_serving(project, now - store::kLiveWorkerWindow.count());
  if (!workers) return ServiceError{503, "", workers.error().to_string()};
  std::map<std::string, int> load;
  if (auto live = store_.live_sandboxes()) {
    for (const auto& s : *live) {
      if (s.mode == "api" && s.worker_id) ++load[*s.worker_id];
    }
  }
  const store::WorkerRow* best = nullptr;
  for (const auto& w : *workers) {
    if (!w.door || !w.door_key || !labels_match(labels, w.labels)) continue;
    if (!host.empty() && w.host_id != host) continue;
    if (best == nullptr || load[w.id] < load[best->id]) best = &w;
  }
  if (best == nullptr) {
    return ServiceError{503, "",
                        "no live worker with a door serves project " + project +
                            (labels.empty() ? "" : " with labels " + labels_text(labels)) +
                            (host.empty() ? "" : " on host " + host + " (where its volumes live)") +
                            ": start one on this store (ringfence worker start "
                            "--sandbox-mode per_run ...)"};
  }
  return DoorAddress{best->id, *best->door, *best->door_key};
}

ServiceResult<json> WorkerSandboxes::create(const std::string& project, const std::string& actor,
                                            const std::string& spec_json) {
  auto parsed =
      parse_json(spec_json.empty() ? std::string_view("{}") : std::string_view(spec_json), "spec");
  if (!parsed) return bad("spec", "the body is " + parsed.error().message);
  // "requires": {"labels": {...}}: only a worker with them holds it, as for a call.
  Labels required;
  if (parsed->is_object() && parsed->contains("requires")) {
    const json req = (*parsed)["requires"];
    parsed->erase("requires");
    if (!req.is_object()) return bad("requires", "expected {\"labels\": {...}}");
    for (auto it = req.begin(); it != req.end(); ++it) {
      if (it.key() != "labels") return bad("requires." + it.key(), "unknown field");
    }
    if (req.contains("labels")) {
      if (!req["labels"].is_object()) {
        return bad("requires.labels", "expected an object of strings");
      }
      auto labels = store::labels_from_json(req["labels"].dump());
      if (!labels) {
        const std::string& at = labels.error().where;
        return bad(at.starts_with("label ") ? "requires.labels." + at.substr(6) : "requires.labels",
                   labels.error().message);
      }
      required = std::move(*labels);
    }
  }
  // The lifetime fields go to the worker with the spec; checked here first.
  json spec_only = *parsed;
  auto lifetime = take_lifetime(spec_only);
  if (!lifetime) return bad(lifetime.error().where, lifetime.error().message);
  auto asked_volumes = take_volumes(spec_only);
  if (!asked_volumes) return bad(asked_volumes.error().where, asked_volumes.error().message);
  auto checked = checked_spec(project, spec_only, options_.allow_host_network);
  if (auto* e = std::get_if<ServiceError>(&checked)) return *e;
  // Its volumes are the project's, and where one lives the sandbox goes.
  std::string host;
  for (size_t i = 0; i < asked_volumes->size(); ++i) {
    const std::string at = "volumes[" + std::to_string(i) + "].name";
    auto found = store::Volumes(store_).find(project, (*asked_volumes)[i].name);
    if (!found) return ServiceError{503, "", found.error().to_string()};
    if (!*found) {
      return bad(at, "project " + project + " has no volume " + (*asked_volumes)[i].name +
                         " (POST /v1/volumes makes one)");
    }
    const std::string& lives = (*found)->host_id;
    if (!lives.empty() && !host.empty() && lives != host) {
      return ServiceError{409, at,
                          "volume " + (*found)->name + " lives on host " + lives +
                              ", another of its volumes on host " + host};
    }
    if (!lives.empty()) host = lives;
  }
  if (lifetime->timeout) {
    auto policy = policy_of(project);
    if (!policy) return ServiceError{503, "", policy.error().to_string()};
    std::chrono::milliseconds t = *lifetime->timeout;
    if (auto s = policy->bound_sandbox_timeout(t, true, "timeout"); !s)
      return ServiceError{403, s.error().where, s.error().message};
  }
  {
    size_t mine = 0;
    if (auto live = store_.live_sandboxes()) {
      for (const auto& s : *live) mine += s.mode == "api" && s.project_id == project;
    }
    if (mine >= options_.max_per_project) {
      return ServiceError{429, "",
                          "project " + project + " has " + std::to_string(mine) +
                              " sandboxes, the most this server allows; delete one"};
    }
  }
  auto door = place(project, required, host);
  if (auto* e = std::get_if<ServiceError>(&door)) return *e;
  auto reply = doors_.call(std::get<DoorAddress>(door), "POST", "/door/v1/sandboxes",
                           headers(project, actor), parsed->dump());
  if (!reply) {
    std::lock_guard lock(mu_);
    ++create_failures_;
    return ServiceError{503, "", reply.error().to_string()};
  }
  if (reply->status != 201) {
    if (reply->status >= 500) {
      std::lock_guard lock(mu_);
      ++create_failures_;
    }
    return error_of(*reply);
  }
  json made = parse_json_or_discarded(reply->body);
  if (!made.is_object()) return ServiceError{502, "", "the worker's answer is not JSON"};
  count_setup(made.value("setup_ms", 0.0));
  return made;
}

std::vector<json> WorkerSandboxes::list(const std::string& project) {
  std::vector<json> out;
  auto live = store_.live_sandboxes();
  if (!live) return out;
  auto lifetimes = store::SandboxLifetimes(store_).of_live(project);
  for (const auto& s : *live) {
    if (s.mode != "api" || (!project.empty() && s.project_id != project)) continue;
    const store::SandboxLifetime* l = nullptr;
    if (lifetimes) {
      auto it = lifetimes->find(s.id);
      if (it != lifetimes->end()) l = &it->second;
    }
    out.push_back(view_of(s, l));
  }
  return out;
}

std::optional<json> WorkerSandboxes::find(const std::string& project, const std::string& id) {
  auto door = door_of(project, id);
  if (!door) return std::nullopt;
  auto reply = doors_.call(*door, "GET", "/door/v1/sandboxes/" + query_escaped(id),
                           headers(project, ""), "");
  if (!reply || reply->status != 200) return std::nullopt;
  json j = parse_json_or_discarded(reply->body);
  if (!j.is_object()) return std::nullopt;
  return j;
}

ServiceResult<bool> WorkerSandboxes::destroy(const std::string& project, const std::string& id,
                                             const std::string& actor) {
  auto door = door_of(project, id);
  if (!door) return false;
  auto reply = doors_.call(*door, "DELETE", "/door/v1/sandboxes/" + query_escaped(id),
                           headers(project, actor), "");
  forget_door(id);
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status == 404) return false;
  if (reply->status != 204) return error_of(*reply);
  std::lock_guard lock(mu_);
  ++destroyed_;
  return true;
}

ServiceResult<ExecResult> WorkerSandboxes::exec(const std::string& project, const std::string& id,
                                                const json& j, OutputSink& sink,
                                                const std::function<bool()>& client_gone) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  // Checked here for a clear answer before anything starts; the worker checks again.
  auto call = checked_call(project, j);
  if (auto* e = std::get_if<ServiceError>(&call)) return *e;
  std::optional<ExecResult> result;
  std::optional<ServiceError> failed;
  auto on_event = [&](std::string_view name, std::string_view data) {
    const json d = parse_json_or_discarded(data);
    if (!d.is_object()) return;
    if (name == "started") {
      if (sink.wants_started()) sink.on_started(0, d.value("pid", 0));
    } else if (name == "stdout" || name == "stderr") {
      if (auto bytes = bytes_of(d, "data")) {
        name == "stdout" ? sink.on_stdout(*bytes) : sink.on_stderr(*bytes);
      }
    } else if (name == "exit" && d.contains("result")) {
      auto r = exec_result_from_json(d["result"]);
      if (r)
        result = std::move(*r);
      else
        failed = ServiceError{502, "", "the worker's result: " + r.error().to_string()};
    } else if (name == "error") {
      failed = ServiceError{d.value("status", 500), d.value("field", ""), d.value("error", "")};
    }
  };
  std::string error_body;
  auto status = doors_.stream(*door, "POST", "/door/v1/sandboxes/" + query_escaped(id) + "/exec",
                              headers(project, ""), j.dump(), on_event, client_gone, &error_body);
  if (!status) {
    if (client_gone && client_gone()) {
      std::lock_guard lock(mu_);
      ++abandoned_;
      return ServiceError{499, "", "the client went away: the call was killed"};
    }
    return ServiceError{503, "", status.error().to_string()};
  }
  if (*status != 200) return error_of(DoorReply{*status, "", error_body});
  if (failed) return *failed;
  if (!result) return ServiceError{502, "", "the worker's stream ended without the call's end"};
  return std::move(*result);
}

ServiceResult<std::string> WorkerSandboxes::read_file(const std::string& project,
                                                      const std::string& id,
                                                      const std::string& path) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  auto reply =
      doors_.call(*door, "GET",
                  "/door/v1/sandboxes/" + query_escaped(id) + "/files?path=" + query_escaped(path),
                  headers(project, ""), "");
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 200) return error_of(*reply);
  return std::move(reply->body);
}

ServiceResult<size_t> WorkerSandboxes::write_file(const std::string& project, const std::string& id,
                                                  const std::string& path, const std::string& data,
                                                  uint32_t mode) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  char octal[16];
  std::snprintf(octal, sizeof octal, "%04o", mode);
  auto reply = doors_.call(*door, "PUT",
                           "/door/v1/sandboxes/" + query_escaped(id) +
                               "/files?path=" + query_escaped(path) + "&mode=" + octal,
                           headers(project, ""), data);
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 201) return error_of(*reply);
  return data.size();
}

ServiceResult<bool> WorkerSandboxes::change_file(const std::string& project, const std::string& id,
                                                 FileOp op, const std::string& path,
                                                 const std::string& to) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  const std::string base = "/door/v1/sandboxes/" + query_escaped(id);
  const std::string q = "?path=" + query_escaped(path);
  std::string method = "POST", target;
  switch (op) {
    case FileOp::kMkdir:
      target = base + "/files:mkdir" + q;
      break;
    case FileOp::kMkdirParents:
      target = base + "/files:mkdir" + q + "&parents=true";
      break;
    case FileOp::kRemove:
      method = "DELETE";
      target = base + "/files" + q;
      break;
    case FileOp::kRemoveRecursive:
      method = "DELETE";
      target = base + "/files" + q + "&recursive=true";
      break;
    case FileOp::kMove:
      target = base + "/files:move" + q + "&to=" + query_escaped(to);
      break;
  }
  auto reply = doors_.call(*door, method, target, headers(project, ""), "");
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 204) return error_of(*reply);
  return true;
}

ServiceResult<proto::FileInfo> WorkerSandboxes::stat(const std::string& project,
                                                     const std::string& id,
                                                     const std::string& path) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  auto reply = doors_.call(
      *door, "GET",
      "/door/v1/sandboxes/" + query_escaped(id) + "/files:stat?path=" + query_escaped(path),
      headers(project, ""), "");
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 200) return error_of(*reply);
  const json j = parse_json_or_discarded(reply->body);
  if (!j.is_object() || !j.contains("type"))
    return ServiceError{502, "", "the worker's answer is not a file's"};
  proto::FileInfo info;
  info.type = j.value("type", "");
  info.size = j.value("size", int64_t{0});
  info.mode = j.value("mode", uint32_t{0});
  info.mtime = j.value("mtime", int64_t{0});
  return info;
}

ServiceResult<std::vector<proto::FileInfo>> WorkerSandboxes::list_dir(const std::string& project,
                                                                      const std::string& id,
                                                                      const std::string& path,
                                                                      int depth) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  auto reply = doors_.call(*door, "GET",
                           "/door/v1/sandboxes/" + query_escaped(id) + "/files:list?path=" +
                               query_escaped(path) + "&depth=" + std::to_string(depth),
                           headers(project, ""), "");
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 200) return error_of(*reply);
  auto entries = entries_of(parse_json_or_discarded(reply->body));
  if (!entries) return ServiceError{502, "", "the worker's answer: " + entries.error().to_string()};
  return std::move(*entries);
}

SandboxService::Counts WorkerSandboxes::counts() {
  Counts c;
  if (auto live = store_.live_sandboxes()) {
    for (const auto& s : *live) {
      if (s.mode == "api") ++c.live_by_backend[s.backend];
    }
  }
  std::lock_guard lock(mu_);
  c.created = created_;
  c.destroyed = destroyed_;
  c.create_failures = create_failures_;
  c.setup_ms = setup_ms_;
  c.abandoned = abandoned_;
  return c;
}

}  // namespace rf::api

namespace rf::api {
namespace {
ServiceError service_error(const ProcessRefusal& r) { return {r.status, r.field, r.message}; }
}  // namespace

ServiceResult<json> LocalSandboxes::process(const std::string& project, const std::string& id,
                                            const ProcessRequest& request) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  if (request.op == ProcessOp::kStart) {
    auto policy = policy_of(project);
    if (!policy) return ServiceError{503, "", policy.error().to_string()};
    ProcessTable::Bounds bounds;
    bounds.buffer_bytes = policy->process_buffer();
    bounds.max_running = policy->processes_max();
    auto started = h->processes->start(request.start.call, request.start.tag, bounds);
    if (!started) {
      const Error& e = started.error();
      return ServiceError{e.code == ErrorCode::kLimit ? 429 : 400, e.where, e.message};
    }
    return process_json(*started);
  }
  auto answered = answer_process_request(*h->processes, request);
  if (auto* r = std::get_if<ProcessRefusal>(&answered)) return service_error(*r);
  return std::get<json>(std::move(answered));
}

ServiceResult<bool> LocalSandboxes::follow_process(const std::string& project,
                                                   const std::string& id, int pid, uint64_t from,
                                                   const ProcessEvent& emit,
                                                   const std::function<bool()>& gone) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  if (!h->processes->find(pid))
    return ServiceError{404, "pid", "no process " + std::to_string(pid)};
  return follow_process_output(*h->processes, pid, from, emit, gone);
}

ServiceResult<bool> LocalSandboxes::watch_dir(const std::string& project, const std::string& id,
                                              const std::string& path, bool recursive,
                                              const ProcessEvent& emit,
                                              const std::function<bool()>& gone) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto followed = follow_watch(*h->sandbox, path, recursive, emit, gone);
  if (!followed) return ServiceError{400, "path", followed.error().to_string()};
  return *followed;
}

ServiceResult<bool> WorkerSandboxes::events_from_door(const std::string& project,
                                                      const std::string& id,
                                                      const std::string& target,
                                                      const ProcessEvent& emit,
                                                      const std::function<bool()>& gone) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  bool ended = false;
  auto on_event = [&](std::string_view name, std::string_view data) {
    const json d = parse_json_or_discarded(data);
    if (!d.is_object()) return;
    const std::string n(name);
    if (n == "end") ended = true;
    emit(n.c_str(), d);
  };
  auto hdrs = headers(project, "");
  hdrs["Accept"] = "text/event-stream";
  std::string error_body;
  auto status = doors_.stream(*door, "GET", "/door/v1/sandboxes/" + query_escaped(id) + target,
                              hdrs, "", on_event, gone, &error_body);
  if (!status) {
    if (gone && gone()) return false;
    return ServiceError{503, "", status.error().to_string()};
  }
  if (*status != 200) return error_of(DoorReply{*status, "", error_body});
  return ended;
}

ServiceResult<bool> WorkerSandboxes::watch_dir(const std::string& project, const std::string& id,
                                               const std::string& path, bool recursive,
                                               const ProcessEvent& emit,
                                               const std::function<bool()>& gone) {
  return events_from_door(
      project, id,
      "/files:watch?path=" + query_escaped(path) + (recursive ? "&recursive=true" : ""), emit,
      gone);
}

ServiceResult<json> WorkerSandboxes::process(const std::string& project, const std::string& id,
                                             const ProcessRequest& request) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  const ProcessHttp http = process_http(request);
  // An output read may wait for output up to its wait_ms.
  auto reply = doors_.call(
      *door, http.method, "/door/v1/sandboxes/" + query_escaped(id) + http.target,
      headers(project, ""), http.body, std::chrono::milliseconds(60'000 + request.wait_ms));
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status == 404) {
    const ServiceError e = error_of(*reply);
    if (e.field == "id") forget_door(id);
    return e;
  }
  if (reply->status != process_success_status(request.op)) return error_of(*reply);
  if (reply->status == 204) return json(nullptr);
  json j = parse_json_or_discarded(reply->body);
  if (!j.is_object()) return ServiceError{502, "", "the worker's answer is not JSON"};
  return j;
}

ServiceResult<bool> WorkerSandboxes::follow_process(const std::string& project,
                                                    const std::string& id, int pid, uint64_t from,
                                                    const ProcessEvent& emit,
                                                    const std::function<bool()>& gone) {
  ProcessRequest r;
  r.op = ProcessOp::kOutput;
  r.pid = pid;
  r.from = from;
  return events_from_door(project, id, process_http(r).target, emit, gone);
}

}  // namespace rf::api

namespace rf::api {
namespace {

json volume_json(const store::Volume& v) {
  return {{"name", v.name},
          {"size", format_size(v.size_bytes)},
          {"size_bytes", v.size_bytes},
          {"created_at", v.created_at},
          {"created_by", v.created_by},
          {"host", v.host_id.empty() ? json(nullptr) : json(v.host_id)}};
}

ServiceError no_local_volumes() {
  return ServiceError{501, "", "volumes are served by `ringfence serve`, not by a local door"};
}

}  // namespace

ServiceResult<json> LocalSandboxes::create_volume(const std::string&, const std::string&,
                                                  const json&) {
  return no_local_volumes();
}
ServiceResult<json> LocalSandboxes::volumes(const std::string&) { return no_local_volumes(); }
ServiceResult<json> LocalSandboxes::volume(const std::string&, const std::string&) {
  return no_local_volumes();
}
ServiceResult<bool> LocalSandboxes::delete_volume(const std::string&, const std::string&,
                                                  const std::string&) {
  return no_local_volumes();
}

ServiceResult<json> WorkerSandboxes::create_volume(const std::string& project,
                                                   const std::string& actor, const json& body) {
  auto asked = parse_volume_create(body);
  if (!asked) return bad(asked.error().where, asked.error().message);
  auto policy = policy_of(project);
  if (!policy) return ServiceError{503, "", policy.error().to_string()};
  const uint64_t size =
      asked->size.value_or(std::min(kDefaultVolumeSize, policy->volume_size_max()));
  if (auto s = policy->bound_volume_size(size, "size"); !s) return refused(s.error());
  store::Volume v{project, asked->name, size, store::now_ms(), actor, ""};
  if (auto made = store::Volumes(store_).create(v); !made) {
    const Error& e = made.error();
    if (e.code == ErrorCode::kConflict) return ServiceError{409, "name", e.message};
    return ServiceError{503, "", e.to_string()};
  }
  store::AuditEvent ev;
  ev.kind = "volume.create";
  ev.actor = actor;
  ev.project_id = project;
  ev.detail_json = json{{"volume", v.name}, {"size_bytes", size}}.dump();
  warn_unless_ok(store::AuditLog(store_).append(ev), "auditing volume " + v.name);
  return volume_json(v);
}

ServiceResult<json> WorkerSandboxes::volumes(const std::string& project) {
  auto all = store::Volumes(store_).list(project);
  if (!all) return ServiceError{503, "", all.error().to_string()};
  json list = json::array();
  for (const auto& v : *all) list.push_back(volume_json(v));
  return json{{"volumes", list}};
}

ServiceResult<json> WorkerSandboxes::volume(const std::string& project, const std::string& name) {
  auto found = store::Volumes(store_).find(project, name);
  if (!found) return ServiceError{503, "", found.error().to_string()};
  if (!*found) return ServiceError{404, "name", "no volume " + name};
  return volume_json(**found);
}

ServiceResult<bool> WorkerSandboxes::delete_volume(const std::string& project,
                                                   const std::string& name,
                                                   const std::string& actor) {
  auto found = store::Volumes(store_).find(project, name);
  if (!found) return ServiceError{503, "", found.error().to_string()};
  if (!*found) return ServiceError{404, "name", "no volume " + name};
  // Its disk goes first, on its host (a worker there refuses while a sandbox mounts it).
  if (!(*found)->host_id.empty()) {
    auto door = place(project, {}, (*found)->host_id);
    if (auto* e = std::get_if<ServiceError>(&door)) {
      return ServiceError{503, "",
                          "volume " + name + " lives on host " + (*found)->host_id +
                              ", where no worker with a door runs now: " + e->message};
    }
    auto reply =
        doors_.call(std::get<DoorAddress>(door), "DELETE",
                    "/door/v1/volumes/" + query_escaped(name), headers(project, actor), "");
    if (!reply) return ServiceError{503, "", reply.error().to_string()};
    if (reply->status != 204) return error_of(*reply);
  }
  auto gone = store::Volumes(store_).remove(project, name);
  if (!gone) return ServiceError{503, "", gone.error().to_string()};
  store::AuditEvent ev;
  ev.kind = "volume.delete";
  ev.actor = actor;
  ev.project_id = project;
  ev.detail_json = json{{"volume", name}}.dump();
  warn_unless_ok(store::AuditLog(store_).append(ev), "auditing volume " + name);
  return true;
}

}  // namespace rf::api

namespace rf::api {

namespace {
ServiceError port_unreachable(const std::string& id, int port, const Error& why) {
  return ServiceError{502, "port",
                      "sandbox " + id + ": " + why.to_string() +
                          " (does a process listen on 127.0.0.1:" + std::to_string(port) +
                          " inside?)"};
}
}  // namespace

ServiceResult<bool> LocalSandboxes::port_request(const std::string& project, const std::string& id,
                                                 int port, const std::string& method,
                                                 const std::string& target,
                                                 const HeaderList& headers, const std::string& body,
                                                 const PortAnswerSink& sink) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  bool told = false;
  Status s =
      relay_port_answer(*h->sandbox, port, port_request_text(method, target, headers, body, port),
                        method == "HEAD", sink, &told);
  if (!s && !told) return port_unreachable(id, port, s.error());
  return s.ok();
}

ServiceResult<bool> LocalSandboxes::port_upgrade(const std::string& project, const std::string& id,
                                                 int port, const std::string& target,
                                                 const HeaderList& headers,
                                                 const TakeOver& take_over) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto raw = take_over();
  if (!raw) return ServiceError{500, "", raw.error().to_string()};
  Status s = relay_port_upgrade(*h->sandbox, port, port_upgrade_request_text(target, headers, port),
                                raw->fd, std::move(raw->early), raw->stop_fd);
  return s.ok();
}

ServiceResult<bool> WorkerSandboxes::port_request(const std::string& project, const std::string& id,
                                                  int port, const std::string& method,
                                                  const std::string& target,
                                                  const HeaderList& headers,
                                                  const std::string& body,
                                                  const PortAnswerSink& sink) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  DoorClient::Headers h = WorkerSandboxes::headers(project, "");
  for (const auto& [k, v] : headers) {
    if (port_header_passes(k)) h.emplace(k, v);
  }
  // The door's own refusals (404 unknown, 502 nothing answers) carry its
  // JSON and X-Ringfence-Refused; anything else is the port's answer.
  std::optional<DoorReply> refused;
  bool told = false;
  Status s = doors_.relay(
      *door, method,
      "/door/v1/sandboxes/" + query_escaped(id) + "/ports/" + std::to_string(port) + target, h,
      body,
      [&](int status, HeaderList&& all) {
        for (const auto& [k, v] : all) {
          if (k == "X-Ringfence-Refused") refused = DoorReply{status, "application/json", "", {}};
        }
        if (refused) return true;
        told = true;
        HeaderList passing;
        for (auto& [k, v] : all) {
          if (port_header_passes(k)) passing.emplace_back(std::move(k), std::move(v));
        }
        return sink.head(status, std::move(passing));
      },
      [&](std::string_view bytes) {
        if (!refused) return sink.body(bytes);
        if (refused->body.size() < 64 * 1024) refused->body.append(bytes);
        return true;
      });
  if (refused) return error_of(*refused);
  if (!s && !told) return ServiceError{503, "", s.error().to_string()};
  return s.ok();
}

ServiceResult<bool> WorkerSandboxes::port_upgrade(const std::string& project, const std::string& id,
                                                  int port, const std::string& target,
                                                  const HeaderList& headers,
                                                  const TakeOver& take_over) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  DoorClient::Headers h = WorkerSandboxes::headers(project, "");
  for (const auto& [k, v] : headers) {
    if (port_header_passes(k)) h.emplace(k, v);
  }
  h.emplace("Upgrade", "websocket");
  h.emplace("Connection", "Upgrade");
  auto raw = take_over();
  if (!raw) return ServiceError{500, "", raw.error().to_string()};
  Status s = doors_.splice(
      *door, "/door/v1/sandboxes/" + query_escaped(id) + "/ports/" + std::to_string(port) + target,
      h, raw->fd, std::move(raw->early), raw->stop_fd);
  return s.ok();
}

namespace {
nlohmann::json ports_json(const std::vector<ListeningPort>& ports) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& p : ports) list.push_back({{"port", p.port}, {"address", p.address}});
  return {{"ports", list}};
}
}  // namespace

ServiceResult<nlohmann::json> LocalSandboxes::ports(const std::string& project,
                                                    const std::string& id) {
  auto h = held(project, id);
  if (!h) return unknown(id);
  auto found = listening_ports(*h->sandbox);
  if (!found) return ServiceError{502, "", found.error().to_string()};
  return ports_json(*found);
}

ServiceResult<nlohmann::json> WorkerSandboxes::ports(const std::string& project,
                                                     const std::string& id) {
  auto door = door_of(project, id);
  if (!door) return unknown(id);
  auto reply = doors_.call(*door, "GET", "/door/v1/sandboxes/" + query_escaped(id) + "/ports",
                           headers(project, ""), "");
  if (!reply) return ServiceError{503, "", reply.error().to_string()};
  if (reply->status != 200) return error_of(*reply);
  auto j = nlohmann::json::parse(reply->body, nullptr, false);
  if (!j.is_object()) return ServiceError{502, "", "the worker's door answered no JSON"};
  return j;
}

ServiceResult<PortAnswer> fetch_port(SandboxService& sandboxes, const std::string& project,
                                     const std::string& id, int port, const std::string& method,
                                     const std::string& target, const HeaderList& headers,
                                     const std::string& body, size_t max) {
  PortAnswer answer;
  bool over = false;
  PortAnswerSink sink;
  sink.head = [&](int status, HeaderList&& h) {
    answer.status = status;
    answer.headers = std::move(h);
    return true;
  };
  sink.body = [&](std::string_view bytes) {
    if (answer.body.size() + bytes.size() > max) {
      over = true;
      return false;
    }
    answer.body.append(bytes);
    return true;
  };
  auto got = sandboxes.port_request(project, id, port, method, target, headers, body, sink);
  if (auto* e = std::get_if<ServiceError>(&got)) return *e;
  if (over) {
    return ServiceError{502, "port",
                        "the answer is larger than " + std::to_string(max >> 20) +
                            " MiB, the most one answer here may be"};
  }
  if (!std::get<bool>(got)) return ServiceError{502, "port", "the answer broke off"};
  return answer;
}

}  // namespace rf::api
