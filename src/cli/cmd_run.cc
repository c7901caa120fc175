// `ringfence run end | show | cancel | replay | artifact`: runs, of calls and
// of workflows (issue 12). Names, commands and errors are a tenant's or a
// sandbox's text: they reach the terminal through printable().
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/run_follow.h"
#include "core/io.h"
#include "core/printable.h"
#include "store/workflow_store.h"

namespace rf::cli {
namespace {

using nlohmann::json;

struct RunFlags {
  std::string state_dir, run, step, output;
  bool json = false, follow = false;
};

Result<std::unique_ptr<store::Store>> open_store(const RunFlags& f) {
  return open_client_store(state_dir_or_default(f.state_dir));
}

int run_end(const RunFlags& f) {
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  if (auto e = (*st)->end_run(f.run); !e) return fail(e.error().to_string(), kExitRuntime);
  return 0;
}

int run_show(const RunFlags& f) {
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  store::Store& s = **st;
  auto run = s.run(f.run);
  if (!run) return fail(run.error().to_string(), kExitRuntime);
  auto wf = store::WorkflowStore(s).run(f.run);
  json calls = json::array();
  for (const auto& c : run->calls) {
    json j = {{"id", c.id}, {"argv", c.argv}, {"state", store::to_string(c.state)}};
    if (c.exit_code) j["exit_code"] = *c.exit_code;
    if (c.worker_id) j["worker_id"] = *c.worker_id;
    if (!c.requires_labels.empty()) j["requires"] = {{"labels", c.requires_labels}};
    if (c.error) j["error"] = *c.error;
    if (c.result_json) j["result"] = json::parse(*c.result_json, nullptr, false);
    calls.push_back(j);
  }
  if (f.json) {
    json j = {{"id", run->id},
              {"project", run->project_id},
              {"state", store::to_string(run->state)},
              {"calls", calls}};
    if (wf) j["workflow_run"] = workflow_run_json(s, *wf);
    std::printf("%s\n", printable_json(j).c_str());
    return 0;
  }
  if (wf) {
    print_workflow_run(s, *wf);
    std::printf("  calls:\n");
  } else {
    std::printf("run %s  project %s  %s  %zu calls\n", printable(run->id).c_str(),
                printable(run->project_id).c_str(),
                std::string(store::to_string(run->state)).c_str(), run->calls.size());
  }
  for (const auto& c : run->calls) {
    std::string argv;
    for (const auto& a : c.argv) argv += (argv.empty() ? "" : " ") + a;
    std::printf("  %-6lld %-12s %-5s %-16s %s\n", static_cast<long long>(c.id),
                std::string(store::to_string(c.state)).c_str(),
                c.exit_code ? std::to_string(*c.exit_code).c_str() : "-",
                printable(c.worker_id.value_or("-")).c_str(), printable(argv, 100).c_str());
    if (c.error) std::printf("         %s\n", printable(*c.error).c_str());
  }
  return 0;
}

int run_cancel(const RunFlags& f) {
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto state =
      store::WorkflowStore(**st).request_cancel(f.run, "cancelled by ringfence run cancel");
  if (!state) return fail(state.error().to_string(), kExitRuntime);
  switch (*state) {
    case store::WorkflowRunState::cancelled:
      std::printf("run %s cancelled\n", printable(f.run).c_str());
      return 0;
    case store::WorkflowRunState::running:
      std::printf("run %s: its worker is asked to stop it\n", printable(f.run).c_str());
      return 0;
    default:
      return fail(
          "run " + f.run + " has ended already (" + std::string(store::to_string(*state)) + ")", 1);
  }
}

int run_replay(const RunFlags& f) {
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  store::Store& s = **st;
  store::WorkflowStore wf(s);
  auto original = wf.run(f.run);
  if (!original) return fail(original.error().to_string(), kExitRuntime);
  if (!original->ended()) return fail("run " + f.run + " has not ended yet", 1);
  auto id = wf.enqueue_run(original->replay());
  if (!id) return fail(id.error().to_string(), kExitRuntime);
  std::printf(
      "run %s: a replay of %s (in_process steps answered from the record while what they read "
      "is unchanged; approval steps ask again; side-effecting steps run again only once a "
      "person approves: ringfence approvals list)\n",
      printable(*id).c_str(), printable(f.run).c_str());
  std::fflush(stdout);
  return follow_to_end(s, *id, {f.follow, state_dir_or_default(f.state_dir)}, f.json);
}

int run_artifact(const RunFlags& f) {
  auto st = open_store(f);
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  auto a = store::WorkflowStore(**st).artifact(f.run, f.step);
  if (!a) return fail(a.error().to_string(), kExitRuntime);
  if (!*a) return fail("step " + f.step + " of run " + f.run + " sent no artifact", 1);
  const store::ArtifactRow& row = **a;
  if (!row.data) {
    std::printf("%s\n", printable_json_text(row.ref_json).c_str());
    if (!f.output.empty()) {
      return fail("the artifact went to " + row.dest + "; only dest none keeps it in the store", 1);
    }
    return 0;
  }
  if (f.output.empty()) return fail("run artifact: give -o FILE for the tar", kExitUsage);
  // Written next to the target, then renamed: never a half-written file.
  if (auto w = write_file_atomic(f.output, *row.data); !w) {
    return fail(w.error().to_string(), kExitRuntime);
  }
  std::printf("%s: %lld bytes, sha256 %s\n", f.output.c_str(), static_cast<long long>(row.size),
              row.sha256.c_str());
  return 0;
}

}  // namespace

void add_run_commands(CLI::App* run, CommandResult* result) {
  auto f = std::make_shared<RunFlags>();
  run->require_subcommand(1);
  auto state_dir = [&](CLI::App* c) {
    c->add_option("--state-dir", f->state_dir, "The workers' state dir");
  };
  auto* end = run->add_subcommand("end", "End a run: its sandbox goes, queued calls fail");
  end->add_option("run", f->run, "Run id")->required();
  state_dir(end);
  end->callback([f, result] { result->exit_code = run_end(*f); });

  auto* show = run->add_subcommand(
      "show",
      "A run: its calls; for a workflow run its steps (mode, sandbox, attempt, status, "
      "duration, outputs)");
  show->add_option("run", f->run, "Run id")->required();
  state_dir(show);
  show->add_flag("--json", f->json, "As JSON");
  show->callback([f, result] { result->exit_code = run_show(*f); });

  auto* cancel = run->add_subcommand("cancel", "Cancel a workflow run");
  cancel->add_option("run", f->run, "Run id")->required();
  state_dir(cancel);
  cancel->callback([f, result] { result->exit_code = run_cancel(*f); });

  auto* replay = run->add_subcommand(
      "replay",
      "Run a workflow run again: in_process steps answered from the record, approval "
      "steps asked again, sandboxed steps run again; a side-effecting step (identity, an "
      "agent, http other than GET, an artifact sent out) runs again only once a person "
      "approves it, else the original's outputs stand in; the end says what was re-run");
  replay->add_option("run", f->run, "The run to replay")->required();
  state_dir(replay);
  replay->add_flag("--follow", f->follow, "Stream the replay's steps");
  replay->add_flag("--json", f->json, "At the end, the run as JSON");
  replay->callback([f, result] { result->exit_code = run_replay(*f); });

  auto* artifact = run->add_subcommand(
      "artifact", "A step's artifact: its reference, or (dest none) the workspace tar to -o FILE");
  artifact->add_option("run", f->run, "Run id")->required();
  artifact->add_option("step", f->step, "Step id")->required();
  artifact->add_option("-o,--output", f->output, "Where to write the tar");
  state_dir(artifact);
  artifact->callback([f, result] { result->exit_code = run_artifact(*f); });
}

}  // namespace rf::cli
