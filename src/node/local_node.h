// This node's side of the agent: how it starts its etcd on its own, how it carries out the
// leader's orders (join, stop, wipe, restore, unfence) and what state it reports.
//
// It reaches the world only through seams — the node's disk (NodeDisk), the runner, the
// other nodes' and its own etcd (EtcdApi), the other initial agents (PeerApi), the backup
// store and a clock — so the deterministic simulation (tests/sim/) runs this very code.
// The Agent (agent.h) wires it to the real ones and drives it from its control thread and
// the peer server's threads.
//
// Where things are:
//   start.cc          the start decision (DecideStart on GatherStartView) and the control pass
//   orders.cc         the leader's orders (join, stop, wipe, unfence) and the reported state
//   node_restore.cc   how a node carries out a restore order
//   start_view.cc     what the start decision is asked on (GatherStartView)
// There is no local_node.cc: the class is split by what a caller asks of it.
//
// Thread-safe. Orders and the control pass's start decision are serialized by mu_. Four
// small locks guard state that State() reports while an order may hold mu_ for long (a
// restore's progress, the client user and certificates, repeated notes, etcd's exit reason).
// Single flags and counters are atomics.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backup/store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "common/status.h"
#include "config/config.h"
#include "control/destroy.h"
#include "etcd/api.h"
#include "etcd/disk_latency.h"
#include "etcd/flags.h"
#include "etcd/version.h"
#include "node/node_disk.h"
#include "node/restore_plan.h"
#include "node/start_decision.h"
#include "node/start_view.h"
#include "peer/api.h"
#include "peer/server.h"
#include "pki/node_certs.h"
#include "runner/runner.h"

namespace steward {

struct LocalNodeEnv {
  NodeDisk* disk = nullptr;
  Runner* runner = nullptr;
  EtcdApi* peers = nullptr;  // the other nodes' client URLs
  EtcdApi* local = nullptr;  // this node's etcd (asked on its client or fence URL)
  // The other initial nodes' agents (the first cluster.size nodes), for the bootstrap rule.
  std::map<std::string, PeerApi*> initial_agents;
  BackupStore* store = nullptr;  // null without backup.store
  Clock* clock = nullptr;
  bool parallel = true;  // ask the initial agents concurrently
  // The etcd version this node runs ("3.4.23"; "" if unknown): a restore refuses a backup
  // taken from a newer minor version, and uses etcdutl from 3.5 on.
  std::function<std::string()> etcd_version;
  // What this node's etcd binaries (or images) report (the agent probes them with --version
  // when it starts); null or empty: not known, and a join runs the binary it has (EV1-EV2).
  std::function<std::vector<EtcdBinary>()> binaries;
  // Free bytes of the file system under node.data_dir (statvfs); unset or negative: unknown.
  std::function<int64_t()> data_free_bytes;
  // etcd's log: its size now, and what was written from `offset` on (the tail when the log
  // was rotated since). Null: no log to read (the simulation).
  std::function<uint64_t()> etcd_log_size;
  std::function<std::string(uint64_t offset)> etcd_log_since;
  // How long a join order watches its etcd for an exit at once (etcd refuses a join within
  // ~30 ms) before it answers. 0: it does not watch.
  std::chrono::milliseconds join_watch{0};
  // Appends an event to the cluster's history (null: none kept). Joins record their own
  // events: "started" when ordered, "joined" once etcd sees a leader, "failed" with etcd's reason.
  std::function<void(const std::string& action, const std::string& reason,
                     const std::string& result)>
      record;
  // Called right before a restart roll's stop of etcd, once the node's own look passed (the
  // simulation checks there that no other voter is down). Null: nothing.
  std::function<void()> before_restart;
};

class LocalNode : public NodeHandler {
 public:
  // `env`'s seams must outlive this object.
  LocalNode(const Config& config, LocalNodeEnv env);

  // NodeHandler: the leader's orders (admitted by the peer server's TermGuard).
  peer::NodeState State() override;
  absl::Status Join(const peer::StartRequest& req) override;
  absl::Status StopEtcd() override;
  absl::Status Wipe(const peer::OrderHeader& header) override;
  absl::Status Restore(const peer::RestoreRequest& req) override;
  absl::Status Unfence(const peer::UnfenceRequest& req) override;
  // Restarts etcd on its data with the binary etcd.versions names for the version, and
  // records the version (the etcd-version marker) so the node keeps running it.
  absl::Status SwitchVersion(const peer::SwitchVersionRequest& req) override;
  // Stops etcd gracefully and starts it again on its data with the same flags (`why` for the
  // log): a CA rotation's change of the trusted CA, which etcd reads only when it starts. Does
  // nothing when etcd is not meant to run here.
  absl::Status RestartEtcd(const std::string& why);
  // A restart roll's step (stewardctl restart): RestartEtcd with the config's flags now, then
  // the restarted-for marker, so the same roll never restarts this member twice.
  absl::Status Restart(const peer::RestartRequest& req) override;
  // stewardctl destroy / undestroy, checked against the store's destroy mark (control/destroy.h).
  absl::Status Destroy(const peer::DestroyRequest& req) override;

  // One pass of the node's control loop:
  //   - while etcd is not wanted and not held stopped by the leader, decide whether this node
  //     may start it on its own (DecideStart) and do so;
  //   - stop etcd whose member data vanished under it (D1);
  //   - mark "joined" once its etcd sees a leader;
  //   - recover from an initial bootstrap that etcd refused;
  //   - drop a fence whose restore the store says is settled.
  void ControlPass();
  // An etcd found running when the agent started: keep it, and know how to restart it.
  void AdoptRunning();
  // D1, for the runner before it restarts an etcd that exited: false (with `why`) when the
  // member's data dir no longer holds its data.
  bool MayRestart(std::string* why);
  bool HasMemberData();
  // What the leader reads from this node, cheaply (no etcd call): when it changes, the agent
  // nudges the leader to look now.
  std::string Fingerprint();
  // Nothing for the control loop to watch closely: etcd runs on member data that has joined,
  // no bootstrap, fence or order under way. The control loop then wakes only on changes in the
  // data dir (or every cluster.idle_interval).
  bool Settled();

  // The watchdog's view of what keeps etcd from answering reads by design (hang_decision.h,
  // H2): a restore staged or fenced, a join under way, etcd held by the leader. "" if none.
  std::string HangBusy();
  // The watchdog's verdict on etcd ("" while it answers) and its restarts in place, reported
  // in State() (NodeState.hang, hang_restarts).
  void SetHang(std::string verdict, int restarts);
  // The disk figures of its etcd (etcd/disk_latency.h), reported in State().
  void SetDiskLatency(const DiskLatency& d);

 private:
  // Starts (or keeps) etcd with `launch`; `on_data`: on the member data in place (not a join
  // or a bootstrap, which start on an empty dir). False (etcd stopped) if `on_data` and the
  // data dir no longer holds a member.
  bool RunEtcd(const EtcdLaunch& launch, bool on_data);
  // REQUIRES: mu_ held. The start decision, and the one step it says to take.
  void MaybeStartEtcd() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  StartView ObserveStart();
  // Moves a partial data dir aside (never a member's). False if that failed.
  bool SetPartialDataAside();
  bool EverJoined();
  bool Bootstrapping();  // the initial-bootstrap marker, and never joined
  void MarkJoined();
  // The restore whose fenced start this node's etcd is in ("" if none).
  std::string FencedRestoreId();
  // How etcd runs on this node's data: BootstrapLaunch, on the fence port while fenced.
  EtcdLaunch LaunchForData();
  // The flags of the running etcd that differ from those it would start with now (PendingFlags);
  // empty when none runs or its command line cannot be read.
  std::vector<std::string> PendingRestart();
  // RS7 (reconcile/restart_roll.h): OK if every other member answers Status with a leader and
  // none is a learner, through this node's etcd; Unavailable naming the one that does not.
  absl::Status OthersServe();
  // REQUIRES: mu_ held. Drops the fence and restarts etcd on its client URL.
  absl::Status UnfenceLocked(const std::string& restore_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestartEtcdLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeUnfenceSelf();
  // FailedPrecondition while this node stopped its etcd for a destroy (SD1): no order starts it.
  absl::Status RefuseWhileDestroyed(const char* what);
  // REQUIRES: mu_ held. Records the destroy on this node's disk and stops etcd (data kept).
  absl::Status CarryOutDestroyLocked(const DestroyMark& mark) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Logs `msg` at info, but the same message at most once a minute.
  void Note(const std::string& msg);
  // REQUIRES: mu_ held. EV1: runs `b` from now on (the etcd-version marker when it is an
  // etcd.versions entry, none for etcd.binary).
  absl::Status UseBinary(const EtcdBinary& b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // REQUIRES: mu_ held. A join etcd refused (it exited at once): stop it, set the partial dir
  // aside, count it, back off, and record it once. Returns the order's answer.
  absl::Status JoinRefused(const std::string& reason, const std::string& leader)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why etcd last exited on its own, from its log since it was started ("" if it has not).
  std::string EtcdExitReason();
  void Record(const std::string& action, const std::string& reason, const std::string& result);
  // A restore order's steps (node_restore.cc). RestoreFailed records and logs `s`.
  absl::Status RestoreFailed(absl::Status s) ABSL_LOCKS_EXCLUDED(restore_mu_);
  absl::Status BeginRestore(const peer::RestoreRequest& req, bool* repeat, bool* applied)
      ABSL_LOCKS_EXCLUDED(mu_, restore_mu_);
  // REQUIRES: mu_ held. Sets the old data aside and puts the staged restore in place, then
  // starts etcd (fenced when ordered).
  absl::Status ApplyRestoreLocked(const peer::RestoreRequest& req, bool repeat,
                                  const NodeRestorePlan& plan) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ApplyRestoreLocked's first steps: walk the staged DB (refusing it untouched), then stop
  // etcd and set its data aside (`*aside`: where, "" when a partial dir was removed instead).
  absl::Status CheckStagedLocked(const peer::RestoreRequest& req, const NodeRestorePlan& plan,
                                 const SnapshotRestore& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SetAsideForRestoreLocked(const peer::RestoreRequest& req, bool repeat,
                                        std::string* aside) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Config& config_;
  const LocalNodeEnv env_;
  NodeDisk& disk_;
  Runner& runner_;

  Mutex mu_;  // serializes orders and the control pass's own start decision
  // A restore's state, under a lock of its own that nothing holds for long: State() reports it
  // even while a restore order fetches its backup (without mu_: see node_restore.cc).
  Mutex restore_mu_;
  std::string restore_error_ ABSL_GUARDED_BY(restore_mu_);  // why the last restore order failed
  std::string restoring_ ABSL_GUARDED_BY(restore_mu_);      // the restore being staged ("" none)
  // Without etcdutl, the restore whose backup the in-place edit refused, and why: the node
  // reports it (the coordinator restores without the bump instead) and answers that restore's
  // orders at once rather than fetching the backup again.
  std::string bump_refused_id_ ABSL_GUARDED_BY(restore_mu_);
  absl::Status bump_refused_ ABSL_GUARDED_BY(restore_mu_);
  // The client certificate's common name, read once it exists (State()).
  // This node's certificates' expiry into `s` (re-read at most once a minute).
  void AddCertificatesLocked(peer::NodeState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(client_user_mu_);
  Mutex client_user_mu_;
  std::string client_user_ ABSL_GUARDED_BY(client_user_mu_);
  // This node's certificates' expiry, read at most once a minute (State is asked every pass).
  std::vector<CertExpiry> certs_ ABSL_GUARDED_BY(client_user_mu_);
  std::optional<std::chrono::steady_clock::time_point> certs_read_at_
      ABSL_GUARDED_BY(client_user_mu_);
  std::atomic<bool> held_{false};  // the leader stopped etcd; do not restart it on our own
  // For DataLostUnderEtcd: etcd was last started on member data (not a join or a bootstrap),
  // and the data dir held member data since it was started.
  std::atomic<bool> started_on_data_{false};
  std::atomic<bool> member_data_seen_{false};
  Mutex note_mu_;
  RepeatFilter repeats_ ABSL_GUARDED_BY(note_mu_);
  // Refused joins in a row (reset once etcd joins), etcd's reason for the last one, and when
  // the next join order may launch etcd again (until then it is answered at once).
  int join_failures_ ABSL_GUARDED_BY(mu_) = 0;
  std::string join_error_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point join_retry_at_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> join_started_{false};  // a join order started etcd, not yet joined
  std::atomic<uint64_t> log_offset_{0};    // etcd's log size when etcd was last started
  std::atomic<int> restarts_at_run_{0};    // the runner's restarts() then
  // EtcdExitReason's cache: the restarts count it was read at, and what it read.
  Mutex hang_mu_;
  std::string hang_ ABSL_GUARDED_BY(hang_mu_);
  int hang_restarts_ ABSL_GUARDED_BY(hang_mu_) = 0;
  DiskLatency disk_latency_ ABSL_GUARDED_BY(hang_mu_);
  Mutex exit_mu_;
  int exit_read_at_ ABSL_GUARDED_BY(exit_mu_) = -1;
  std::string exit_reason_ ABSL_GUARDED_BY(exit_mu_);
};

}  // namespace steward
