#include "reconcile/plan.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rules.h"
#include "reconcile/plan_text.h"

namespace steward {

const char* StepKindName(StepKind k) {
  switch (k) {
    case StepKind::kNone:
      return "none";
    case StepKind::kWait:
      return "wait";
    case StepKind::kRemoveMember:
      return "remove-member";
    case StepKind::kAddLearner:
      return "add-learner";
    case StepKind::kJoin:
      return "join";
    case StepKind::kPromote:
      return "promote";
    case StepKind::kWipe:
      return "wipe";
    case StepKind::kSwitchVersion:
      return "switch-version";
    case StepKind::kRestart:
      return "restart";
    case StepKind::kMoveLeader:
      return "move-leader";
  }
  return "?";
}

std::string MemberLabel(const MemberView& m) {
  return absl::StrCat(m.name.empty() ? "(unnamed)" : m.name, " (", plan_text::Hex(m.id), ")");
}

bool RestartingInPlace(const NodeView& n) {
  if (RuleOff("HG1")) return false;
  return n.hang.rfind("H5:", 0) == 0 || n.hang.rfind("H8:", 0) == 0;
}

Step MakeStep(StepKind kind, std::string reason) {
  Step s;
  s.kind = kind;
  s.reason = std::move(reason);
  return s;
}

namespace {

using plan_text::Hex;
using plan_text::Secs;

class Planner {
 public:
  explicit Planner(const ClusterObservation& o) : o_(o), cluster_version_(ClusterVersion(o)) {
    for (const auto& m : o_.members) {
      if (m.is_learner) continue;
      ++voters_;
      if (m.healthy) ++healthy_voters_;
      if (!Unmanaged(m)) ++managed_voters_;
    }
    // RM2: the nodes removed for good cannot hold members; the size is clamped to the rest.
    desired_ = o_.desired_size;
    int remaining = 0;
    for (const auto& n : o_.nodes) {
      if (n.removed) {
        clamped_ = true;
      } else {
        ++remaining;
      }
    }
    if (clamped_ && remaining < desired_) {
      desired_ = remaining;
    } else {
      clamped_ = false;
    }
  }

  Step Plan() {
    if (!o_.member_list_ok) return MakeStep(StepKind::kWait, "the member list cannot be read");
    if (healthy_voters_ < Quorum(voters_)) {
      return MakeStep(StepKind::kWait,
                      absl::StrCat("quorum lost: ", healthy_voters_, " of ", voters_,
                                   " voting members healthy; members with data are restarted by "
                                   "their agents, nothing is wiped"));
    }
    Step s = PlanSteps();
    if (o_.cluster_paused.empty()) return s;
    // P4: only what is safe while the operator holds the cluster.
    switch (s.kind) {
      case StepKind::kNone:
        s.reason = absl::StrCat(s.reason, "; the cluster is paused ", o_.cluster_paused);
        return s;
      case StepKind::kWait:
      case StepKind::kPromote:
        return s;
      default:
        break;
    }
    // The step found first may hide a promotion (a wipe comes before the learner's turn).
    if (std::optional<Step> l = DriveLearner(); l && l->kind == StepKind::kPromote) return *l;
    return MakeStep(StepKind::kWait, absl::StrCat("the cluster is paused ", o_.cluster_paused,
                                                  "; held: ", s.reason));
  }

 private:
  Step PlanSteps() {
    // RS0 (restart_roll.h): a restart roll only once healthy at size. Off (mutation testing
    // only), its steps come before anything else, degraded or not.
    if (RuleOff("RS0")) {
      if (Step r = PlanRestart(o_); r.kind == StepKind::kRestart) return r;
    }
    if (auto s = SetAsideForeignData()) return *s;
    if (auto s = AdoptNameClash()) return *s;
    // A stale entry whose removal would lose quorum must not stop the steps that can make its
    // removal safe (growing the cluster): those still run; if they have nothing to do, wait.
    std::optional<Step> stale = RemoveStaleEntries();
    if (stale && stale->kind != StepKind::kWait) return *stale;
    // A member whose data differs goes first, a learner too: a learner on its way may be a
    // copy of it, and is never promoted meanwhile (DV6).
    std::optional<Step> next = RepairDiverged();
    if (!next) next = DriveLearner();
    if (!next) next = ReplaceDeadMembers();
    if (!next) next = Resize();
    if (next && (next->kind != StepKind::kWait || !stale)) return *next;
    if (stale) return *stale;
    for (const auto& m : o_.members) {
      if (!m.is_learner && !m.healthy && m.started) {
        if (Unmanaged(m)) {
          return MakeStep(
              StepKind::kWait,
              absl::StrCat("member ", MemberLabel(m), " is unhealthy (for ", Secs(m.unhealthy_for),
                           ") and no agent manages it "
                           "(cluster.adopt): its operator must bring it back, or "
                           "retire it with stewardctl retire-unmanaged"));
        }
        if (const NodeView* n = NodeForMember(m); n != nullptr && !n->paused.empty()) {  // P1
          return MakeStep(StepKind::kWait,
                          absl::StrCat("member ", MemberLabel(m), " is unhealthy (for ",
                                       Secs(m.unhealthy_for), "); not replaced: ", PausedNote(*n)));
        }
        if (const NodeView* n = NodeForMember(m); n != nullptr && RestartingInPlace(*n)) {
          return MakeStep(
              StepKind::kWait,
              absl::StrCat("member ", MemberLabel(m), " is unhealthy (for ", Secs(m.unhealthy_for),
                           "); not replaced while its agent "
                           "restarts it in place: ",
                           n->hang));  // HG1
        }
        if (auto back = PlanVersionRecovery(o_, m)) return *back;
        if (auto stalled = StalledRoll(m)) return *stalled;  // U8
        // Nothing to do yet, but not "all healthy": say what is awaited, and what the
        // member's own agent says of it (a hung etcd: node/hang_decision.h).
        const NodeView* n = NodeForMember(m);
        const std::string agent_says =
            n != nullptr && !n->hang.empty() ? absl::StrCat("; its agent says: ", n->hang) : "";
        return MakeStep(StepKind::kWait,
                        m.unhealthy_for < o_.replace_after
                            ? absl::StrCat("member ", MemberLabel(m), " is unhealthy (for ",
                                           Secs(m.unhealthy_for), agent_says,
                                           "); it is replaced after ", Secs(o_.replace_after))
                            : absl::StrCat("member ", MemberLabel(m), " is unhealthy (for ",
                                           Secs(m.unhealthy_for), agent_says,
                                           "); no spare node is ready to "
                                           "replace it, and its node has not come back empty",
                                           SpareNote()));
      }
    }
    Step upgrade = PlanUpgrade(o_);
    if (upgrade.kind == StepKind::kSwitchVersion) {  // P3
      const NodeView* n = NodeByName(upgrade.node);
      if (n != nullptr && !n->paused.empty()) {
        return MakeStep(StepKind::kWait, absl::StrCat("the rolling upgrade waits: ", PausedNote(*n),
                                                      " (next: ", upgrade.reason, ")"));
      }
    }
    if (upgrade.kind != StepKind::kNone) return upgrade;
    if (Step restart = PlanRestart(o_); restart.kind != StepKind::kNone) return restart;
    if (o_.adopting && managed_voters_ < voters_) {
      return MakeStep(StepKind::kNone,
                      absl::StrCat(managed_voters_, " managed voting members of ", desired_,
                                   " wanted, and ", voters_ - managed_voters_,
                                   " unmanaged; all healthy (stewardctl retire-unmanaged removes "
                                   "the unmanaged ones)"));
    }
    std::string note;
    for (const auto& n : o_.nodes) {
      if (!n.paused.empty()) absl::StrAppend(&note, "; ", PausedNote(n));
    }
    if (clamped_) {
      absl::StrAppend(&note, "; desired size ", desired_, " (cluster size ", o_.desired_size,
                      ", clamped to the nodes not removed)");
    }
    return MakeStep(StepKind::kNone,
                    absl::StrCat("cluster at size ", voters_, ", all members healthy", note));
  }

  // "node n2 is paused until 2026-11-26 18:00:00Z by alice@host: kernel upgrade"
  static std::string PausedNote(const NodeView& n) {
    return absl::StrCat("node ", n.name, " is paused ", n.paused);
  }
  const NodeView* NodeByName(const std::string& name) const {
    for (const auto& n : o_.nodes) {
      if (n.name == name) return &n;
    }
    return nullptr;
  }
  // AD1: while adopting, a member on no configured node is not ours.
  bool Unmanaged(const MemberView& m) const { return o_.adopting && NodeForMember(m) == nullptr; }

  // AD3
  std::optional<Step> AdoptNameClash() const {
    if (!o_.adopting) return std::nullopt;
    for (const auto& m : o_.members) {
      // An adopted member on a node's host and peer port: it is not the node's (ours carry
      // the node's name), and the rules for a node's own entry must not touch it.
      if (const NodeView* n = NodeForMember(m);
          n != nullptr && !m.name.empty() && m.name != n->name) {
        return MakeStep(StepKind::kWait,
                        absl::StrCat("member ", MemberLabel(m), " has node ", n->name,
                                     "'s peer URL ", m.peer_url,
                                     " but another name: an adopted member on the same "
                                     "host and peer port; give the nodes other ports "
                                     "(cluster.ports)"));
      }
    }
    for (const auto& m : o_.members) {
      if (!Unmanaged(m) || m.name.empty()) continue;
      for (const auto& n : o_.nodes) {
        if (n.name != m.name) continue;
        return MakeStep(StepKind::kWait,
                        absl::StrCat("unmanaged member ", MemberLabel(m), " has the name of node ",
                                     n.name, " (peer URL ", m.peer_url, ", not ", n.peer_url,
                                     "): a node joining would list that name twice; rename the "
                                     "node in cluster.nodes"));
      }
    }
    return std::nullopt;
  }

  const MemberView* MemberById(uint64_t id) const {
    for (const auto& m : o_.members) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  const MemberView* MemberForNode(const NodeView& n) const {
    for (const auto& m : o_.members) {
      if (m.peer_url == n.peer_url) return &m;
    }
    return nullptr;
  }
  const NodeView* NodeForMember(const MemberView& m) const {
    for (const auto& n : o_.nodes) {
      if (n.peer_url == m.peer_url) return &n;
    }
    return nullptr;
  }
  // Would removing `m` leave a quorum of healthy voters among the voters that remain?
  bool CanRemove(const MemberView& m) const {
    if (m.is_learner) return true;
    int v = voters_ - 1;
    int h = healthy_voters_ - (m.healthy ? 1 : 0);
    return v >= 1 && h >= Quorum(v);
  }
  Step Remove(const MemberView& m, const std::string& why) const {
    Step s = MakeStep(StepKind::kRemoveMember,
                      absl::StrCat("removing member ", MemberLabel(m), ": ", why));
    s.member_id = m.id;
    return s;
  }
  Step RemoveOrWait(const MemberView& m, const std::string& why) const {
    if (CanRemove(m)) return Remove(m, why);
    return MakeStep(StepKind::kWait, absl::StrCat("member ", MemberLabel(m), " should go (", why,
                                                  ") but removing it would lose quorum"));
  }

  // DV4-DV5.
  std::optional<Step> RepairDiverged() const {
    if (!o_.hash_split.empty() && !RuleOff("DV5")) {
      return MakeStep(StepKind::kWait, absl::StrCat("hash check ", o_.hash_split));
    }
    for (const auto& m : o_.members) {
      if (m.diverged.empty()) continue;
      const std::string what = absl::StrCat(
          "its data differs from a majority's that agrees (hash check ", m.diverged, ")");
      const NodeView* n = NodeForMember(m);
      if (Unmanaged(m)) {  // AD1
        return MakeStep(StepKind::kWait,
                        absl::StrCat("member ", MemberLabel(m), ": ", what,
                                     "; no agent manages it (cluster.adopt): its operator must "
                                     "repair or retire it"));
      }
      if (n != nullptr && !n->paused.empty()) {  // P1
        return MakeStep(StepKind::kWait, absl::StrCat("member ", MemberLabel(m), ": ", what,
                                                      "; not repaired: ", PausedNote(*n)));
      }
      if (!o_.repair_diverged) {
        return MakeStep(StepKind::kWait,
                        absl::StrCat("member ", MemberLabel(m), ": ", what,
                                     "; not repaired (cluster.repair_diverged is off)"));
      }
      return RemoveOrWait(m, absl::StrCat(what, "; its data is set aside and it rejoins"));
    }
    return std::nullopt;
  }

  // A node holding the data of a member that is no longer in the list: set the data aside so
  // the node can join again. Only when the data's member ID is known and provably gone.
  std::optional<Step> SetAsideForeignData() const {
    for (const auto& n : o_.nodes) {
      if (!n.agent_up || !n.has_data || n.local_member_id == 0) continue;
      if (!n.paused.empty() || n.removed) continue;  // P1, RM1
      if (MemberById(n.local_member_id) != nullptr) continue;
      Step s =
          MakeStep(StepKind::kWipe,
                   absl::StrCat("wiping node ", n.name, ": its data belongs to member ",
                                Hex(n.local_member_id), ", which is no longer in the member list"));
      s.node = n.name;
      return s;
    }
    return std::nullopt;
  }

  std::optional<Step> RemoveStaleEntries() const {
    // A due removal that would lose quorum must not block another one that would not (that
    // one may be what makes the first safe): remember the wait, keep looking.
    std::optional<Step> blocked;
    auto consider = [&](const MemberView& m, const std::string& why) {
      Step s = RemoveOrWait(m, why);
      if (s.kind == StepKind::kRemoveMember) return std::optional<Step>(s);
      if (!blocked) blocked = s;
      return std::optional<Step>();
    };
    for (const auto& n : o_.nodes) {
      if (!n.agent_up) continue;
      if (!n.paused.empty()) {  // P1
        if (const MemberView* m = MemberForNode(n);
            m != nullptr && m->started && !n.has_data && !n.etcd_running && !blocked) {
          blocked = MakeStep(StepKind::kWait,
                             absl::StrCat("node ", n.name,
                                          " is back with an empty data dir; its "
                                          "member ",
                                          MemberLabel(*m), " is not replaced: ", PausedNote(n)));
        }
        continue;
      }
      // A member that carries this node's name but another peer URL.
      for (const auto& m : o_.members) {
        if (m.name == n.name && m.peer_url != n.peer_url) {
          if (auto s = consider(m, absl::StrCat("its name is node ", n.name, "'s but its peer URL ",
                                                m.peer_url, " is not (", n.peer_url, ")"))) {
            return s;
          }
        }
      }
      const MemberView* m = MemberForNode(n);
      if (m == nullptr || n.has_data || n.etcd_running) continue;
      if (m->started) {
        if (auto s =
                consider(*m, absl::StrCat("node ", n.name, " is back with an empty data dir"))) {
          return s;
        }
      } else if (!m->is_learner && m->id != n.initial_member_id) {
        if (auto s = consider(*m, absl::StrCat("entry for node ", n.name,
                                               "'s peer URL was never started and is not one we "
                                               "added (stale or conflicting ID)"))) {
          return s;
        }
      }
    }
    return blocked;
  }

  std::optional<Step> DriveLearner() const {
    const MemberView* l = nullptr;
    for (const auto& m : o_.members) {
      if (m.is_learner) {
        l = &m;
        break;
      }
    }
    if (l == nullptr) return std::nullopt;
    const NodeView* n = NodeForMember(*l);
    if (n == nullptr && o_.adopting) {  // AD2
      return MakeStep(
          StepKind::kWait,
          absl::StrCat("learner ", MemberLabel(*l),
                       " is on no configured node and no agent "
                       "manages it (cluster.adopt); etcd allows one learner at a time, "
                       "so no node is added until its operator promotes or removes it"));
    }
    if (n == nullptr) return Remove(*l, "learner for a peer URL that is not a configured node");
    if (n->removed) {  // RM1 (a learner's removal never touches quorum)
      return Remove(*l, absl::StrCat("learner on node ", n->name,
                                     ", which was removed (stewardctl remove-node)"));
    }
    if (l->started && l->healthy) {
      // etcd promotes only a learner within 10% of the leader's index; ask when we are there.
      if (o_.leader_raft_index > 0 && l->raft_index * 10 >= o_.leader_raft_index * 9) {
        if (healthy_voters_ + 1 >= Quorum(voters_ + 1)) {
          Step s = MakeStep(StepKind::kPromote,
                            absl::StrCat("promoting learner ", MemberLabel(*l), " on node ",
                                         n->name, ": caught up (raft index ", l->raft_index, " of ",
                                         o_.leader_raft_index, ")"));
          s.member_id = l->id;
          return s;
        }
      }
      return MakeStep(StepKind::kWait,
                      absl::StrCat("learner ", MemberLabel(*l), " catching up (raft index ",
                                   l->raft_index, " of ", o_.leader_raft_index, ")"));
    }
    if (!n->paused.empty()) {  // P2
      return MakeStep(StepKind::kWait,
                      absl::StrCat("learner ", MemberLabel(*l), " waits: ", PausedNote(*n)));
    }
    if (!l->started && n->agent_up && !n->etcd_running && !n->has_data) {
      if (std::string why = VersionBlock(*n, cluster_version_); !why.empty()) {  // EV2
        if (o_.learner_age >= o_.learner_timeout) {
          return Remove(*l, absl::StrCat("learner cannot start: ", why));
        }
        return MakeStep(StepKind::kWait,
                        absl::StrCat("learner ", MemberLabel(*l), " waits: ", why));
      }
      if (n->join_retry_in.count() > 0) {
        // The node backs off after etcd refused its join: no order until it would launch.
        const std::string why =
            absl::StrCat("etcd on node ", n->name, " refused its join (", n->join_error, ")");
        if (o_.learner_age >= o_.learner_timeout) return Remove(*l, why);
        return MakeStep(StepKind::kWait,
                        absl::StrCat("learner ", MemberLabel(*l), " waits: ", why,
                                     "; the node backs off before it tries again"));
      }
      Step s = MakeStep(StepKind::kJoin, absl::StrCat("ordering node ", n->name,
                                                      " to join as learner ", Hex(l->id)));
      s.node = n->name;
      s.member_id = l->id;
      for (const auto& m : o_.members) {
        std::string name = m.name;
        if (&m == l) name = n->name;
        if (name.empty()) name = absl::StrCat("m", Hex(m.id));
        s.initial_cluster.emplace_back(name, m.peer_url);
      }
      s.version = cluster_version_;
      return s;
    }
    if (o_.learner_age >= o_.learner_timeout) {
      return Remove(*l, absl::StrCat("learner has not come up within ", Secs(o_.learner_timeout)));
    }
    return MakeStep(StepKind::kWait, absl::StrCat("waiting for learner ", MemberLabel(*l),
                                                  " on node ", n->name, " to start"));
  }

  // A spare: its agent is up, it holds no data and no member entry is its.
  const NodeView* Spare(const std::string& except) const {
    for (const auto& n : o_.nodes) {
      if (n.name == except || !n.agent_up || n.has_data || n.etcd_running) continue;
      if (!n.paused.empty() || n.removed) continue;  // P2, RM1
      if (MemberForNode(n) != nullptr) continue;
      if (std::string why = VersionBlock(n, cluster_version_); !why.empty()) {  // EV2
        if (version_block_.empty()) version_block_ = why;
        continue;
      }
      return &n;
    }
    return nullptr;
  }
  // Why a spare was passed over for its etcd version (EV2), for the wait's reason.
  std::string SpareNote() const {
    return version_block_.empty() ? "" : absl::StrCat(" (", version_block_, ")");
  }

  std::optional<Step> ReplaceDeadMembers() const {
    for (const auto& m : o_.members) {
      if (m.is_learner || m.healthy || m.unhealthy_for < o_.replace_after) continue;
      if (Unmanaged(m)) continue;  // AD1
      const NodeView* n = NodeForMember(m);
      if (n != nullptr && !n->paused.empty()) continue;     // P1
      if (n != nullptr && RestartingInPlace(*n)) continue;  // HG1
      const NodeView* spare = Spare(n ? n->name : "");
      if (spare == nullptr) continue;
      // Removing a dead voter first is quorum-safe whenever the cluster has quorum, and etcd
      // refuses to add members while a voter is disconnected.
      return RemoveOrWait(m, absl::StrCat("unreachable for ", Secs(m.unhealthy_for), ", spare ",
                                          spare->name, " ready"));
    }
    return std::nullopt;
  }

  std::optional<Step> Resize() const {
    // AD1: adopting, the size counts the voters on configured nodes only.
    const int counted = o_.adopting ? managed_voters_ : voters_;
    if (counted < desired_) {
      for (const auto& m : o_.members) {
        if (!m.is_learner && !m.healthy) {
          return MakeStep(
              StepKind::kWait,
              absl::StrCat(counted, " of ", desired_, " voting members; member ", MemberLabel(m),
                           " is unhealthy and etcd refuses to add members "
                           "until every voter is connected"));
        }
      }
      const NodeView* n = Spare("");
      if (n == nullptr) {
        return MakeStep(StepKind::kWait,
                        absl::StrCat(counted, " of ", desired_,
                                     " voting members; no spare node is ready", SpareNote()));
      }
      Step s = MakeStep(StepKind::kAddLearner,
                        absl::StrCat("adding node ", n->name, " as a learner: ", counted, " of ",
                                     desired_, o_.adopting ? " managed" : "", " voting members"));
      s.node = n->name;
      return s;
    }
    if (counted > desired_) {
      // Unhealthy first; then members on unconfigured or later nodes; never the etcd leader
      // while another member can go.
      // RM2: a removed node's member before any other. P1: never a paused node's.
      const MemberView* victim = nullptr;
      const NodeView* held = nullptr;
      int best = -1;
      for (const auto& m : o_.members) {
        if (m.is_learner || Unmanaged(m)) continue;
        const NodeView* n = NodeForMember(m);
        if (n != nullptr && !n->paused.empty()) {
          held = n;
          continue;
        }
        int score = 0;
        if (n != nullptr && n->removed) score += 2000;
        if (!m.healthy) score += 1000;
        if (!m.is_etcd_leader) score += 500;
        int pos = n ? static_cast<int>(n - o_.nodes.data()) : 400;
        score += pos;
        if (score > best) {
          best = score;
          victim = &m;
        }
      }
      const std::string want = clamped_ ? absl::StrCat(desired_, " (cluster size ", o_.desired_size,
                                                       ", clamped to the nodes not removed)")
                                        : absl::StrCat(desired_);
      if (victim != nullptr) {
        const NodeView* n = NodeForMember(*victim);
        return RemoveOrWait(*victim,
                            absl::StrCat(counted, " voting members, want ", want,
                                         n != nullptr && n->removed
                                             ? absl::StrCat("; node ", n->name, " was removed")
                                             : ""));
      }
      if (held != nullptr) {
        return MakeStep(StepKind::kWait, absl::StrCat(counted, " voting members, want ", want,
                                                      "; not shrinking: ", PausedNote(*held)));
      }
    }
    return std::nullopt;
  }

  // U8: member `down` is down on the version it was switched to, and the healthy members run
  // another: the roll stopped on it.
  std::optional<Step> StalledRoll(const MemberView& down) const {
    const NodeView* n = NodeForMember(down);
    if (n == nullptr || n->switched_version.empty()) return std::nullopt;
    // A member restarting on its new version is down for a moment: stopped means etcd exited
    // on its own there, or it has stayed down for a while.
    if (n->etcd_exit.empty() && down.unhealthy_for < std::chrono::seconds(30)) return std::nullopt;
    std::string others;
    for (const auto& m : o_.members) {
      if (!m.healthy || m.version.empty() || m.version == n->switched_version) continue;
      if (others.empty() || MinorBelow(m.version, others)) others = m.version;
    }
    if (others.empty()) return std::nullopt;
    return MakeStep(
        StepKind::kWait,
        absl::StrCat("rolling upgrade to etcd ",
                     o_.desired_version.empty() ? n->switched_version : o_.desired_version,
                     " stopped: ", n->name, " does not come up on ", n->switched_version, " (",
                     Secs(down.unhealthy_for), "; ",
                     n->etcd_exit.empty() ? "etcd has not said why"
                                          : absl::StrCat("etcd exits: ", n->etcd_exit),
                     "); `stewardctl configure-cluster --etcd-version ", others,
                     "` takes it back"));
  }

  const ClusterObservation& o_;
  const std::string cluster_version_;
  mutable std::string version_block_;
  int voters_ = 0;
  int healthy_voters_ = 0;
  int managed_voters_ = 0;
  int desired_ = 0;       // the desired size, clamped to the nodes not removed (RM2)
  bool clamped_ = false;  // desired_ is below o_.desired_size because of removed nodes
};

}  // namespace

Step PlanNextStep(const ClusterObservation& obs) { return Planner(obs).Plan(); }

}  // namespace steward
