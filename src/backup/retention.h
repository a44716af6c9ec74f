// Backup retention: which backups to delete. A pure function, unit-tested.
//
// Keep every backup younger than keep_all_for; then the newest backup of each hour for
// hourly_for; then the newest of each day (UTC) for daily_for; delete the rest. Incomplete
// backups (no meta.json) are deleted once older than keep_all_for (they are leftovers of a
// crash mid-backup).
//
// Clocks are not trusted with the last copy:
//   - the newest valid backup by (generation, revision) is never deleted, whatever its time;
//   - a backup whose time lies in the future (the taker's clock was ahead) is never deleted;
//   - when the times of valid backups disagree with their revision order by more than the
//     tolerance (some taker's clock was skewed), nothing is deleted at all until an operator
//     looks: `skew` then says which backups disagree.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"

namespace steward {

struct RetentionItem {
  std::string name;
  int64_t unix_time = 0;
  bool valid = true;  // complete (meta.json present and readable)
  int64_t generation = 0;
  int64_t revision = 0;
};

// Seconds of clock difference tolerated between backup takers.
constexpr int64_t kClockTolerance = 300;

// Names to delete. `skew`, if given, receives why nothing was deleted when clocks disagree.
std::vector<std::string> PlanRetention(const std::vector<RetentionItem>& backups, int64_t now,
                                       const RetentionConfig& policy, std::string* skew = nullptr);

}  // namespace steward
