// When the leader takes backups: every backup.interval, and before risky changes (at most once
// per backup.before_change_min_interval), then applies retention. Failures are retried with
// backoff and never touch the cluster; the last success and the last error are published under
// the reserved prefix for `stewardctl status`.
//
// Not thread-safe: the leader's reconcile thread owns it.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "backup/drill_scheduler.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "common/backoff.h"
#include "common/clock.h"
#include "config/config.h"
#include "etcd/api.h"
#include "etcd/keys.h"

namespace steward {

// Deletes backup `name` of `cluster` and everything under it: meta.json first (a failure there
// deletes nothing), the snapshot, its deltas, its marks and anything stored onto it meanwhile.
absl::Status DeleteBackup(BackupStore& store, const std::string& cluster, const std::string& name);
// The backups the retention policy (backup.retention, PlanRetention's rules) deletes at `now`
// (Unix seconds); `skew` gets its warning about clocks, if any.
absl::StatusOr<std::vector<std::string>> BackupsToPrune(const Config& config, BackupStore& store,
                                                        int64_t now, std::string* skew);

// Takes one backup now from a healthy member and applies retention. For stewardctl too.
absl::StatusOr<BackupMeta> BackupAndPrune(const Config& config, BackupStore& store, EtcdApi& etcd,
                                          const std::string& taken_by,
                                          const std::function<void(uint64_t)>& progress = {});

class BackupScheduler {
 public:
  // `clock`: when backups are due (Clock::Real() in production).
  BackupScheduler(const Config& config, BackupStore* store, EtcdApi* etcd,
                  Clock* clock = Clock::Real());

  // A new leader learns from the store when the last backup was taken, and backs up at once if
  // there is none of this cluster (e.g. right after a restore, whose cluster ID is new).
  void OnNewLeadership() {
    last_success_.reset();
    checked_store_ = false;
    if (drills_ != nullptr) drills_->OnNewLeadership();
  }
  // The restore drills to start from MaybePeriodic (null: none). Set before passes run.
  void SetDrills(DrillScheduler* drills) { drills_ = drills; }
  // Takes a backup if one is due, then starts a restore drill if one is due (on its own thread).
  // Called only when the cluster is healthy and nothing else is to be done.
  void MaybePeriodic();
  void BeforeChange(const std::string& why);

 private:
  void Run(const std::string& why);
  // Loads the newest backup's time from the store (once per leadership); a backup of another
  // cluster ID does not count.
  void LoadFromStore();
  bool checked_store_ = false;
  void Publish();

  const Config& config_;
  BackupStore* store_;
  EtcdApi* etcd_;
  Clock* clock_;
  std::optional<std::chrono::system_clock::time_point> last_success_;
  std::string last_name_;
  std::string last_error_;
  std::chrono::system_clock::time_point last_error_at_{};
  std::chrono::steady_clock::time_point next_try_{};
  Backoff backoff_;
  DrillScheduler* drills_ = nullptr;
  std::string published_drill_;  // the drill summary in the last Publish
};

}  // namespace steward
