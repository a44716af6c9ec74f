// stewardctl's progress display (ctl/progress.h): the line's format with and without a total,
// the summary, and how often it is written on a terminal and elsewhere (a fake clock).
#include "ctl/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace steward {
namespace {

using namespace std::chrono_literals;

TEST(ProgressTest, WithATotalShowsPercentRateAndEta) {
  // 10 MB of 40 MB in 2 s: 5 MB/s, 30 MB left, 6 s.
  EXPECT_EQ(FormatProgress("snapshot of n2", 10000000, 40000000, 2.0),
            "snapshot of n2: 10.0 MB / 40.0 MB (25%)  5.0 MB/s  ETA 0:06");
  // Hours when it is that long.
  EXPECT_EQ(FormatProgress("x", 1000000, 4000000000, 1.0),
            "x: 1.0 MB / 4.0 GB (0%)  1.0 MB/s  ETA 1:06:39");
}

TEST(ProgressTest, WithoutATotalShowsBytesAndRateOnly) {
  EXPECT_EQ(FormatProgress("backup", 3000000, 0, 1.5), "backup: 3.0 MB  2.0 MB/s");
  // No time yet: no rate.
  EXPECT_EQ(FormatProgress("backup", 512, 0, 0), "backup: 512 B");
}

TEST(ProgressTest, AnEstimateExceededStaysAtOneHundredPercent) {
  // The total given for a snapshot is the DB size etcd reported, which the stream (with its
  // trailer) exceeds a little.
  EXPECT_EQ(FormatProgress("s", 4128, 4096, 1.0), "s: 4.1 kB / 4.1 kB (100%)  4.1 kB/s  ETA 0:00");
}

TEST(ProgressTest, Summary) {
  EXPECT_EQ(FormatProgressSummary("export of b", 40000000, 0.5),
            "export of b: 40.0 MB in 0.5 s (80.0 MB/s)");
  EXPECT_EQ(FormatProgressSummary("export of b", 0, 0), "export of b: 0 B in 0.0 s");
}

struct FakeClock {
  std::chrono::steady_clock::time_point t{};
  Progress::Now now() {
    return [this] { return t; };
  }
};

TEST(ProgressTest, NotATerminalWritesAPlainLineAtMostEveryFiveSeconds) {
  FakeClock clock;
  std::ostringstream out;
  Progress p("backup", 0, out, /*tty=*/false, clock.now());
  clock.t += 1s;
  p.Update(1000000);
  EXPECT_EQ(out.str(), "") << "nothing before 5 s";
  clock.t += 4s;
  p.Update(5000000);
  EXPECT_EQ(out.str(), "backup: 5.0 MB  1.0 MB/s\n");
  clock.t += 1s;
  p.Update(6000000);
  EXPECT_EQ(out.str(), "backup: 5.0 MB  1.0 MB/s\n") << "not again within 5 s";
  p.Done();
  EXPECT_EQ(out.str(), "backup: 5.0 MB  1.0 MB/s\nbackup: 6.0 MB in 6.0 s (1.0 MB/s)\n");
  p.Done();
  EXPECT_EQ(out.str(), "backup: 5.0 MB  1.0 MB/s\nbackup: 6.0 MB in 6.0 s (1.0 MB/s)\n")
      << "one summary";
}

TEST(ProgressTest, ATerminalRewritesOneLineThenEndsItWithTheSummary) {
  FakeClock clock;
  std::ostringstream out;
  Progress p("export", 4000000, out, /*tty=*/true, clock.now());
  clock.t += 1s;
  p.Update(1000000);
  clock.t += 100ms;
  p.Update(2000000);  // within 200 ms of the last: skipped
  clock.t += 100ms;
  p.Update(2000000);
  p.Done();
  EXPECT_EQ(out.str(),
            "\rexport: 1.0 MB / 4.0 MB (25%)  1.0 MB/s  ETA 0:03\x1b[K"
            "\rexport: 2.0 MB / 4.0 MB (50%)  1.7 MB/s  ETA 0:01\x1b[K"
            "\r\x1b[Kexport: 2.0 MB in 1.2 s (1.7 MB/s)\n");
}

TEST(ProgressTest, AFailedStreamEndsTheLiveLineWithoutASummary) {
  FakeClock clock;
  std::ostringstream out;
  {
    Progress p("import", 0, out, /*tty=*/true, clock.now());
    clock.t += 1s;
    p.Update(1024);
    p.Done(/*ok=*/false);
  }
  EXPECT_EQ(out.str(),
            "\rimport: 1.0 kB  1.0 kB/s\x1b[K\r\x1b[Kimport: 1.0 kB  1.0 kB/s (failed)\n");
  std::ostringstream plain;
  Progress q("import", 0, plain, /*tty=*/false, clock.now());
  q.Done(false);
  EXPECT_EQ(plain.str(), "") << "off a terminal the caller's error says it";
}

}  // namespace
}  // namespace steward
