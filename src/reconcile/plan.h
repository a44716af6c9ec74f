// The reconciler's decision: a pure function from what the leader observed and the desired spec
// to the one next step. No I/O, no clock reads (time comes in the view), so it is table-tested
// and driven by a randomized cluster simulation (tests/unit/plan_*_test.cc).
//
// Safety rules every plan obeys:
//   - never a member removal or promotion that leaves fewer healthy voters than a quorum of the
//     voters that remain;
//   - never more than one learner;
//   - never a wipe of a node whose member is still in the member list;
//   - never bootstrap: creating a cluster is not a step of this planner.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "etcd/version.h"

namespace steward {

// A restart roll as stewardctl restart asked for it (reconcile/restart_roll.h).
struct RestartRoll {
  std::string id;             // unique per request: "r-<unix seconds>-<random hex>"
  std::string by;             // user@host of the operator
  std::string reason;         // "pending: --quota-backend-bytes on n1, n2, n3", or the operator's
  int64_t since = 0;          // Unix seconds
  bool pending_only = false;  // asked with --pending
  std::vector<std::string> nodes;  // in the order asked; the leader still goes last
};

// One configured node as its agent reported it.
struct NodeView {
  std::string name;
  std::string peer_url;
  bool agent_up = false;  // the agent answered this pass
  bool etcd_running = false;
  bool has_data = false;         // its etcd data dir holds a member
  uint64_t local_member_id = 0;  // the member ID of that data, 0 if unknown
  // The member ID etcd gives this node as a member of the initial cluster (from the token).
  uint64_t initial_member_id = 0;
  // The etcd version a rolling upgrade switched this node to last ("" never).
  std::string switched_version;
  // Maintenance (reconcile/maintenance.h), as in force this pass. `paused`: non-empty while the
  // node is paused, saying until when, by whom and why (rules P1-P3). `removed`: the operator
  // removed the node for good (stewardctl remove-node; rules RM1-RM2).
  std::string paused;
  bool removed = false;
  // What this node's etcd binaries (or images) reported (rules EV1-EV2, etcd/version.h); empty if
  // its agent did not say (an older agent): then nothing is assumed and nothing is refused.
  std::vector<EtcdBinary> binaries;
  // Why its etcd last exited on its own, from etcd's log ("" if it has not).
  std::string etcd_exit;
  // Its watchdog's verdict on a running etcd that does not answer reads ("" while it answers,
  // or from an agent without one): "H5: ..." and so on (node/hang_decision.h). Rule HG1.
  std::string hang;
  // The last join its etcd refused ("" none since), and how long until the node launches
  // etcd for a join again (it backs off after each refusal).
  std::string join_error;
  std::chrono::milliseconds join_retry_in{0};
  // Its etcd's disk (etcd/disk_latency.h): the p99s in ms (negative: unknown) and "" while
  // within etcd's guidance, else why not. For reconcile/leader_move.h and status.
  double wal_fsync_p99_ms = -1;
  double backend_commit_p99_ms = -1;
  std::string disk_slow;
  // Free bytes under its data dir (-1: unknown, an older agent). reconcile/defrag_rule.h DR7.
  int64_t data_free_bytes = -1;
  // The flags its running etcd would start with otherwise now ("--quota-backend-bytes"), and
  // the restart roll it restarted for last ("" none). reconcile/restart_roll.h.
  std::vector<std::string> pending_restart;
  std::string restarted_for;
};

// One entry of etcd's member list, with what its Status call said.
struct MemberView {
  uint64_t id = 0;
  std::string name;      // empty until started (except initial-cluster members)
  std::string peer_url;  // the first peer URL
  bool started = false;  // has published client URLs
  bool is_learner = false;
  bool healthy = false;  // answered Status with a leader and no errors
  uint64_t raft_index = 0;
  bool is_etcd_leader = false;
  // How long it has been unhealthy, as the leader has watched it (0 if healthy).
  std::chrono::milliseconds unhealthy_for{0};
  std::string version;  // the etcd version its Status reported ("" if unknown)
  // Its data differs from a majority's that agrees, in kDivergedChecks hash checks in a row
  // (reconcile/divergence.h): the last check's verdict. "" otherwise. Rule DV4.
  std::string diverged;
  // Its backend file and the part of it in use, as its Status said (-1: unknown).
  int64_t db_size = -1, db_size_in_use = -1;
};

struct ClusterObservation {
  int desired_size = 0;
  std::chrono::milliseconds replace_after{60000};
  // A learner that never starts for this long is removed again.
  std::chrono::milliseconds learner_timeout{60000};
  std::vector<NodeView> nodes;      // in config order (priority order for adds)
  std::vector<MemberView> members;  // empty if the member list could not be read
  bool member_list_ok = false;
  uint64_t leader_raft_index = 0;
  // How long the current learner (if any) has existed, as the leader has watched it.
  std::chrono::milliseconds learner_age{0};
  // Rolling upgrades: the spec's desired etcd version ("" none), and the versions every node
  // has a binary (or image) for (etcd.versions, the same on every node).
  std::string desired_version;
  std::vector<std::string> available_versions;
  // cluster.adopt is set: members on no configured node belong to the cluster being adopted
  // (rules AD1-AD3 below).
  bool adopting = false;
  // Non-empty while the whole cluster is paused (stewardctl pause without --node): until when,
  // by whom and why (rule P4).
  std::string cluster_paused;
  // cluster.repair_diverged (rule DV4), and the last hash check's verdict when no majority
  // agreed ("" otherwise; rule DV3, etcd/agreement.h).
  bool repair_diverged = true;
  std::string hash_split;
  // The restart roll stewardctl restart asked for last, if any (reconcile/restart_roll.h).
  std::optional<RestartRoll> restart;
};

enum class StepKind {
  kNone,           // nothing to do
  kWait,           // something is wrong or in progress; nothing safe to do now
  kRemoveMember,   // member_id
  kAddLearner,     // node (peer URL from the node)
  kJoin,           // order node to start as an existing member (member_id is its learner)
  kPromote,        // member_id
  kWipe,           // order node to stop etcd and set its data aside (its member is gone)
  kSwitchVersion,  // order node to restart etcd on the same data with `version` (an upgrade)
  kRestart,        // order node to restart etcd on its data for restart roll `restart_id`
  kMoveLeader,     // move etcd leadership to member_id (before the leader's restart, RS3)
};

const char* StepKindName(StepKind k);

struct Step {
  StepKind kind = StepKind::kNone;
  uint64_t member_id = 0;
  std::string node;
  std::string reason;  // for logs and status: why this step (or why waiting)
  // For kJoin: name -> peer URL of every member, this node included, for --initial-cluster.
  std::vector<std::pair<std::string, std::string>> initial_cluster;
  std::string version;     // for kSwitchVersion; for kJoin the version the cluster runs (EV1)
  std::string restart_id;  // for kRestart
};

// How the planner's reasons name a member: "n2 (8e9e05c52164694d)".
std::string MemberLabel(const MemberView& m);
// A step of `kind`, with why.
Step MakeStep(StepKind kind, std::string reason);

// Quorum of `voters` voting members.
inline int Quorum(int voters) { return voters / 2 + 1; }

Step PlanNextStep(const ClusterObservation& obs);

// EV0: the version the cluster runs, which joins use (EV1): the desired version once every member
// whose version is known runs it, else the highest version a member runs (a joiner on a lower
// minor than any member is refused by etcd). "" if no member's version is known.
std::string ClusterVersion(const ClusterObservation& obs);
// EV2: "" if node `n` can run `version` (or it did not say what it can run), else why not.
std::string VersionBlock(const NodeView& n, const std::string& version);

// Adopting a cluster no agent created (obs.adopting). A member whose peer URL is no configured
// node's is unmanaged. Rules, each with a table test (tests/unit/adopt_plan_test.cc):
//   AD1 unmanaged members are never removed, replaced or shrunk away by the planner (only the
//      operator's `stewardctl retire-unmanaged` removes them); cluster.size counts managed
//      voters, so the agents grow the cluster until that many of their nodes are voters;
//      quorum still counts every voter.
//   AD2 an unmanaged learner is its operator's: wait (etcd allows one learner at a time).
//   AD3 an unmanaged member named like a configured node would give a joining node's
//      --initial-cluster one name twice; a member on a node's peer URL under another name is
//      an adopted member on the same host and port, not the node's: wait, saying so, and
//      change nothing (the rules for a node's own entry would remove it).
// AD4 (start_decision.h) and AD5 (restore/decision.h): while adopting, no node bootstraps and no
// restore starts by itself.

// A member whose node's own watchdog is restarting it in place (node/hang_decision.h). Rule,
// with a table test (tests/unit/plan_test.cc):
//   HG1 a dead member whose agent answers and reports its etcd hung but not given up (H5
//       waiting out the bound, H8 restarting; not H6 stuck in I/O, not H7 given up) is not
//       replaced: its data is good, and a restart in place is faster than any resync. The
//       planner waits and says so. Once the watchdog gives up, or the agent stops answering,
//       the rules for a dead member apply as before.
bool RestartingInPlace(const NodeView& n);

// A member whose data differs (etcd/agreement.h, reconcile/divergence.h). Rules, with table
// tests (tests/unit/plan_test.cc):
//   DV4 a member named diverged (MemberView.diverged) is removed, quorum-checked as every
//       removal, before anything else (a learner on its way may be its copy); then the ordinary
//       rules set its node's data aside (never deleted) and rejoin it learner-first. Not while its
//       node is paused (P1), not an unmanaged member (AD1), not with cluster.repair_diverged off:
//       then the planner says what differs and waits. The reconciler checks the hashes once more
//       right before it removes one.
//   DV5 without a majority that agrees (obs.hash_split) nothing is removed for its data and
//       nothing else changes either (no learner would copy the right data for sure): the
//       planner waits and says who holds which hash, for an operator.
//   DV6 (the reconciler, right before it adds, starts or promotes a learner) a learner copies
//       the etcd leader's data: none is added, joined or promoted while a fresh hash check
//       names a member that differs (the learner included) or no majority agrees.

// Maintenance (reconcile/maintenance.h: stewardctl pause, drain, remove-node, readd-node).
// Rules, each with a table test (tests/unit/maintenance_plan_test.cc):
//   P1 a paused node's member is never removed (not as a dead member to replace, not as a stale
//      entry, not to shrink the cluster) and a paused node's data is never wiped: the planner
//      waits and says "node N is paused until ... by ...: reason".
//   P2 a paused node is no spare: it is not added, and a learner on it is not ordered to join
//      nor removed for being slow; a caught-up learner on it is still promoted (that is safe).
//   P3 a paused node is not switched to another etcd version (rolling upgrade, U7 recovery).
//   P4 paused cluster-wide: no step that changes membership or a node (remove, add, join, wipe,
//      switch-version) anywhere; a caught-up learner is still promoted. The planner says what
//      it would have done and that the cluster is paused.
//   An expired pause is not in the observation (ApplyMaintenance leaves it out).
//   RM1 a removed node is never a spare (never added, never replaced onto); a learner on it is
//      removed; its left-over data is not wiped (it is no longer the cluster's business).
//   RM2 the desired size is clamped to the configured nodes that are not removed; a removed
//      node's member still in the list goes first when the cluster shrinks to that size
//      (quorum-checked, as every removal).
//   Not yet a rule: start_decision.h does not read the mark; a removed node that has been a
//   member does not bootstrap by S3/S6/S7, but its runner restarts its removed etcd.

// Rolling upgrades, asked by PlanNextStep once the cluster is healthy at its size (so every
// voter is healthy and there is no learner). Rules, each with a table test:
//   U1 no desired version, or every member runs it: nothing. While adopting, a member on no
//      configured node (AD1) cannot be switched: wait until it is retired.
//   U2 the desired version has no binary in etcd.versions: wait, saying so. Nor while a node
//      (agent up, not removed) reports that its etcd.versions entry for the round's target is
//      missing, not etcd, or another version: wait, naming the node and what it reported, before
//      any member switches.
//   U3 a member's version is unknown: wait.
//   U4 never below the cluster's version (the lowest minor any member runs): etcd does not
//      support downgrades; wait, saying so. (A member back to the version the others run is
//      not a downgrade of the cluster.)
//   U5 one minor version at a time: the target is the next minor above the cluster's lowest,
//      up to the desired one, and needs a binary; every member reaches it before any goes
//      further (3.3 -> 3.5 goes through 3.4).
//   U6 followers first, the etcd leader last; one member per step (the next waits until the
//      switched member is healthy again, which PlanNextStep requires).
//   U7 (asked by PlanNextStep for an unhealthy member) a member down since it was switched to
//      a version other than the desired one goes to the desired one at once — the way back
//      from a version that does not start. It is down already: quorum is not touched. Only
//      to the minor version every healthy member runs (never a downgrade, never a jump ahead
//      of the round).
//   U9 a round into a minor whose upgrade guide requires a patch of the minor below first (the
//      table in etcd/advisories.h: 3.6 needs 3.5.32): wait, naming the member below it and the
//      patch, until every member runs it or later.
//   U8 (likewise) a member down on the version it was switched to, while the healthy members
//      run another: the roll has stopped there. Say so, with why etcd exits and the way back
//      (configure-cluster --etcd-version <the version the others run>), which U7 then takes.
Step PlanUpgrade(const ClusterObservation& obs);
// Restart rolls (reconcile/restart_roll.h, rules RS1-RS5), asked after PlanUpgrade has no step:
// kNone (no roll, or done), kWait (why not now), kMoveLeader or kRestart.
Step PlanRestart(const ClusterObservation& obs);
std::optional<Step> PlanVersionRecovery(const ClusterObservation& obs, const MemberView& down);

}  // namespace steward
