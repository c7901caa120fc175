#include "identity/audit_events.h"

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "store/audit_log.h"

namespace rf::identity {
namespace {

using json = nlohmann::json;

store::AuditEvent make(const std::string& actor, std::string kind, const std::string& project,
                       const AuditContext& where, const json& detail) {
  store::AuditEvent e;
  e.kind = std::move(kind);
  e.actor = actor;
  if (!project.empty()) e.project_id = project;
  e.run_id = where.run_id;
  e.call_id = where.call_id;
  e.sandbox_id = where.sandbox_id;
  e.detail_json = detail.dump();
  return e;
}

void append(store::Store& store, const std::string& actor, std::string kind,
            const std::string& project, const AuditContext& where, const json& detail) {
  const store::AuditEvent e = make(actor, std::move(kind), project, where, detail);
  warn_unless_ok(store::AuditLog(store).append(e), "audit " + e.kind);
}

json request_json(const CascadeRequest& r) {
  json j = {{"project", r.project}};
  if (!r.workflow.empty()) j["workflow"] = r.workflow;
  if (!r.user.empty()) j["user"] = r.user;
  return j;
}

}  // namespace

store::AuditEvent profile_set_event(const std::string& actor, const store::ProfileRow& p) {
  json keys = json::array();
  for (const auto& e : p.entries) {
    json k = {{"key", e.key}};
    if (e.kind == store::ProfileEntry::Kind::secret) k["secret"] = e.ref;
    keys.push_back(std::move(k));
  }
  json detail = {{"profile", p.name}, {"level", store::to_string(p.level)}, {"keys", keys}};
  if (!p.workflow.empty()) detail["workflow"] = p.workflow;
  if (!p.user.empty()) detail["user"] = p.user;
  return make(actor, "profile.set", p.project, {}, detail);
}

void audit_resolution(store::Store& store, const std::string& actor, const CascadePlan& plan,
                      const AuditContext& where) {
  append(store, actor, "identity.resolve", plan.request.project, where,
         json::parse(plan_json(plan, /*explain=*/false)));
}

void audit_refusal(store::Store& store, const std::string& actor, const CascadeRequest& request,
                   const std::string& reason, const AuditContext& where) {
  json detail = request_json(request);
  detail["reason"] = reason;
  append(store, actor, "identity.refuse", request.project, where, detail);
}

store::AuditEvent injection_event(const std::string& actor, const CascadePlan& plan,
                                  const AuditContext& where) {
  json keys = json::array();
  for (const auto& e : plan.entries) {
    if (!e.opened_at_start()) continue;  // JIT entries go in when asked for (jit.delivered)
    json k = {{"key", e.key}, {"level", store::to_string(e.level)}};
    if (e.kind == store::ProfileEntry::Kind::secret) {
      k["secret"] = e.secret;
      k["version"] = e.version;
      k["delivery"] = e.delivery;  // gateway, proxy: a placeholder went in, not the value
    }
    keys.push_back(std::move(k));
  }
  json detail = request_json(plan.request);
  detail["keys"] = keys;
  return make(actor, "identity.inject", plan.request.project, where, detail);
}

void audit_jit(store::Store& store, const std::string& actor, const std::string& kind,
               const std::string& project, const AuditContext& where,
               const std::string& detail_json) {
  append(store, actor, kind, project, where, json::parse(detail_json));
}

store::AuditEvent jit_event(const std::string& actor, const std::string& kind,
                            const std::string& project, const AuditContext& where,
                            const std::string& detail_json) {
  store::AuditEvent e;
  e.kind = kind;
  e.actor = actor;
  if (!project.empty()) e.project_id = project;
  e.run_id = where.run_id;
  e.call_id = where.call_id;
  e.sandbox_id = where.sandbox_id;
  e.detail_json = detail_json;
  return e;
}

void audit_all(store::Store& store, const std::vector<store::AuditEvent>& events) {
  if (events.empty()) return;
  warn_unless_ok(store::AuditLog(store).append_all(events), "audit " + events.front().kind);
}

void audit_redactions(store::Store& store, const std::string& actor, const std::string& project,
                      const std::map<std::pair<std::string, std::string>, uint64_t>& counts,
                      const AuditContext& where) {
  if (counts.empty()) return;
  json list = json::array();
  for (const auto& [what, n] : counts) {
    list.push_back({{"key", what.first}, {"form", what.second}, {"count", n}});
  }
  append(store, actor, "redaction", project, where, {{"redactions", list}});
}

}  // namespace rf::identity
