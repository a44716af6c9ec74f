// The steward agent: wiring and startup/teardown order for one node.
//
// Start(): prepare the data dir, adopt an etcd a previous agent left running, serve the peer
// API, then start three threads:
//   - control: while etcd is not wanted and not held stopped by the leader, decide whether this
//     node may start it on its own:
//       * the data dir holds a member: start it (etcd rejoins its cluster by itself);
//       * no data, the node is one of the first cluster.size nodes, it has never been a member
//         (no "joined" marker), and no running cluster knows it: start as a member of the
//         initial cluster — the same initial cluster and token on every node, so however the
//         agents start, they form one cluster, and a minority cannot form one alone;
//       * otherwise wait for the leader's orders (a wiped node, a spare).
//   - leadership: campaign for / keep the lease-backed leader key in etcd;
//   - reconcile: while leading, run the reconciler (observe, plan one step, act).
// Shutdown(): resign, stop the threads and the peer API, then stop etcd.
//
// The agent is also the NodeHandler behind the peer API: the leader's orders land here.
//
// Where things are:
//   agent.cc          wiring, Start/Shutdown, the three loops
//   start.cc          how a node starts etcd on its own (DecideStart on GatherStartView,
//                     start_view.h), the data dir's state and markers
//   orders.cc         the leader's orders (join, stop, wipe, unfence) and the reported state
//   node_restore.cc   how a node carries out a restore order
//   agent_main.cc     main(): flags, config, logging, signals
#pragma once

#include <atomic>
#include <map>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "agent/start_view.h"
#include "backup/scheduler.h"
#include "backup/store.h"
#include "common/status.h"
#include "config/config.h"
#include "etcd/client.h"
#include "etcd/flags.h"
#include "peer/client.h"
#include "peer/leadership.h"
#include "peer/server.h"
#include "reconcile/reconciler.h"
#include "reconcile/restore.h"
#include "reconcile/start_decision.h"
#include "runner/runner.h"

namespace steward {

class Agent : public NodeHandler {
 public:
  explicit Agent(Config config);
  ~Agent() override;

  // REQUIRES: a validated config. FailedPrecondition if the data dir cannot be created,
  // Unavailable if the agent port cannot be bound.
  absl::Status Start();
  // Stops the threads and, if `stop_etcd`, etcd (gracefully). Idempotent.
  void Shutdown(bool stop_etcd = true);

  // NodeHandler: the leader's orders.
  peer::NodeState State() override;
  absl::Status Join(const peer::StartRequest& req) override;
  absl::Status StopEtcd() override;
  absl::Status Wipe(const peer::OrderHeader& header) override;
  absl::Status Restore(const peer::RestoreRequest& req) override;
  absl::Status Unfence(const peer::UnfenceRequest& req) override;

 private:
  // Builds the clients and servers (after the TLS files exist).
  absl::Status Wire();
  void ControlLoop();
  void LeadershipLoop();
  void ReconcileLoop();
  void MaybeStartEtcd();
  // Starts (or keeps) etcd with `launch`; `on_data`: on the member data in place (not a join
  // or a bootstrap, which start on an empty dir).
  void RunEtcd(const EtcdLaunch& launch, bool on_data);
  DataDirState DataState() const;
  // What DecideStart needs (GatherStartView, agent/start_view.h).
  StartView ObserveStart();
  bool HasMemberData() const;  // DataState() == kMember
  // Moves a partial data dir aside (never a member's). False if that failed.
  bool SetPartialDataAside();
  bool EverJoined() const;
  bool Bootstrapping() const;  // the initial-bootstrap marker, and never joined
  std::string AppliedRestoreId() const;
  // The restore whose fenced start this node's etcd is in ("" if none).
  std::string FencedRestoreId() const;
  // How etcd runs on this node's data: BootstrapLaunch, on the fence port while fenced.
  EtcdLaunch LaunchForData() const;
  // REQUIRES: order_mu_ held. Drops the fence and restarts etcd on its client URL.
  absl::Status UnfenceLocked(const std::string& restore_id);
  // While fenced: unfence once the store says the restore is settled (its coordinator may have
  // died before it ordered this node).
  void MaybeUnfenceSelf();
  // Moves etcd's data dir to <data_dir>/removed/<label> (keeping only the newest such copy).
  absl::Status SetDataAside(const std::string& label, std::string* moved_to);
  void MarkJoined();
  // Sleeps up to `d`; returns false if the agent is stopping.
  bool SleepFor(std::chrono::milliseconds d);
  // Logs `msg` at info, but the same message at most once a minute.
  void Note(const std::string& msg);

  const Config config_;
  std::unique_ptr<Runner> runner_;
  std::unique_ptr<EtcdClient> peers_client_;  // the other nodes' client URLs
  // The other initial nodes' agents (the first cluster.size nodes), for the bootstrap rule.
  std::map<std::string, std::unique_ptr<PeerClient>> initial_agents_;
  std::unique_ptr<EtcdClient> cluster_client_;  // every node's client URL
  std::unique_ptr<EtcdClient> local_client_;    // this node's client URL
  std::unique_ptr<TermGuard> terms_;
  std::unique_ptr<PeerServer> server_;
  std::unique_ptr<Leadership> leadership_;
  std::unique_ptr<BackupStore> store_;  // null without backup.store
  std::unique_ptr<BackupScheduler> backups_;
  std::unique_ptr<RestoreCoordinator> restorer_;
  std::string restore_error_;  // guarded by order_mu_
  std::unique_ptr<Reconciler> reconciler_;

  std::mutex order_mu_;  // serializes orders and the control loop's own start decision
  std::atomic<bool> held_{false};  // the leader stopped etcd; do not restart it on our own
  // For DataLostUnderEtcd: etcd was last started on member data (not a join or a bootstrap),
  // and the data dir held member data since it was started.
  std::atomic<bool> started_on_data_{false};
  std::atomic<bool> member_data_seen_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread control_, leadership_thread_, reconcile_thread_;
  RepeatFilter repeats_;
};

// The agent's main(): flags, config, logging, signals. Returns the process exit status
// (2 for a bad command line or config).
int AgentMain(int argc, char** argv);

}  // namespace steward
