// The leader's report (etcd/keys.h: StatusKey): how often it is rewritten, so that readers
// (stewardctl status, the restore's settle, which writes a first report for the restored
// cluster) can tell a silent leader from an idle one.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "config/config.h"

namespace steward {

// The leader rewrites an unchanged report (StatusKey) this often: a report older than a few
// of these means the leader has gone silent, not that it is idle. A settled leader passes
// only every cluster.idle_interval, so never more often than that.
inline constexpr int64_t kReportRefreshSeconds = 30;
inline int64_t ReportRefreshSeconds(const Config& config) {
  return std::max<int64_t>(
      kReportRefreshSeconds,
      std::chrono::duration_cast<std::chrono::seconds>(config.cluster.idle_interval).count() + 1);
}

}  // namespace steward
