// How much slower the code under test runs in this build. A test that checks
// a promise made in wall time ("ends within a second") holds the plain build
// to the promise and gives a sanitizer build this many times as long: under
// ThreadSanitizer every call of the CLI and worker runs several times slower,
// and what such a build is for is races, not latency.
#pragma once

#include <chrono>

namespace rf::test {

#ifdef RF_TEST_SLOWDOWN
inline constexpr int kSlowdown = RF_TEST_SLOWDOWN;
#else
inline constexpr int kSlowdown = 1;
#endif

template <class Rep, class Period>
constexpr auto scaled(std::chrono::duration<Rep, Period> d) {
  return d * kSlowdown;
}

}  // namespace rf::test
