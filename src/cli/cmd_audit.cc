// `ringfence audit show | verify` (issue 11): the hash-chained audit log.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "store/audit_log.h"

namespace rf::cli {
namespace {

using json = nlohmann::json;

// audit verify: the chain is broken (distinct from 125, the store cannot be read).
constexpr int kExitTampered = 1;

struct AuditFlags {
  std::string state_dir, run, project;
  int64_t after = 0;
  int limit = 1000;
  bool json = false;
};

int fail(const std::string& what, int code) {
  std::fprintf(stderr, "ringfence: %s\n", what.c_str());
  return code;
}

std::string iso_time(int64_t ms) {
  const std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms % 1000));
  return out;
}

json event_json(const store::AuditEvent& e) {
  json j = {{"seq", e.seq},
            {"at", iso_time(e.at)},
            {"kind", e.kind},
            {"actor", e.actor},
            {"detail", json::parse(e.detail_json, nullptr, false)},
            {"hash", e.hash}};
  if (e.project_id) j["project"] = *e.project_id;
  if (e.run_id) j["run"] = *e.run_id;
  if (e.call_id) j["call"] = *e.call_id;
  if (e.sandbox_id) j["sandbox"] = *e.sandbox_id;
  return j;
}

int run_show(const AuditFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  store::AuditFilter filter;
  if (!f.run.empty()) filter.run_id = f.run;
  if (!f.project.empty()) filter.project_id = f.project;
  filter.after_seq = f.after;
  filter.limit = f.limit;
  auto events = store::AuditLog(**st).list(filter);
  if (!events.ok()) return fail(events.error().to_string(), kExitRuntime);
  if (f.json) {
    json out = json::array();
    for (const auto& e : *events) out.push_back(event_json(e));
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("%-6s %-24s %-20s %-16s %-28s %s\n", "SEQ", "AT", "KIND", "ACTOR", "WHERE", "DETAIL");
  for (const auto& e : *events) {
    std::string where;
    if (e.project_id) where += "project=" + *e.project_id;
    if (e.run_id) where += (where.empty() ? "" : " ") + std::string("run=") + *e.run_id;
    if (e.call_id)
      where += (where.empty() ? "" : " ") + std::string("call=") + std::to_string(*e.call_id);
    if (e.sandbox_id) where += (where.empty() ? "" : " ") + std::string("sandbox=") + *e.sandbox_id;
    std::printf("%-6lld %-24s %-20s %-16s %-28s %s\n", static_cast<long long>(e.seq),
                iso_time(e.at).c_str(), e.kind.c_str(), e.actor.c_str(), where.c_str(),
                e.detail_json.c_str());
  }
  return 0;
}

int run_verify(const AuditFlags& f) {
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st.ok()) return fail(st.error().to_string(), kExitRuntime);
  auto verdict = store::AuditLog(**st).verify();
  if (!verdict.ok()) return fail(verdict.error().to_string(), kExitRuntime);
  if (f.json) {
    json j = {{"intact", verdict->intact}, {"events", verdict->events}};
    if (verdict->first_bad) j["first_bad"] = *verdict->first_bad;
    if (!verdict->intact) j["reason"] = verdict->reason;
    std::printf("%s\n", j.dump().c_str());
  } else if (verdict->intact) {
    std::printf("audit log intact: %lld events\n", static_cast<long long>(verdict->events));
  } else {
    std::printf("audit log NOT intact: %s\n", verdict->reason.c_str());
  }
  return verdict->intact ? 0 : kExitTampered;
}

}  // namespace

void add_audit_commands(CLI::App* audit, CommandResult* result) {
  auto f = std::make_shared<AuditFlags>();
  audit->require_subcommand(1);
  auto* show = audit->add_subcommand("show", "List audit events, oldest first");
  show->add_option("--run", f->run, "Only this run's events");
  show->add_option("--project", f->project, "Only this project's events");
  show->add_option("--after", f->after, "Only events after this seq");
  show->add_option("--limit", f->limit, "At most this many")->default_val(1000);
  show->add_flag("--json", f->json, "As a JSON array");
  show->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  show->callback([f, result] { result->exit_code = run_show(*f); });
  auto* verify = audit->add_subcommand("verify", "Check the hash chain of every event");
  verify->add_flag("--json", f->json, "As JSON");
  verify->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  verify->footer(
      "Exit codes: 0 the chain is intact; 1 it is not (an event was edited, deleted or "
      "reordered): the first bad event is named; 125 the store cannot be read.");
  verify->callback([f, result] { result->exit_code = run_verify(*f); });
}

}  // namespace rf::cli
