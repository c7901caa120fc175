// Skipping a test is fine on a developer's machine that lacks root, a docker
// daemon or some kernel feature; in CI (CI=true) it must fail instead, so a
// missing daemon or a lost privilege never turns into a green build.
//
//   if (::geteuid() != 0) RF_SKIP() << "real sandboxes need root";
//
// Outside CI this is GTEST_SKIP(); with CI=true (or 1) it is a fatal failure
// whose message says the test would have been skipped, and why.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace rf::testing {

inline bool in_ci() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string_view v(ci);
  return v == "true" || v == "1";
}

inline ::testing::TestPartResult::Type skip_or_fail() {
  return in_ci() ? ::testing::TestPartResult::kFatalFailure : ::testing::TestPartResult::kSkip;
}

inline const char* skip_prefix() { return in_ci() ? "CI=true, so this skip fails the run: " : ""; }

}  // namespace rf::testing

// Like GTEST_SKIP() (it returns from the current function, and takes << reason),
// but a failure in CI.
#define RF_SKIP() return GTEST_MESSAGE_(::rf::testing::skip_prefix(), ::rf::testing::skip_or_fail())
