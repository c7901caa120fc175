// `ringfence sandbox doctor | list | reap`: the operator's view of this host's
// sandboxes, across every backend, joined with what the worker's store knows
// of them (project, run, mode, worker).
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/backends.h"
#include "cli/client_store.h"
#include "cli/commands.h"
#include "core/printable.h"
#include "core/units.h"
#include "host/host_health.h"
#include "local/scratch_dir.h"
#include "sandbox/sandbox.h"
#include "store/store.h"
#include "worker/config_file.h"
#include "worker/settings.h"
#include "worker/worker.h"

namespace rf::cli {
namespace {

struct AdminFlags {
  std::string backend;  // empty: every backend (doctor: native)
  std::string docker_host;
  std::string state_dir;  // empty: the worker's default
  bool json = false;
  std::string older_than;
  bool dry_run = false;
  bool all = false;  // list: every sandbox of the host, not only the state dir's
};

// A sandbox found on the host, and its row in the store if it has one.
struct Listed {
  SandboxInfo info;
  std::optional<store::SandboxRow> row;
};

void complain(const std::string& text) { std::fprintf(stderr, "ringfence: %s\n", text.c_str()); }

std::string state_dir_or_default(const std::string& flag) {
  return flag.empty() ? worker::default_settings(worker::home_directory()).state_dir.value : flag;
}

// Without --backend: native, local, and docker when a daemon is configured
// (remotedocker is docker by another name). A docker daemon that does not
// answer then is noted, not a failure: this host may simply not run one.
std::vector<BackendKind> every_backend(const AdminFlags& f) {
  std::vector<BackendKind> out;
  for (BackendKind k : registered_backends()) {
    if (k == BackendKind::kRemoteDocker) continue;
    if (k == BackendKind::kDocker && !docker_configured({f.docker_host, {}})) continue;
    out.push_back(k);
  }
  return out;
}

bool implicit_docker(const AdminFlags& f, BackendKind kind) {
  return f.backend.empty() && kind == BackendKind::kDocker;
}

// `--backend NAME`, or every backend; an unknown name is a usage error.
std::optional<std::vector<BackendKind>> backends_for(const AdminFlags& f, const char* verb) {
  register_backends({f.docker_host, {}});
  if (f.backend.empty()) return every_backend(f);
  auto kind = parse_backend_kind(f.backend);
  if (!kind) {
    complain(std::string("sandbox ") + verb + ": --backend: " + kind.error().message);
    return std::nullopt;
  }
  return std::vector<BackendKind>{*kind};
}

// The store's live sandbox rows by id. No store file: none (nothing is
// created). A store that cannot be read: none, and a warning.
std::map<std::string, store::SandboxRow> stored_sandboxes(const std::string& state_dir) {
  std::map<std::string, store::SandboxRow> by_id;
  const std::string path = store_target("", state_dir);
  struct stat st {};
  if (!store::is_postgres_uri(path) && ::stat(store::sqlite_path(path).c_str(), &st) != 0)
    return by_id;
  auto st_open = store::Store::open(path);
  auto rows = st_open ? (*st_open)->live_sandboxes()
                      : Result<std::vector<store::SandboxRow>>(st_open.error());
  if (!rows) {
    complain("sandbox list: store " + store::engine::redact_uri(path) + ": " +
             rows.error().to_string() + " (project, run and mode not shown)");
    return by_id;
  }
  for (auto& r : *rows) by_id.emplace(r.id, std::move(r));
  return by_id;
}

std::string format_age(std::chrono::seconds s) {
  const auto n = s.count();
  if (n < 120) return std::to_string(n) + "s";
  if (n < 7200) return std::to_string(n / 60) + "m";
  if (n < 172800) return std::to_string(n / 3600) + "h";
  return std::to_string(n / 86400) + "d";
}

nlohmann::json or_null(const std::optional<std::string>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

nlohmann::json listed_json(const Listed& l) {
  const SandboxInfo& i = l.info;
  const auto* row = l.row ? &*l.row : nullptr;
  return {{"id", i.id},
          {"backend", i.backend},
          {"project", row ? or_null(row->project_id) : nullptr},
          {"run", row ? or_null(row->run_id) : nullptr},
          {"mode", row ? nlohmann::json(row->mode) : nullptr},
          {"worker", row ? or_null(row->worker_id) : nullptr},
          {"age_seconds", i.age.count()},
          {"pid", i.pid},
          {"owner_pid", i.owner_pid},
          {"orphaned", i.orphaned()},
          {"peak_memory_bytes", i.memory_bytes ? nlohmann::json(*i.memory_bytes) : nullptr}};
}

// Ids, runs and projects are a tenant's text (a docker container's name can
// be anyone's): each cell is shown escaped, and on one line.
std::vector<std::string> listed_cells(const Listed& l) {
  const SandboxInfo& i = l.info;
  auto text = [](const std::optional<std::string>& v) {
    return v ? printable(*v) : std::string("-");
  };
  const auto* row = l.row ? &*l.row : nullptr;
  return {printable(i.id),
          printable(i.backend),
          row ? text(row->project_id) : "-",
          row ? text(row->run_id) : "-",
          row ? printable(row->mode) : "-",
          row ? text(row->worker_id) : "-",
          format_age(i.age),
          i.pid ? std::to_string(i.pid) : "-",
          i.orphaned() ? "gone" : std::to_string(i.owner_pid),
          i.memory_bytes ? format_size_human(*i.memory_bytes) : "-"};
}

// Columns as wide as their widest cell, two spaces apart.
void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    width.resize(std::max(width.size(), r.size()));
    for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
  }
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      line += r[c];
      if (c + 1 < r.size()) line += std::string(width[c] - r[c].size() + 2, ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

int run_list(const AdminFlags& f) {
  auto names = backends_for(f, "list");
  if (!names) return kExitUsage;
  std::vector<Listed> found;
  bool failed = false;
  for (BackendKind kind : *names) {
    auto backend = make_backend(kind);
    auto all = backend ? (*backend)->list() : Result<std::vector<SandboxInfo>>(backend.error());
    if (!all && implicit_docker(f, kind)) {
      complain("sandbox list: docker skipped: " + all.error().to_string());
      continue;
    }
    if (!all) {
      complain("sandbox list: " + std::string(to_string(kind)) + ": " + all.error().to_string());
      failed = true;
      continue;
    }
    for (auto& i : *all) found.push_back(Listed{std::move(i), std::nullopt});
  }
  auto stored = stored_sandboxes(state_dir_or_default(f.state_dir));
  for (auto& l : found) {
    if (auto it = stored.find(l.info.id); it != stored.end()) l.row = it->second;
  }
  // A state dir named: its store's sandboxes, not every other state's on the
  // host (issue 40: 150 of them, all "-"), unless --all.
  size_t others = 0;
  if (!f.state_dir.empty() && !f.all)
    others = std::erase_if(found, [](const Listed& l) { return !l.row.has_value(); });
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& l : found) arr.push_back(listed_json(l));
    std::printf("%s\n", printable_json(arr).c_str());
  } else {
    std::vector<std::vector<std::string>> rows = {
        {"ID", "BACKEND", "PROJECT", "RUN", "MODE", "WORKER", "AGE", "PID", "OWNER", "MEMORY"}};
    for (const auto& l : found) rows.push_back(listed_cells(l));
    print_table(rows);
    if (others > 0)
      std::fprintf(stderr,
                   "ringfence: %zu more sandbox(es) on this host are not in the store of "
                   "--state-dir %s (--all lists them)\n",
                   others, f.state_dir.c_str());
  }
  return failed ? kExitRuntime : 0;
}

int run_reap(const AdminFlags& f) {
  auto age = parse_duration(f.older_than);
  if (!age) {
    complain("--older-than: " + age.error().to_string());
    return kExitUsage;
  }
  auto names = backends_for(f, "reap");
  if (!names) return kExitUsage;
  const auto older_than = std::chrono::duration_cast<std::chrono::seconds>(*age);
  bool failed = false, any = false;
  for (BackendKind kind : *names) {
    const std::string name(to_string(kind));
    auto backend = make_backend(kind);
    auto reaped = backend ? (*backend)->reap(older_than, f.dry_run)
                          : Result<std::vector<SandboxInfo>>(backend.error());
    if (!reaped && implicit_docker(f, kind)) {
      complain("sandbox reap: docker skipped: " + reaped.error().to_string());
      continue;
    }
    if (!reaped) {
      complain("sandbox reap: " + name + ": " + reaped.error().to_string());
      failed = true;
      continue;
    }
    for (const auto& i : *reaped) {
      const std::string why = i.orphaned() ? "orphaned" : "older than " + f.older_than;
      std::printf("%s %s (%s; %s, age %s)\n", f.dry_run ? "would reap" : "reaped",
                  printable(i.id).c_str(), name.c_str(), why.c_str(), format_age(i.age).c_str());
      any = true;
    }
  }
  if (!any && !failed) std::printf("nothing to reap\n");
  return failed ? kExitRuntime : 0;
}

// One ✓ or ✗ line per check, each ✗ with its remedy; false if a required one failed.
bool print_checks(const std::vector<HealthCheck>& checks) {
  bool healthy = true;
  for (const auto& c : checks) {
    std::printf("%s %s: %s%s\n", c.ok ? "\u2713" : "\u2717", c.name.c_str(), c.detail.c_str(),
                c.ok || c.required ? "" : " (optional)");
    if (!c.ok) std::printf("    fix: %s\n", c.remedy.c_str());
    if (!c.ok && c.required) healthy = false;
  }
  return healthy;
}

int run_doctor(const AdminFlags& f) {
  auto kind = parse_backend_kind(f.backend.empty() ? "native" : f.backend);
  if (!kind) {
    complain("sandbox doctor: --backend: " + kind.error().message);
    return kExitUsage;
  }
  const std::string name(to_string(*kind));
  register_backends({f.docker_host, {}});
  const std::vector<HealthCheck> checks = backend_doctor(*kind);
  const std::string state_dir = state_dir_or_default(f.state_dir);
  const std::vector<HealthCheck> host = {
      host::check_state_dir_writable(state_dir),
      host::check_free_disk("free disk (state dir)", state_dir),
      host::check_free_disk("free disk (scratch root)", local::default_scratch_root())};
  const bool host_ok = print_checks(host);
  const bool backend_ok = print_checks(checks);
  const bool healthy = host_ok && backend_ok;
  std::printf("%s backend: %s\n", name.c_str(), healthy ? "healthy" : "UNHEALTHY");
  return healthy ? 0 : 1;
}

}  // namespace

void add_sandbox_admin_commands(CLI::App* sandbox, CommandResult* result) {
  auto f = std::make_shared<AdminFlags>();
  const char* state_dir_help = "The worker's state dir (default ~/.ringfence/state)";

  auto* doctor =
      sandbox->add_subcommand("doctor", "Check that this host can run the backend's sandboxes");
  doctor->add_option("--backend", f->backend,
                     "Backend to check: native (default), local, docker or remotedocker");
  doctor->add_option("--docker-host", f->docker_host, "The Docker daemon (docker backends)");
  doctor->add_option("--state-dir", f->state_dir, state_dir_help);
  doctor->callback([f, result] { result->exit_code = run_doctor(*f); });

  auto* list = sandbox->add_subcommand("list", "The live sandboxes on this host, of every backend");
  list->add_option("--backend", f->backend, "Only this backend");
  list->add_option("--docker-host", f->docker_host, "The Docker daemon (docker backends)");
  list->add_option("--state-dir", f->state_dir,
                   "The worker's state dir: only the sandboxes its store knows (default "
                   "~/.ringfence/state, and every sandbox of the host)");
  list->add_flag("--all", f->all, "With --state-dir: every sandbox of the host too");
  list->add_flag("--json", f->json, "One JSON array");
  list->callback([f, result] { result->exit_code = run_list(*f); });

  auto* reap = sandbox->add_subcommand(
      "reap", "Kill orphaned or old sandboxes of every backend, remove every trace");
  reap->add_option("--backend", f->backend, "Only this backend");
  reap->add_option("--docker-host", f->docker_host, "The Docker daemon (docker backends)");
  reap->add_option("--older-than", f->older_than, "Also reap live sandboxes at least this old")
      ->required();
  reap->add_flag("--dry-run", f->dry_run, "Only say what would be reaped");
  reap->callback([f, result] { result->exit_code = run_reap(*f); });
}

}  // namespace rf::cli
