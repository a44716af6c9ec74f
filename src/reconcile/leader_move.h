// Moving etcd leadership off a slow disk. A leader whose WAL fsync is slow slows every write of
// the cluster (each one waits for the leader's own fsync) and sends its heartbeats late; a slow
// follower slows only itself. So the steward leader hands etcd leadership to a member with a
// faster disk, with hysteresis so that it never flaps. Pure (tests/unit/leader_move_test.cc).
//
// Rules:
//   LM1 only while the etcd leader's disk has been past etcd's guidance (etcd/disk_latency.h)
//       for `sustain` (1 min) without a break: one slow window is no reason.
//   LM2 to a healthy voter whose disk is within the guidance and whose worst p99 is at most half
//       the leader's; of those, the fastest. A member whose figures are unknown is no target.
//   LM3 when no member qualifies (every disk slow, or none much faster), nothing moves, and the
//       reason says so.
//   LM4 at most one move per `quiet` (5 min): a disk that is slow now and then does not make
//       leadership bounce.
//   LM5 off with cluster.move_leader_off_slow_disk: false (the leader is only named).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reconcile/plan.h"

namespace steward {

struct LeaderMoveView {
  bool enabled = true;
  std::vector<NodeView> nodes;
  std::vector<MemberView> members;
  // How long the etcd leader's node has reported a slow disk without a break (0: not slow).
  std::chrono::milliseconds leader_slow_for{0};
  // Since the last move this leader made (nullopt: none).
  std::optional<std::chrono::milliseconds> since_last_move;
  std::chrono::milliseconds sustain{60000};
  std::chrono::milliseconds quiet{300000};
};

struct LeaderMove {
  uint64_t from = 0, to = 0;  // member IDs; `to` 0: no move
  std::string to_name;
  std::string reason;  // why the move, or why none ("" when the leader's disk is fine)
};

LeaderMove DecideLeaderMove(const LeaderMoveView& v);

}  // namespace steward
