#include "backup/retention.h"

#include <algorithm>
#include <set>

namespace steward {

std::vector<std::string> PlanRetention(const std::vector<RetentionItem>& backups, int64_t now,
                                       const RetentionConfig& p) {
  const int64_t keep_all = p.keep_all_for.count() / 1000;
  const int64_t hourly = p.hourly_for.count() / 1000;
  const int64_t daily = p.daily_for.count() / 1000;
  std::vector<RetentionItem> sorted = backups;
  // Newest first, so the first backup seen in a bucket is the one kept.
  std::sort(sorted.begin(), sorted.end(), [](const RetentionItem& a, const RetentionItem& b) {
    return a.unix_time != b.unix_time ? a.unix_time > b.unix_time : a.name > b.name;
  });
  std::set<int64_t> hours_kept, days_kept;
  bool newest_valid_seen = false;
  std::vector<std::string> doomed;
  for (const auto& b : sorted) {
    const int64_t age = now - b.unix_time;
    if (!b.valid) {
      if (age > keep_all) doomed.push_back(b.name);
      continue;
    }
    bool keep = false;
    if (!newest_valid_seen) {
      keep = true;
      newest_valid_seen = true;
    }
    if (age <= keep_all) {
      keep = true;
    } else if (age <= keep_all + hourly) {
      keep = hours_kept.insert(b.unix_time / 3600).second || keep;
    } else if (age <= keep_all + hourly + daily) {
      keep = days_kept.insert(b.unix_time / 86400).second || keep;
    }
    if (!keep) doomed.push_back(b.name);
  }
  return doomed;
}

}  // namespace steward
