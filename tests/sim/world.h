// The world: the simulation's nodes, the models they run against, and the step loop that
// drives them (as TigerBeetle's testing/cluster.zig ties its models together). One World is one
// run: single-threaded, on virtual time, every random choice from its seeded streams.
//
// The World holds all the state the models share (the nodes, their disks, the clusters, the
// store, the links, the backups taken), so the models' world-side behaviour is written as World
// methods; each is defined in the file of the model or checker it belongs to (the groups
// below). The seams the agents call (SimEtcd, SimPeer, SimDisk, SimRunner, SimClock, SimStore)
// are classes of their own over it.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/config.h"
#include "node/local_node.h"
#include "peer/leadership.h"
#include "peer/server.h"
#include "reconcile/reconciler.h"
#include "restore/coordinator.h"
#include "sim/backup_model.h"
#include "sim/disk_model.h"
#include "sim/etcd_cluster.h"
#include "sim/simulation.h"
#include "sim/store_model.h"

namespace steward::sim {

class SimClock;
class SimEtcd;
class SimPeer;
class SimRunner;

// Thrown from inside a call to model the caller's process dying at that point: it unwinds the
// agent's code, whose objects are then destroyed like a dead process's memory.
struct CrashPoint {
  int node;
};

struct Node {
  int index = 0;
  NodeSpec spec;
  Config config;
  bool initial = false;
  bool agent_up = true;
  Ms restart_at = -1;  // a crashed node comes back then
  Ms paused_until = 0;
  bool etcd_up = false;
  bool in_code = false;        // its Tick is on the stack
  bool serving_fence = false;  // etcd listens on the fence URL, not the client URL
  // The runner: what the agent asked for (ProcessRunner's state, which dies with the agent).
  bool runner_wanted = false;
  std::vector<std::string> etcd_flags;
  std::vector<std::string> running_flags;  // etcd_flags when etcd last started
  // Pauses in the middle of a call so far, and their count when a restart order reached this
  // node: a pause between the node's own last look (RS7) and its stop is the one window no
  // check can close.
  int mid_call_pauses = 0, pauses_at_restart_order = 0;
  int restarts = 0;
  std::string binary;  // the etcd binary the runner starts (Options::upgraded)
  Disk disk;
  Ms skew = 0;
  std::unique_ptr<SimClock> clock;
  std::unique_ptr<SimDisk> disk_seam;
  std::unique_ptr<SimRunner> runner;
  std::unique_ptr<SimEtcd> cluster_client, peers_client, local_client;
  std::map<std::string, std::unique_ptr<SimPeer>> initial_agents;
  // The agent's node side, the very code the agent runs (node/local_node.h).
  std::unique_ptr<TermGuard> terms;
  std::unique_ptr<LocalNode> local;
  std::unique_ptr<Leadership> leadership;
  std::unique_ptr<RestoreCoordinator> restorer;
  std::unique_ptr<Reconciler> reconciler;
  Ms next_restore_pass = 0;
};

class World {
 public:
  explicit World(const Options& o);
  ~World();
  Result Run();

  // --- used by the seams ---

  // Time (clock_model.h).
  Ms now() const { return now_; }
  Ms Wall(int node) const { return kWallEpoch + now_ + nodes_[node]->skew; }
  void Sleep(Ms d) {
    now_ += d;
    dirty_ = true;
  }
  static constexpr Ms kWallEpoch = 1'790'000'000'000;  // 2026-09

  // The trace and the verdict (world.cc).
  void Trace(const std::string& line);
  void Trace(int node, const std::string& line) {
    Trace(absl::StrCat(nodes_[node]->spec.name, " ", line));
  }
  void Violation(const std::string& what);
  // Options::diverge: the leader's report `report` (its status key) says a member is removed
  // for its data: that member's data must differ (invariants.cc).
  void CheckRepair(const std::string& report);

  // Faults (faults.cc): a crash point in the caller's code.
  void CallPoint(int caller);  // may throw CrashPoint

  // The network (network.cc).
  bool Reach(int a, int b) const {
    return a == b || (!cuts_.count({a, b}) && !cuts_.count({b, a}));
  }
  bool Paused(int n) const { return nodes_[n]->paused_until > now_; }
  bool AgentAnswers(int caller, int n) const {
    // A node whose code is on the stack (stopped inside a call) holds its locks: an order to
    // it would wait, and here times out.
    return nodes_[n]->agent_up && !Paused(n) && Reach(caller, n) &&
           (n == caller || !nodes_[n]->in_code);
  }
  absl::Status Admit(int n, const peer::OrderHeader& h, const char* what, bool promise);

  // The etcd model (etcd_cluster.cc).
  // The node whose etcd serves on `url` for `caller`, or -1.
  int Answering(int caller, const std::string& url);
  Cluster* ClusterOf(int n) {
    auto it = clusters_.find(nodes_[n]->disk.cluster);
    return it == clusters_.end() ? nullptr : &it->second;
  }
  // The member serves on its cluster's quorum side (the leader reaches it).
  bool InQuorum(int n);
  // Brings the clusters up to date with the nodes: expired leases, raft leaders, the quorum
  // side caught up, removed members stopped. Cheap when nothing changed.
  void Refresh();
  int NodeByPeerUrl(const std::string& url) const;
  Member* FindMember(Cluster& c, uint64_t id) {
    for (auto& m : c.members) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  int NodeOfMember(const Cluster& c, uint64_t id) const;
  // What etcd does when the runner starts it with `flags` (on member data: start on it; on an
  // empty dir: bootstrap or join as the flags say).
  void StartEtcd(int n);

  // Backups and restores (backup_model.cc).
  absl::Status RestoreCluster(int n, const std::string& backup, const SnapshotRestore& r,
                              Disk* staged);
  // Whether the in-place edit refuses `backup` (Options::in_place_refusals): the same answer on
  // every node, as for one backup's bytes.
  bool InPlaceRefuses(const std::string& backup) const {
    uint64_t h = 1469598103934665603ull;
    for (char ch : backup) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ull;
    return static_cast<double>(h % 1000) < o_.in_place_refusals * 1000;
  }

  // Ground truth the seams report to (invariants.cc).
  // etcd's data of node `n` is about to be set aside or deleted.
  void BeforeDataGoes(int n, const std::string& why);
  void CheckNoRestoredLease(int n);
  // A replay put write `w` back into cluster `cluster`.
  void Replayed(uint64_t cluster, int w);
  // Node `n` is about to serve clients: its restore's replay must have brought every write
  // the restore counted on.
  void CheckReplayed(int n);

  // The operator (operator_model.cc): stewardctl destroy --force / undestroy
  // (Options::destroy_at).
  bool destroyed() const { return destroyed_; }
  bool StoreUp() const { return store_.mode == SimStore::Mode::kUp; }
  void OperatorDestroy();
  void OperatorUndestroy();
  // stewardctl restart: a new restart roll of every node (Options::restart_every).
  void OperatorRestart();
  // A restart order is about to reach node `n` (the invariant of Options::restart_every).
  void CheckRestartSafe(int n);

  std::mt19937_64& rng() { return rng_; }
  SimStore& store() { return store_; }
  Result& result() { return result_; }
  const std::vector<std::unique_ptr<Node>>& nodes() const { return nodes_; }
  bool stopped() const { return !result_.ok; }
  std::map<uint64_t, Cluster>& clusters() { return clusters_; }

 private:
  // An agent's life (agent_wiring.cc).
  void Boot(int n);  // (re)start a node's agent: fresh objects, the disk as it was
  void Kill(int n, bool etcd_too);

  // The step loop's parts (world.cc).
  void Tick(int n);
  void TickBody(int n);
  void Write();

  // The etcd model (etcd_cluster.cc).
  void Bootstrap(int n, const std::vector<std::string>& flags);
  void TryJoin(int n, const std::vector<std::string>& flags);
  // The highest version a running member of `c` runs (Options::upgraded).
  std::string RunningVersion(const Cluster& c) const;
  // Forgets clusters no disk holds any more.
  void Prune();

  // Backups (backup_model.cc).
  void TakeBackup();
  // The leader's DeltaWriter, as a model: stores the acknowledged writes since the end of the
  // chain it follows (Options::delta_every).
  void TakeDelta();
  // The writes the intact part of `backup`'s chain holds, its snapshot's included, up to
  // `to` (0: the whole intact chain). An object or meta gone from the store ends it.
  // `reached` (optional): the revision the intact part reaches.
  std::set<int> HeldByChain(const std::string& backup, int64_t to,
                            int64_t* reached = nullptr) const;

  // Faults (faults.cc).
  void Fault();
  // Brings back what a fault took for a while: agents restart, links and the store heal.
  void Scheduled();
  void HealAll();
  // Options::reimage_at: the first node whose etcd runs a member is re-imaged.
  void ScriptedReimage();
  // Options::lose_first_leader, once a first leader is elected: every node dies, and the first
  // that held data comes back re-imaged.
  void LoseFirstLeader();

  // Invariants (invariants.cc).
  bool Healthy(std::string* why);
  bool EvidenceOfExistence(int except) const;
  // Clusters whose voters' disks still hold a majority of them; only those that have served
  // clients unless `unserved_too` (Cluster::served).
  std::vector<uint64_t> ClustersAbleToReachQuorum(bool unserved_too = false) const;
  void CheckWrites(bool after_fault);
  // No two clusters can reach quorum.
  void CheckOneQuorum();
  // After the liveness phase (Healthy said `why`): not healthy is a violation unless waiting
  // for an operator is right.
  void CheckLiveness(const std::string& why);

  Options o_;
  std::mt19937_64 rng_;
  Ms now_ = 0;
  bool dirty_ = true;
  Ms refreshed_at_ = -1;
  std::vector<std::unique_ptr<Node>> nodes_;
  std::map<uint64_t, Cluster> clusters_;
  // The highest revision a cluster that served clients reached before it was lost (pruned).
  int64_t lost_rev_ = 0;
  SimStore store_;
  std::set<std::pair<int, int>> cuts_;
  Ms heal_cuts_at_ = -1, heal_store_at_ = -1;
  std::map<std::string, BackupData> backups_;
  std::string last_backup_;  // the newest backup by history: the one taken last
  std::string prev_backup_;  // the one taken before it
  // Delta backups (Options::delta_every): each base's chain as stored, the base the writer
  // follows and where its chain ends, when it notices a newer backup; its own random stream,
  // so that runs without deltas stay as they were.
  std::map<std::string, std::vector<DeltaRecord>> deltas_;
  std::string delta_base_;
  Ms delta_switch_at_ = -1;
  Ms next_delta_ = 0;
  std::mt19937_64 delta_rng_;
  std::mt19937_64 diverge_rng_;  // Options::diverge's faults
  // Writes a restore's replay owes the cluster it restored (held in the store until then).
  std::map<uint64_t, std::set<int>> pending_replay_;
  // Leases each restored cluster brought back from its backup (none may outlive the fence).
  std::map<uint64_t, std::set<int64_t>> restored_leases_;
  int next_write_ = 0;
  std::set<int> lost_;  // writes no longer held (to a fault, or a justified restore)
  std::set<std::string> restores_seen_;
  std::deque<std::string> trace_;
  Ms next_backup_ = 20000;
  bool in_fault_ = false;
  bool healing_ = false;
  bool in_pause_ = false;
  bool trap_sprung_ = false, trap_done_ = false;  // Options::lose_first_leader
  bool destroyed_ = false;                        // the store holds the operator's destroy mark
  bool undestroy_pending_ = false;

 public:
 public:
  int current_ = -1;  // the node whose code runs (only it can crash or pause mid-call)
  int speaker_ = -1;  // the node whose log lines these are (an order's handler: the target)
 private:
  Result result_;
};

}  // namespace steward::sim
