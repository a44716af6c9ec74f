// The steward agent: wiring and startup/teardown order for one node.
//
// Start(): prepare the node dir and TLS files, wire the real seams (gRPC clients, the node's
// disk, the process runner, the backup store), adopt an etcd a previous agent left running,
// serve the peer API, then start its threads:
//   - control: this node's side (LocalNode::ControlPass: start etcd on its own when the start
//     decision says so, D1, markers, fences), certificate renewal, and the restore
//     coordinator's passes (restores are coordinated without etcd);
//   - leadership: campaign for / keep the lease-backed leader key in etcd;
//   - reconcile: while leading, run the reconciler (observe, plan one step, act);
//   - watchdog: probe this node's etcd and restart it in place when it hangs
//     (node/hang_watch.h; off with etcd.hang_restart_after: 0).
// Shutdown(): cancel what is in flight (a restore tool, orders waiting on peers), resign, stop
// the threads and the peer API, then stop etcd.
//
// Where things are:
//   agent.cc            wiring (the Wire* steps), Start/Shutdown, trust and renewal orders
//   agent_loops.cc      the control, leadership and reconcile loops, what each pass does
//   watchdog.cc         the watchdog's loop and its probes
//   control_wiring.h    WireControl: the control objects, linked (the simulation calls it too)
//   agent_main.cc       main(): flags, config, logging, signals
//   node/local_node.h   this node's side: start.cc (how a node starts etcd on its own),
//                       orders.cc (the leader's orders), node_restore.cc (a restore order)
//   node/node_disk.h    the node's disk (data dir, markers, restore staging)
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "admin/server.h"
#include "backup/delta_writer.h"
#include "backup/drill_scheduler.h"
#include "backup/scheduler.h"
#include "backup/store.h"
#include "common/dir_watch.h"
#include "common/mutex.h"
#include "common/status.h"
#include "config/config.h"
#include "control/history.h"
#include "etcd/client.h"
#include "etcd/flags.h"
#include "etcd/version.h"
#include "node/hang_watch.h"
#include "node/local_node.h"
#include "node/node_disk.h"
#include "node/start_decision.h"
#include "peer/client.h"
#include "peer/leadership.h"
#include "peer/server.h"
#include "reconcile/auth.h"
#include "reconcile/reconciler.h"
#include "reconcile/space.h"
#include "restore/coordinator.h"
#include "runner/runner.h"

namespace steward {

class Agent {
 public:
  explicit Agent(Config config);
  ~Agent();

  // REQUIRES: a validated config. FailedPrecondition if the data dir cannot be created,
  // Unavailable if the agent port cannot be bound.
  absl::Status Start();
  // Stops the threads and, if `stop_etcd`, etcd (gracefully). Idempotent.
  void Shutdown(bool stop_etcd = true);

 private:
  // Builds the clients and servers (after the TLS files exist).
  absl::Status Wire();
  absl::Status WireClients(const std::shared_ptr<grpc::ChannelCredentials>& client_creds);
  // The control objects (control_wiring.h), over this node's real seams.
  void WireControlParts(const std::shared_ptr<grpc::ChannelCredentials>& client_creds);
  LocalNodeEnv NodeEnv();
  void WireServer(const std::shared_ptr<grpc::ServerCredentials>& server_creds);
  void WireBackups();
  void WireAdmin();
  void WireKeepers();
  // stewardctl pki renew (tls.mode issued): the control loop renews this node's certificates.
  absl::Status RequestRenewal();
  // stewardctl pki rotate-ca's step on this node (pki/ca_rotation.h): stages the phase, issues
  // what it calls for, restarts etcd when what it trusts changed, then the agent itself.
  absl::Status SetTrust(const peer::SetTrustRequest& req);
  // The leader's restore drills (backup.drill_interval), recorded in the history.
  void WireDrills();
  bool Stopping();
  // The etcd version this node runs ("" if it cannot be told): the binary the etcd-version
  // marker names, else etcd.binary's, as the probe found them.
  std::string RunningEtcdVersion();
  void ControlLoop();
  // ControlLoop's steps, with its clocks (defined in agent.cc).
  struct ControlTimes;
  void MaybeRenewTls(ControlTimes& t);
  void MaybeRestorePass(ControlTimes& t, bool quorum_up);
  void MaybeReleaseMemory(ControlTimes& t, bool quorum_up);
  // Every 10 minutes: this member's DB members bucket against the live member list
  // (etcd/members_bucket.h, etcd #19557); a difference seen twice in a row is logged and set in
  // steward_etcd_membership_mismatch.
  void MaybeCheckMembers(ControlTimes& t, bool quorum_up);
  std::chrono::milliseconds ControlPause(const ControlTimes& t, bool quorum_up);
  void LeadershipLoop();
  void ReconcileLoop();
  // S6 (reconcile/space.h): no steward leader is seen, and no lower-named agent answers — this
  // agent runs the NOSPACE recovery that NOSPACE keeps any new leader from running.
  bool ActsForSpaceWithoutLeader();
  // Sleeps up to `d`; returns false if the agent is stopping.
  bool SleepFor(std::chrono::milliseconds d);
  // The watchdog (node/hang_watch.h): its probes over this agent's handles, and its loop.
  HangProbes WatchProbes();
  void WatchdogLoop();
  // etcd's own /metrics text (the metrics port when set, else the client port); nullopt if it
  // does not answer within 2 s.
  std::optional<std::string> EtcdMetricsText();
  // One sample of the disk histograms: the p99s since the last one to the node's state and
  // /metrics (etcd/disk_latency.h).
  void SampleDisk();
  // The watchdog thread's: the histograms at the last figure, the figures, what was logged.
  Buckets wal_fsync_before_, backend_commit_before_;
  DiskLatency disk_latency_;
  std::string disk_slow_said_;
  // Brings the reconcile loop's next pass forward (a nudge from a node, or leadership won).
  void WakeReconciler();
  // Tells the steward leader this node's state changed (best effort). False when no leader is
  // known yet: the caller keeps the change to tell once one is (a node that starts empty looks
  // for the leader while its first control pass already has news for it).
  bool NudgeLeader();
  // The admin port's answers (admin/server.h).
  std::optional<std::string> NotAlive();
  std::optional<std::string> NotReady();
  std::string ScrapeMetrics();
  std::string SeenLeader();

  const Config config_;
  std::unique_ptr<NodeDisk> disk_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<EtcdClient> peers_client_;  // the other nodes' client URLs
  // The other initial nodes' agents (the first cluster.size nodes), for the bootstrap rule.
  std::map<std::string, std::unique_ptr<PeerClient>> initial_agents_;
  // Every other node's agent, for nudges.
  std::map<std::string, std::unique_ptr<PeerClient>> agents_;
  // The control loop sleeps on this: data dir changes and Shutdown() wake it.
  DirWatch control_wake_;
  std::unique_ptr<EtcdClient> cluster_client_;  // every node's client URL
  std::unique_ptr<EtcdClient> local_client_;    // this node's client URL
  // The watchdog's own handles, with its probe deadline (the loops' clients keep theirs).
  std::unique_ptr<EtcdClient> watch_local_, watch_peers_;
  std::unique_ptr<HangWatch> hang_watch_;  // null: etcd.hang_restart_after is 0
  std::unique_ptr<TermGuard> terms_;
  std::unique_ptr<BackupStore> store_;  // null without backup.store
  std::unique_ptr<LocalNode> node_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<Leadership> leadership_;
  std::unique_ptr<BackupScheduler> backups_;
  std::unique_ptr<DeltaWriter> deltas_;  // backup.delta_interval > 0 and a store
  std::unique_ptr<RestoreCoordinator> restorer_;
  std::unique_ptr<Reconciler> reconciler_;
  std::unique_ptr<SpaceKeeper> space_;  // the leader's NOSPACE recovery (reconcile/space.h)
  std::unique_ptr<AuthKeeper> auth_;    // auth.mode on/off (reconcile/auth.h); else null
  std::unique_ptr<AdminServer> admin_;
  std::unique_ptr<History> history_;  // decisions and orders, appended to etcd
  // The leader's restore drills (backup.drill_interval > 0 and a store). Declared after what its
  // thread uses, so that it is joined first.
  std::unique_ptr<DrillScheduler> drills_;
  // What etcd.binary and each etcd.versions entry said to --version when the agent started
  // (a reload restarts the agent, and so probes again). Written before the threads start.
  std::vector<EtcdBinary> binaries_;
  // When each loop last came round (steady clock, ns): /healthz.
  std::atomic<int64_t> control_beat_{0}, leadership_beat_{0}, reconcile_beat_{0};
  // The leadership as of the last tick, for the admin port (never waits on etcd).
  std::atomic<bool> leading_{false};
  Mutex seen_leader_mu_;
  std::string seen_leader_ ABSL_GUARDED_BY(seen_leader_mu_);
  Mutex trust_mu_;  // one CA rotation step (SetTrust) at a time

  std::atomic<bool> stopping_flag_{false};  // read by cancellable calls without mu_
  // stewardctl pki renew asked: the control loop renews this node's certificates now.
  std::atomic<bool> renew_requested_{false};
  std::shared_ptr<CallCanceller> canceller_ = std::make_shared<CallCanceller>();
  Mutex mu_;
  CondVar cv_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool nudged_ ABSL_GUARDED_BY(mu_) = false;  // the reconcile loop should pass now
  std::thread control_, leadership_thread_, reconcile_thread_, delta_thread_, watchdog_thread_;
};

// The agent's main(): flags, config, logging, signals. Returns the process exit status
// (2 for a bad command line or config).
int AgentMain(int argc, char** argv);

}  // namespace steward
