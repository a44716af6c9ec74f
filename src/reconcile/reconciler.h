// The leader's reconcile loop body: observe every agent and etcd, decide one step with the pure
// planner (plan.h), act on it, report. The caller runs Pass() only while it leads, again at
// once after progress, and after a pause otherwise.
//
// Observation state that spans passes (how long a member has been unhealthy, how old the
// learner is) lives here; a new leader starts it afresh, which only makes it wait longer.
//
// Not thread-safe: one reconcile thread owns it; status() may be read from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "backup/scheduler.h"
#include "backup/store.h"
#include "common/mutex.h"
#include "common/status.h"
#include "config/config.h"
#include "control/env.h"
#include "control/history.h"
#include "control/report.h"
#include "etcd/api.h"
#include "etcd/keys.h"
#include "peer/api.h"
#include "reconcile/defrag_rule.h"
#include "reconcile/divergence.h"
#include "reconcile/leader_move.h"
#include "reconcile/maintenance.h"
#include "reconcile/plan.h"

namespace steward {

class Reconciler {
 public:
  // `store` and `backups` may be null (no backup store configured). `restore_pending` says
  // whether a restore is under way, during which the reconciler does nothing.
  // `confirm_leader` re-checks the leadership right before each mutating step.
  // `env` reaches the agents and the clock (RealControlEnv in production).
  Reconciler(const Config& config, EtcdApi* etcd, BackupStore* store, BackupScheduler* backups,
             std::function<bool()> restore_pending, std::function<bool()> confirm_leader,
             ControlEnv env, std::function<bool(uint64_t)> raise_epoch = nullptr);

  // One observe-decide-act pass with the leader's `term`. Returns true if a mutating step was
  // taken successfully (the caller should pass again at once).
  bool Pass(uint64_t term);
  // The last decision, for status output.
  std::string status() const;
  // A change is under way (a learner exists): the caller should pass again soon.
  bool in_progress() const { return in_progress_; }
  // The last pass found nothing to do: the cluster is at its spec and healthy. The agent then
  // passes less often, and a node's nudge (a change in its state) brings the next pass forward.
  bool settled() const { return settled_; }
  // Per node, the user its agent last reported connecting to etcd as (missing: never
  // answered). Called on the reconcile thread, like Pass.
  const std::map<std::string, std::string>& node_users() const { return node_users_; }
  // Where decisions are recorded (control/history.h); null: nowhere. Set before passes run.
  void SetHistory(History* history) { history_ = history; }

  // Exposed for tests: the observation of the cluster as this leader sees it now.
  absl::StatusOr<ClusterObservation> Observe();
  // Writes the voting members to the store's membership record when they changed.
  void RecordVoters(const ClusterObservation& obs);
  // Before a step that changes the voting members (promote, remove), makes sure the record
  // lists every voter there will be (rule V1). False, with the reason, if it cannot: the step
  // must wait.
  bool RecordVotersBefore(const Step& step, const ClusterObservation& obs, std::string* why);
  // Writes the highest revision seen to the store, at most every kRevisionRecordInterval.
  void RecordRevision();
  // Marks the store for this cluster, or finds that the store lost the mark (store_mismatch_).
  void CheckStoreIdentity();
  // The member counts of `obs` as steward_members_* (only the leader observes).
  static void ExportMembers(const ClusterObservation& obs);
  // Logs each member's advisories (etcd/advisories.h) once per member and version this leader
  // sees; while adopting, also into the history: what the adoption found.
  void SayAdvisories(const ClusterObservation& obs, uint64_t term);

 private:
  // Raises the store's epoch record (control/epoch.json) to this leader's term, once per term;
  // only once the store is known to be this cluster's (CheckStoreIdentity).
  void RecordEpoch(uint64_t leader_term);
  // Observe's parts: the spec and maintenance, one node from its agent, the members.
  absl::Status ObserveSpec(ClusterObservation* obs, Maintenance* maintenance);
  NodeView ObserveNode(const NodeSpec& n, const absl::StatusOr<peer::NodeState>& st,
                       std::vector<std::string>& notes);
  void ObserveMembers(const std::vector<MemberInfo>& members, ClusterObservation& obs);
  // Carries out a step Pass decided and checked, and records the outcome.
  bool Carry(const Step& step, uint64_t term);
  absl::Status Act(const Step& step, uint64_t term);
  void Publish(const Step& step, uint64_t term, const std::string& error);
  PeerApi& Agent(const std::string& node);
  uint64_t InitialIdOf(const std::string& peer_url);

  const Config& config_;
  EtcdApi* etcd_;
  ControlEnv env_;
  BackupStore* store_;
  BackupScheduler* backups_;
  std::function<bool()> restore_pending_;
  std::function<bool()> confirm_leader_;
  std::function<bool(uint64_t)> raise_epoch_;  // Leadership::Raise
  uint64_t last_leader_term_ = 0;
  bool created_marked_ = false;
  std::string store_mismatch_;  // why backups are held ("" when the store is this cluster's)
  // Each node's etcd binaries that do not run or report another version than their
  // etcd.versions key (from the last Observe), and its last refused join: for status.
  std::vector<std::string> node_notes_ ABSL_GUARDED_BY(mu_);
  RepeatFilter repeats_;
  uint64_t agents_max_term_ = 0;        // the newest term any agent has seen (this pass)
  std::string agents_max_term_leader_;  // who holds it (another leader, if any agent says so)
  uint64_t cluster_id_ = 0;             // the cluster that answered this pass's member list
  std::string last_failure_;
  std::string last_decision_;
  std::map<std::string, std::unique_ptr<PeerApi>> agents_;
  // The user each node's agent last said it connects to etcd as (NodeState.client_user).
  std::map<std::string, std::string> node_users_;
  // etcd's initial member ID of a peer URL with this cluster's token (InitialIdOf).
  std::map<std::string, uint64_t> initial_ids_;
  std::map<uint64_t, std::chrono::steady_clock::time_point> unhealthy_since_;
  std::vector<std::string> recorded_voters_;  // as last written to the store
  int64_t max_revision_ = 0;                  // the highest revision any member reported
  int64_t recorded_revision_ = -1;            // as in the store (-1: not read yet)
  uint64_t epoch_recorded_ = 0;  // the highest leader epoch this agent put in the store
  std::optional<std::chrono::steady_clock::time_point> revision_recorded_at_;
  std::optional<std::pair<uint64_t, std::chrono::steady_clock::time_point>> learner_since_;
  std::set<uint64_t> removed_ids_;         // members this leader removed (for the ID-reuse check)
  std::set<std::string> advisories_said_;  // "member@version" (SayAdvisories)
  std::atomic<bool> in_progress_{false};
  std::atomic<bool> settled_{false};
  std::string published_;
  std::string published_notes_;  // node_notes_ as last written
  std::string recorded_wait_;    // the last wait recorded in the history, digits removed
  int64_t published_at_ = 0;     // unix seconds of the last report written
  History* history_ = nullptr;
  // The hash check (reconcile/divergence.h), and the members already recorded as diverged.
  DivergenceWatch divergence_;
  std::set<std::string> recorded_diverged_;
  bool restore_was_pending_ = false;
  // Leadership off a slow disk (reconcile/leader_move.h): since when the etcd leader (by member
  // ID) has reported a slow disk without a break, and when this leader last moved it.
  std::optional<std::pair<uint64_t, std::chrono::steady_clock::time_point>> leader_slow_since_;
  std::optional<std::chrono::steady_clock::time_point> leader_moved_at_;
  // With the cluster settled (`step` none): moves etcd leadership if DecideLeaderMove says so,
  // and adds why (or why not) to the step's reason.
  void MaybeMoveLeader(const ClusterObservation& obs, Step& step, uint64_t term);
  // Defragmentation by rule (reconcile/defrag_rule.h): at most one member per pass, after
  // everything else; `step` gets the reason while one is due and waits.
  void MaybeDefrag(const ClusterObservation& obs, Step& step, uint64_t term);
  // When this leader's last defrag by rule ended (DR5).
  std::optional<std::chrono::steady_clock::time_point> defrag_ended_at_;
  std::string defrag_said_;  // the last wait logged (once per reason)
  // Runs a due hash check and puts its findings into `obs` (rules DV4-DV5).
  void ObserveDivergence(ClusterObservation& obs, uint64_t term);
  // DV4's last look: false (with why) if the member `step` removes no longer differs.
  bool StillDiverged(const Step& step, const ClusterObservation& obs, std::string* why);
  // DV6: false (with why) when `step` adds, joins or promotes a learner while the members'
  // data does not agree.
  bool AgreeBeforeAdd(const Step& step, std::string* why);
  // RS6 (restart_roll.h): right before a restart order, a fresh member list and Status of every
  // other member: false (with why) if one does not answer with a leader, or a learner is there.
  bool OthersHealthyBeforeRestart(const Step& step, std::string* why);
  // Records a decision in the history, if there is one.
  void Record(uint64_t term, const std::string& action, const std::string& reason,
              const std::string& result);
  mutable Mutex mu_;
  std::string status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace steward
