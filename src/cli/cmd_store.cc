// `ringfence store migrate --from sqlite:PATH --to postgres://...` (issue
// 16): a state dir's store moved to PostgreSQL (or back), audit chain
// included and verified (store/store_copy.h).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "store/store_copy.h"

namespace rf::cli {
namespace {

struct StoreFlags {
  std::string state_dir;
  std::string from;
  std::string to;
  bool json = false;
};

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// A SQLite file this command made is removed when the move fails: a failed
// move leaves the target as it found it.
void remove_sqlite_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

int migrate_store(const StoreFlags& f) {
  const std::string from =
      f.from.empty() ? store_target("", state_dir_or_default(f.state_dir)) : f.from;
  const std::string from_name = store::engine::redact_uri(from);
  const std::string to_name = store::engine::redact_uri(f.to);
  // A password in --from or --to was refused before (main.cc).
  if (!store::is_postgres_uri(from) && !exists(store::sqlite_path(from)))
    return fail("store migrate: --from " + from_name + ": no such SQLite file", kExitUsage);
  if (from == f.to || (!store::is_postgres_uri(from) && !store::is_postgres_uri(f.to) &&
                       store::sqlite_path(from) == store::sqlite_path(f.to)))
    return fail("store migrate: --from and --to name the same store (" + from_name + ")",
                kExitUsage);
  const bool new_file = !store::is_postgres_uri(f.to) && !exists(store::sqlite_path(f.to));

  auto source = store::Db::open(from);
  if (!source.ok()) return fail("store migrate: " + source.error().to_string(), kExitRuntime);
  auto target = store::Db::open(f.to);
  if (!target.ok()) return fail("store migrate: " + target.error().to_string(), kExitRuntime);
  const auto started = std::chrono::steady_clock::now();
  auto report = store::copy_store(*source, *target,
                                  std::chrono::milliseconds(store::kLiveWorkerWindow).count());
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!report.ok()) {
    *target = store::Db();
    if (new_file) remove_sqlite_files(store::sqlite_path(f.to));
    return fail("store migrate " + from_name + " -> " + to_name + ": " +
                    report.error().to_string() + " (no row was written to " + to_name + ")",
                kExitRuntime);
  }

  int64_t sealed = 0;
  for (const store::TableCopied& t : report->tables)
    if (t.table == "secret_versions") sealed = t.rows;
  if (f.json) {
    nlohmann::json tables = nlohmann::json::array();
    for (const store::TableCopied& t : report->tables)
      tables.push_back({{"table", t.table}, {"rows", t.rows}});
    const nlohmann::json out = {
        {"from", from_name},
        {"to", to_name},
        {"schema_version", report->schema_version},
        {"tables", tables},
        {"rows", report->rows},
        {"audit",
         {{"events", report->audit_events}, {"head", report->audit_head}, {"verified", true}}},
        {"seconds", seconds}};
    std::printf("%s\n", out.dump().c_str());
    return 0;
  }
  std::printf("moved %s -> %s (schema version %d)\n", from_name.c_str(), to_name.c_str(),
              report->schema_version);
  for (const store::TableCopied& t : report->tables)
    std::printf("  %-20s %8lld\n", t.table.c_str(), static_cast<long long>(t.rows));
  std::printf("%lld rows in %zu tables in %.2f s\n", static_cast<long long>(report->rows),
              report->tables.size(), seconds);
  std::printf("audit chain verified in %s: %lld events, head %s\n", to_name.c_str(),
              static_cast<long long>(report->audit_events), report->audit_head.c_str());
  std::printf("next: name %s to every worker and command (--store, or RINGFENCE_STORE)\n",
              to_name.c_str());
  if (sealed > 0) {
    std::printf(
        "note: %lld sealed secret version(s) moved; they open only with the key that sealed them "
        "(secrets.key in the state dir): give each worker that resolves them that key\n",
        static_cast<long long>(sealed));
  }
  return 0;
}

}  // namespace

void add_store_commands(CLI::App* store_cmd, CommandResult* result) {
  store_cmd->require_subcommand(1);
  auto f = std::make_shared<StoreFlags>();
  auto* migrate = store_cmd->add_subcommand(
      "migrate",
      "Move a store's data (the audit chain included, verified) into an empty store of the "
      "other engine: --from sqlite:PATH --to postgres://...");
  migrate->add_option("--from", f->from,
                      "The store to move: sqlite:PATH, PATH or postgres://... (default: "
                      "$RINGFENCE_STORE, else the state dir's SQLite file)");
  migrate
      ->add_option("--to", f->to, "The empty store to move it into: postgres://... or sqlite:PATH")
      ->required();
  migrate->add_option("--state-dir", f->state_dir,
                      "The state dir whose store is moved when --from is not given (default "
                      "~/.ringfence/state)");
  migrate->add_flag("--json", f->json, "As JSON");
  migrate->callback([f, result] { result->exit_code = migrate_store(*f); });
}

}  // namespace rf::cli
