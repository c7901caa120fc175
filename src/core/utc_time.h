// Times as people and APIs read them: ISO 8601 in UTC, from the store's
// milliseconds since the epoch.
#pragma once

#include <cstdint>
#include <string>

namespace rf {

// "2026-12-07T05:39:10Z", or "2026-12-07T05:39:10.123Z" with `millis`.
std::string iso_utc(int64_t ms_since_epoch, bool millis = false);

}  // namespace rf
