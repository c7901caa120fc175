// The known name a mistyped one was meant to be, for "did you mean ...?"
// messages: the worker's config keys, workflow fields, the CLI's options.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace rf {

// Edits (insert, delete, replace) from `a` to `b` (Levenshtein).
size_t edit_distance(std::string_view a, std::string_view b);

// The first of `known` nearest `word`, within two edits; with
// `a_start_counts`, one that is the start of the other (both at least 3
// characters: --mem, --memory) counts as one edit. Empty when none is near.
std::string nearest_name(std::string_view word, std::span<const std::string> known,
                         bool a_start_counts);

}  // namespace rf
