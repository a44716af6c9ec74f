// The invariants: ground truth the world checks after every step, and where the seams report
// that something irreversible is about to happen. A violation stops the run (World::Violation).
//   - No acknowledged write is lost, unless a fault took every copy or a justified restore gave
//     it up (CheckWrites, after every step).
//   - No member of a live cluster is wiped while it is in the member list (BeforeDataGoes,
//     as SimDisk sets data aside or deletes it).
//   - At most one cluster can reach quorum (CheckOneQuorum, after every step).
//   - No bootstrap of an empty cluster once the cluster existed (EvidenceOfExistence, checked
//     by World::Bootstrap).
//   - A restored cluster serves no client while a lease from its backup lives
//     (CheckNoRestoredLease) or while its replay still owes a write (CheckReplayed), checked as
//     a fence is dropped.
//   - Liveness: once every fault is lifted the cluster is healthy at its size within the bound,
//     or waiting for an operator is right (Healthy, CheckLiveness).
// Checked where the action is taken: a restore's ground truth (justified, the newest backup,
// no write an intact chain holds given up, the revision raised: World::RestoreCluster in
// backup_model.cc); no start and no restore while the cluster is destroyed (SimRunner::Run,
// RestoreCluster); a revision bump only with a tool that can make it (SimDisk::RestoreStaged).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/layout.h"
#include "sim/world.h"

namespace steward::sim {

void World::BeforeDataGoes(int i, const std::string& why) {
  Node& n = *nodes_[i];
  Trace(i, absl::StrCat(why, " (member ", HexId(n.disk.member), " of cluster ",
                        HexId(n.disk.cluster), ")"));
  if (n.disk.state != DataDirState::kMember) return;
  ++result_.wipes;
  // Ground truth: a member of a live cluster (one whose voters still hold a majority of their
  // data) is never wiped while it is in the member list. A minority survivor of a cluster that
  // a justified restore replaced is set aside like its restore order would have.
  auto able = ClustersAbleToReachQuorum();
  if (Cluster* c = ClusterOf(i); c != nullptr && FindMember(*c, n.disk.member) != nullptr &&
                                 std::count(able.begin(), able.end(), c->id) > 0) {
    Violation(absl::StrCat("node ", n.spec.name, " wiped member ", HexId(n.disk.member),
                           " while it is still in cluster ", HexId(c->id), "'s member list"));
  }
  dirty_ = true;
}

bool World::EvidenceOfExistence(int except) const {
  for (const auto& n : nodes_) {
    if (n->index == except) continue;
    if (n->disk.joined) return true;
    if (n->disk.state == DataDirState::kMember) {
      auto it = clusters_.find(n->disk.cluster);
      if (it != clusters_.end() && it->second.had_leader) return true;
    }
  }
  for (const auto& [key, v] : store_.objects) {
    if (key == CreatedMarkerKey("sim") || key.rfind(BackupsPrefix("sim"), 0) == 0) return true;
  }
  return false;
}

std::vector<uint64_t> World::ClustersAbleToReachQuorum(bool unserved_too) const {
  std::vector<uint64_t> out;
  for (const auto& [id, c] : clusters_) {
    if (!c.served && !unserved_too) continue;
    int voters = 0, held = 0;
    for (const auto& m : c.members) {
      if (m.learner) continue;
      ++voters;
      if (NodeOfMember(c, m.id) >= 0) ++held;
    }
    if (voters > 0 && held * 2 > voters && c.had_leader) out.push_back(id);
  }
  return out;
}

void World::CheckWrites(bool after_fault) {
  std::vector<char> held(static_cast<size_t>(next_write_) + 1, 0);
  for (const auto& [id, c] : clusters_) {
    int64_t rev = -1;
    for (const auto& n : nodes_) {
      if (n->disk.state == DataDirState::kMember && n->disk.cluster == id)
        rev = std::max(rev, n->disk.rev);
    }
    for (const auto& [r, w] : c.writes) {
      if (r <= rev) held[static_cast<size_t>(w)] = 1;
    }
  }
  // A restore's replay still owes its cluster these: the store holds them meanwhile (also
  // when that cluster is lost again before the replay: the next restore replays them, or
  // counts them as given up).
  for (const auto& [cid, owed] : pending_replay_) {
    for (int w : owed) held[static_cast<size_t>(w)] = 1;
  }
  for (int w = 1; w <= next_write_; ++w) {
    if (held[static_cast<size_t>(w)] || lost_.count(w)) continue;
    lost_.insert(w);
    if (after_fault) {
      ++result_.writes_lost_to_faults;
    } else {
      Violation(absl::StrCat("acknowledged write ", w,
                             " is lost (no disk holds it) and no "
                             "justified restore gave it up"));
      return;
    }
  }
}

void World::Replayed(uint64_t cluster, int w) {
  auto it = pending_replay_.find(cluster);
  if (it != pending_replay_.end() && it->second.erase(w) > 0) ++result_.writes_replayed;
}

void World::CheckReplayed(int i) {
  Cluster* c = ClusterOf(i);
  if (c == nullptr) return;
  c->served = true;
  auto it = pending_replay_.find(c->id);
  if (it == pending_replay_.end() || it->second.empty()) return;
  Violation(absl::StrCat("node ", nodes_[i]->spec.name, " serves clients of restored cluster ",
                         HexId(c->id), " while its replay still owes ", it->second.size(),
                         " acknowledged write(s), e.g. ", *it->second.begin()));
}

void World::CheckNoRestoredLease(int i) {
  Cluster* c = ClusterOf(i);
  if (c == nullptr) return;
  for (int64_t lease : restored_leases_[c->id]) {
    if (c->leases.count(lease)) {
      Violation(absl::StrCat("node ", nodes_[i]->spec.name, " serves clients while lease ",
                             absl::StrFormat("%x", lease),
                             " from the backup is still alive (a lost lock would live on)"));
      return;
    }
  }
}

void World::CheckRepair(const std::string& report) {
  if (!o_.diverge) return;
  const std::string said = "removing member ";
  const size_t at = report.find(said);
  if (at == std::string::npos || report.find("its data differs") == std::string::npos) return;
  const size_t from = at + said.size();
  const std::string name = report.substr(from, report.find(' ', from) - from);
  for (const auto& n : nodes_) {
    if (n->spec.name != name) continue;
    const Disk& d = n->disk;
    if (d.diverged == 0 && !(d.removed && d.removed->diverged != 0)) {
      Violation(absl::StrCat("member ", name, " was repaired for its data, which agreed"));
    }
  }
}

bool World::Healthy(std::string* why) {
  Refresh();
  for (const auto& [id, c] : clusters_) {
    if (c.leader == 0) continue;
    int voters = 0, up = 0, learners = 0;
    for (const auto& m : c.members) {
      if (m.learner) {
        ++learners;
        continue;
      }
      ++voters;
      int n = NodeOfMember(c, m.id);
      // Options::diverge: a voter whose data differs is not healthy until it is repaired.
      if (n >= 0 && InQuorum(n) && !nodes_[n]->serving_fence && nodes_[n]->disk.diverged == 0) ++up;
    }
    if (voters == 3 && up == 3 && learners == 0) {
      *why = absl::StrCat("cluster ", HexId(id), " healthy with 3 voters");
      return true;
    }
    *why = absl::StrCat("cluster ", HexId(id), ": ", up, "/", voters, " voters up, ", learners,
                        " learners");
  }
  if (why->empty()) *why = "no cluster has a leader";
  return false;
}

void World::CheckOneQuorum() {
  if (clusters_.size() > 1) {
    auto able = ClustersAbleToReachQuorum();
    if (able.size() > 1) {
      Violation(
          absl::StrCat("two clusters can reach quorum: ", HexId(able[0]), " and ", HexId(able[1])));
    }
  }
}

void World::CheckLiveness(const std::string& why) {
  if (result_.ok && !result_.live_at_end && !destroyed_) {
    // The agents must heal by themselves when a cluster still holds a majority of its
    // voters' data, or when nothing survives and a backup does (restore). Otherwise waiting
    // for an operator is right: a minority that survives with data is never overwritten.
    bool survivors = false;
    for (const auto& n : nodes_) survivors |= n->disk.state == DataDirState::kMember;
    // (A restored cluster that never served counts: its fenced members wait for the agents.)
    // Options::diverge: when the voters whose data is right are no majority, no hash check can
    // tell which is right (DV5): waiting for an operator is right.
    bool no_right_majority = false;
    for (const auto& [id, c] : clusters_) {
      int voters = 0, right = 0;
      for (const auto& m : c.members) {
        if (m.learner) continue;
        ++voters;
        const int k = NodeOfMember(c, m.id);
        if (k >= 0 && nodes_[k]->disk.diverged == 0) ++right;
      }
      no_right_majority |= o_.diverge && voters > 0 && right < voters / 2 + 1;
    }
    if (no_right_majority) {
      result_.end_state +=
          " (no majority of the voters holds the right data: waiting for an "
          "operator is right)";
    } else if (!ClustersAbleToReachQuorum(/*unserved_too=*/true).empty() ||
               (!survivors && !backups_.empty())) {
      Violation(absl::StrCat("not healthy ", o_.liveness_bound / 1000,
                             "s after the faults stopped: ", why));
    } else {
      result_.end_state +=
          survivors ? " (a minority survives with data: waiting for an operator is right)"
                    : " (total loss without a backup: waiting for an operator is right)";
    }
  }
}

}  // namespace steward::sim
