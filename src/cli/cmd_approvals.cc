// `ringfence approvals list | show ID | approve ID | deny ID --reason TEXT`
// (issue 12): the requests waiting for a human (workflow approval steps, JIT
// credentials). A request's text is written by a tenant or a sandbox (an
// rf-cred reason): it reaches the operator's terminal through printable().
#include <pwd.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "core/printable.h"
#include "store/workflow_store.h"

namespace rf::cli {
namespace {

using nlohmann::json;

struct ApprovalFlags {
  std::string state_dir, project, as, reason;
  std::string id_text;  // as given: parsed (and refused) here, never clamped
  int64_t id = 0;
  bool json = false;
};

// Who answers: --as, else $USER, else the account's name.
std::string who(const ApprovalFlags& f) {
  if (!f.as.empty()) return f.as;
  if (const char* u = std::getenv("USER"); u != nullptr && *u != '\0') return u;
  if (const passwd* pw = ::getpwuid(::getuid()); pw != nullptr) return pw->pw_name;
  return "uid " + std::to_string(::getuid());
}

json approval_json(const store::ApprovalRow& a) {
  json j = {{"id", a.id},
            {"project", a.project_id},
            {"kind", a.kind},
            {"state", std::string(store::to_string(a.state))},
            {"request", json::parse(a.request_json, nullptr, false)},
            {"created_at", a.created_at}};
  if (a.run_id) j["run"] = *a.run_id;
  if (a.step_id) j["step"] = *a.step_id;
  if (a.expires_at) j["expires_at"] = *a.expires_at;
  if (a.decided_by) j["decided_by"] = *a.decided_by;
  if (a.reason) j["reason"] = *a.reason;
  return j;
}

std::string expires_text(const store::ApprovalRow& a, int64_t now) {
  if (!a.expires_at) return "-";
  return "in " + std::to_string(std::max<int64_t>(0, (*a.expires_at - now) / 1000)) + "s";
}

int list(const ApprovalFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto pending = store::WorkflowStore(**st).pending_approvals(f.project);
  if (!pending) return fail(pending.error().to_string(), kExitRuntime);
  if (f.json) {
    json out = json::array();
    for (const auto& a : *pending) out.push_back(approval_json(a));
    std::printf("%s\n", printable_json(out).c_str());
    return 0;
  }
  if (pending->empty()) {
    std::printf("no approvals waiting\n");
    return 0;
  }
  std::printf("%-6s %-12s %-16s %-12s %-10s %s\n", "ID", "PROJECT", "RUN", "STEP", "EXPIRES",
              "REQUEST");
  const int64_t now = store::now_ms();
  for (const auto& a : *pending) {
    const json req = json::parse(a.request_json, nullptr, false);
    const std::string text = req.is_object() ? req.value("message", "") : "";
    std::printf("%-6lld %-12s %-16s %-12s %-10s %s\n", static_cast<long long>(a.id),
                printable(a.project_id).c_str(), printable(a.run_id.value_or("-")).c_str(),
                printable(a.step_id.value_or("-")).c_str(), expires_text(a, now).c_str(),
                printable(text, 80).c_str());
  }
  return 0;
}

// The id as given: a number, or a usage error naming the verb.
bool parse_id(ApprovalFlags* f, const std::string& verb) {
  const char* first = f->id_text.data();
  const char* last = first + f->id_text.size();
  const auto [end, ec] = std::from_chars(first, last, f->id);
  if (f->id_text.empty() || ec != std::errc() || end != last) {
    (void)fail(verb + ": id \"" + printable(f->id_text) +
                   "\": not a number (the ids `approvals list` shows)",
               kExitUsage);
    return false;
  }
  return true;
}

// A request's field as one line: a string as it is (escaped), else its JSON.
std::string field_text(const json& v) {
  return v.is_string() ? printable(v.get<std::string>()) : printable_json(v);
}

// One approval, whatever its state, every field of its request in full.
int show(ApprovalFlags f) {
  if (!parse_id(&f, "approvals show")) return kExitUsage;
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto a = store::WorkflowStore(**st).approval(f.id);
  if (!a) return fail(a.error().to_string(), 1);
  if (f.json) {
    std::printf("%s\n", printable_json(approval_json(*a)).c_str());
    return 0;
  }
  std::printf("approval %lld  %s  %s\n", static_cast<long long>(a->id), printable(a->kind).c_str(),
              std::string(store::to_string(a->state)).c_str());
  auto line = [](const char* name, const std::string& shown) {
    std::printf("  %-10s %s\n", name, shown.c_str());
  };
  line("project", printable(a->project_id));
  line("run", printable(a->run_id.value_or("-")));
  line("step", printable(a->step_id.value_or("-")));
  if (a->state == store::ApprovalState::pending) line("expires", expires_text(*a, store::now_ms()));
  if (a->decided_by) line("by", printable(*a->decided_by));
  if (a->reason && !a->reason->empty()) line("why", printable(*a->reason));
  const json req = json::parse(a->request_json, nullptr, false);
  if (!req.is_object()) return 0;
  for (const auto& [key, value] : req.items()) {
    line(printable(key).c_str(), field_text(value));
  }
  return 0;
}

int decide(ApprovalFlags f, bool approve) {
  const std::string verb = approve ? "approvals approve" : "approvals deny";
  if (!parse_id(&f, verb)) return kExitUsage;
  if (!approve && f.reason.empty()) return fail("approvals deny: give --reason TEXT", kExitUsage);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  store::WorkflowStore wf(**st);
  auto a = wf.approval(f.id);
  if (!a) return fail(a.error().to_string(), 1);
  const std::string by = who(f);
  const json req = json::parse(a->request_json, nullptr, false);
  if (req.is_object() && req.contains("approvers") && req["approvers"].is_array() &&
      !req["approvers"].empty()) {
    bool listed = false;
    for (const auto& p : req["approvers"])
      listed = listed || (p.is_string() && p.get<std::string>() == by);
    if (!listed) {
      return fail("approval " + std::to_string(f.id) + ": " + printable(by) +
                      " is not one of its approvers (" + printable_json(req["approvers"]) + ")",
                  1);
    }
  }
  if (auto s = wf.decide_approval(f.id, approve, by, f.reason); !s) {
    return fail(printable(s.error().to_string()), 1);
  }
  std::printf("approval %lld %s by %s\n", static_cast<long long>(f.id),
              approve ? "approved" : "denied", printable(by).c_str());
  return 0;
}

}  // namespace

void add_approvals_commands(CLI::App* approvals, CommandResult* result) {
  approvals->require_subcommand(1);
  auto f = std::make_shared<ApprovalFlags>();
  auto* l = approvals->add_subcommand("list", "The requests waiting for an answer");
  l->add_option("--project", f->project, "Only this project's");
  l->add_option("--state-dir", f->state_dir, "The workers' state dir");
  l->add_flag("--json", f->json, "As JSON");
  l->callback([f, result] { result->exit_code = list(*f); });
  auto* sh = approvals->add_subcommand(
      "show", "One request, whatever its state: every field in full, and who decided it, why");
  sh->add_option("id", f->id_text, "The approval's id")->required();
  sh->add_option("--state-dir", f->state_dir, "The workers' state dir");
  sh->add_flag("--json", f->json, "As JSON");
  sh->callback([f, result] { result->exit_code = show(*f); });
  for (const bool approve : {true, false}) {
    auto* c = approvals->add_subcommand(approve ? "approve" : "deny",
                                        approve ? "Approve a request" : "Deny a request");
    c->add_option("id", f->id_text, "The approval's id")->required();
    c->add_option("--reason", f->reason, approve ? "Why (optional)" : "Why (required)");
    c->add_option("--as", f->as, "Who answers (default: $USER)");
    c->add_option("--state-dir", f->state_dir, "The workers' state dir");
    c->callback([f, result, approve] { result->exit_code = decide(*f, approve); });
  }
}

}  // namespace rf::cli
