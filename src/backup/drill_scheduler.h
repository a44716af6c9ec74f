// The steward leader's periodic restore drill (backup/drill.h): every backup.drill_interval
// (0: off) the newest complete backup is restored into a scratch etcd on this node and compared
// with the live cluster. The leader's reconciler asks for it only when the cluster is healthy and
// nothing else is to be done (no membership change, restore or upgrade under way), the same moment
// periodic backups are taken; the drill then runs on a thread of its own, so healing never waits
// for it. The scratch etcd runs at lower CPU and I/O priority and touches no member.
//
// When a drill is due: one interval after the last one recorded in the store (any backup's
// verified.json), and for a cluster never drilled, min(interval, 1h) after this leadership began.
// A drill that cannot run (store, scratch dir) is tried again one interval later, like a failed
// one.
//
// Thread-safe: MaybeStart and the accessors are called from the reconcile thread, the drill runs
// on its own thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>

#include "backup/drill.h"
#include "backup/store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/config.h"
#include "etcd/api.h"

namespace steward {

class DrillScheduler {
 public:
  // `live` reaches the cluster's members (the agent's cluster client).
  DrillScheduler(const Config& config, BackupStore* store, EtcdApi* live,
                 Clock* clock = Clock::Real());
  // Waits for a running drill (it is bounded by its own limits: etcd's start, the compare).
  ~DrillScheduler();

  // Where this node's drills put their scratch data dir: backup.drill_scratch, else
  // <node.data_dir>/drill.
  static std::string ScratchRoot(const Config& config);

  // Called for each drill that ran, on the drill's thread (the agent records it in history).
  void SetOnDone(std::function<void(const DrillResult&)> fn);
  // A new leadership: the first drill is due from the store's records again.
  void OnNewLeadership();
  // Starts a drill on its own thread if one is due and none runs. True if it started one.
  bool MaybeStart();
  // One line for status about the last drill this leader ran ("" if none yet).
  std::string LastSummary();
  // Unix seconds when that drill ended (0: none yet).
  int64_t LastAt();
  bool running() const { return running_.load(); }

 private:
  void RunOne();
  // The newest time a drill was recorded in the store (0: none, or unreadable).
  int64_t NewestRecordedDrill();

  const Config& config_;
  BackupStore* store_;
  EtcdApi* live_;
  Clock* clock_;
  std::atomic<bool> running_{false};
  std::thread worker_;
  Mutex mu_;
  std::function<void(const DrillResult&)> on_done_ ABSL_GUARDED_BY(mu_);
  bool loaded_ ABSL_GUARDED_BY(mu_) = false;  // NewestRecordedDrill read this leadership
  // No drill recorded: the first is due then.
  std::optional<std::chrono::steady_clock::time_point> first_due_ ABSL_GUARDED_BY(mu_);
  // Unix seconds of the last drill (recorded or tried).
  std::optional<int64_t> last_ ABSL_GUARDED_BY(mu_);
  std::string last_summary_ ABSL_GUARDED_BY(mu_);
  int64_t last_summary_at_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace steward
