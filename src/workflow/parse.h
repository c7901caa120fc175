// Reading a workflow file (YAML, or JSON, which YAML reads too) into a
// WorkflowDef, and checking it (issue 12). Every problem names the file, the
// line and the key:
//   portfolio.yaml:14: steps[1].sandbox.mem: expected a size such as 2g, got "lots"
//   portfolio.yaml:9: steps[0].mode: unknown execution mode "inproc" (expected ...)
//   portfolio.yaml:21: steps[2].needs: step "scafold" does not exist (steps: plan, scaffold, ...)
// Problems are collected, not stopped at: `workflow validate` lists them all,
// in file order. Only a text that is not a YAML (or JSON) document stops the
// check at its first problem, named FILE:LINE:COL: a syntax error, a quoted
// string never closed, anything after the document, a line with no ':' in a
// mapping, a key given twice.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "workflow/definition.h"

namespace rf::workflow {

struct Loaded {
  WorkflowDef def;
  std::vector<std::string> problems;  // "file:line: key: what is wrong"
  bool ok() const { return problems.empty(); }
};

// The file's shape: known keys, types, values. `file` is only for messages.
Loaded parse_workflow(std::string_view text, const std::string& file);

// The rest: the DAG (missing needs, cycles, duplicate ids), templates that
// name an unknown input or step (or one the step does not need, so it may not
// have run yet), and settings the step's mode or kind does not take.
void validate_workflow(Loaded& loaded);

// Both, on the file at `path` (at most 1 MiB). The error lists every problem,
// one per line.
Result<WorkflowDef> load_workflow_file(const std::string& path);
// Both, on text (a run's stored definition, a request body).
Result<WorkflowDef> load_workflow_text(std::string_view text, const std::string& file);

// Any YAML (or JSON) document as JSON, bounded as a workflow file is (depth,
// size with aliases, duplicate keys): for the other files the CLI reads in
// the same language (`policy set --file`).
Result<nlohmann::json> yaml_document(std::string_view text, const std::string& file);

}  // namespace rf::workflow
