#include "common/backoff.h"

#include <gtest/gtest.h>

namespace steward {
namespace {

using std::chrono::milliseconds;

TEST(BackoffTest, DoublesUpToTheCapWithoutJitter) {
  Backoff b(milliseconds(100), milliseconds(1000), 0.0, 1);
  EXPECT_EQ(b.Next(), milliseconds(100));
  EXPECT_EQ(b.Next(), milliseconds(200));
  EXPECT_EQ(b.Next(), milliseconds(400));
  EXPECT_EQ(b.Next(), milliseconds(800));
  EXPECT_EQ(b.Next(), milliseconds(1000));
  EXPECT_EQ(b.Next(), milliseconds(1000));
  b.Reset();
  EXPECT_EQ(b.Next(), milliseconds(100));
}

TEST(BackoffTest, JitterStaysWithinBounds) {
  Backoff b(milliseconds(1000), milliseconds(1000), 0.5, 42);
  bool varied = false;
  milliseconds first = b.Next();
  for (int i = 0; i < 200; ++i) {
    milliseconds d = b.Next();
    EXPECT_GE(d, milliseconds(500));
    EXPECT_LE(d, milliseconds(1000));
    if (d != first) varied = true;
  }
  EXPECT_TRUE(varied) << "jitter never changed the delay";
}

}  // namespace
}  // namespace steward
