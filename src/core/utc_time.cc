#include "core/utc_time.h"

#include <cstdio>
#include <ctime>

namespace rf {

std::string iso_utc(int64_t ms_since_epoch, bool millis) {
  const std::time_t secs = static_cast<std::time_t>(ms_since_epoch / 1000);
  std::tm tm{};
  ::gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  if (millis) {
    std::snprintf(out, sizeof out, "%s.%03dZ", buf, static_cast<int>(ms_since_epoch % 1000));
  } else {
    std::snprintf(out, sizeof out, "%sZ", buf);
  }
  return out;
}

}  // namespace rf
