// `ringfence workflow validate FILE | run FILE ...` (issue 12).
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli/client_store.h"
#include "cli/commands.h"
#include "cli/run_follow.h"
#include "core/json_input.h"
#include "core/units.h"
#include "store/workflow_store.h"
#include "workflow/parse.h"

namespace rf::cli {
namespace {

using nlohmann::json;

struct WorkflowRunFlags {
  std::string file, project, user, run_id, state_dir, environment = "development";
  std::vector<std::string> inputs;
  bool follow = false, detach = false, json = false;
};

// --input k=v, typed as the workflow declares k; defaults fill the rest.
Result<json> read_inputs(const workflow::WorkflowDef& def, const std::vector<std::string>& given) {
  json out = json::object();
  for (const auto& kv : given) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return make_error("--input " + kv, "expected NAME=VALUE");
    }
    const std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    // Given twice: which one was meant is unknown, so neither is kept.
    for (const auto& earlier : given) {
      if (&earlier == &kv) break;
      if (earlier.compare(0, eq + 1, kv, 0, eq + 1) == 0) {
        return make_error("--input " + name,
                          "given more than once (" + earlier + ", then " + kv + "); give it once");
      }
    }
    const workflow::InputDef* in = def.input(name);
    if (in == nullptr) {
      std::string names;
      for (const auto& i : def.inputs) names += (names.empty() ? "" : ", ") + i.name;
      return make_error("--input " + name,
                        "workflow " + def.name + " has no such input" +
                            (names.empty() ? " (it has none)" : " (inputs: " + names + ")"));
    }
    if (in->type == "string") {
      out[name] = value;
      continue;
    }
    json v = rf::parse_json_or_discarded(value);
    const bool ok =
        !v.is_discarded() &&
        ((in->type == "number" && v.is_number()) || (in->type == "boolean" && v.is_boolean()) ||
         (in->type == "object" && v.is_object()) || (in->type == "array" && v.is_array()));
    if (!ok)
      return make_error("--input " + name, "expected a " + in->type + ", got \"" + value + "\"");
    out[name] = v;
  }
  for (const auto& in : def.inputs) {
    if (out.contains(in.name)) continue;
    if (in.default_value) {
      out[in.name] = *in.default_value;
    } else if (in.required) {
      return make_error("--input " + in.name,
                        "required by workflow " + def.name + " (" + in.where.to_string() + ")");
    }
  }
  return out;
}

int run_workflow(const WorkflowRunFlags& f) {
  auto def = workflow::load_workflow_file(f.file);
  if (!def) {
    std::fprintf(stderr, "%s\n", def.error().to_string().c_str());
    return fail("workflow " + f.file + " is not valid", kExitUsage);
  }
  auto inputs = read_inputs(*def, f.inputs);
  if (!inputs) return fail(inputs.error().to_string(), kExitUsage);
  auto env = store::parse_environment(f.environment);
  if (!env) return fail("--environment: " + env.error().to_string(), kExitUsage);
  store::NewWorkflowRun run;
  run.run_id = f.run_id;
  run.project = f.project;
  run.workflow = def->name;
  run.file = f.file;
  run.definition = def->source;
  run.inputs_json = inputs->dump();
  run.user = f.user;
  run.timeout = def->timeout;
  // Checked before anything is written: a refused run leaves no new project.
  if (auto bad = store::WorkflowStore::check_new_run(run); !bad)
    return fail(bad.error().to_string(), kExitUsage);
  auto st = open_client_store(state_dir_or_default(f.state_dir));
  if (!st) return fail(st.error().to_string(), kExitRuntime);
  store::Store& s = **st;
  if (!s.project(f.project)) {
    if (auto e = s.ensure_project(f.project, *env); !e)
      return fail(e.error().to_string(), kExitRuntime);
  }
  auto id = store::WorkflowStore(s).enqueue_run(run);
  if (!id) return fail(id.error().to_string(), kExitRuntime);
  if (f.detach) {
    std::printf("%s\n", id->c_str());
    return 0;
  }
  if (f.follow) {
    std::printf("run %s: workflow %s, project %s, %zu step%s\n", id->c_str(), def->name.c_str(),
                f.project.c_str(), def->steps.size(), def->steps.size() == 1 ? "" : "s");
    std::fflush(stdout);
  }
  return follow_to_end(s, *id, {f.follow, state_dir_or_default(f.state_dir)}, f.json);
}

// workflow validate: the file has problems (distinct from 2, usage).
constexpr int kExitInvalid = 1;

int run_validate(const std::string& file) {
  workflow::Loaded loaded;
  auto def = workflow::load_workflow_file(file);
  if (!def) {
    std::fprintf(stderr, "%s\n", def.error().to_string().c_str());
    std::fprintf(stderr, "ringfence: workflow %s is not valid\n", file.c_str());
    return kExitInvalid;
  }
  std::printf("workflow %s (%s): %zu step%s, valid\n", def->name.c_str(), file.c_str(),
              def->steps.size(), def->steps.size() == 1 ? "" : "s");
  for (const auto& s : def->steps) {
    std::string needs;
    for (const auto& n : s.needs) needs += (needs.empty() ? "" : ", ") + n;
    std::printf("  %-16s %-16s%s%s\n", s.id.c_str(), std::string(to_string(s.mode)).c_str(),
                s.kind == workflow::StepKind::kNone
                    ? ""
                    : (" kind " + std::string(to_string(s.kind))).c_str(),
                needs.empty() ? "" : ("  needs " + needs).c_str());
  }
  return 0;
}

}  // namespace

void add_workflow_commands(CLI::App* wf, CommandResult* result) {
  wf->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  auto* validate = wf->add_subcommand(
      "validate", "Check a workflow file without running it; problems name file:line and key");
  validate->add_option("file", *file, "The workflow (YAML or JSON)")->required();
  validate->callback([result, file] { result->exit_code = run_validate(*file); });

  auto f = std::make_shared<WorkflowRunFlags>();
  auto* run = wf->add_subcommand("run", "Run a workflow on the workers and wait for its end");
  run->add_option("file", f->file, "The workflow (YAML or JSON)")->required();
  run->add_option("--project", f->project, "Project")->check(project_name())->required();
  run->add_option("--input", f->inputs, "An input, NAME=VALUE (repeat)");
  run->add_option("--user", f->user, "Who runs it (the identity cascade's user level)");
  run->add_option("--run-id", f->run_id, "The run's id (default: generated)");
  run->add_option("--environment", f->environment, "Environment of a new project")
      ->default_val("development");
  run->add_option("--state-dir", f->state_dir, "The workers' state dir");
  run->add_flag("--follow", f->follow,
                "Stream each step's start, mode, sandbox, output and end as it happens");
  run->add_flag("--detach", f->detach, "Print the run id and return at once");
  run->add_flag("--json", f->json, "At the end, the run as JSON");
  run->footer(
      "Exit codes: 0 the run succeeded; 1 it failed or was cancelled; 2 the workflow or "
      "an input is not valid; 125 the store cannot be used.");
  run->callback([f, result] { result->exit_code = run_workflow(*f); });
}

}  // namespace rf::cli
