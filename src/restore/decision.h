// The total-loss -> restore decision: a pure function from what the restore coordinator observed
// (the agents that answered, whether any etcd answers, what the backup store says) to one of
// nothing / wait / start a restore / continue a pending one / cancel a pending one, with the
// reason. No I/O and no clock: tests/unit/restore_decision_test.cc tables each rule, and the
// coordinator calls it again right before every step it takes (choosing the backup, the
// promises, the orders), so nothing destructive rests on an observation older than one round.
//
// Safety rules (each is a row in the tests):
//   R1 total loss is a fact about the LAST KNOWN VOTING MEMBERS, not about configured nodes:
//      a restore starts only when a majority of them answer, and no answering agent has data or
//      runs etcd, and no etcd answers on any configured client URL. Spares and wiped nodes know
//      nothing about whether the cluster still lives, so they never make up that majority.
//   R2 a majority of ALL configured nodes must answer too: the coordinator then collects a
//      majority of promises, so two partitions can never both restore.
//   R3 only the lowest-named agent that answers coordinates.
//   R4 an unreadable store means wait (never "no cluster existed"); a store with no sign of the
//      cluster means the agents bootstrap it themselves, not a restore.
//   R5 a pending AUTOMATIC restore is re-proved before every step until a node has applied it:
//      it is cancelled the moment an agent reports data or a running etcd that is not the
//      restore's own, or an etcd answers. Once a node applied it, it is carried through (the
//      proof stood when the first order went out; stopping halfway would strand those nodes).
//      An operator's restore (stewardctl restore-backup) replaces a live cluster on purpose and
//      is carried on.
//   R6 once the intent records that orders may have gone out, R5 no longer applies: a node that
//      restored may be silent (its agent died, a partition), so "nobody that answers applied
//      it" does not show that nobody did, and cancelling would strand the restored members
//      behind their fence for good. The coordinator records this before its first order.
//   R7 a cluster the store marks destroyed (stewardctl destroy) is never restored by itself: wait
//      for `stewardctl undestroy`; a pending automatic restore whose orders have not gone out is
//      cancelled (one with orders out follows R6; destroy refuses to run while a restore is
//      under way, and restore-backup refuses while the cluster is destroyed).
//   R8 a backup the members refuse as damaged (the full walk of its DB, node/node_restore.cc:
//      the same bytes give the same verdict on every node) so many that those left are no
//      majority can never be restored: it is marked damaged in the store (no automatic restore
//      or delta chain takes it again), and an automatic restore of it that has not settled is
//      replaced by one of the next older good backup (nothing has served clients from it:
//      no member applied it). An operator's restore is marked too and waits, refused.
//   R9 members that cannot raise the revision as ordered (no etcdutl, and the in-place edit
//      refuses the backup: the same on every such node) so many that the others are no majority:
//      the restore can never settle. An automatic one that has not settled is replaced by one of
//      the same backup without the bump (revisions served since the backup are served again,
//      logged). An operator's restore waits, and `status` shows the errors.
//   R10 a restore settles (its leases revoked, its deltas replayed, then unfenced) only once a
//      majority of its members applied it; a member that never does is the leader's to heal
//      afterwards, like any lost member.
//   R11 a settled restore whose cluster does not answer while a majority of its members answer
//      without data was lost as a whole since: it is closed, never carried on (restoring its
//      backup again would drop what was written after it); the next pass decides afresh.
//   AD5 while adopting a running cluster (cluster.adopt), no automatic restore starts: the
//      members no agent manages may still hold the cluster, and no agent can see their data.
//      The operator's restore-backup still works.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace steward {

// One agent that answered GetState.
struct RestoreAgentView {
  bool has_data = false;
  bool etcd_running = false;
  std::string restore_id;  // the last restore this node applied
};

struct RestoreView {
  std::string self;                                  // this agent's node name
  std::vector<std::string> configured;               // every configured node name
  std::map<std::string, RestoreAgentView> answered;  // by node name (self included if it answered)
  bool etcd_answers = false;  // some etcd answered a member list on a configured client URL
  // The store.
  bool store_ok = true;  // the intent and the existence check could be read
  std::string store_error;
  bool cluster_existed = false;  // a backup or the created marker
  // The store's destroy mark (R7): DescribeDestroyMark's text, "" if the cluster is not destroyed.
  std::string destroyed;
  // The voting members as last recorded (the store's membership record, else the initial
  // cluster). Never empty when cluster_existed.
  std::vector<std::string> last_voters;
  bool auto_restore = true;
  bool adopting = false;  // cluster.adopt is set (AD5)
  // A restore that is neither done nor cancelled, if any.
  struct Pending {
    std::string id;
    bool automatic = true;  // false: requested by the operator
    bool ordered = false;   // the intent says restore orders may have gone out (R6)
  };
  std::optional<Pending> pending;
};

enum class RestoreAction {
  kNothing,   // not our business (not the coordinator, or the cluster lives / is new)
  kWait,      // something must change first; the reason says what
  kStart,     // pick the newest valid backup and start a restore
  kContinue,  // carry the pending restore on
  kCancel,    // cancel the pending automatic restore: the live cluster answered
};

const char* RestoreActionName(RestoreAction a);

struct RestoreDecision {
  RestoreAction action = RestoreAction::kNothing;
  std::string reason;
};

RestoreDecision DecideRestore(const RestoreView& view);

// R8 for one round of orders to a restore of `members` members: `applied` of them restored it,
// `refused_damaged` refused its DB as damaged.
struct DamagedBackupVerdict {
  bool mark = false;     // record the backup as damaged in the store
  bool replace = false;  // replace the restore with one of an older backup
};
DamagedBackupVerdict JudgeDamagedBackup(size_t members, size_t applied, size_t refused_damaged,
                                        bool automatic, bool settled);

// One round of restore orders, as the coordinator saw it afterwards.
struct RoundView {
  size_t members = 0;          // the intent's initial cluster
  size_t applied = 0;          // members that restored it and hold its data
  size_t refused_damaged = 0;  // nodes that refused the backup's DB as damaged (R8)
  size_t cannot_bump = 0;      // members that cannot raise the revision as ordered (R9)
  bool bumped = false;         // the intent raises the revision
  bool automatic = true;       // false: the operator's restore
  bool settled = false;
};
enum class RoundVerdict {
  kSettle,           // R10: a majority applied it
  kWait,             // fewer: order again next pass
  kMarkDamaged,      // R8: mark the backup damaged; the operator's restore waits, refused
  kReplaceDamaged,   // R8: mark it, and replace the restore with one of an older backup
  kReplaceUnbumped,  // R9: replace it with a restore of the same backup, not raised
};
const char* RoundVerdictName(RoundVerdict v);
RoundVerdict JudgeRound(const RoundView& v);

// R11: close a settled restore whose cluster does not answer on its client URLs, when `empty`
// of its `members` answer without data.
bool CloseLostRestore(bool settled, size_t members, size_t empty);

// The coordinator's steps through a pending restore, one at a time: NextRestoreStep chooses
// the next from the intent as recorded and what this pass has done so far; the coordinator
// (restore/coordinator.cc, Execute) carries it out, records what it changed in the intent, and asks
// again. A coordinator that stops between two steps leaves an intent the next one continues: its
// passes start over at the promise, and the recorded flags (ordered, settled, done) say where.
//   RC1 every order (restore or unfence) carries a term a majority acknowledged in this pass.
//   RC2 restore orders go out only after DecideRestore, asked again on an observation made after
//       the promises, still says continue (R5-R7 re-proved right before the orders).
//   RC3 a settled restore is never ordered to restore again: its cluster is the live one, and a
//       member that lost its data since is the leader's to heal.
//   RC4 a restore settles only after a round of orders in this pass whose verdict is settle
//       (JudgeRound: R8-R10), on what the members said after that round.
//   RC5 the members are unfenced only once the restore is settled, and it is finished (its
//       voters recorded and done, or closed by R11) only after the unfence orders.
struct RestoreStepView {
  bool settled = false;        // the intent records the restore settled
  bool promised = false;       // this pass: a majority acknowledged its term
  bool rechecked = false;      // this pass: DecideRestore said continue after the promises
  bool round_done = false;     // this pass: restore orders went out and the round was judged
  bool round_settles = false;  // ... and its verdict was settle
  bool unfenced = false;       // this pass: the fenced members were ordered back
};
enum class RestoreStep {
  kPromise,  // collect a majority's acknowledgement of a new term (RC1)
  kRecheck,  // DecideRestore once more on a fresh observation (RC2)
  kOrder,    // record "ordered", order every node that has not applied it, judge the round
  kSettle,   // behind the fence: revoke the backup's leases, replay deltas, record settled
  kUnfence,  // every fenced member back to its client URL
  kFinish,   // record the voters and the restore done, or close it (R11)
  kStop,     // nothing more this pass: the round did not settle it (R10)
};
const char* RestoreStepName(RestoreStep s);
RestoreStep NextRestoreStep(const RestoreStepView& v);

}  // namespace steward
