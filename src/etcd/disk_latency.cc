#include "etcd/disk_latency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace steward {

Buckets ParseHistogram(const std::string& metrics, const std::string& name) {
  Buckets out;
  const std::string prefix = name + "_bucket{";
  std::istringstream in(metrics);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const size_t le = line.find("le=\"", prefix.size());
    const size_t close = line.find("}", prefix.size());
    if (le == std::string::npos || close == std::string::npos) continue;
    const size_t from = le + 4;
    const std::string bound = line.substr(from, line.find('"', from) - from);
    double upper = 0, count = 0;
    if (bound == "+Inf") {
      upper = std::numeric_limits<double>::infinity();
    } else if (!absl::SimpleAtod(bound, &upper)) {
      continue;
    }
    std::string value = line.substr(close + 1);
    while (!value.empty() && value.front() == ' ') value.erase(0, 1);
    value = value.substr(0, value.find(' '));  // a timestamp may follow
    if (!absl::SimpleAtod(value, &count)) continue;
    out[upper] += count;
  }
  return out;
}

std::optional<double> QuantileBetween(const Buckets& before, const Buckets& after, double q,
                                      double min_count) {
  if (after.empty()) return std::nullopt;
  // A restarted etcd starts its counters again: then only what it counted since.
  const bool reset = !before.empty() && before.rbegin()->second > after.rbegin()->second;
  std::vector<std::pair<double, double>> delta;  // (upper bound, cumulative count between)
  for (const auto& [upper, count] : after) {
    auto it = before.find(upper);
    const double was = reset || it == before.end() ? 0 : it->second;
    delta.push_back({upper, std::max(0.0, count - was)});
  }
  const double total = delta.back().second;
  if (total < min_count || total <= 0) return std::nullopt;
  const double rank = q * total;
  double lower_bound = 0, lower_count = 0;
  for (const auto& [upper, cumulative] : delta) {
    if (cumulative >= rank) {
      if (std::isinf(upper)) return lower_bound * 1000;  // past the last finite bucket
      const double in_bucket = cumulative - lower_count;
      const double frac = in_bucket > 0 ? (rank - lower_count) / in_bucket : 1;
      return (lower_bound + (upper - lower_bound) * frac) * 1000;
    }
    lower_bound = upper;
    lower_count = cumulative;
  }
  return lower_bound * 1000;
}

std::string SlowDiskNote(const DiskLatency& d) {
  std::vector<std::string> parts;
  if (d.wal_fsync_p99_ms && *d.wal_fsync_p99_ms >= kWalFsyncGuidanceMs) {
    parts.push_back(absl::StrFormat("WAL fsync p99 %.0f ms (etcd's guidance: under %.0f ms)",
                                    *d.wal_fsync_p99_ms, kWalFsyncGuidanceMs));
  }
  if (d.backend_commit_p99_ms && *d.backend_commit_p99_ms >= kBackendCommitGuidanceMs) {
    parts.push_back(absl::StrFormat("backend commit p99 %.0f ms (etcd's guidance: under %.0f ms)",
                                    *d.backend_commit_p99_ms, kBackendCommitGuidanceMs));
  }
  std::string out;
  for (const auto& p : parts) absl::StrAppend(&out, out.empty() ? "" : ", ", p);
  return out;
}

}  // namespace steward
