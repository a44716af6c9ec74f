#include "ctl/retire.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reconcile/plan.h"

namespace steward {

namespace {

bool Managed(const MemberRow& r, const std::map<std::string, std::string>& managed) {
  for (const auto& u : r.member.peer_urls) {
    auto it = managed.find(u);
    if (it != managed.end() && (r.member.name.empty() || r.member.name == it->second)) return true;
  }
  return false;
}

std::string Label(const MemberRow& r) {
  return absl::StrFormat("%s (%x)", r.member.name.empty() ? "(unnamed)" : r.member.name,
                         r.member.id);
}

}  // namespace

RetireStep NextRetirement(const ClusterView& view,
                          const std::map<std::string, std::string>& managed, int size) {
  RetireStep step;
  if (!view.reachable) {
    step.kind = RetireStep::kRefuse;
    step.reason = absl::StrCat("the cluster does not answer: ", view.error);
    return step;
  }
  // T4
  for (const auto& r : view.members) {
    if (!r.status) continue;
    if ((view.list_cluster_id != 0 && r.status->cluster_id != view.list_cluster_id) ||
        r.status->member_id != r.member.id) {
      step.kind = RetireStep::kRefuse;
      step.reason = absl::StrFormat(
          "member %s answers as member %x of cluster %x, but the member list is cluster %x's: "
          "the view mixes two clusters",
          Label(r), r.status->member_id, r.status->cluster_id, view.list_cluster_id);
      return step;
    }
  }
  int voters = 0, healthy_voters = 0, managed_voters = 0, managed_healthy = 0;
  const MemberRow* pick = nullptr;
  int best = -1;
  for (const auto& r : view.members) {
    const bool voter = !r.member.is_learner;
    if (voter) {
      ++voters;
      if (r.healthy) ++healthy_voters;
    }
    if (Managed(r, managed)) {
      if (voter) ++managed_voters;
      if (voter && r.healthy) ++managed_healthy;
      continue;
    }
    // T3: learners, then the unhealthy, then the healthy; the etcd leader last.
    int score = !voter ? 3 : !r.healthy ? 2 : r.member.id == view.leader_id ? 0 : 1;
    if (score > best) {
      best = score;
      pick = &r;
    }
  }
  if (pick == nullptr) {
    step.kind = RetireStep::kDone;
    step.reason = "no member is left that no agent manages";
    return step;
  }
  step.kind = RetireStep::kRefuse;
  // T1
  if (view.leader_id == 0) {
    step.reason = "the cluster has no leader";
    return step;
  }
  if (managed_healthy < size) {
    step.reason = absl::StrCat("only ", managed_healthy, " of ", size,
                               " managed voting members "
                               "are healthy: wait for the agents to grow the cluster (stewardctl "
                               "status)");
    return step;
  }
  // T2
  const bool voter = !pick->member.is_learner;
  const int after = voters - (voter ? 1 : 0);
  const int healthy_after = healthy_voters - (voter && pick->healthy ? 1 : 0);
  if (healthy_after < Quorum(after)) {
    step.reason =
        absl::StrCat("removing ", Label(*pick), " would leave ", healthy_after, " healthy of ",
                     after, " voting members, below quorum (", Quorum(after), ")");
    return step;
  }
  if (managed_healthy < Quorum(managed_voters)) {
    step.reason = absl::StrCat("the ", managed_healthy, " healthy of ", managed_voters,
                               " managed voting members would not hold a quorum once the "
                               "unmanaged ones are gone");
    return step;
  }
  step.kind = RetireStep::kRemove;
  step.member_id = pick->member.id;
  step.name = Label(*pick);
  step.reason = absl::StrCat(!voter           ? "an unmanaged learner"
                             : !pick->healthy ? "an unhealthy unmanaged voter"
                                              : "an unmanaged voter",
                             pick->member.id == view.leader_id ? " (the etcd leader, last)" : "",
                             "; ", healthy_after, " healthy of ", after,
                             " voting members remain (quorum ", Quorum(after), ")");
  return step;
}

}  // namespace steward
