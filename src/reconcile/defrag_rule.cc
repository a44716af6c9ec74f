#include "reconcile/defrag_rule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rules.h"

namespace steward {
namespace {

std::string Mib(int64_t bytes) { return absl::StrCat((bytes + (1 << 19)) >> 20, " MiB"); }

DefragRuleDecision Wait(const char* rule, std::string reason) {
  DefragRuleDecision d;
  d.kind = DefragRuleDecision::kWait;
  d.rule = rule;
  d.reason = std::move(reason);
  return d;
}

const NodeView* NodeOf(const DefragRuleView& v, const MemberView& m) {
  for (const auto& n : v.nodes) {
    if (n.peer_url == m.peer_url) return &n;
  }
  return nullptr;
}

std::string Describe(const MemberView& m) {
  return absl::StrCat(m.name, " (", Mib(m.db_size), ", ", FragmentedPercent(m), " % free)");
}

// The worst of a node's two disk figures, or a large number when unknown.
double WorstP99(const NodeView* n) {
  if (n == nullptr || n->wal_fsync_p99_ms < 0) return 1e9;
  return std::max(n->wal_fsync_p99_ms, n->backend_commit_p99_ms);
}

}  // namespace

int FragmentedPercent(const MemberView& m) {
  if (m.db_size <= 0 || m.db_size_in_use < 0 || m.db_size_in_use > m.db_size) return 0;
  return static_cast<int>((m.db_size - m.db_size_in_use) * 100 / m.db_size);
}

// DR2: why member `m` keeps the cluster from being whole ("" when it does not).
static std::string NotWhole(const DefragRuleView& v, const MemberView& m) {
  if (!m.started) return "has not started";
  if (!m.healthy) return "is unhealthy";
  if (m.is_learner) return "is a learner";
  if (!m.diverged.empty()) return "holds data that differs";
  if (m.raft_index + kDefragMaxLag < v.leader_raft_index) {
    return absl::StrCat("is ", v.leader_raft_index - m.raft_index, " entries behind");
  }
  return "";
}

// DR7: the first of `due` (in DR6's order) whose data dir has room for the copy. A member
// without it is passed over; with none left, nullptr and `no_room` names the first shortfall.
static const MemberView* FirstWithRoom(const DefragRuleView& v,
                                       const std::vector<const MemberView*>& due,
                                       const std::string& what, DefragRuleDecision* no_room) {
  for (const MemberView* m : due) {
    if (RuleOff("DR7")) return m;
    const NodeView* node = NodeOf(v, *m);
    if (node == nullptr || node->data_free_bytes < 0) {
      if (no_room->rule.empty()) {
        *no_room = Wait("DR7", absl::StrCat(what, " waits: ", m->name,
                                            "'s agent reports no free space under its data dir"));
      }
      continue;
    }
    const int64_t need = m->db_size_in_use + kDefragHeadroom;
    if (node->data_free_bytes < need) {
      if (no_room->rule.empty()) {
        *no_room =
            Wait("DR7", absl::StrCat(what, " waits: ", m->name, "'s data dir has ",
                                     Mib(node->data_free_bytes), " free, a defrag needs ",
                                     Mib(need), " (the data in use plus ", Mib(kDefragHeadroom),
                                     "): short by ", need - node->data_free_bytes, " bytes"));
        no_room->shortfall = need - node->data_free_bytes;
        no_room->member = m->id;
        no_room->name = m->name;
      }
      continue;
    }
    return m;
  }
  return nullptr;
}

// DR6: the healthy voter with the fastest disk to take leadership before `target`, the etcd
// leader, is defragmented; nullptr when there is none.
static const MemberView* LeaderFor(const DefragRuleView& v, const MemberView& target) {
  const MemberView* to = nullptr;
  for (const auto& m : v.members) {
    if (m.id == target.id || m.is_learner || !m.healthy) continue;
    if (to == nullptr || WorstP99(NodeOf(v, m)) < WorstP99(NodeOf(v, *to))) to = &m;
  }
  return to;
}

DefragRuleDecision DecideDefrag(const DefragRuleView& v) {
  DefragRuleDecision d;
  d.rule = "DR1";
  if (v.above_percent <= 0) return d;
  std::vector<const MemberView*> due;
  for (const auto& m : v.members) {
    if (m.db_size >= v.min_size && FragmentedPercent(m) >= v.above_percent) due.push_back(&m);
  }
  if (due.empty()) return d;
  const std::string what = absl::StrCat(
      "defragmentation due (",
      due.size() == 1 ? Describe(*due.front()) : absl::StrCat(due.size(), " members"), ")");
  for (const auto& m : RuleOff("DR2") ? std::vector<MemberView>{} : v.members) {
    if (std::string why = NotWhole(v, m); !why.empty()) {
      return Wait("DR2", absl::StrCat(what, " waits: member ", m.name.empty() ? "?" : m.name, " ",
                                      why, " (a defrag blocks its member)"));
    }
  }
  if (!v.busy.empty()) return Wait("DR3", absl::StrCat(what, " waits: ", v.busy));
  if (!v.outside_window.empty()) {
    return Wait("DR4", absl::StrCat(what, " waits: ", v.outside_window));
  }
  if (v.since_last && *v.since_last < v.pause) {
    return Wait("DR5", absl::StrCat(what, " waits ", (v.pause - *v.since_last).count() / 1000 + 1,
                                    "s: the pause between members"));
  }
  // DR6: followers first, the most fragmented first; the etcd leader last.
  std::stable_sort(due.begin(), due.end(), [](const MemberView* a, const MemberView* b) {
    if (a->is_etcd_leader != b->is_etcd_leader) return !a->is_etcd_leader;
    return FragmentedPercent(*a) > FragmentedPercent(*b);
  });
  DefragRuleDecision no_room;
  const MemberView* chosen = FirstWithRoom(v, due, what, &no_room);
  if (chosen == nullptr) return no_room;
  const MemberView& target = *chosen;
  int voters = 0;
  for (const auto& m : v.members) voters += m.is_learner ? 0 : 1;
  d.rule = "DR6";
  d.member = target.id;
  d.name = target.name;
  if (const MemberView* to =
          target.is_etcd_leader && voters > 1 && !RuleOff("DR6") ? LeaderFor(v, target) : nullptr;
      to != nullptr) {
    d.kind = DefragRuleDecision::kMoveLeader;
    d.move_to = to->id;
    d.move_to_name = to->name;
    d.reason =
        absl::StrCat(what, ": the etcd leader ", target.name, " is next; moving leadership to ",
                     to->name, " first (a defragmenting leader stalls every write)");
    return d;
  }
  d.kind = DefragRuleDecision::kDefrag;
  d.reason = absl::StrCat("defragmenting ", Describe(target),
                          voters == 1 ? ": the only member; it serves nothing meanwhile" : "");
  return d;
}

}  // namespace steward
