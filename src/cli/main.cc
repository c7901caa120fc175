// ringfence: the command line. A thin layer over the library; each verb group
// lives in its own cmd_*.cc.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/name_services.h"
#include "core/log.h"
#include "core/nearest.h"
#include "store/db.h"
#include "store/store.h"
#ifdef RF_WITH_POSTGRES
#include "store/postgres.h"
#endif

namespace {

// The top-level command named on the command line: the first word that is
// neither an option nor the value of --log-level (the one global option that
// takes a value). Empty when there is none (`ringfence --version`).
std::string_view command_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    // the program's options with a value
    if (arg == "--log-level" || arg == "--store" || arg == "--state-dir") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] != '-') return arg;
  }
  return {};
}

#ifdef RF_STATIC_CLI
// The static ringfence has no libpq (docs/store.md). A command given a
// PostgreSQL store (--store URI, $RINGFENCE_STORE, or store migrate's --from
// and --to) becomes ringfence-pg, the same CLI linked with libpq, next to this
// binary, before it does anything.
bool names_a_postgres_store(int argc, char** argv) {
  for (const auto& [flag, value] : rf::cli::store_flags_in(argc, argv))
    if (rf::store::is_postgres_uri(value)) return true;
  const char* env = std::getenv("RINGFENCE_STORE");
  return env != nullptr && rf::store::is_postgres_uri(env);
}

[[noreturn]] void become_postgres_twin(char** argv) {
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  std::string twin = n > 0 ? std::string(self, n) : std::string();
  twin = twin.substr(0, twin.rfind('/') + 1) + "ringfence-pg";
  ::execv(twin.c_str(), argv);
  std::fprintf(stderr, "ringfence: a PostgreSQL store needs %s (the CLI with libpq): %s\n",
               twin.c_str(), std::strerror(errno));
  std::exit(2);
}

// A store named where the scan above cannot see it (a worker's config file):
// say what to run instead.
rf::Result<std::unique_ptr<rf::store::engine::ConnectionImpl>> refuse_postgres(
    const std::string& target, const rf::store::DbOptions&) {
  return rf::make_error("open database " + rf::store::engine::redact_uri(target),
                        "the static ringfence has no libpq: run ringfence-pg (next to it), or "
                        "name the store with --store or RINGFENCE_STORE, which hand it over");
}
#endif

// For the first --name on the command line that the command named (or the
// program) has no option for: " (did you mean --mem?)" with the nearest one
// (within two edits, or one name the start of the other: --memory, --mem).
std::string did_you_mean(const CLI::App& app, int argc, char** argv) {
  std::vector<const CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty())
    chain.push_back(chain.back()->get_subcommands().front());
  std::vector<std::string> known;
  for (const CLI::App* c : chain)
    for (const CLI::Option* o : c->get_options())
      for (const std::string& n : o->get_lnames()) known.push_back(n);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (!arg.starts_with("--") || arg.size() < 3) continue;
    std::string_view flag = arg.substr(2);
    const std::string name(flag.substr(0, flag.find('=')));
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    const std::string best = rf::nearest_name(name, known, /*a_start_counts=*/true);
    return best.empty() ? "" : " (did you mean --" + best + "?)";
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  // Before anything opens a store, or the static CLI hands it on.
  if (auto why = rf::cli::store_password_refusal(argc, argv)) {
    std::fprintf(stderr, "ringfence: %s\n", why->c_str());
    return 2;
  }
#ifdef RF_STATIC_CLI
  if (names_a_postgres_store(argc, argv)) become_postgres_twin(argv);
  rf::store::engine::register_postgres(refuse_postgres);
  rf::cli::use_builtin_name_services();  // a static binary cannot load NSS modules
#endif
#ifdef RF_WITH_POSTGRES
  rf::store::enable_postgres();
#endif
  CLI::App app{"ringfence: run AI agents' tool calls in disposable sandboxes"};
  app.name("ringfence");
  app.set_version_flag("--version", std::string("ringfence ") + RF_VERSION);
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level, "debug, info, warn or error")
      ->default_val("warn")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.parse_complete_callback([&] { rf::init_logging(log_level); });
  // The store, for every command, before or after its name (a command's
  // options fall through to these): it becomes $RINGFENCE_STORE, which every
  // command that opens the store reads (cli/client_store.h). A command with a
  // --store of its own (call, fleet status, worker start) takes it itself.
  app.fallthrough();
  std::string store;
  app.add_option("--store", store,
                 "The store every command opens: postgres://... or sqlite:PATH (default "
                 "$RINGFENCE_STORE, else the state dir's SQLite file; never with a "
                 "password: store_password_refusal)")
      ->each([](const std::string& uri) { ::setenv("RINGFENCE_STORE", uri.c_str(), 1); });
  // The state dir the same way: $RINGFENCE_STATE_DIR, every command's default
  // (worker/settings.h), unless the command is given its own.
  std::string state_dir;
  app.add_option("--state-dir", state_dir,
                 "The state dir of every command (default $RINGFENCE_STATE_DIR, else "
                 "~/.ringfence/state)")
      ->each([](const std::string& dir) { ::setenv("RINGFENCE_STATE_DIR", dir.c_str(), 1); });

  rf::cli::CommandResult result;
  // Everything after the first "--" is a command, never options: CLI11 keeps
  // parsing "-la" in "-- ls -la" as an option once a repeatable option came first.
  int cli_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      cli_argc = i;
      result.command_tail.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  // Every top-level command is listed (for the help and for CLI11's errors),
  // but only the one on the command line gets its options and subcommands.
  const std::string_view word = command_word(cli_argc, argv);
  // A client holds one PostgreSQL connection (issue 40); a worker and serve,
  // which open several Stores, share a relay between them.
  rf::store::Store::use_one_connection_each(word != "worker" && word != "serve");
  for (const rf::cli::TopCommand& c : rf::cli::top_commands()) {
    CLI::App* command = app.add_subcommand(c.name, c.description);
    if (word == c.name) c.build(command, &result);
  }
  auto* help = app.add_subcommand("help", "Show this help");
  help->callback([&] {
    // The formatter, not app.help(): that would describe the parsed subcommand, `help`.
    const std::string usage =
        app.get_formatter()->make_help(&app, app.get_name(), CLI::AppFormatMode::Normal);
    std::fputs(usage.c_str(), stdout);
  });

  try {
    app.parse(cli_argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "ringfence: %s%s\nRun 'ringfence help' for usage.\n", e.what(),
                 did_you_mean(app, cli_argc, argv).c_str());
    return 2;
  }
  return result.exit_code;
}
