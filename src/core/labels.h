// Labels (issue 16): what a worker offers (`worker start --label gpu=true`)
// and what a call or a workflow step requires (`call --require zone=b`,
// `requires: {labels: {zone: b}}`). A worker may take a call when it has every
// label the call requires, each with the same value.
//
// A key is 1-63 of [A-Za-z0-9._/-], starting with a letter or digit; a value
// is 1-63 of [A-Za-z0-9._-]. At most 32 labels. Their JSON form, as the store
// keeps them, is in store/labels.h.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "core/result.h"

namespace rf {

using Labels = std::map<std::string, std::string, std::less<>>;

inline constexpr size_t kMaxLabels = 32;

// "key=value" as a flag gives it. Errors say what is wrong with the text.
Result<std::pair<std::string, std::string>> parse_label(std::string_view text);
// One key and value, or a whole set: the error names the key.
Status check_label(std::string_view key, std::string_view value);
Status check_labels(const Labels& labels);

// "gpu=true zone=b" for messages and tables; "(none)" for none.
std::string labels_text(const Labels& labels);

// The required labels `have` lacks or has with another value.
Labels missing_labels(const Labels& required, const Labels& have);
// What a worker with `have` lacks of `required`, truthfully: "lacks zone=c"
// for a key it does not have, "has gpu=true (not gpu=false)" for one it has
// with another value, joined by ", ". Empty when nothing is missing.
std::string lacking_text(const Labels& required, const Labels& have);
inline bool labels_match(const Labels& required, const Labels& have) {
  return missing_labels(required, have).empty();
}

}  // namespace rf
