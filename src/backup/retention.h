// Backup retention: which backups to delete. A pure function, unit-tested.
//
// Keep every backup younger than keep_all_for; then the newest backup of each hour for
// hourly_for; then the newest of each day (UTC) for daily_for; delete the rest. The newest
// valid backup is never deleted, however old. Incomplete backups (no meta.json) are deleted
// once older than keep_all_for (they are leftovers of a crash mid-backup).
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
};

std::vector<std::string> PlanRetention(const std::vector<RetentionItem>& backups, int64_t now,
                                       const RetentionConfig& policy);

}  // namespace steward
