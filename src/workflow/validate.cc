// validate_workflow (parse.h): the DAG, the templates' names, and the
// settings each mode and kind takes.
#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "workflow/parse.h"
#include "workflow/template.h"

namespace rf::workflow {
namespace {

const std::set<std::string> kStepFields = {"output", "stdout", "stderr",   "exit_code",
                                           "status", "json",   "artifact", "error"};
const std::set<std::string> kArtifactFields = {"url",  "commit", "branch", "path", "bucket", "key",
                                               "etag", "sha256", "size",   "dest", "files"};

class Checker {
 public:
  explicit Checker(Loaded& loaded) : def_(loaded.def), problems_(loaded.problems) {}

  // Every check runs, whatever the others found: a step id given twice is
  // read as its first (def_.step), as it is when the run is checked again.
  void run() {
    ids();
    needs();
    cycles();
    for (const auto& s : def_.steps) {
      mode_settings(s);
      templates(s);
    }
  }

 private:
  void problem(const StepDef& s, const std::string& sub, const std::string& what) {
    int line = s.where.line;
    const auto it = s.keys.find(sub);
    if (it != s.keys.end()) line = it->second;
    problems_.push_back(
        Where{def_.file, line, s.where.key + (sub.empty() ? "" : "." + sub)}.to_string() + ": " +
        what);
  }

  std::string ids_text() const {
    std::string out;
    for (const auto& s : def_.steps) out += (out.empty() ? "" : ", ") + s.id;
    return out;
  }

  void ids() {
    std::map<std::string, const StepDef*> seen;
    for (const auto& s : def_.steps) {
      if (s.id.empty()) continue;
      auto [it, fresh] = seen.emplace(s.id, &s);
      if (!fresh) {
        problem(s, "id",
                "step \"" + s.id + "\" is defined twice (first at line " +
                    std::to_string(it->second->where.line) + ")");
      }
    }
    std::set<std::string> inputs;
    for (const auto& in : def_.inputs) {
      if (!inputs.insert(in.name).second) {
        problems_.push_back(in.where.to_string() + ": input \"" + in.name + "\" is defined twice");
      }
    }
  }

  void needs() {
    for (const auto& s : def_.steps) {
      std::set<std::string> seen;
      for (const auto& n : s.needs) {
        if (n == s.id) {
          problem(s, "needs", "step \"" + s.id + "\" needs itself");
        } else if (def_.step(n) == nullptr) {
          problem(s, "needs", "step \"" + n + "\" does not exist (steps: " + ids_text() + ")");
        } else if (!seen.insert(n).second) {
          problem(s, "needs", "step \"" + n + "\" is named twice");
        }
      }
    }
  }

  // Depth-first, in file order: each cycle found (each need that leads back
  // to a step on the path) is reported as a path.
  void cycles() {
    std::map<std::string, int> state;  // 0 new, 1 on the path, 2 done
    std::vector<std::string> path;
    std::function<void(const StepDef&)> visit = [&](const StepDef& s) {
      state[s.id] = 1;
      path.push_back(s.id);
      for (const auto& n : s.needs) {
        const StepDef* next = def_.step(n);
        if (next == nullptr || next->id == s.id) continue;
        if (state[n] == 1) {
          std::string cycle;
          auto from = std::find(path.begin(), path.end(), n);
          for (auto it = from; it != path.end(); ++it) cycle += *it + " -> ";
          cycle += n;
          problem(s, "needs", "a cycle: " + cycle);
          continue;
        }
        if (state[n] == 0) visit(*next);
      }
      path.pop_back();
      state[s.id] = 2;
    };
    for (const auto& s : def_.steps) {
      if (state[s.id] == 0) visit(s);
    }
  }

  // Every step `s` depends on, directly or not.
  std::set<std::string> upstream(const StepDef& s) const {
    std::set<std::string> out;
    std::vector<const StepDef*> todo{&s};
    while (!todo.empty()) {
      const StepDef* cur = todo.back();
      todo.pop_back();
      for (const auto& n : cur->needs) {
        const StepDef* next = def_.step(n);
        if (next != nullptr && out.insert(n).second) todo.push_back(next);
      }
    }
    return out;
  }

  void check_text(const StepDef& s, const std::string& key, const std::string& text,
                  const std::set<std::string>& up) {
    auto refs = template_refs(text);
    if (!refs) {
      problem(s, key, refs.error().to_string());
      return;
    }
    for (const auto& ref : *refs) {
      if (ref.name == ".") {
        if (!ref.in_section) problem(s, key, "{{.}} is the item of a section; here there is none");
        continue;
      }
      std::vector<std::string> parts;
      size_t start = 0;
      for (size_t i = 0; i <= ref.name.size(); ++i) {
        if (i == ref.name.size() || ref.name[i] == '.') {
          parts.push_back(ref.name.substr(start, i - start));
          start = i + 1;
        }
      }
      const std::string& root = parts[0];
      if (root == "inputs") {
        if (parts.size() < 2) {
          problem(s, key, "{{inputs}}: name an input, as {{inputs.NAME}}");
        } else if (def_.input(parts[1]) == nullptr) {
          std::string names;
          for (const auto& in : def_.inputs) names += (names.empty() ? "" : ", ") + in.name;
          problem(s, key,
                  "{{" + ref.name + "}}: the workflow has no input \"" + parts[1] + "\"" +
                      (names.empty() ? std::string(" (it declares no inputs)")
                                     : " (inputs: " + names + ")"));
        }
      } else if (root == "steps") {
        if (parts.size() < 3) {
          problem(s, key,
                  "{{" + ref.name + "}}: expected {{steps.ID.FIELD}}, e.g. {{steps." +
                      (parts.size() > 1 ? parts[1] : std::string("ID")) + ".output}}");
          continue;
        }
        const std::string& id = parts[1];
        if (id == s.id) {
          problem(s, key, "{{" + ref.name + "}}: a step cannot read its own outputs");
        } else if (def_.step(id) == nullptr) {
          problem(
              s, key,
              "{{" + ref.name + "}}: there is no step \"" + id + "\" (steps: " + ids_text() + ")");
        } else if (!up.count(id)) {
          problem(s, key,
                  "{{" + ref.name + "}}: step \"" + id + "\" is not in the needs of \"" + s.id +
                      "\", so it may not have run yet (add it to needs)");
        } else if (!kStepFields.count(parts[2])) {
          problem(s, key,
                  "{{" + ref.name + "}}: a step has no field \"" + parts[2] +
                      "\" (output, stdout, stderr, exit_code, status, json, artifact, "
                      "error)");
        } else if (parts[2] == "artifact" && parts.size() > 3 && !kArtifactFields.count(parts[3])) {
          problem(s, key,
                  "{{" + ref.name + "}}: an artifact has no field \"" + parts[3] +
                      "\" (url, commit, branch, path, bucket, key, etag, sha256, size, "
                      "dest, files)");
        } else if (parts[2] == "artifact" && !def_.step(id)->artifact) {
          problem(s, key, "{{" + ref.name + "}}: step \"" + id + "\" sends no artifact");
        }
      } else if (root == "run") {
        if (parts.size() != 2 ||
            (parts[1] != "id" && parts[1] != "project" && parts[1] != "user")) {
          problem(s, key,
                  "{{" + ref.name + "}}: expected {{run.id}}, {{run.project}} or {{run.user}}");
        }
      } else if (root == "workflow") {
        if (parts.size() != 2 || parts[1] != "name") {
          problem(s, key, "{{" + ref.name + "}}: expected {{workflow.name}}");
        }
      } else if (!ref.in_section) {
        problem(s, key,
                "{{" + ref.name +
                    "}}: unknown name (expected inputs.NAME, steps.ID.FIELD, "
                    "run.id, run.project, run.user or workflow.name)");
      }
    }
  }

  void templates(const StepDef& s) {
    const auto up = upstream(s);
    auto text = [&](const std::string& key, const std::string& value) {
      if (!value.empty()) check_text(s, key, value, up);
    };
    text("template", s.template_text);
    text("prompt", s.prompt);
    text("system", s.system_prompt);
    text("message", s.approval_message);
    text("run", s.run);
    for (const auto& a : s.argv) text("argv", a);
    for (const auto& [k, v] : s.env) text("env", v);
    if (s.json_spec.contains("input")) text("input", s.json_spec["input"].get<std::string>());
    if (s.http_spec.contains("url")) text("url", s.http_spec["url"].get<std::string>());
    if (s.http_spec.contains("body")) text("body", s.http_spec["body"].get<std::string>());
    if (s.http_spec.contains("headers")) {
      for (const auto& [k, v] : s.http_spec["headers"].items())
        text("headers", v.get<std::string>());
    }
    if (s.artifact) {
      text("artifact", s.artifact->url);
      text("artifact", s.artifact->path);
      text("artifact", s.artifact->key);
      text("artifact", s.artifact->message);
      text("artifact", s.artifact->branch);
    }
  }

  // What a step of this mode and kind takes, and why not otherwise.
  void mode_settings(const StepDef& s) {
    if (!s.keys.count("mode")) return;  // reported already
    const ExecutionMode m = s.mode;
    const std::string mode(to_string(m));
    auto has = [&](const char* k) { return s.keys.count(k) > 0; };
    static const std::map<std::string, std::set<StepKind>> kind_keys = {
        {"template", {StepKind::kTemplate}}, {"input", {StepKind::kJson}},
        {"pointer", {StepKind::kJson}},      {"patch", {StepKind::kJson}},
        {"schema", {StepKind::kJson}},       {"method", {StepKind::kHttp}},
        {"url", {StepKind::kHttp}},          {"headers", {StepKind::kHttp}},
        {"body", {StepKind::kHttp}},         {"allow", {StepKind::kHttp}},
        {"model", {StepKind::kLlm}},         {"system", {StepKind::kLlm}},
        {"message", {StepKind::kApproval}},  {"approvers", {StepKind::kApproval}},
        {"duration", {StepKind::kSleep}},
    };
    if (m == ExecutionMode::kInProcess) {
      // Without a kind (missing, or unknown and reported), what takes no kind
      // is still checked.
      const bool kind = has("kind") && s.kind != StepKind::kNone;
      if (!has("kind")) {
        problem(s, "kind",
                "missing: an in_process step is one of the declarative kinds template, json, "
                "http, llm, approval or sleep");
      }
      if (has("sandbox")) {
        problem(s, "sandbox",
                "an in_process step runs in the worker and takes no sandbox (use mode: "
                "sandboxed for a step in a sandbox)");
      }
      for (const char* k : {"run", "argv"}) {
        if (has(k)) {
          problem(s, k,
                  "an in_process step never runs a command or a shell in the worker (use mode: "
                  "sandboxed)");
        }
      }
      if (has("env")) problem(s, "env", "an in_process step runs no process and takes no env");
      if (has("agent")) {
        problem(s, "agent", "agents run in sandboxes: use mode: cli_agent (or identity_scoped)");
      }
      if (has("artifact")) {
        problem(s, "artifact", "only cli_agent and cli_agent_jit steps send an artifact");
      }
      if (!kind) return;
      if (has("identity") && s.kind != StepKind::kLlm) {
        problem(s, "identity",
                "an in_process step takes identity only to find an llm step's key (kind: llm)");
      }
      if (has("prompt") && s.kind != StepKind::kLlm) {
        problem(s, "prompt", "only llm steps (and agents) take a prompt");
      }
      for (const auto& [key, kinds] : kind_keys) {
        if (has(key.c_str()) && !kinds.count(s.kind)) {
          problem(s, key,
                  "a " + std::string(to_string(s.kind)) + " step takes no " + key + " (only " +
                      std::string(to_string(*kinds.begin())) + " steps do)");
        }
      }
      switch (s.kind) {
        case StepKind::kTemplate:
          if (!has("template")) problem(s, "template", "missing: the mustache template to render");
          break;
        case StepKind::kJson:
          if (!has("input")) problem(s, "input", "missing: the JSON text (or value) to work on");
          break;
        case StepKind::kHttp:
          if (!has("url")) problem(s, "url", "missing: the URL to request");
          if (!has("allow")) {
            problem(s, "allow",
                    "missing: the hosts this request may reach, as a sandbox's allow rules "
                    "(e.g. [api.example.com])");
          }
          break;
        case StepKind::kLlm:
          if (!has("model")) problem(s, "model", "missing: {api, base_url, model, key_env}");
          if (!has("prompt")) problem(s, "prompt", "missing: what to ask");
          break;
        case StepKind::kSleep:
          if (!has("duration")) problem(s, "duration", "missing: how long, e.g. 5s");
          break;
        default:
          break;
      }
      return;
    }
    // A sandbox step.
    if (has("kind")) {
      problem(s, "kind",
              "only in_process steps have a kind; this step runs in a sandbox (mode " + mode + ")");
    }
    for (const auto& [key, kinds] : kind_keys) {
      if (has(key.c_str())) {
        problem(s, key,
                key + " belongs to in_process " + std::string(to_string(*kinds.begin())) +
                    " steps; a " + mode + " step runs " +
                    (runs_agent(m) ? std::string("its agent") : std::string("run or argv")) +
                    " in a sandbox");
      }
    }
    if (!takes_identity(m) && has("identity")) {
      problem(s, "identity",
              "a sandboxed step gets an empty environment and no identity (use mode: "
              "identity_scoped)");
    }
    if (!runs_agent(m) && has("artifact")) {
      problem(s, "artifact", "only cli_agent and cli_agent_jit steps send an artifact");
    }
    if (m == ExecutionMode::kSandboxed && has("agent")) {
      problem(s, "agent", "a sandboxed step runs a command; use mode: cli_agent to run an agent");
    }
    if (has("run") && has("argv")) problem(s, "argv", "give run or argv, not both");
    if (runs_agent(m)) {
      for (const char* k : {"run", "argv"}) {
        if (has(k)) {
          problem(s, k, "a " + mode + " step runs its agent with the prompt; it takes no " + k);
        }
      }
      if (!has("agent")) problem(s, "agent", "missing: claude-code, codex, or an adapter file");
      if (!has("prompt")) problem(s, "prompt", "missing: the agent's task");
    } else if (has("agent")) {
      if (!has("prompt")) problem(s, "prompt", "missing: the agent's task");
      for (const char* k : {"run", "argv"}) {
        if (has(k)) problem(s, k, "give an agent and a prompt, or a command, not both");
      }
    } else {
      if (!has("run") && !has("argv")) {
        problem(s, "run", "missing: the command to run (run: a shell line, or argv: a list)");
      }
      if (has("prompt")) problem(s, "prompt", "a prompt goes to an agent (add agent:)");
    }
  }

  WorkflowDef& def_;
  std::vector<std::string>& problems_;
};

}  // namespace

void validate_workflow(Loaded& loaded) { Checker(loaded).run(); }

}  // namespace rf::workflow
