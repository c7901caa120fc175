// A JSON Schema check (in_process json steps, issue 12): the keywords of
// JSON Schema 2020-12 a workflow needs to check a model's or a tool's JSON
// answer. Supported: type, enum, const, required, properties,
// additionalProperties, patternProperties, items (a schema; prefixItems),
// minItems, maxItems, uniqueItems, minLength, maxLength, pattern, minimum,
// maximum, exclusiveMinimum, exclusiveMaximum, multipleOf, minProperties,
// maxProperties, allOf, anyOf, oneOf, not, if/then/else, $defs with local
// "#/$defs/NAME" (and "#/definitions/NAME") $refs. Annotations (title,
// description, default, examples, $schema, $id, $comment, format) are
// accepted and not checked. Any other keyword is refused when the schema is
// compiled, so a schema never passes by silently meaning less.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/result.h"

namespace rf::in_process {

// Refuses a schema with an unsupported keyword or a malformed one, naming
// its JSON Pointer ("/properties/name/minLength: expected a non-negative integer").
Status check_schema(const nlohmann::json& schema);

// Every way `value` breaks `schema` (empty: it conforms), each as
// "<pointer into the value>: <what>", e.g. "/items/2/name: expected a string, got 3".
std::vector<std::string> validate_json(const nlohmann::json& schema, const nlohmann::json& value);

}  // namespace rf::in_process
