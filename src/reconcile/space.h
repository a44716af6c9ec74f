// Space: the backend quota and what fills it. Two pieces share this header.
//
// 1. The order of a rolling defragmentation (stewardctl defrag and the leader's NOSPACE
//    recovery): one member at a time, followers and learners first, the etcd leader last
//    (defragmenting the leader blocks it, and a blocked leader stalls every write), and never a
//    member whose blocking would leave the voters that answer short of a quorum.
//
// 2. The steward leader's NOSPACE recovery. etcd raises NOSPACE when a member's backend
//    reaches --quota-backend-bytes and then refuses every write until an operator compacts,
//    defragments and disarms. The leader does the same by itself:
//      compact to the current revision -> defragment member by member (leader last) -> disarm.
//    Whether to act is DecideSpace, a pure function of a plain observation (rules S1-S5 below);
//    SpaceKeeper (agent side) observes, asks it, and acts.
//
//    S1  Only NOSPACE is handled. CORRUPT means a member's data disagrees with the others': that
//        needs an operator (the leader never disarms it).
//    S2  Only while a quorum answers (the alarm list is a quorum read). Without one, nothing.
//    S3  After a failed recovery, back off: 30 s, doubling, at most 5 min.
//    S4  If the alarm is back within kSpaceReturnWindow (5 min) of a recovery that cleared it,
//        the live data itself is likely over the quota (compaction and defragmentation freed
//        too little): do not loop. Wait until kSpaceReturnWindow after that recovery, and say
//        why (raise --quota-backend-bytes or delete data).
//    S5  Otherwise act.
//    S6  Who acts: the steward leader. But NOSPACE refuses the lease and the key a new leader
//        needs, so when the alarm came while nobody led, nobody ever could: then the
//        lowest-named agent that answers acts (no leader seen, and every lower-named agent
//        silent), re-checking both right before it compacts (Agent::ActsForSpaceWithoutLeader).
//        Its history records carry term 0.
//
// Thread-safety: the free functions are pure. A SpaceKeeper is owned by one thread (the
// agent's reconcile loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/history.h"
#include "etcd/client.h"

namespace steward {

// --- rolling defragmentation ---

struct DefragMember {
  uint64_t id = 0;
  std::string name;
  std::string endpoint;  // client URL; empty: never started
  bool is_learner = false;
  bool is_leader = false;  // the etcd leader
  bool reachable = false;  // answered Status just now
  int64_t db_size = 0;     // as it answered
};

// The order to defragment `members` in: the reachable ones, learners and followers first (in
// the given order), the etcd leader last. Unreachable or never-started members are left out.
std::vector<DefragMember> DefragOrder(const std::vector<DefragMember>& members);

// Empty if blocking `target` for a defragmentation leaves a quorum of the voters answering (or
// the cluster has one voter, which cannot be helped), else why not. `members` is a fresh view
// (reachable = answered Status with a leader).
std::string DefragQuorumBlocker(const std::vector<DefragMember>& members, uint64_t target);

// A fresh view through `client`: the member list and each member's Status (in turn, `timeout`
// each). The leader is the one the answering members name.
absl::StatusOr<std::vector<DefragMember>> ObserveForDefrag(EtcdClient& client,
                                                           std::chrono::milliseconds timeout);

// --- NOSPACE recovery decision ---

inline constexpr std::chrono::milliseconds kSpaceReturnWindow{5 * 60 * 1000};
inline constexpr std::chrono::milliseconds kSpaceFailureBackoffMin{30 * 1000};
inline constexpr std::chrono::milliseconds kSpaceFailureBackoffMax{5 * 60 * 1000};

struct SpaceObservation {
  bool quorum = false;               // the alarm list answered (a quorum read)
  std::vector<AlarmInfo> alarms;     // active alarms, every member's
  std::chrono::milliseconds now{0};  // a monotonic clock
  // The last recovery that completed (alarms disarmed), if any.
  std::optional<std::chrono::milliseconds> last_success_at;
  // Failed recoveries since the last success, and when the latest one ended.
  int failures = 0;
  std::optional<std::chrono::milliseconds> last_failure_at;
};

struct SpaceDecision {
  enum Kind { kNothing, kWait, kRecover } kind = kNothing;
  std::string reason;
  std::chrono::milliseconds retry_in{0};  // kWait: when acting could be possible again
};

SpaceDecision DecideSpace(const SpaceObservation& obs);

// --- acting (the leader) ---

class SpaceKeeper {
 public:
  struct Options {
    // Each member's defragmentation (etcd blocks the member meanwhile; a multi-GiB backend
    // takes minutes on a slow disk).
    std::chrono::milliseconds defrag_timeout{5 * 60 * 1000};
    std::chrono::milliseconds call_timeout{5000};
    // How often the alarms are looked at (a pass may come more often than this).
    std::chrono::milliseconds check_every{2000};
    Clock* clock = Clock::Real();  // when the alarms were last looked at
  };
  // `client` (every member's client URL) and `history` (may be null) must outlive this object.
  // `confirm_leader` re-checks the steward leadership right before each step.
  SpaceKeeper(EtcdClient* client, History* history, std::function<bool()> confirm_leader,
              std::string node, Options options);
  SpaceKeeper(EtcdClient* client, History* history, std::function<bool()> confirm_leader,
              std::string node)
      : SpaceKeeper(client, history, std::move(confirm_leader), std::move(node), Options{}) {}

  // One look (at most every check_every) with the leader's `term`: recovers from NOSPACE when
  // DecideSpace says so. Returns true if it recovered (the alarm is disarmed).
  bool Pass(uint64_t term);
  // The last decision's reason ("" when there was nothing to do), for logs and tests.
  const std::string& last_reason() const { return last_reason_; }

 private:
  std::chrono::milliseconds Now() const;
  // Compact, defragment member by member, disarm. Returns what it did, or why it stopped.
  absl::StatusOr<std::string> Recover(const std::vector<AlarmInfo>& alarms);
  void Record(uint64_t term, const std::string& action, const std::string& reason,
              const std::string& result);

  EtcdClient* client_;
  History* history_;
  std::function<bool()> confirm_leader_;
  std::string node_;
  Options options_;
  std::optional<std::chrono::milliseconds> last_check_;
  std::optional<std::chrono::milliseconds> last_success_at_;
  std::optional<std::chrono::milliseconds> last_failure_at_;
  int failures_ = 0;
  std::string last_reason_;
  std::string recorded_wait_;  // the last wait written to the history (once per reason)
};

}  // namespace steward
