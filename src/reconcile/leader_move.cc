#include "reconcile/leader_move.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rules.h"

namespace steward {
namespace {

// The worse of a node's two p99s relative to etcd's guidance is what decides; unknown: -1.
double Worst(const NodeView& n) {
  if (n.wal_fsync_p99_ms <= 0 && n.backend_commit_p99_ms <= 0) return -1;
  return std::max(n.wal_fsync_p99_ms, n.backend_commit_p99_ms);
}

}  // namespace

LeaderMove DecideLeaderMove(const LeaderMoveView& v) {
  LeaderMove out;
  const MemberView* leader = nullptr;
  for (const auto& m : v.members) {
    if (m.is_etcd_leader) leader = &m;
  }
  if (leader == nullptr) return out;
  auto node_of = [&](const MemberView& m) -> const NodeView* {
    for (const auto& n : v.nodes) {
      if (n.peer_url == m.peer_url) return &n;
    }
    return nullptr;
  };
  const NodeView* ln = node_of(*leader);
  if (ln == nullptr || ln->disk_slow.empty()) return out;
  const std::string slow =
      absl::StrCat("the etcd leader ", MemberLabel(*leader), " has a slow disk: ", ln->disk_slow);
  if (!v.enabled) {
    out.reason = absl::StrCat(slow, "; leadership stays (cluster.move_leader_off_slow_disk off)");
    return out;
  }
  if (v.leader_slow_for < v.sustain && !RuleOff("LM1")) {
    out.reason = absl::StrCat(slow, "; leadership moves if it stays slow for ",
                              v.sustain.count() / 1000, "s");
    return out;
  }
  if (v.since_last_move && *v.since_last_move < v.quiet && !RuleOff("LM4")) {
    out.reason = absl::StrCat(slow, "; leadership moved ", v.since_last_move->count() / 1000,
                              "s ago, and moves at most once in ", v.quiet.count() / 1000, "s");
    return out;
  }
  const double leader_worst = Worst(*ln);
  const MemberView* best = nullptr;
  double best_worst = 0;
  for (const auto& m : v.members) {
    if (&m == leader || m.is_learner || !m.healthy) continue;
    const NodeView* n = node_of(m);
    if (n == nullptr || !n->disk_slow.empty()) continue;
    const double w = Worst(*n);
    if (w <= 0 || (leader_worst > 0 && w > leader_worst / 2)) continue;
    if (best == nullptr || w < best_worst) {
      best = &m;
      best_worst = w;
    }
  }
  if (best == nullptr) {
    out.reason = absl::StrCat(slow,
                              "; no healthy voter's disk is within etcd's guidance and "
                              "twice as fast, so leadership stays");
    return out;
  }
  out.from = leader->id;
  out.to = best->id;
  out.to_name = best->name;
  out.reason = absl::StrCat(slow, "; moving etcd leadership to ", MemberLabel(*best),
                            absl::StrFormat(" (its worst disk p99 %.1f ms)", best_worst));
  return out;
}

}  // namespace steward
