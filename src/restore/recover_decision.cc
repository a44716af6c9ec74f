#include "restore/recover_decision.h"

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "etcd/api.h"

namespace steward {

namespace {

RecoverDecision Refuse(RecoverDecision d, const char* rule, std::string why) {
  d.rule = rule;
  d.refusal = std::move(why);
  d.chosen.reset();
  return d;
}

}  // namespace

namespace {

// Each step below returns a refusal, or fills in its part of `d` and returns nothing.

// Q1-Q5: no quorum answers, provably, and the members that answer are of one cluster.
std::optional<RecoverDecision> RefuseWhileAQuorumMayAnswer(const RecoverView& v,
                                                           RecoverDecision& d) {
  if (v.linearizable_ok) {
    return Refuse(d, "Q1",
                  absl::StrCat("a quorum of cluster ", v.cluster,
                               " answers (a linearizable member list succeeded). The "
                               "steward leader replaces lost members by itself; see "
                               "stewardctl status."));
  }
  if (!v.linearizable_unavailable) {
    return Refuse(d, "Q2",
                  absl::StrCat("cannot tell whether a quorum answers: ", v.linearizable_error));
  }
  const RecoverView::Node* first = nullptr;
  for (const auto& n : v.nodes) {
    if (!n.etcd_answered) continue;
    if (n.leader != 0) {
      return Refuse(d, "Q3",
                    absl::StrCat("member ", n.name, " sees leader ", HexId(n.leader),
                                 ", so a quorum exists"));
    }
    if (first != nullptr && first->cluster_id != n.cluster_id) {
      return Refuse(d, "Q4",
                    absl::StrCat("the members that answer belong to different clusters (",
                                 first->name, ": ", HexId(first->cluster_id), ", ", n.name, ": ",
                                 HexId(n.cluster_id), "); set the stale one aside first"));
    }
    if (first == nullptr) first = &n;
  }
  if (first == nullptr) {
    return Refuse(d, "Q5",
                  "no member answers, so none can be recovered from. Restore a backup "
                  "instead: stewardctl list-backups, then stewardctl restore-backup NAME");
  }
  if (!v.list_ok) {
    return Refuse(d, "Q5", absl::StrCat("no member answers a member list: ", v.list_error));
  }
  return std::nullopt;
}

// Q6: the voting members that answer are fewer than a majority.
std::optional<RecoverDecision> FindTheSurvivors(const RecoverView& v, RecoverDecision& d) {
  const std::set<uint64_t> voters(v.voter_ids.begin(), v.voter_ids.end());
  d.voters = voters.size();
  for (size_t i = 0; i < v.nodes.size(); ++i) {
    const auto& n = v.nodes[i];
    if (n.etcd_answered && !n.is_learner && voters.count(n.member_id)) d.survivors.push_back(i);
  }
  if (d.survivors.empty()) {
    return Refuse(d, "Q6",
                  "no voting member answers, so none can be recovered from. Restore a "
                  "backup instead: stewardctl list-backups, then stewardctl "
                  "restore-backup NAME");
  }
  if (d.survivors.size() >= d.voters / 2 + 1) {
    return Refuse(d, "Q6",
                  absl::StrCat(d.survivors.size(), " of ", d.voters,
                               " voting members answer, a majority: they elect a "
                               "leader by themselves"));
  }
  return std::nullopt;
}

// Q7: every member that does not answer is gone, not merely out of sight.
std::optional<RecoverDecision> RefuseWhileAMemberMayLive(const RecoverView& v, RecoverDecision& d) {
  for (const auto& n : v.nodes) {
    if (n.etcd_answered) continue;
    if (n.agent_answered && n.agent_has_data) {
      return Refuse(
          d, "Q7",
          absl::StrCat(
              "node ", n.name, "'s agent answers and holds member data (its etcd ",
              n.agent_etcd_running ? "runs" : "does not run",
              "): that member is not gone, it may only be cut off from this host or from the "
              "others. Bring it back; if its disk is really lost, stop its agent and move the data "
              "dir away first"));
    }
    d.gone.push_back(n.agent_answered ? n.name + " (its agent answers, with no data)"
                                      : n.name + " (neither its etcd nor its agent answers)");
  }
  return std::nullopt;
}

// The survivor with the most of the log, or the one --from names (Q8).
std::optional<RecoverDecision> ChooseTheSurvivor(const RecoverView& v, RecoverDecision& d) {
  std::sort(d.survivors.begin(), d.survivors.end(), [&](size_t x, size_t y) {
    if (v.nodes[x].raft_index != v.nodes[y].raft_index) {
      return v.nodes[x].raft_index > v.nodes[y].raft_index;
    }
    return v.nodes[x].name < v.nodes[y].name;
  });
  d.chosen = d.survivors.front();
  if (!v.from.empty()) {
    d.chosen.reset();
    for (size_t i : d.survivors) {
      if (v.nodes[i].name == v.from) d.chosen = i;
    }
    if (!d.chosen) {
      return Refuse(
          d, "Q8",
          absl::StrCat("--from ", v.from, ": that node's etcd does not answer as a voting member"));
    }
  }
  return std::nullopt;
}

// Q9: no backup in the store got further than the chosen survivor (unless --force).
std::optional<RecoverDecision> RefuseIfABackupGotFurther(const RecoverView& v, RecoverDecision& d) {
  if (!v.backups_ok) {
    return Refuse(d, "Q9", absl::StrCat("cannot list the backups: ", v.backups_error));
  }
  const RecoverView::Node& chosen = v.nodes[*d.chosen];
  if (v.newest_backup && v.newest_backup_revision > chosen.revision) {
    d.newer_backup = absl::StrCat(*v.newest_backup, " (revision ", v.newest_backup_revision, ")");
    if (!v.force) {
      return Refuse(
          d, "Q9",
          absl::StrCat(
              "the store holds backup ", d.newer_backup, " of this cluster, newer than ",
              chosen.name, "'s revision ", chosen.revision,
              ": members that do not answer got further, or still run out of sight. Restore that "
              "backup instead (stewardctl restore-backup NAME), or pass --force if you know they "
              "are gone and the survivor is what you want"));
    }
  }
  return std::nullopt;
}

}  // namespace

RecoverDecision DecideRecover(const RecoverView& v) {
  RecoverDecision d;
  for (auto step : {RefuseWhileAQuorumMayAnswer, FindTheSurvivors, RefuseWhileAMemberMayLive,
                    ChooseTheSurvivor, RefuseIfABackupGotFurther}) {
    if (std::optional<RecoverDecision> refused = step(v, d)) return *refused;
  }
  return d;
}

}  // namespace steward
