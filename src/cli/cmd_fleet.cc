// `ringfence fleet status [--json]` (issue 16): the workers sharing a store,
// with their hosts, labels, load and last heartbeat.
#include <cstdio>
#include <string>

#include "api/fleet_view.h"
#include "cli/client_store.h"
#include "cli/commands.h"

namespace rf::cli {
namespace {

struct FleetFlags {
  std::string state_dir;
  std::string store;
  bool json = false;
  bool all = false;  // stopped workers too
};

std::string age_text(int64_t ms) {
  char buf[32];
  if (ms < 0) ms = 0;
  if (ms < 10'000) {
    std::snprintf(buf, sizeof buf, "%.1fs ago", static_cast<double>(ms) / 1000);
  } else if (ms < 3600'000) {
    std::snprintf(buf, sizeof buf, "%llds ago", static_cast<long long>(ms / 1000));
  } else {
    std::snprintf(buf, sizeof buf, "%lldh ago", static_cast<long long>(ms / 3600'000));
  }
  return buf;
}

int status(const FleetFlags& f) {
  const std::string target = store_target(f.store, state_dir_or_default(f.state_dir));
  auto st = store::Store::open(target);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto fleet = (*st)->fleet();
  if (!fleet) return fail(fleet.error().to_string(), kExitRuntime);
  const int64_t now = store::now_ms();
  if (!f.all) {
    std::erase_if(*fleet, [&](const store::FleetWorker& w) {
      return w.worker.state == store::WorkerState::stopped;
    });
  }
  const nlohmann::json view = api::fleet_json(*fleet, now);
  if (f.json) {
    std::printf("%s\n", view.dump().c_str());
    return 0;
  }
  std::printf("%-24s %-16s %-8s %-5s %-6s %-9s %-12s %s\n", "WORKER", "HOST", "STATE", "LIVE",
              "CALLS", "SANDBOXES", "HEARTBEAT", "LABELS");
  for (const store::FleetWorker& w : *fleet) {
    const store::WorkerRow& r = w.worker;
    std::string labels = store::labels_text(r.labels);
    if (r.project) labels += " (project " + *r.project + " only)";
    const bool live = api::worker_is_live(r, now);
    // Registered running but silent past the live window: killed, or its
    // host is gone (issue 40: it read "running").
    const std::string state = r.state == store::WorkerState::running && !live
                                  ? "dead"
                                  : std::string(store::to_string(r.state));
    std::printf("%-24s %-16s %-8s %-5s %-6lld %-9lld %-12s %s\n", r.id.c_str(), r.host_id.c_str(),
                state.c_str(), live ? "yes" : "no", static_cast<long long>(w.held_calls),
                static_cast<long long>(w.live_sandboxes), age_text(now - r.heartbeat_at).c_str(),
                labels.c_str());
  }
  std::printf("%d live worker(s) in store %s\n", view["live_workers"].get<int>(),
              store::engine::redact_uri(target).c_str());
  return 0;
}

}  // namespace

void add_fleet_commands(CLI::App* fleet, CommandResult* result) {
  fleet->require_subcommand(1);
  auto f = std::make_shared<FleetFlags>();
  auto* cmd = fleet->add_subcommand(
      "status", "The workers sharing the store: host, labels, state, load, last heartbeat");
  cmd->add_option("--state-dir", f->state_dir, "The state dir (default ~/.ringfence/state)");
  cmd->add_option("--store", f->store,
                  "The store (default $RINGFENCE_STORE, else the state dir's SQLite file)");
  cmd->add_flag("--json", f->json, "As JSON (the shape of GET /v1/fleet)");
  cmd->add_flag("--all", f->all, "Stopped workers too");
  cmd->callback([f, result] { result->exit_code = status(*f); });
}

}  // namespace rf::cli
