// Workflow files come from users and, through the API, from anyone holding a
// project token (issue 12): the parser, the checks (DAG, templates, modes)
// and the template engine. Invariants: no crash, no hang; every problem
// names the file; a file that passes renders its templates over an empty
// context without crashing.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>

#include "workflow/parse.h"
#include "workflow/template.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  rf::workflow::Loaded l = rf::workflow::parse_workflow(text, "f.yaml");
  rf::workflow::validate_workflow(l);
  for (const auto& p : l.problems) {
    if (p.rfind("f.yaml", 0) != 0) std::abort();
  }
  // The same bytes as a template, over a context with a little of everything.
  const nlohmann::json ctx = {{"inputs", {{"a", "x'y"}, {"n", 1}, {"b", true}}},
                              {"steps", {{"s", {{"output", "o"}, {"json", {{"items", {1, 2}}}}}}}}};
  (void)rf::workflow::template_refs(text);
  (void)rf::workflow::render_template(text, ctx, rf::workflow::Escape::kShell);
  if (!l.ok()) return 0;
  for (const auto& s : l.def.steps) {
    (void)rf::workflow::render_template(s.run, nlohmann::json::object(),
                                        rf::workflow::Escape::kShell);
    (void)rf::workflow::render_template(s.prompt, nlohmann::json::object());
  }
  return 0;
}
