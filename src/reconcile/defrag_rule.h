// Defragmentation by rule: after compaction etcd's backend file only grows, so the steward
// leader defragments a member whose file is mostly free pages, one member at a time, while the
// cluster is whole. Pure (tests/unit/defrag_rule_test.cc tables each rule; common/rules.h
// switches one off to show what it prevents).
//
// A member is fragmented when its file is at least `min_size` and the free part of it,
// (dbSize - dbSizeInUse) / dbSize, is at least `above_percent` %. Rules, in order:
//   DR1 off (cluster.defrag_above_percent: 0), or no member fragmented: nothing.
//   DR2 only while the cluster is whole: every member started, healthy and a voter (no
//       learner), none diverged, none more than kDefragMaxLag raft entries behind the leader.
//       A defrag blocks its member; with another member already down that could cost the
//       quorum, and a member still catching up is not back yet. Wait, naming the member.
//   DR3 only while nothing else is under way (a membership step, an upgrade, a restore): wait.
//   DR4 only inside cluster.defrag_window when one is set: wait, saying when it opens.
//   DR5 at least `pause` after the last defrag this leader ran: clients that failed over to
//       other members come back, and the member just done gets to serve before the next.
//   DR6 the order: followers first (the most fragmented first), the etcd leader last. A
//       defrag blocks the member, and a blocked leader stalls every write; so the leader's turn
//       is a leadership move first (to the healthy voter with the fastest disk), and its defrag
//       on a later pass, once it is a follower. A one-member cluster defragments its only
//       member (nothing else can serve meanwhile; said so).
//   DR7 room first: a defrag writes a copy of the data in use next to the file. The member's
//       node must report free space of at least dbSizeInUse plus kDefragHeadroom under its data
//       dir; else the member is passed over for the next in the order, and with none left the
//       leader waits, naming the first one's shortfall in bytes. A node that reports no figure
//       (an older agent) is not defragmented: nothing is assumed.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reconcile/plan.h"

namespace steward {

// A member more than this many raft entries behind the leader is still catching up (DR2).
inline constexpr uint64_t kDefragMaxLag = 1000;
// Room beyond the copy itself: etcd's WAL segments (64 MiB) and a margin (DR7).
inline constexpr int64_t kDefragHeadroom = int64_t{128} << 20;

struct DefragRuleView {
  int above_percent = 45;  // 0: off
  int64_t min_size = int64_t{100} << 20;
  std::chrono::milliseconds pause{30000};
  std::vector<NodeView> nodes;      // data_free_bytes (DR7), disk figures (DR6's move target)
  std::vector<MemberView> members;  // db_size, db_size_in_use, health, roles
  uint64_t leader_raft_index = 0;
  std::string busy;            // DR3: "" when nothing else is under way, else what is
  std::string outside_window;  // DR4: "" inside the window (or none set), else when it opens
  std::optional<std::chrono::milliseconds> since_last;  // DR5: since the last defrag ended
};

struct DefragRuleDecision {
  enum Kind { kNothing, kWait, kMoveLeader, kDefrag } kind = kNothing;
  std::string rule;     // "DR1".."DR7"
  std::string reason;   // for logs, status and history ("" for kNothing without a candidate)
  uint64_t member = 0;  // kDefrag: whom; kMoveLeader: the leader to move off
  std::string name;
  uint64_t move_to = 0;  // kMoveLeader: the new leader
  std::string move_to_name;
  int64_t shortfall = 0;  // DR7: bytes missing
};

// The free part of a member's file, in percent (0 for an empty or unknown size).
int FragmentedPercent(const MemberView& m);

DefragRuleDecision DecideDefrag(const DefragRuleView& v);

}  // namespace steward
