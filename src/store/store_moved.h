// A store that `ringfence store migrate` moved to another (issue 40): the
// source is marked with where its data went, and from then on refuses every
// process, so no worker or client keeps writing where nobody reads.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"
#include "store/db.h"

namespace rf::store {

// Records in `from` that its data now lives in `to_name` (a redacted URI or a
// path), moved at `at_ms`.
Status mark_moved(Db& from, const std::string& to_name, int64_t at_ms);

// An error naming where the store went and when, once it was moved; ok
// otherwise. `name`: how the store is called in the message.
Status refuse_moved(Db& db, const std::string& name);

}  // namespace rf::store
