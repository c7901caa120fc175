// Templates in a workflow (issue 12): mustache (Debian's kainjow/mustache),
// over the run's values:
//   {{inputs.NAME}}                      a run input
//   {{steps.ID.output}}                  a step's result text (stdout, the agent's
//                                        answer, the rendered template, ...)
//   {{steps.ID.stdout}} / .stderr / .exit_code / .status
//   {{steps.ID.json.A.B}}                a field of its output parsed as JSON
//   {{steps.ID.artifact.url}}            its artifact (url, commit, branch, path,
//                                        bucket, key, etag, sha256, size, dest)
//   {{run.id}} {{run.project}} {{run.user}} {{workflow.name}}
// Sections ({{#steps.ID.json.items}}...{{/...}}) and inverted sections work as
// mustache says; names inside a section may be the item's own. Partials and
// delimiter changes are refused.
//
// Escaping: none for prompts and templates (the text is not HTML); in a
// shell command (`run:`) every value is inserted single-quoted for sh, so a
// value can never become shell syntax ({{{name}}} inserts it raw, on purpose).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace rf::workflow {

struct TemplateRef {
  std::string name;         // as written, trimmed: "steps.plan.output"
  size_t offset = 0;        // of the tag in the text
  bool in_section = false;  // inside a section: a bare name may be the item's own
};

// The names a template refers to, in order. Refuses what mustache would not
// parse (an unclosed tag or section, a section closed by another name), and
// partials and delimiter changes, naming the offset.
Result<std::vector<TemplateRef>> template_refs(std::string_view text);

enum class Escape { kNone, kShell };

// Renders `text` over `context` (a JSON object: {"inputs": ..., "steps": ...}).
// Strings are inserted as they are, numbers and booleans as JSON writes them;
// null, missing names, objects and arrays as nothing (mustache has no text for
// them: {{steps.ID.output}} is the JSON text itself).
Result<std::string> render_template(std::string_view text, const nlohmann::json& context,
                                    Escape escape = Escape::kNone);

// 'text' quoted for sh: single quotes, each ' written as '\''.
std::string shell_quote(std::string_view text);

}  // namespace rf::workflow
