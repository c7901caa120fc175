// `ringfence policy set | show | clear` (issue 39): the operator's policy of
// a project, or the default one (--default), in the store. Every door applies
// it (policy/operator_policy.h): the ceilings of a tenant's limits, the
// networks and egress destinations it may ask for, the execution modes and
// step kinds its workflows may use, the worker variables a step may read.
//
//   policy set --project P --memory 4g --cpus 2 --timeout 10m
//   policy set --project P --egress-allow 127.0.0.1:18080 --worker-env PLANNER_KEY
//   policy set --default --networks none,proxy
//   policy set --project P --file policy.yaml      (the whole document)
//   policy show --project P --explain              (each value and where it came from)
//   policy clear --project P                       (the default applies again)
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "core/json_input.h"
#include "policy/load.h"
#include "policy/operator_policy.h"
#include "store/policy_store.h"
#include "workflow/parse.h"

namespace rf::cli {
namespace {

using nlohmann::json;

struct PolicyFlags {
  std::string state_dir, project, file;
  bool is_default = false, explain = false, json = false;
  std::map<std::string, std::string> limits;  // by limit json key, from --memory etc.
  std::vector<std::string> networks, egress_allow, modes, step_kinds, worker_env;
  bool no_egress_allow = false, no_worker_env = false;
  std::string sandbox_timeout, sandbox_timeout_max;
  std::string process_buffer, volume_size_max;
  int64_t processes_max = 0;
};

// The project the command is about: --project P, or --default ("*").
Result<std::string> target_of(const PolicyFlags& f) {
  if (f.is_default == !f.project.empty()) {
    return make_error("", "give --project P or --default (the policy every project falls back to)");
  }
  return f.is_default ? std::string(store::kDefaultPolicy) : f.project;
}

// Lists given as "a,b" or repeated flags.
std::vector<std::string> split_commas(const std::vector<std::string>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) {
    std::stringstream in(v);
    std::string part;
    while (std::getline(in, part, ',')) {
      if (!part.empty()) out.push_back(part);
    }
  }
  return out;
}

// What the flags say, as a document over the stored one.
Result<policy::PolicyDoc> doc_of_flags(const PolicyFlags& f) {
  json j = json::object();
  for (const auto& [k, v] : f.limits) {
    if (!v.empty()) j["limits"][k] = v;
  }
  auto list = [&](const char* key, const std::vector<std::string>& values, bool clear) {
    if (clear) j[key] = json::array();
    if (!values.empty()) j[key] = split_commas(values);
  };
  list("networks", f.networks, false);
  list("egress_allow", f.egress_allow, f.no_egress_allow);
  list("modes", f.modes, false);
  list("step_kinds", f.step_kinds, false);
  list("worker_env", f.worker_env, f.no_worker_env);
  if (!f.sandbox_timeout.empty()) j["sandbox_timeout"] = f.sandbox_timeout;
  if (!f.sandbox_timeout_max.empty()) j["sandbox_timeout_max"] = f.sandbox_timeout_max;
  if (!f.process_buffer.empty()) j["process_buffer"] = f.process_buffer;
  if (!f.volume_size_max.empty()) j["volume_size_max"] = f.volume_size_max;
  if (f.processes_max != 0) j["processes_max"] = f.processes_max;
  return policy::parse_policy_doc(j);
}

// A YAML or JSON policy file, read as the workflow files are.
Result<policy::PolicyDoc> doc_of_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(path, "cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  auto j = workflow::yaml_document(text.str(), path);
  if (!j) return j.take_error();
  auto doc = policy::parse_policy_doc(*j);
  if (!doc) return make_error(path + ": " + doc.error().where, doc.error().message);
  return doc;
}

int set(const PolicyFlags& f) {
  auto target = target_of(f);
  if (!target) return fail("policy set: " + target.error().message, kExitUsage);
  auto changes = f.file.empty() ? doc_of_flags(f) : doc_of_file(f.file);
  if (!changes) return fail("policy set: " + changes.error().to_string(), kExitUsage);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::PolicyStore policies(**st);
  // Flags change the fields they name; a file replaces the whole document.
  policy::PolicyDoc doc = *changes;
  if (f.file.empty()) {
    auto now = policies.get(*target);
    if (!now) return fail(now.error().to_string(), kExitRuntime);
    if (*now) {
      auto parsed = parse_json(now->value().policy_json, "stored policy");
      auto stored = parsed ? policy::parse_policy_doc(*parsed)
                           : Result<policy::PolicyDoc>(parsed.take_error());
      if (stored) doc = policy::merged(std::move(*stored), *changes);
    }
  }
  store::PolicyRow row{*target, policy::policy_doc_json(doc).dump(), 0, "cli"};
  store::AuditEvent e;
  e.kind = "policy.set";
  e.actor = "cli";
  if (!f.is_default) e.project_id = f.project;
  e.detail_json = json{{"project", *target}, {"policy", policy::policy_doc_json(doc)}}.dump();
  if (auto s = policies.set(row, {e}); !s) return fail(s.error().to_string(), kExitRuntime);
  std::printf("%s\n", policy::policy_doc_json(doc).dump(2).c_str());
  return 0;
}

int clear(const PolicyFlags& f) {
  auto target = target_of(f);
  if (!target) return fail("policy clear: " + target.error().message, kExitUsage);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::AuditEvent e;
  e.kind = "policy.clear";
  e.actor = "cli";
  if (!f.is_default) e.project_id = f.project;
  e.detail_json = json{{"project", *target}}.dump();
  auto gone = store::PolicyStore(**st).clear(*target, {e});
  if (!gone) return fail(gone.error().to_string(), kExitRuntime);
  if (!*gone) return fail("policy clear: " + *target + " has no policy of its own", 1);
  return 0;
}

int show(const PolicyFlags& f) {
  auto target = target_of(f);
  if (!target) return fail("policy show: " + target.error().message, kExitUsage);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  // The default's effective values are those of a project with no policy.
  auto effective = policy::load_policy(**st, f.is_default ? std::string("\x01") : f.project);
  if (!effective) return fail(effective.error().to_string(), kExitRuntime);
  const json out = f.explain ? effective->explain() : effective->values();
  if (f.json) {
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  if (!f.explain) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  // One line per value: "limits.memory: 4g (project)".
  for (const auto& [k, v] : out["limits"].items()) {
    std::printf("limits.%-20s %s (%s)\n", (k + ":").c_str(), v["value"].get<std::string>().c_str(),
                v["source"].get<std::string>().c_str());
  }
  for (const char* k : {"networks", "egress_allow", "modes", "step_kinds", "worker_env"}) {
    std::string values;
    for (const auto& v : out[k]["value"])
      values += (values.empty() ? "" : ", ") + v.get<std::string>();
    std::printf("%-27s %s (%s)\n", (std::string(k) + ":").c_str(),
                values.empty() ? "none" : values.c_str(),
                out[k]["source"].get<std::string>().c_str());
  }
  for (const char* k : {"sandbox_timeout", "sandbox_timeout_max", "process_buffer", "processes_max",
                        "volume_size_max"}) {
    const json& v = out[k]["value"];
    std::printf("%-27s %s (%s)\n", (std::string(k) + ":").c_str(),
                v.is_string() ? v.get<std::string>().c_str() : v.dump().c_str(),
                out[k]["source"].get<std::string>().c_str());
  }
  return 0;
}

void common(CLI::App* cmd, PolicyFlags* f) {
  cmd->add_option("--project", f->project, "The project")->check(project_name());
  cmd->add_flag("--default", f->is_default,
                "The default policy, which every project falls back to");
  cmd->add_option("--state-dir", f->state_dir, "The store's directory");
}

}  // namespace

void add_policy_commands(CLI::App* cmd, CommandResult* result) {
  cmd->require_subcommand(1);
  auto f = std::make_shared<PolicyFlags>();
  auto* set_cmd = cmd->add_subcommand(
      "set", "Set fields of a project's (or the default) operator policy; others stay");
  common(set_cmd, f.get());
  set_cmd->add_option("--file", f->file, "A whole policy document (YAML or JSON) to store");
  for (const auto& lf : limit_fields()) {
    const std::string key(lf.json_key);
    std::string flag = "--" + std::string(lf.name);
    for (char& ch : flag) ch = ch == '_' ? '-' : ch;
    if (lf.name != lf.json_key) {
      std::string alias = "--" + key;
      for (char& ch : alias) ch = ch == '_' ? '-' : ch;
      if (alias != flag) flag += "," + alias;
    }
    set_cmd->add_option(flag, f->limits[key],
                        "Ceiling of " + std::string(lf.help) + " a tenant may ask for");
  }
  set_cmd->add_option("--networks", f->networks,
                      "Network policies a tenant may ask for (none,proxy,host)");
  set_cmd->add_option("--egress-allow", f->egress_allow,
                      "An egress rule beyond public space (loopback, private) tenants may write");
  set_cmd->add_flag("--no-egress-allow", f->no_egress_allow, "Allow no such rule");
  set_cmd->add_option("--modes", f->modes, "Execution modes a project's steps may use");
  set_cmd->add_option("--step-kinds", f->step_kinds, "in_process step kinds they may use");
  set_cmd->add_option("--worker-env", f->worker_env,
                      "A worker environment variable a step may read (llm model.key_env)");
  set_cmd->add_flag("--no-worker-env", f->no_worker_env, "Let steps read no worker variable");
  set_cmd->add_option("--sandbox-timeout", f->sandbox_timeout,
                      "How long an API sandbox lives when its client does not say (e.g. 30m)");
  set_cmd->add_option("--sandbox-timeout-max", f->sandbox_timeout_max,
                      "The longest an API client may ask a sandbox to live (e.g. 24h)");
  set_cmd->add_option("--process-buffer", f->process_buffer,
                      "Output kept per background process (its ring buffer, e.g. 1m)");
  set_cmd->add_option("--processes-max", f->processes_max,
                      "Background processes that may run at once in one sandbox");
  set_cmd->add_option("--volume-size-max", f->volume_size_max,
                      "The largest volume a project may make (e.g. 10g)");
  set_cmd->callback([f, result] { result->exit_code = set(*f); });

  auto* show_cmd = cmd->add_subcommand("show", "A project's effective operator policy");
  common(show_cmd, f.get());
  show_cmd->add_flag("--explain", f->explain, "Where each value came from");
  show_cmd->add_flag("--json", f->json, "As JSON");
  show_cmd->callback([f, result] { result->exit_code = show(*f); });

  auto* clear_cmd = cmd->add_subcommand("clear", "Remove a project's policy: the default applies");
  common(clear_cmd, f.get());
  clear_cmd->callback([f, result] { result->exit_code = clear(*f); });
}

}  // namespace rf::cli
