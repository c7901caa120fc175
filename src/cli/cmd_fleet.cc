// `ringfence fleet status [--json]` (issue 16): the workers sharing a store,
// with their hosts, labels, load and last heartbeat. `fleet cordon | drain |
// uncordon TARGET` (issue 40): an operator takes a worker, or every worker of
// a host, out of service and back.
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "api/fleet_view.h"
#include "cli/client_store.h"
#include "cli/commands.h"
#include "core/units.h"

namespace rf::cli {
namespace {

struct FleetFlags {
  std::string state_dir;
  std::string store;
  bool json = false;
  bool all = false;    // stopped workers too
  std::string target;  // cordon, drain, uncordon: a worker id or a host id
  bool wait = false;   // drain: until the workers exited
  std::string timeout = "10m";
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
  std::printf("%-24s %-16s %-9s %-5s %-6s %-9s %-12s %-10s %s\n", "WORKER", "HOST", "STATE", "LIVE",
              "CALLS", "SANDBOXES", "HEARTBEAT", "VERSION", "LABELS");
  for (const store::FleetWorker& w : *fleet) {
    const store::WorkerRow& r = w.worker;
    std::string labels = store::labels_text(r.labels);
    if (r.project) labels += " (project " + *r.project + " only)";
    const bool live = api::worker_is_live(r, now);
    // Registered running but silent past the live window: killed, or its
    // host is gone (issue 40: it read "running").
    // A cordoned or draining worker says so (a cordon outlives its process).
    std::string state = r.state == store::WorkerState::running && !live
                            ? "dead"
                            : std::string(store::to_string(r.state));
    if (r.admin != store::WorkerAdmin::none && state == "running") {
      state = store::to_string(r.admin);
    } else if (r.admin == store::WorkerAdmin::cordoned) {
      state += ",cordoned";
    }
    std::printf("%-24s %-16s %-9s %-5s %-6lld %-9lld %-12s %-10s %s\n", r.id.c_str(),
                r.host_id.c_str(), state.c_str(), live ? "yes" : "no",
                static_cast<long long>(w.held_calls), static_cast<long long>(w.live_sandboxes),
                age_text(now - r.heartbeat_at).c_str(), r.version.empty() ? "-" : r.version.c_str(),
                labels.c_str());
  }
  std::printf("%d live worker(s) in store %s\n", view["live_workers"].get<int>(),
              store::engine::redact_uri(target).c_str());
  return 0;
}

// Until every worker in `ids` is stopped (or dead): a drained worker exits.
int wait_stopped(store::Store& st, const std::vector<std::string>& ids,
                 std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::vector<std::string> left;
    for (const std::string& id : ids) {
      auto w = st.worker(id);
      if (!w) return fail(w.error().to_string(), kExitRuntime);
      if (*w && (*w)->state == store::WorkerState::running &&
          api::worker_is_live(**w, store::now_ms()))
        left.push_back(id);
    }
    if (left.empty()) return 0;
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string names;
      for (const auto& id : left) names += (names.empty() ? "" : ", ") + id;
      return fail("fleet drain: still running after --timeout: " + names +
                      " (they go on draining; `fleet status` shows them)",
                  1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

int set_admin(const FleetFlags& f, store::WorkerAdmin admin) {
  std::optional<std::chrono::milliseconds> timeout;
  if (f.wait) {
    auto d = parse_duration(f.timeout);
    if (!d) return fail("--timeout: " + d.error().to_string(), kExitUsage);
    timeout = *d;
  }
  const std::string target = store_target(f.store, state_dir_or_default(f.state_dir));
  auto st = store::Store::open(target);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto changed = (*st)->set_worker_admin(f.target, admin);
  if (!changed) return fail(changed.error().to_string(), 1);
  for (const std::string& id : *changed) {
    switch (admin) {
      case store::WorkerAdmin::none:
        std::printf("worker %s uncordoned: it takes new work again\n", id.c_str());
        break;
      case store::WorkerAdmin::cordoned:
        std::printf("worker %s cordoned: it takes no new work (what it holds goes on)\n",
                    id.c_str());
        break;
      case store::WorkerAdmin::draining:
        std::printf(
            "worker %s draining: it takes no new work, finishes what it holds, then exits 0\n",
            id.c_str());
        break;
    }
  }
  std::fflush(stdout);
  if (!timeout) return 0;
  const int rc = wait_stopped(**st, *changed, *timeout);
  if (rc == 0) std::printf("drained: %zu worker(s) exited\n", changed->size());
  return rc;
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

  struct Verb {
    const char* name;
    const char* help;
    store::WorkerAdmin admin;
  };
  for (const Verb& v :
       {Verb{"cordon", "Take no new work on a worker (or every worker of a host) until uncordoned",
             store::WorkerAdmin::cordoned},
        Verb{
            "drain",
            "Take no new work on a worker (or a host's), let what it holds finish, then it exits 0",
            store::WorkerAdmin::draining},
        Verb{"uncordon", "Let a cordoned worker (or a host's) take new work again",
             store::WorkerAdmin::none}}) {
    auto g = std::make_shared<FleetFlags>();
    auto* sub = fleet->add_subcommand(v.name, v.help);
    sub->add_option("target", g->target, "A worker id, or a host id (its every worker)")
        ->required();
    sub->add_option("--state-dir", g->state_dir, "The state dir (default ~/.ringfence/state)");
    sub->add_option("--store", g->store,
                    "The store (default $RINGFENCE_STORE, else the state dir's SQLite file)");
    if (v.admin == store::WorkerAdmin::draining) {
      sub->add_flag("--wait", g->wait, "Return once the workers exited");
      sub->add_option("--timeout", g->timeout, "With --wait: give up waiting after (default 10m)");
    }
    const store::WorkerAdmin admin = v.admin;
    sub->callback([g, admin, result] { result->exit_code = set_admin(*g, admin); });
  }
}

}  // namespace rf::cli
