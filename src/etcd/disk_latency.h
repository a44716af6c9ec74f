// How fast a member's disk is, from etcd's own /metrics: the WAL fsync and backend commit
// duration histograms, as percentiles over the time between two reads (what changed in the
// buckets), so that a disk that became slow shows at once and one that recovered stops showing.
//
// etcd's guidance (its tuning and hardware docs): WAL fsync p99 under 10 ms, backend commit p99
// under 25 ms. Past them, heartbeats are late and the member, or the whole cluster when it is
// the leader, slows every write. Pure (tests/unit/disk_latency_test.cc).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace steward {

inline constexpr double kWalFsyncGuidanceMs = 10;
inline constexpr double kBackendCommitGuidanceMs = 25;

// A Prometheus histogram's cumulative buckets: upper bound (seconds; +Inf as infinity) ->
// count of observations at or below it.
using Buckets = std::map<double, double>;

// The buckets of histogram `name` (its `name_bucket{...le="..."}` lines) in a /metrics text;
// empty if absent. Other labels are ignored (etcd's disk histograms have none).
Buckets ParseHistogram(const std::string& metrics, const std::string& name);

// The `q` quantile (0..1) in milliseconds of what was observed between `before` and `after`
// (the same histogram read twice), interpolated inside its bucket as Prometheus'
// histogram_quantile does; nullopt with fewer than `min_count` observations in between.
std::optional<double> QuantileBetween(const Buckets& before, const Buckets& after, double q,
                                      double min_count = 1);

struct DiskLatency {
  std::optional<double> wal_fsync_p99_ms;
  std::optional<double> backend_commit_p99_ms;
};

// "" if within etcd's guidance (or unknown), else why not: "WAL fsync p99 149 ms (etcd's
// guidance: under 10 ms)".
std::string SlowDiskNote(const DiskLatency& d);

}  // namespace steward
