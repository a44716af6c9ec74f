// Restoring a cluster from a backup: after total loss (automatically) or on the operator's
// command (stewardctl restore-backup), both through a restore intent kept in the backup store:
//   <cluster>/control/restore.json  {id, backup, token, initial_cluster, done}
// The intent outlives any one coordinator: if the agent carrying it out dies, the next one
// finishes the same restore from the same backup.
//
// No etcd is needed (it is what is being restored), so the coordinator is the lowest-named
// reachable agent. What it does is decided by DecideRestore (restore_decision.h), a pure
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
#include "etcd/api.h"
#include "peer/api.h"
#include "reconcile/env.h"
#include "reconcile/history.h"
#include "reconcile/restore_decision.h"

namespace steward {

struct RestoreIntent {
  std::string id;
  std::string backup;
  std::string token;
  std::string requested_by;  // "auto" or "stewardctl"
  std::vector<std::pair<std::string, std::string>> initial_cluster;  // name, peer URL
  // The restored cluster's generation (BackupMeta::generation): one above every backup's.
  int64_t generation = 1;
  // How far each member raises the restored revision (RevisionBump); the same on every node.
  int64_t bump_revision = 0;
  // The revision the backup's deltas (backup/delta.h) are replayed to while fenced; 0 or the
  // backup's own revision: none. Chosen, and every delta up to it checked, before the intent
  // is written: every coordinator replays the same.
  int64_t delta_to = 0;
  // The restored cluster's leases are revoked and its generation recorded (while fenced); from
  // here on members are unfenced, and nothing may revoke leases again.
  bool settled = false;
  // Restore orders may have gone out (written before the first one): from here on the restore
  // is carried through, never cancelled (rule R6).
  bool ordered = false;
  bool done = false;
  bool cancelled = false;     // an automatic restore whose total loss could not be re-proved
  std::string cancel_reason;
  // The automatic restore this one replaced before it settled, because deltas that one was to
  // replay were lost or damaged after it was chosen ("" if none). It carries that restore's
  // orders on (so it is `ordered` from the start) and re-orders its fenced members.
  std::string supersedes;
  int64_t created_at = 0;
};

absl::StatusOr<std::optional<RestoreIntent>> ReadRestoreIntent(BackupStore& store,
                                                               const std::string& cluster);
absl::Status WriteRestoreIntent(BackupStore& store, const std::string& cluster,
                                const RestoreIntent& intent);
// A fresh intent to restore `backup` onto the first cluster.size nodes, with a new token. Its ID
// is made of `created_at` (Unix seconds) and a 16-bit `nonce`.
RestoreIntent NewRestoreIntent(const Config& config, const std::string& backup,
                               const std::string& requested_by, int64_t generation,
                               int64_t bump_revision, int64_t created_at, uint32_t nonce);

// Replays the deltas of `backup` (backup/delta.h) up to `to_revision` onto `etcd`, one
// transaction per revision (split when etcd's request limits need it); keys put under a lease
// are deleted instead. Every transaction applies only while ReplayGuardKey holds `guard`
// (Aborted once another coordinator has marked its own replay). `replayed` counts the revisions.
// `chain_broken` as ForEachDeltaRevision's (etcd's errors never set it).
absl::Status ReplayDeltas(BackupStore& store, const std::string& cluster, const std::string& backup,
                          int64_t to_revision, EtcdApi& etcd, const std::string& guard,
                          int64_t* replayed, bool* chain_broken = nullptr);

// " + N delta(s), to revision R" for a log line ("" without deltas).
std::string DescribePoint(const RestorePoint& p);

// The highest revision the cluster was seen to serve, kept in the store by the leader:
//   <cluster>/control/revision.json  {"revision": R, "updated_at": <unix seconds>}
// 0 when nothing is recorded.
absl::StatusOr<int64_t> ReadHighestRevision(BackupStore& store, const std::string& cluster);
absl::Status WriteHighestRevision(BackupStore& store, const std::string& cluster, int64_t revision,
                                  int64_t now_unix);
// The revision a restored cluster starts at: the backup's (or, with deltas replayed, their
// point's, 0 for none) plus the bump.
inline int64_t RestoredStartRevision(int64_t backup_revision, int64_t delta_to, int64_t bump) {
  return std::max(backup_revision, delta_to) + bump;
}
// Raises the record to `revision` unless it is there already (never lowers it). Called with
// the revision a restore starts its cluster at before the restore is ordered: a restored
// cluster lost again before the leader records what it served is then restored past it.
absl::Status RaiseHighestRevision(BackupStore& store, const std::string& cluster,
                                  int64_t revision, int64_t now_unix);
// Writes since the last record are covered by this margin: the leader records at least every
// kRevisionRecordInterval, and etcd does not serve this many writes in that time.
inline constexpr int64_t kRevisionBumpMargin = 10'000'000;
inline constexpr std::chrono::seconds kRevisionRecordInterval{30};
// How far to raise a restore of a backup taken at `backup_revision`: past the highest recorded
// revision, plus the margin.
int64_t RevisionBump(int64_t highest_recorded, int64_t backup_revision);
// One above the highest generation of any backup in the store.
absl::StatusOr<int64_t> NextGeneration(BackupStore& store, const std::string& cluster);

// The voting members (node names) as last recorded in the store, by the leader when the
// membership changes and by the restore coordinator when a restore is done:
//   <cluster>/control/members.json  {"voters": [...], "updated_at": <unix seconds>}
// nullopt when nothing is recorded yet.
absl::StatusOr<std::optional<std::vector<std::string>>> ReadLastVoters(BackupStore& store,
                                                                      const std::string& cluster);
absl::Status WriteLastVoters(BackupStore& store, const std::string& cluster,
                             const std::vector<std::string>& voters, int64_t now_unix);

// Is there a sign that this cluster ever existed (a backup, or the created marker)? Errors
// when the store cannot be read: the caller must then not bootstrap an empty cluster.
absl::StatusOr<bool> ClusterEverExisted(BackupStore& store, const std::string& cluster);

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
  // Where restores are recorded (reconcile/history.h); null: nowhere. Set before passes run.
  void SetHistory(History* history) { history_ = history; }

 private:
  struct Observed {
    RestoreView view;
    std::map<std::string, peer::NodeState> states;  // the agents that answered
    std::optional<RestoreIntent> intent;            // pending (neither done nor cancelled)
  };
  // What DecideRestore needs; the store and etcd are read only when this agent coordinates.
  Observed Observe();
  // Carries `intent` on by the steps below, each of which re-checks what it rests on and
  // records its progress before the next.
  absl::Status Execute(RestoreIntent intent);
  // A term a majority of the agents acknowledged, in the header every order carries.
  absl::Status PromiseTerm(const Observed& o, peer::OrderHeader* header);
  // DecideRestore once more right before the orders (o is observed again): cancels the
  // restore, or says why not now.
  absl::Status StillJustified(const RestoreIntent& intent, Observed* o);
  // Records that orders go out (R6), orders every node that has not applied the restore, and
  // judges the round; `missing` gets the members that have not restored it.
  absl::Status OrderRound(RestoreIntent& intent, const Observed& o,
                          const peer::OrderHeader& header, std::vector<std::string>* missing);
  struct OrderResults {
    std::vector<std::string> refused_damaged;  // nodes that found the backup's DB damaged (R8)
    std::string damage;                        // what the first of them found
  };
  OrderResults SendOrders(const RestoreIntent& intent, const Observed& o,
                          const peer::OrderHeader& header);
  // OK once a majority of members applied it; else why not, replacing an automatic restore
  // that can never settle (R8, or a revision bump too many members cannot make).
  absl::Status JudgeRound(RestoreIntent& intent, const OrderResults& round,
                          std::vector<std::string>* missing);
  // Behind the fence: revokes the backup's leases (Settle), raises the revision record, and
  // records the restore settled. Nothing to do once settled.
  absl::Status SettleRound(RestoreIntent& intent);
  // Every fenced member back to its client URL (best effort: an agent does it by itself once
  // it reads that the restore is settled).
  void UnfenceMembers(const RestoreIntent& intent, const peer::OrderHeader& header);
  // Once the restored cluster answers on its client URLs: records its voters and the restore
  // done (or closes a settled restore whose cluster was lost as a whole since).
  absl::Status Finish(RestoreIntent& intent, const Observed& o, bool was_settled,
                      const std::vector<std::string>& missing);
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
  // Before the restored cluster is declared done: revoke every lease the backup brought back
  // (no lock or leader key of the lost cluster survives) and record the new generation.
  // `*deltas_lost`: the deltas an automatic restore is to replay can no longer be read to
  // `delta_to` (lost or damaged since it was chosen), and this coordinator marked the restore
  // replaced in the fenced cluster (ReplaySupersededKey, exclusive with its settling), so that
  // it never settles: the caller must Supersede it.
  absl::Status Settle(const RestoreIntent& intent, EtcdApi& fenced, bool* deltas_lost);
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
