// `ringfence call`: the client side of the worker.
// A call is enqueued in the store; a worker claims it; this process streams its
// output from the store and exits with its exit code. With --api, the same
// through `serve` (call_via_api.h): no store, the project's token.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/call_via_api.h"
#include "cli/call_wait.h"
#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/proof_session.h"
#include "core/base64.h"
#include "core/io.h"
#include "core/units.h"
#include "identity/audit_events.h"
#include "identity/cascade.h"
#include "store/identity_store.h"
#include "store/store.h"
#include "worker/config_file.h"
#include "worker/settings.h"
#include "worker/settings_flags.h"
#include "worker/worker.h"

namespace rf::cli {
namespace {

struct ClientFlags {
  std::string state_dir;  // empty: the worker's default
  std::string store;      // empty: $RINGFENCE_STORE, else the state dir's
  std::string project, run, stdin_file, environment = "development", timeout = "30s";
  std::string sandbox_image;       // an agent's own image; "" = the worker's
  std::string wait_timeout;        // "" = wait for a worker as long as it takes
  std::string store_wait = "60s";  // how long an unreachable store is waited for
  bool identity = false;           // identity-scoped: the cascade of project, workflow, user
  bool jit = false;  // the sandbox may ask for credentials (rf-cred); implies identity
  std::string workflow, user;
  bool json = false;
  std::string receipt;               // write the call's signed receipt here
  std::vector<std::string> require;  // KEY=VALUE labels a worker must have
  std::vector<std::string> command;
  std::string api;                      // serve's URL: the call goes through it
  std::string token_file;               // with --api: where the token is
  std::vector<std::string> store_only;  // flags given that only the store path has
};

std::string state_dir_of(const ClientFlags& f) {
  return f.state_dir.empty() ? worker::default_settings(worker::home_directory()).state_dir.value
                             : f.state_dir;
}

Result<std::unique_ptr<store::Store>> open_store(const ClientFlags& f) {
  return store::Store::open(store_target(f.store, state_dir_of(f)));
}

// Why a finished call's command could not start: its result's "error" (the
// worker writes it with exit 126 or 127); nullopt when it started.
std::optional<std::string> start_error(const store::CallView& v) {
  if (!v.result_json || (v.exit_code != 126 && v.exit_code != 127)) return std::nullopt;
  const auto j = nlohmann::json::parse(*v.result_json, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("error") || !j["error"].is_string()) return std::nullopt;
  return j["error"].get<std::string>();
}

// The call as a CallRequest to serve (docs/openapi.yaml), whose token
// names the project.
int run_call_through_serve(const ClientFlags& f, const store::NewCall& call) {
  if (!f.store_only.empty())
    return fail(f.store_only.front() +
                    " goes with the store, not --api (serve and the token's project decide it)",
                kExitUsage);
  auto token = api_token(f.token_file);
  if (!token) return fail(token.error().to_string(), kExitUsage);
  nlohmann::json body = {{"run", call.run}, {"argv", call.argv}, {"timeout", f.timeout}};
  if (!call.stdin_bytes.empty()) body["stdin_base64"] = base64_encode(call.stdin_bytes);
  if (!call.requires_labels.empty()) body["requires"] = {{"labels", call.requires_labels}};
  if (f.identity) {
    body["identity"] = nlohmann::json::object();
    if (!f.workflow.empty()) body["identity"]["workflow"] = f.workflow;
    if (!f.user.empty()) body["identity"]["user"] = f.user;
  }
  return run_call_via_api({.api = f.api, .token = *token, .body = std::move(body)});
}

int run_call(const ClientFlags& f) {
  auto timeout = parse_duration(f.timeout);
  if (!timeout) return fail("--timeout: " + timeout.error().to_string(), kExitUsage);
  if (timeout->count() <= 0)
    return fail("--timeout \"" + f.timeout + "\": must be more than 0", kExitUsage);
  if ((!f.workflow.empty() || !f.user.empty()) && !f.identity && !f.jit)
    return fail("--workflow and --user go with --identity", kExitUsage);
  auto env = store::parse_environment(f.environment);
  if (!env) return fail("--environment: " + env.error().to_string(), kExitUsage);
  std::optional<std::chrono::milliseconds> wait_timeout;
  if (!f.wait_timeout.empty()) {
    auto d = parse_duration(f.wait_timeout);
    if (!d) return fail("--wait-timeout: " + d.error().to_string(), kExitUsage);
    wait_timeout = *d;
  }
  auto store_wait = parse_duration(f.store_wait);
  if (!store_wait) return fail("--store-wait: " + store_wait.error().to_string(), kExitUsage);
  if (!f.receipt.empty()) {
    if (auto ok = check_receipt_path(f.receipt); !ok)
      return fail(ok.error().to_string(), kExitUsage);
  }
  store::NewCall call;
  call.project = f.project;
  call.run = f.run;
  call.argv = f.command;
  call.timeout = *timeout;
  call.sandbox_image = f.sandbox_image;
  // A call requiring labels waits this long for a worker with them (one may
  // be restarting) before a live worker fails it naming what each lacks.
  call.wait_for_worker = wait_timeout;
  for (const std::string& text : f.require) {
    auto labels = worker::parse_labels(text);
    if (!labels) return fail("--require: " + labels.error().to_string(), kExitUsage);
    for (auto& [k, v] : *labels) {
      if (!call.requires_labels.emplace(k, v).second)
        return fail("--require: the label " + k + " is given twice", kExitUsage);
    }
  }
  if (auto many = store::check_labels(call.requires_labels); !many)
    return fail("--require: " + many.error().to_string(), kExitUsage);
  if (!f.stdin_file.empty()) {
    auto data = read_file(f.stdin_file);
    if (!data) return fail("--stdin: " + data.error().to_string(), kExitUsage);
    call.stdin_bytes = *data;
  }
  if (!f.api.empty()) return run_call_through_serve(f, call);
  if (f.project.empty()) return fail("--project is required (or --api: the token's)", kExitUsage);
  // Checked before anything is written: a refused call leaves no new project.
  if (auto bad = store::Store::check_new_call(call); !bad)
    return fail(bad.error().to_string(), kExitUsage);
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string() + "; the call was never queued", kExitNeverQueued);
  store::Store& s = **st;
  if (f.jit) call.jit = true;
  if (f.identity || f.jit) {
    // Checked now (fail closed, naming the key and the secret) and again when
    // the sandbox starts: what is revoked in between never reaches it.
    call.identity = store::IdentityScope{f.workflow, f.user};
    store::IdentityStore rows(s);
    const identity::CascadeRequest request{f.project, f.workflow, f.user};
    auto plan = identity::plan_cascade(rows, request);
    if (!plan) {
      identity::audit_refusal(s, "cli", request, plan.error().to_string(), {f.run, {}, {}});
      return fail("call refused: " + plan.error().to_string(), kExitRuntime);
    }
  }
  // A new project takes --environment; an existing one keeps its own.
  auto project = s.project(f.project);
  if (!project) {
    if (auto e = s.ensure_project(f.project, *env); !e)
      return fail(e.error().to_string() + "; the call was never queued",
                  e.error().code == ErrorCode::kUnavailable ? kExitNeverQueued : kExitRuntime);
  }
  auto id = s.enqueue_call(call);
  if (!id) {
    if (id.error().code == ErrorCode::kUnavailable)
      return fail(id.error().to_string() + "; the call was never queued", kExitNeverQueued);
    return fail(id.error().to_string(), kExitUsage);
  }
  QueueWatch watch({.call_id = *id,
                    .project = f.project,
                    .labels = call.requires_labels,
                    .store_path = store::engine::redact_uri(store_target(f.store, state_dir_of(f))),
                    .state_dir = state_dir_of(f),
                    .environment = project ? project->environment : *env,
                    .wait_timeout = wait_timeout,
                    .wait_timeout_text = f.wait_timeout});
  int64_t seq = 0;
  // How long the client waits for a store it cannot reach before it gives up
  // (the call itself goes on, and `run show` finds it later).
  const std::chrono::milliseconds kUnreachableFor = *store_wait;
  int64_t unreachable_until = store::now_ms() + kUnreachableFor.count();
  bool said_unreachable = false;
  for (;;) {
    const uint32_t seen = s.call_version(*id);  // before looking: a later change rings it
    auto view = s.call(*id);  // read the state first: output written before it is then complete
    auto chunks = s.output(*id, seq);
    if (chunks) {
      for (const auto& c : *chunks) {
        (void)write_all(c.stream == store::Stream::out ? STDOUT_FILENO : STDERR_FILENO, c.data);
        seq = c.seq;
      }
      if (!chunks->empty()) continue;
    }
    if (!view) {
      // The store is restarting (PostgreSQL): the call goes on without us, so
      // wait for the store to come back (a while), then read on.
      if (view.error().code != ErrorCode::kUnavailable || store::now_ms() > unreachable_until) {
        return fail(view.error().to_string() + "; call " + std::to_string(*id) +
                        " was queued and its outcome is unknown here (ringfence run show " + f.run +
                        " says how it ended)",
                    kExitOutcomeUnknown);
      }
      if (!said_unreachable) {
        std::fprintf(stderr,
                     "ringfence: call %lld: the store is unreachable (%s); waiting for it\n",
                     static_cast<long long>(*id), view.error().to_string().c_str());
        said_unreachable = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      continue;
    }
    unreachable_until = store::now_ms() + kUnreachableFor.count();
    if (view->state == store::CallState::done) {
      // A command that could not start (126, 127) says why, as `sandbox exec` does.
      if (auto why = start_error(*view)) {
        std::fprintf(stderr, "ringfence: call %lld: %s\n", static_cast<long long>(*id),
                     why->c_str());
      }
      if (!f.receipt.empty()) {
        auto bundle = wait_for_call_receipt(s, state_dir_of(f), *id, std::chrono::seconds(30));
        Status written = bundle ? write_receipt_file(f.receipt, *bundle) : Status(bundle.error());
        if (!written) return fail("receipt: " + written.error().to_string(), kExitRuntime);
      }
      return static_cast<int>(view->exit_code.value_or(0));
    }
    if (view->state == store::CallState::failed || view->state == store::CallState::interrupted ||
        view->state == store::CallState::revoked) {
      return fail("call " + std::to_string(*id) + " " + std::string(store::to_string(view->state)) +
                      ": " + view->error.value_or(""),
                  kExitRuntime);
    }
    if (view->state == store::CallState::cancelled) {
      return fail("call " + std::to_string(*id) + " cancelled: " + view->error.value_or("") +
                      "; it never runs",
                  kExitWaitTimeout);
    }
    if (view->state != store::CallState::queued) {
      watch.claimed();
    } else if (watch.still_queued(s) == QueueWatch::Verdict::cancelled) {
      continue;  // the next look reads the cancelled state and says so
    }
    s.wait_for_call(*id, seen, watch.next_look(std::chrono::milliseconds(200)));
  }
}

}  // namespace

void add_call_command(CLI::App* call, CommandResult* result) {
  auto f = std::make_shared<ClientFlags>();
  call->add_option("--project", f->project, "Project (required, but with --api)")
      ->check(project_name());
  call->add_option("--run", f->run, "Run (created on first use)")->required();
  call->add_option("--stdin", f->stdin_file, "File whose bytes are the call's stdin");
  call->add_option("--timeout", f->timeout, "Per-call timeout")->default_val("30s");
  call->add_option("--sandbox-image", f->sandbox_image,
                   "This agent's own sandbox image (docker backends); a run keeps its first "
                   "call's image. Default: the worker's");
  call->add_option("--environment", f->environment, "Environment of a new project")
      ->default_val("development");
  call->add_option("--state-dir", f->state_dir,
                   "The workers' state dir (default ~/.ringfence/state)");
  call->add_option("--store", f->store,
                   "The workers' store, when not the state dir's: a postgres:// URI (its "
                   "password in PGPASSFILE) or a SQLite file. Default: $RINGFENCE_STORE");
  call->add_option("--require", f->require,
                   "A label the worker must have, KEY=VALUE (repeatable); a call no live "
                   "worker has the labels for fails, naming what each lacks");
  call->add_option("--wait-timeout", f->wait_timeout,
                   "Give up when no worker has claimed the call within this long (e.g. 30s): "
                   "the call is cancelled, never runs, and the exit code is 124. "
                   "Default: wait as long as it takes");
  call->add_option("--store-wait", f->store_wait,
                   "How long to wait for the store when it becomes unreachable after the call "
                   "was queued; then exit 123: the call goes on, its outcome unknown here "
                   "(`run show` tells it later). Default: 60s");
  call->add_flag("--identity", f->identity,
                 "Run identity-scoped: the keys of the project's profile cascade (and of "
                 "--workflow, --user) go into this call's environment, redacted from its output");
  call->add_flag("--jit", f->jit,
                 "Identity-scoped, and the call may ask for the keys its profiles deliver by "
                 "jit: `rf-cred get KEY --scope S --reason R` inside, answered by the worker's "
                 "JIT policy (implies --identity)");
  call->add_option("--receipt", f->receipt,
                   "Write the call's signed receipt to FILE once it is done: its sandbox's "
                   "boundary report, digests of argv, stdin, stdout and stderr as delivered, "
                   "and their place in the audit log (`audit verify --receipt FILE`)");
  call->add_option("--workflow", f->workflow, "With --identity: the workflow level");
  call->add_option("--user", f->user, "With --identity: the user level");
  call->add_option("--api", f->api,
                   "Send the call through `ringfence serve` at this URL (http://HOST:PORT) "
                   "instead of the store: no store credentials here, the project is the "
                   "token's (RINGFENCE_TOKEN, or --token-file). Default: $RINGFENCE_API")
      ->envname("RINGFENCE_API");
  call->add_option("--token-file", f->token_file,
                   "With --api: a file whose first line is the project's token (default: "
                   "$RINGFENCE_TOKEN)");
  call->add_option("command", f->command, "The command and its arguments (after --)");
  call->footer(
      "Exit codes: the command's own (128+N when killed by signal N); 124: no worker claimed "
      "the call within --wait-timeout, so it was cancelled and never runs; 125: the call "
      "failed, was interrupted or revoked (a secret it received was hard-revoked), was refused "
      "(identity), or the store cannot be used; 2: usage errors.\n"
      "With no live worker serving the project, a notice on stderr says so within about 2 s "
      "and names the command that starts one; the call keeps waiting.");
  call->callback([f, result, call] {
    f->command = command_words(f->command, *result);
    if (f->command.empty()) {
      std::fprintf(
          stderr,
          "ringfence: call: no command (usage: call --project P --run R -- CMD [ARG...])\n");
      result->exit_code = kExitUsage;
      return;
    }
    // Flags of the store path that a call through serve cannot honour.
    for (const char* name :
         {"--project", "--state-dir", "--store", "--environment", "--sandbox-image",
          "--wait-timeout", "--store-wait", "--jit", "--receipt"}) {
      if (call->get_option(name)->count() > 0) f->store_only.emplace_back(name);
    }
    result->exit_code = run_call(*f);
  });
}

}  // namespace rf::cli
