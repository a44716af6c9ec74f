#include "common/duration.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

using std::chrono::milliseconds;

TEST(DurationTest, ParsesEachUnit) {
  EXPECT_EQ(*ParseDuration("250ms"), milliseconds(250));
  EXPECT_EQ(*ParseDuration("10s"), milliseconds(10000));
  EXPECT_EQ(*ParseDuration("1m"), milliseconds(60000));
  EXPECT_EQ(*ParseDuration("2h"), milliseconds(7200000));
  EXPECT_EQ(*ParseDuration("1m30s"), milliseconds(90000));
  EXPECT_EQ(*ParseDuration("30d"), milliseconds(30LL * 86400000));
}

TEST(DurationTest, RejectsBadInput) {
  EXPECT_NE(ParseDuration("").status().message().find("empty"), std::string::npos);
  EXPECT_NE(ParseDuration("10").status().message().find("no unit"), std::string::npos);
  EXPECT_NE(ParseDuration("10w").status().message().find("unknown unit \"w\""), std::string::npos);
  EXPECT_NE(ParseDuration("-1s").status().message().find("is not a duration"), std::string::npos);
}

TEST(DurationTest, FormatsShortestExactForm) {
  EXPECT_EQ(FormatDuration(milliseconds(90000)), "90s");
  EXPECT_EQ(FormatDuration(milliseconds(60000)), "1m");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1500ms");
  EXPECT_EQ(FormatDuration(milliseconds(7200000)), "2h");
}

}  // namespace
}  // namespace steward
