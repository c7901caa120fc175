// Labels as the store keeps them (issue 16; the rules: core/labels.h): a
// JSON object of strings, keys sorted, "{}" for none, on workers (what they
// offer) and on calls and workflow runs (what they require).
#pragma once

#include <string>
#include <string_view>

#include "core/labels.h"
#include "core/result.h"

namespace rf::store {

using rf::check_label;
using rf::check_labels;
using rf::Labels;
using rf::labels_match;
using rf::labels_text;
using rf::missing_labels;
using rf::parse_label;

// The canonical JSON object ("{}" for none), and back (checked).
std::string labels_json(const Labels& labels);
Result<Labels> labels_from_json(std::string_view text);

}  // namespace rf::store
