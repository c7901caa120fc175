#include "core/units.h"

#include <gtest/gtest.h>

namespace rf {
namespace {

TEST(Units, ParsesSizes) {
  EXPECT_EQ(*parse_size("4096"), 4096u);
  EXPECT_EQ(*parse_size("512k"), 512u * 1024);
  EXPECT_EQ(*parse_size("512m"), 512ull << 20);
  EXPECT_EQ(*parse_size("1G"), 1ull << 30);
  EXPECT_EQ(*parse_size("1.5g"), 3ull << 29);
  EXPECT_EQ(*parse_size("16MiB"), 16ull << 20);
  EXPECT_EQ(*parse_size("2mb"), 2ull << 20);
}

TEST(Units, SizeErrorsNameTheText) {
  auto r = parse_size("12x");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "\"12x\": unknown size suffix \"x\" (use k, m, g or t)");
  EXPECT_FALSE(parse_size("").ok());
  EXPECT_FALSE(parse_size("-1m").ok());
  EXPECT_FALSE(parse_size("1.2.3m").ok());
  EXPECT_FALSE(parse_size("99999999999t").ok());
  // A suffix is a unit with at most one "b" or "ib" after it.
  EXPECT_EQ(parse_size("512bb").error().to_string(),
            "\"512bb\": unknown size suffix \"bb\" (use k, m, g or t)");
  EXPECT_FALSE(parse_size("512ib").ok());
  EXPECT_FALSE(parse_size("512kbb").ok());
  EXPECT_EQ(*parse_size("512b"), 512u);
}

// A fraction of a byte is refused, not rounded down: "0.4" read as 0 would be
// "no cap" for the limits where 0 means that (egress bytes, output).
TEST(Units, ASizeIsAWholeNumberOfBytes) {
  EXPECT_EQ(parse_size("0.4").error().to_string(), "\"0.4\": not a whole number of bytes");
  EXPECT_FALSE(parse_size("1.5").ok());
  EXPECT_FALSE(parse_size("0.0001k").ok());
  EXPECT_EQ(*parse_size("0.5k"), 512u);
}

TEST(Units, ParsesDurations) {
  EXPECT_EQ(parse_duration("30s")->count(), 30'000);
  EXPECT_EQ(parse_duration("250ms")->count(), 250);
  EXPECT_EQ(parse_duration("2m")->count(), 120'000);
  EXPECT_EQ(parse_duration("1h")->count(), 3'600'000);
  EXPECT_EQ(parse_duration("5")->count(), 5'000);
  EXPECT_EQ(parse_duration("0.5s")->count(), 500);
  EXPECT_EQ(parse_duration("30d")->count(), 30LL * 86'400'000);  // token create --expires 30d
  EXPECT_FALSE(parse_duration("5 minutes").ok());
  EXPECT_FALSE(parse_duration("s").ok());
}

TEST(Units, ParsesWholeNumbers) {
  EXPECT_EQ(*parse_whole_number("0"), 0u);
  EXPECT_EQ(*parse_whole_number("64"), 64u);
  EXPECT_EQ(*parse_whole_number("999999999999999999"), 999'999'999'999'999'999u);
  auto r = parse_whole_number("1.5");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().to_string(), "\"1.5\": not a whole number");
  EXPECT_FALSE(parse_whole_number("").ok());
  EXPECT_FALSE(parse_whole_number("-1").ok());
  EXPECT_FALSE(parse_whole_number("+1").ok());
  EXPECT_FALSE(parse_whole_number("1k").ok());
  EXPECT_FALSE(parse_whole_number("1000000000000000000").ok());  // 19 digits
}

TEST(Units, FormatsRoundTrip) {
  EXPECT_EQ(format_size(512ull << 20), "512m");
  EXPECT_EQ(format_size(1000), "1000");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(30'000)), "30s");
  EXPECT_EQ(format_duration(std::chrono::milliseconds(1500)), "1500ms");
}

}  // namespace
}  // namespace rf
