#include "identity/cascade.h"

#include <nlohmann/json.hpp>

namespace rf::identity {
namespace {

using json = nlohmann::json;

std::string describe(const CascadeRequest& r) {
  std::string s = "project " + r.project;
  if (!r.workflow.empty()) s += ", workflow " + r.workflow;
  if (!r.user.empty()) s += ", user " + r.user;
  return s;
}

}  // namespace

std::vector<std::string> CascadePlan::secrets() const {
  std::vector<std::string> names;
  for (const auto& e : entries) {
    if (e.kind == store::ProfileEntry::Kind::secret) names.push_back(e.secret);
  }
  return names;
}

Result<CascadePlan> plan_cascade(store::IdentityStore& rows, const CascadeRequest& request) {
  const std::string where = "resolve identity for " + describe(request);
  if (request.project.empty()) return make_error(where, "the project is empty");
  auto profiles = rows.profiles_for(request.project, request.workflow, request.user);
  if (!profiles.ok()) return make_error(where, profiles.error().to_string());
  // Least specific first: a later profile's entry replaces an earlier one's.
  std::map<std::string, CascadeEntry> by_key;
  for (const auto& p : *profiles) {
    for (const auto& e : p.entries) {
      CascadeEntry next{e.key, p.level, p.name, e.kind, "", 0, "", e.delivery, e.delivery_json, {}};
      if (e.kind == store::ProfileEntry::Kind::secret) {
        next.secret = e.ref;
      } else {
        next.plain = e.ref;
      }
      auto it = by_key.find(e.key);
      if (it != by_key.end()) {
        next.overridden = std::move(it->second.overridden);
        next.overridden.push_back(it->second.profile);
        it->second = std::move(next);
      } else {
        by_key.emplace(e.key, std::move(next));
      }
    }
  }
  CascadePlan plan{request, {}};
  std::vector<std::string> names;
  for (auto& [key, entry] : by_key) {
    if (entry.kind == store::ProfileEntry::Kind::secret) names.push_back(entry.secret);
    plan.entries.push_back(std::move(entry));
  }
  if (names.empty()) return plan;
  auto versions = rows.current_versions(names);
  if (!versions.ok()) return make_error(where, versions.error().to_string());
  for (auto& e : plan.entries) {
    if (e.kind != store::ProfileEntry::Kind::secret) continue;
    const auto& [row, sealed] = versions->at(e.secret);
    // A JIT entry's secret is opened only when asked for, and refused then if
    // revoked: it does not hold up the rest of the cascade.
    if (row.state != store::SecretState::active && e.opened_at_start()) {
      return make_error(where, "key " + e.key + " (profile " + e.profile + ") names secret " +
                                   e.secret + ", which is " +
                                   std::string(store::to_string(row.state)) +
                                   "; refused (fail closed)");
    }
    e.version = sealed.version;
  }
  plan.rows = std::move(*versions);
  return plan;
}

Result<ResolvedIdentity> resolve_cascade(store::IdentityStore& rows, Secrets& secrets,
                                         const CascadeRequest& request) {
  auto plan = plan_cascade(rows, request);
  if (!plan.ok()) return plan.take_error();
  // Only what goes in at start is opened now.
  std::map<std::string, std::pair<store::SecretRow, store::SealedVersion>> at_start;
  for (const auto& e : plan->entries) {
    if (e.kind == store::ProfileEntry::Kind::secret && e.opened_at_start())
      at_start.emplace(e.secret, plan->rows.at(e.secret));
  }
  auto opened = secrets.open_rows(at_start);
  if (!opened.ok()) {
    return make_error("resolve identity for " + describe(request), opened.error().to_string());
  }
  ResolvedIdentity out{std::move(*plan), {}, {}};
  for (auto& e : out.plan.entries) {
    if (e.at_edge()) {
      out.edge.emplace(e.key, opened->at(e.secret).value);
      continue;
    }
    if (!e.at_start()) continue;
    if (e.kind == store::ProfileEntry::Kind::secret) {
      out.env.emplace(e.key, opened->at(e.secret).value);
    } else {
      out.env.emplace(e.key, SecretValue(e.plain));
    }
  }
  return out;
}

std::string plan_json(const CascadePlan& plan, bool explain) {
  json keys = json::array();
  for (const auto& e : plan.entries) {
    json k = {{"key", e.key},
              {"level", store::to_string(e.level)},
              {"profile", e.profile},
              {"kind", e.kind == store::ProfileEntry::Kind::secret ? "secret" : "value"}};
    if (e.kind == store::ProfileEntry::Kind::secret) {
      k["secret"] = e.secret;
      k["version"] = e.version;
      k["delivery"] = e.delivery;
    }
    if (explain) k["overridden"] = e.overridden;
    keys.push_back(std::move(k));
  }
  json j = {{"project", plan.request.project}, {"keys", keys}};
  if (!plan.request.workflow.empty()) j["workflow"] = plan.request.workflow;
  if (!plan.request.user.empty()) j["user"] = plan.request.user;
  return j.dump();
}

}  // namespace rf::identity
