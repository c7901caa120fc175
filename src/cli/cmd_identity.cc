// `ringfence identity profile set | show | list` and `identity resolve`
// (issue 11). Profiles map environment keys to secrets or plain values and
// attach at one level; resolve shows which level each key comes from and the
// secret version it would give, never a value.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/vault_wiring.h"
#include "identity/audit_events.h"
#include "identity/cascade.h"
#include "net/edge_credential.h"
#include "store/identity_store.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

struct IdentityFlags {
  std::string state_dir, name, level, project, workflow, user;
  std::vector<std::string> entries;
  bool json = false, explain = false;
};

constexpr const char* kEntryForms =
    "expected KEY=secret:SECRET, KEY=jit:SECRET, KEY=gateway:SECRET,OPTIONS, "
    "KEY=proxy:SECRET,host=HOST[,...] or KEY=value:TEXT";

// KEY=secret:NAME, KEY=jit:NAME, KEY=gateway:NAME,OPT=V..., KEY=proxy:NAME,OPT=V...
// or KEY=value:TEXT (net/edge_credential.h has the options).
Result<store::ProfileEntry> parse_entry(const std::string& word) {
  const std::string where = "entry \"" + word.substr(0, word.find('=')) + "\"";
  const size_t eq = word.find('=');
  if (eq == std::string::npos || eq == 0) return make_error(where, kEntryForms);
  std::string key = word.substr(0, eq);
  std::string rest = word.substr(eq + 1);
  for (char c : key) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) {
      return make_error(where, "a key is letters, digits and '_' (an environment name)");
    }
  }
  if (std::isdigit(static_cast<unsigned char>(key[0])))
    return make_error(where, "a key does not start with a digit");
  if (rest.starts_with("secret:")) {
    std::string name = rest.substr(7);
    if (name.empty()) return make_error(where, "the secret name is empty");
    return store::ProfileEntry{key, store::ProfileEntry::Kind::secret, name};
  }
  if (rest.starts_with("jit:")) {
    // Not in the environment at start: asked for with rf-cred, under the JIT policy.
    std::string name = rest.substr(4);
    if (name.empty()) return make_error(where, "the secret name is empty");
    store::ProfileEntry e{key, store::ProfileEntry::Kind::secret, name};
    e.delivery = "jit";
    return e;
  }
  for (const auto delivery : {net::EdgeDelivery::kGateway, net::EdgeDelivery::kProxy}) {
    const std::string prefix = std::string(net::to_string(delivery)) + ":";
    if (!rest.starts_with(prefix)) continue;
    // The value never reaches the sandbox: a placeholder does, swapped at the egress edge.
    const std::string spec = rest.substr(prefix.size());
    const size_t comma = spec.find(',');
    std::string name = spec.substr(0, comma);
    if (name.empty()) return make_error(where, "the secret name is empty");
    auto settings = net::parse_edge_options(
        delivery, comma == std::string::npos ? "" : std::string_view(spec).substr(comma + 1));
    if (!settings) return make_error(where, settings.error().to_string());
    store::ProfileEntry e{key, store::ProfileEntry::Kind::secret, name};
    e.delivery = std::string(net::to_string(delivery));
    e.delivery_json = net::edge_settings_json(*settings);
    return e;
  }
  if (rest.starts_with("value:")) {
    std::string text = rest.substr(6);
    if (text.empty()) return make_error(where, "the value is empty");
    return store::ProfileEntry{key, store::ProfileEntry::Kind::value, text};
  }
  return make_error(where, kEntryForms);
}

// A gateway or proxy entry's options, as written ("preset" folded in).
std::string edge_options_text(const store::ProfileEntry& e) {
  const auto delivery =
      e.delivery == "gateway" ? net::EdgeDelivery::kGateway : net::EdgeDelivery::kProxy;
  auto s = net::edge_settings_from_json(delivery, e.delivery_json);
  if (!s) return ",(" + s.error().to_string() + ")";
  std::string out;
  if (delivery == net::EdgeDelivery::kGateway) {
    out += ",upstream=" + s->upstream_url() + ",header=" + s->header + ",scheme=" +
           (s->scheme == net::EdgeScheme::kRaw      ? "raw"
            : s->scheme == net::EdgeScheme::kBearer ? "bearer"
                                                    : "basic");
    if (s->scheme == net::EdgeScheme::kBasic) out += ",user=" + s->user;
    if (!s->base_env.empty()) out += ",base_env=" + s->base_env;
    if (s->git) out += ",git=true";
  } else {
    for (const auto& h : s->hosts) out += ",host=" + h;
    for (const auto& p : s->places) out += ",in=" + p.to_string();
  }
  return out;
}

json profile_json(const store::ProfileRow& p) {
  json entries = json::array();
  for (const auto& e : p.entries) {
    // Plain values are behaviour knobs, not secrets: shown. Secrets by name.
    json entry = {{"key", e.key},
                  {"kind", e.kind == store::ProfileEntry::Kind::secret ? "secret" : "value"},
                  {e.kind == store::ProfileEntry::Kind::secret ? "secret" : "value", e.ref}};
    if (e.kind == store::ProfileEntry::Kind::secret) entry["delivery"] = e.delivery;
    if (e.delivery == "gateway" || e.delivery == "proxy") {
      entry["settings"] = json::parse(e.delivery_json, nullptr, false);
    }
    entries.push_back(std::move(entry));
  }
  json j = {{"name", p.name}, {"level", store::to_string(p.level)}, {"entries", entries}};
  if (!p.project.empty()) j["project"] = p.project;
  if (!p.workflow.empty()) j["workflow"] = p.workflow;
  if (!p.user.empty()) j["user"] = p.user;
  return j;
}

std::string scope_text(const store::ProfileRow& p) {
  std::string s;
  if (!p.project.empty()) s += " project=" + p.project;
  if (!p.workflow.empty()) s += " workflow=" + p.workflow;
  if (!p.user.empty()) s += " user=" + p.user;
  return s;
}

int run_profile_set(const IdentityFlags& f) {
  auto level = store::parse_profile_level(f.level);
  if (!level.ok())
    return fail("identity profile set: --level: " + level.error().to_string(), kExitUsage);
  store::ProfileRow p;
  p.name = f.name;
  p.level = *level;
  p.project = f.project;
  p.workflow = f.workflow;
  p.user = f.user;
  for (const auto& word : f.entries) {
    auto e = parse_entry(word);
    if (!e.ok())
      return fail("identity profile set " + f.name + ": " + e.error().to_string(), kExitUsage);
    p.entries.push_back(std::move(*e));
  }
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::IdentityStore rows(**st);
  const store::AuditEvent set = identity::profile_set_event("cli", p);
  if (auto s = rows.put_profile(p, [&](int64_t) { return std::vector{set}; }); !s)
    return fail(s.error().to_string(), kExitUsage);
  std::fprintf(stderr, "profile %s: %zu key%s at level %s%s\n", p.name.c_str(), p.entries.size(),
               p.entries.size() == 1 ? "" : "s", f.level.c_str(), scope_text(p).c_str());
  return 0;
}

int run_profile_show(const IdentityFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::IdentityStore rows(**st);
  auto p = rows.profile(f.name);
  if (!p.ok()) return fail(p.error().to_string(), kExitRuntime);
  if (!*p) return fail("identity profile show: there is no profile " + f.name, kExitUsage);
  if (f.json) {
    std::printf("%s\n", profile_json(**p).dump().c_str());
    return 0;
  }
  std::printf("profile %s  level %s%s\n", (*p)->name.c_str(),
              std::string(store::to_string((*p)->level)).c_str(), scope_text(**p).c_str());
  for (const auto& e : (*p)->entries) {
    // As it was written: secret:NAME, jit:NAME, value:TEXT.
    const std::string how = e.kind != store::ProfileEntry::Kind::secret ? "value"
                            : e.delivery == "env"                       ? "secret"
                                                                        : e.delivery;
    const std::string options =
        e.delivery == "gateway" || e.delivery == "proxy" ? edge_options_text(e) : "";
    std::printf("  %-32s %s:%s%s\n", e.key.c_str(), how.c_str(), e.ref.c_str(), options.c_str());
  }
  return 0;
}

int run_profile_list(const IdentityFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::IdentityStore rows(**st);
  auto all = rows.profiles();
  if (!all.ok()) return fail(all.error().to_string(), kExitRuntime);
  if (f.json) {
    json out = json::array();
    for (const auto& p : *all) out.push_back(profile_json(p));
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%-24s %-9s %-5s %s\n", "NAME", "LEVEL", "KEYS", "SCOPE");
  for (const auto& p : *all) {
    std::printf("%-24s %-9s %-5zu%s\n", p.name.c_str(),
                std::string(store::to_string(p.level)).c_str(), p.entries.size(),
                scope_text(p).c_str());
  }
  return 0;
}

int run_resolve(const IdentityFlags& f) {
  const std::string dir = state_dir_or_default(f.state_dir);
  auto st = open_client_store(dir);
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::IdentityStore rows(**st);
  auto vault = make_vault_access();
  if (!vault.ok()) return fail(vault.error().to_string(), kExitUsage);
  identity::Secrets secrets(**st, {dir, vault->get(), "cli"});
  const identity::CascadeRequest request{f.project, f.workflow, f.user};
  // Resolved in full (every secret opened, then dropped): what fails here
  // would fail when a sandbox starts.
  auto resolved = identity::resolve_cascade(rows, secrets, request);
  if (!resolved.ok()) {
    identity::audit_refusal(**st, "cli", request, resolved.error().to_string(), {});
    return fail(resolved.error().to_string(), kExitRuntime);
  }
  identity::audit_resolution(**st, "cli", resolved->plan, {});
  if (f.json) {
    std::printf("%s\n", identity::plan_json(resolved->plan, f.explain).c_str());
    return 0;
  }
  std::printf("%-32s %-9s %-20s %s\n", "KEY", "LEVEL", "PROFILE", "FROM");
  for (const auto& e : resolved->plan.entries) {
    const std::string from = e.kind == store::ProfileEntry::Kind::secret
                                 ? "secret " + e.secret + " v" + std::to_string(e.version) +
                                       (e.at_start() ? "" : " (" + e.delivery + ")")
                                 : "plain value";
    std::printf("%-32s %-9s %-20s %s\n", e.key.c_str(),
                std::string(store::to_string(e.level)).c_str(), e.profile.c_str(), from.c_str());
    if (f.explain && !e.overridden.empty()) {
      std::string over;
      for (const auto& o : e.overridden) over += (over.empty() ? "" : ", ") + o;
      std::printf("%-32s overrides profile %s\n", "", over.c_str());
    }
  }
  if (resolved->plan.entries.empty()) std::printf("(no profile applies)\n");
  return 0;
}

}  // namespace

void add_identity_commands(CLI::App* identity, CommandResult* result) {
  auto f = std::make_shared<IdentityFlags>();
  identity->require_subcommand(1);
  auto* profile = identity->add_subcommand("profile", "Identity profiles: set, show, list");
  profile->require_subcommand(1);
  auto* set = profile->add_subcommand("set", "Create or replace a profile");
  set->add_option("name", f->name, "Profile name")->required();
  set->add_option("--level", f->level, "system, project, workflow or user")->required();
  set->add_option("--project", f->project, "The project (level project; narrows workflow, user)")
      ->check(project_name());
  set->add_option("--workflow", f->workflow, "The workflow (level workflow)");
  set->add_option("--user", f->user, "The user (level user)");
  set->add_option("entries", f->entries,
                  "KEY=secret:SECRET (in the environment), KEY=jit:SECRET (asked for with "
                  "rf-cred), KEY=gateway:SECRET,preset=anthropic|upstream=URL,... or "
                  "KEY=proxy:SECRET,host=HOST,in=PLACE... (a placeholder in the sandbox, the "
                  "value swapped in at the egress proxy; docs/identity.md), or KEY=value:TEXT ...")
      ->required();
  set->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  set->callback([f, result] { result->exit_code = run_profile_set(*f); });
  auto* show = profile->add_subcommand("show", "A profile's level, scope and entries");
  show->add_option("name", f->name, "Profile name")->required();
  show->add_flag("--json", f->json, "As JSON");
  show->add_option("--state-dir", f->state_dir, "The state dir");
  show->callback([f, result] { result->exit_code = run_profile_show(*f); });
  auto* list = profile->add_subcommand("list", "Every profile");
  list->add_flag("--json", f->json, "As JSON");
  list->add_option("--state-dir", f->state_dir, "The state dir");
  list->callback([f, result] { result->exit_code = run_profile_list(*f); });
  auto* resolve = identity->add_subcommand(
      "resolve", "Which key comes from which level and secret version (never a value)");
  resolve->add_option("--project", f->project, "Project")->required();
  resolve->add_option("--workflow", f->workflow, "Workflow");
  resolve->add_option("--user", f->user, "User");
  resolve->add_flag("--explain", f->explain, "Also the profiles each key overrides");
  resolve->add_flag("--json", f->json, "As JSON");
  resolve->add_option("--state-dir", f->state_dir, "The state dir");
  resolve->callback([f, result] { result->exit_code = run_resolve(*f); });
}

}  // namespace rf::cli
