#include "backup/retention.h"

#include <algorithm>
#include <climits>
#include <set>

namespace steward {

std::vector<std::string> PlanRetention(const std::vector<RetentionItem>& backups, int64_t now,
                                       const RetentionConfig& p, std::string* skew) {
  const int64_t keep_all = p.keep_all_for.count() / 1000;
  const int64_t hourly = p.hourly_for.count() / 1000;
  const int64_t daily = p.daily_for.count() / 1000;
  std::vector<RetentionItem> sorted = backups;
  // Newest first, so the first backup seen in a bucket is the one kept.
  std::sort(sorted.begin(), sorted.end(), [](const RetentionItem& a, const RetentionItem& b) {
    return a.unix_time != b.unix_time ? a.unix_time > b.unix_time : a.name > b.name;
  });
  // History order: (generation, revision); the clock breaks ties only.
  auto newer = [](const RetentionItem* a, const RetentionItem* b) {
    if (a->generation != b->generation) return a->generation > b->generation;
    if (a->revision != b->revision) return a->revision > b->revision;
    return a->unix_time != b->unix_time ? a->unix_time > b->unix_time : a->name > b->name;
  };
  std::vector<const RetentionItem*> by_history;
  for (const auto& b : backups) {
    if (b.valid) by_history.push_back(&b);
  }
  std::sort(by_history.begin(), by_history.end(), newer);
  const RetentionItem* newest = by_history.empty() ? nullptr : by_history.front();
  // Times against history: a backup more than the tolerance later than one that holds a
  // strictly later point of history means some taker's clock was off.
  int64_t earliest_newer = INT64_MAX;  // earliest time among strictly newer backups
  for (size_t i = 0; i < by_history.size();) {
    size_t j = i;
    int64_t group_earliest = INT64_MAX;
    for (; j < by_history.size() && by_history[j]->generation == by_history[i]->generation &&
           by_history[j]->revision == by_history[i]->revision;
         ++j) {
      const RetentionItem* b = by_history[j];
      if (earliest_newer != INT64_MAX && b->unix_time > earliest_newer + kClockTolerance) {
        if (skew != nullptr) {
          *skew = "backup " + b->name +
                  " is dated after a backup of a later revision: a "
                  "clock was off; pruning nothing until an operator looks";
        }
        return {};
      }
      group_earliest = std::min(group_earliest, b->unix_time);
    }
    earliest_newer = std::min(earliest_newer, group_earliest);
    i = j;
  }
  std::set<int64_t> hours_kept, days_kept;
  std::vector<std::string> doomed;
  for (const auto& b : sorted) {
    const int64_t age = now - b.unix_time;
    if (!b.valid) {
      if (age > keep_all) doomed.push_back(b.name);
      continue;
    }
    bool keep = newest != nullptr && b.name == newest->name;
    if (b.unix_time > now + kClockTolerance) keep = true;  // a clock ahead: never by age
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
