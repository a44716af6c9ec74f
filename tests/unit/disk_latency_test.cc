// etcd/disk_latency.h: percentiles of etcd's disk histograms between two reads of /metrics.
#include "etcd/disk_latency.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "ctl/check_disk_cmd.h"

namespace steward {
namespace {

// etcd's WAL fsync buckets (0.001 s doubling to 8.192 s), with `counts` cumulative.
std::string Text(const std::vector<double>& counts, double inf) {
  std::string out =
      "# HELP etcd_disk_wal_fsync_duration_seconds ...\n"
      "# TYPE etcd_disk_wal_fsync_duration_seconds histogram\n";
  double le = 0.001;
  for (double c : counts) {
    absl::StrAppend(&out, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"", le, "\"} ", c, "\n");
    le *= 2;
  }
  absl::StrAppend(&out, "etcd_disk_wal_fsync_duration_seconds_bucket{le=\"+Inf\"} ", inf, "\n",
                  "etcd_disk_wal_fsync_duration_seconds_sum 1.5\n",
                  "etcd_disk_wal_fsync_duration_seconds_count ", inf, "\n",
                  "etcd_disk_backend_commit_duration_seconds_bucket{le=\"0.001\"} 7\n");
  return out;
}

TEST(DiskLatency, ParsesOnlyTheNamedHistogram) {
  Buckets b = ParseHistogram(Text({1, 2, 3}, 4), "etcd_disk_wal_fsync_duration_seconds");
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b.at(0.001), 1);
  EXPECT_EQ(b.at(0.004), 3);
  EXPECT_EQ(b.rbegin()->second, 4);
  EXPECT_TRUE(ParseHistogram(Text({1}, 1), "etcd_nothing").empty());
}

TEST(DiskLatency, TheQuantileIsOfWhatChangedBetweenTwoReads) {
  const std::string name = "etcd_disk_wal_fsync_duration_seconds";
  // Before: 1000 fast fsyncs (under 1 ms). Then 100 more, all between 128 and 256 ms.
  std::vector<double> fast(9, 1000), slow(9, 1000);
  slow[8] = 1100;  // le=0.256
  const Buckets before = ParseHistogram(Text(fast, 1000), name);
  const Buckets after = ParseHistogram(Text(slow, 1100), name);
  auto p99 = QuantileBetween(before, after, 0.99);
  ASSERT_TRUE(p99.has_value());
  EXPECT_GT(*p99, 128);
  EXPECT_LE(*p99, 256);
  // Over the whole life it would read fast: the window is what matters.
  auto life = QuantileBetween({}, after, 0.5);
  ASSERT_TRUE(life.has_value());
  EXPECT_LE(*life, 1.0);
  // Nothing observed in between: no figure.
  EXPECT_FALSE(QuantileBetween(after, after, 0.99).has_value());
  // A restarted etcd (counters lower than before) counts from its restart.
  auto restarted = QuantileBetween(after, ParseHistogram(Text(fast, 1000), name), 0.99);
  ASSERT_TRUE(restarted.has_value());
  EXPECT_LE(*restarted, 1.0);
}

TEST(DiskLatency, PastTheGuidanceIsNamed) {
  EXPECT_EQ(SlowDiskNote({}), "");
  EXPECT_EQ(SlowDiskNote({9.0, 24.0}), "");
  EXPECT_EQ(SlowDiskNote({149.0, std::nullopt}),
            "WAL fsync p99 149 ms (etcd's guidance: under 10 ms)");
  EXPECT_NE(SlowDiskNote({1.0, 30.0}).find("backend commit p99 30 ms"), std::string::npos);
}

// stewardctl check-disk's measurement, on this machine's real file system: every write synced
// and timed, the file gone afterwards; a directory that does not exist is an error.
TEST(CheckDisk, MeasuresSyncedWritesAndLeavesNothingBehind) {
  const std::string dir = ::testing::TempDir() + "/check-disk";
  std::filesystem::create_directories(dir);
  auto r = MeasureSyncedWrites(dir, 200 * 2300, 2300);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->writes, 200);
  EXPECT_GT(r->p99_ms, 0);
  EXPECT_LE(r->p50_ms, r->p99_ms);
  EXPECT_LE(r->p99_ms, r->max_ms);
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_FALSE(MeasureSyncedWrites(dir + "/missing", 2300, 2300).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace steward
