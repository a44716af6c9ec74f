// Restoring a cluster from a backup: after total loss (automatically) or on the operator's
// command (stewardctl restore-backup), both through a restore intent kept in the backup store:
//   <cluster>/control/restore.json  {id, backup, token, initial_cluster, done}
// The intent outlives any one coordinator: if the agent carrying it out dies, the next one
// finishes the same restore from the same backup.
//
// No etcd is needed (it is what is being restored), so the coordinator is the lowest-named
// reachable agent. What it does is decided by DecideRestore (restore/decision.h), a pure
// function of what it observed, asked again right before each step: total loss must be shown by
// a majority of the last known voting members (the store's membership record), and a majority
// of all configured nodes must acknowledge the coordinator's term (Promise), so two partitions
// can never both restore. A pending automatic restore is cancelled as soon as the live cluster
// answers.
//
// Not thread-safe: one agent thread owns a coordinator.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/delta.h"
#include "backup/layout.h"
#include "backup/store.h"
#include "common/status.h"
#include "config/config.h"
#include "control/env.h"
#include "control/history.h"
#include "control/records.h"
#include "etcd/api.h"
#include "peer/api.h"
#include "restore/decision.h"
#include "restore/settle.h"

namespace steward {

class RestoreCoordinator {
 public:
  // `etcd` reaches every configured client URL; `env` the agents, fresh etcd handles and the
  // clock (RealControlEnv in production).
  RestoreCoordinator(const Config& config, BackupStore* store, EtcdApi* etcd, ControlEnv env);

  // One pass; cheap when there is nothing to do. Every agent calls it periodically; only the
  // lowest-named reachable agent acts.
  void Pass();
  // True while a restore intent is pending (not done): the reconciler must keep its hands off.
  bool RestorePending();
  // Where restores are recorded (control/history.h); null: nowhere. Set before passes run.
  void SetHistory(History* history) { history_ = history; }

 private:
  struct Observed {
    RestoreView view;
    std::map<std::string, peer::NodeState> states;  // the agents that answered
    std::optional<RestoreIntent> intent;            // pending (neither done nor cancelled)
  };
  // What DecideRestore needs; the store and etcd are read only when this agent coordinates.
  Observed Observe();
  // Total loss is proven (`why`): chooses the backup and its deltas, decides again on a fresh
  // observation, records a new intent and carries it out.
  void Start(const std::string& why);
  // Carries `intent` on, one step at a time as NextRestoreStep chooses (restore/decision.h):
  // each re-checks what it rests on and records its progress before the next is chosen.
  absl::Status Execute(RestoreIntent intent);
  // The intent's members that `o` does not show restored (silent, or another restore's).
  static std::vector<std::string> MembersWithout(const RestoreIntent& intent, const Observed& o);
  // A term a majority of the agents acknowledged, in the header every order carries.
  absl::Status PromiseTerm(const Observed& o, peer::OrderHeader* header);
  // DecideRestore once more right before the orders (o is observed again): cancels the
  // restore, or says why not now.
  absl::Status StillJustified(const RestoreIntent& intent, Observed* o);
  // Records that orders go out (R6), orders every node that has not applied the restore, and
  // judges the round; `missing` gets the members that have not restored it.
  absl::Status OrderRound(RestoreIntent& intent, const Observed& o, const peer::OrderHeader& header,
                          std::vector<std::string>* missing);
  struct OrderResults {
    std::vector<std::string> refused_damaged;  // nodes that found the backup's DB damaged (R8)
    std::string damage;                        // what the first of them found
  };
  OrderResults SendOrders(const RestoreIntent& intent, const Observed& o,
                          const peer::OrderHeader& header);
  // JudgeRound (restore/decision.h) on what the members say after the round: OK once a
  // majority applied it (R10); else why not, replacing an automatic restore that can never
  // settle (R8, R9).
  absl::Status AfterRound(RestoreIntent& intent, const OrderResults& round,
                          std::vector<std::string>* missing);
  // Behind the fence: revokes the backup's leases (Settle), raises the revision record, and
  // records the restore settled. Nothing to do once settled.
  // `term`: the coordinator's promised term, which the restored cluster's epoch is raised to.
  absl::Status SettleRound(RestoreIntent& intent, uint64_t term);
  // Every fenced member back to its client URL (best effort: an agent does it by itself once
  // it reads that the restore is settled).
  void UnfenceMembers(const RestoreIntent& intent, const peer::OrderHeader& header);
  // Before the unfence: waits (bounded) until each of `fenced_nodes` lists its fence URL in the
  // member list, so that no fenced run's publish is still on its way when etcd restarts.
  void WaitFencedPublished(const RestoreIntent& intent,
                           const std::vector<std::string>& fenced_nodes);
  // Which of `nodes` the member list (read through `etcd`) shows with client URLs other than
  // `url` gives (with `unpublished_is_stale`: also those that published none yet).
  absl::StatusOr<std::vector<std::string>> StalePublishes(
      EtcdApi& etcd, const RestoreIntent& intent, const std::vector<std::string>& nodes,
      std::string (Config::*url)(const NodeSpec&) const, bool unpublished_is_stale) const;
  // After the unfence: a restored member whose entry does not list its client URL (clients
  // that read the member list would go to its closed fence port) is ordered to restart etcd,
  // one per pass and only while the others keep a quorum. Unavailable while one is fixed.
  absl::Status RepublishStale(const RestoreIntent& intent, const peer::OrderHeader& header,
                              const std::vector<std::string>& restored, EtcdApi& unfenced);
  std::map<std::string, int> republished_;  // "<restore id>/<node>" -> restarts ordered
  // The member that leads the fenced cluster ("" if none answers as leader).
  std::string FencedLeader(const RestoreIntent& intent);
  // Once the restored cluster answers on its client URLs: records its voters and the restore
  // done (or closes a settled restore whose cluster was lost as a whole since).
  absl::Status Finish(RestoreIntent& intent, const Observed& o, bool was_settled,
                      const std::vector<std::string>& missing, const peer::OrderHeader& header);
  // steward_restores_total{kind, result} for the admin port, and the event history.
  void CountRestore(const RestoreIntent& intent, const char* result);
  History* history_ = nullptr;
  // Cancels a pending intent — never one whose orders went out (R6).
  absl::Status Cancel(RestoreIntent intent, const std::string& why);
  // Re-reads the stored intent: Aborted if it is another restore, or done or cancelled; else
  // merges what other coordinators recorded (ordered, settled) into `intent`.
  absl::Status Sync(RestoreIntent& intent);
  // Sync, then `change` (an error from it aborts, nothing written), then write: the only way
  // progress is recorded.
  absl::Status Record(RestoreIntent& intent, const char* what,
                      const std::function<absl::Status(RestoreIntent&)>& change);
  // Replaces `intent` (whose deltas were lost, or whose bump too many members cannot make:
  // `why`; nothing has served clients from it) with a new intent chosen afresh from what the
  // store holds now, carried out from the next pass; one that does not raise the revision if
  // it restores `unbumped_backup` again.
  absl::Status Supersede(const RestoreIntent& intent, const absl::Status& why,
                         const std::string& unbumped_backup = "");
  // A new automatic intent for `backup` up to `point`: its generation, and its revision bump
  // unless `bump_wanted` is false or an agent in `states` cannot raise it.
  absl::StatusOr<RestoreIntent> FreshIntent(const std::map<std::string, peer::NodeState>& states,
                                            const std::string& backup, const RestorePoint& point,
                                            bool bump_wanted = true);
  // A fresh client of the intent's members at `url` (their fence or client URL).
  std::unique_ptr<EtcdApi> MembersClient(const RestoreIntent& intent,
                                         std::string (Config::*url)(const NodeSpec&) const) const;
  // Waits (bounded) until some member reachable through `etcd` reports a leader.
  bool WaitForLeader(EtcdApi& etcd, std::chrono::seconds bound);
  std::optional<std::string> NewestValidBackup();
  // RevisionBump for restoring `backup`, from its meta.json (whose revision goes to
  // `*backup_revision`) and the store's revision record.
  absl::StatusOr<int64_t> BumpFor(const std::string& backup, int64_t* backup_revision);
  // Where the deltas of `*backup` let a restore reach (every one up to there checked); may
  // switch `*backup` to the one before it when that one's deltas reach further.
  absl::StatusOr<RestorePoint> DeltaPointFor(std::string* backup);
  std::map<std::string, peer::NodeState> States();
  void Note(const std::string& msg);

  const Config& config_;
  BackupStore* store_;
  EtcdApi* etcd_;
  ControlEnv env_;
  std::map<std::string, std::unique_ptr<PeerApi>> agents_;
  std::atomic<bool> last_pending_{false};
  RepeatFilter repeats_;
};

}  // namespace steward
