// The fault suite (issue 13): real agents and real etcd (TLS on, a file backup store taking a
// backup every few seconds), a writer that keeps a ledger of every acknowledged write, faults
// injected one per cycle, and after each cycle the checks that matter to a manager:
//   - every acknowledged write is there with its value; after a total loss, every one up to
//     the restored backup's revision (the rest is counted as the restore's loss and printed);
//   - one cluster ID among all members;
//   - no member rolled back: a member ID listed before and after has a raft index no lower;
//   - the cluster back at its desired size, every voter healthy, no learner (bounded wait).
// tests/faults/fault_test.cc runs every kind once (make test) and seeded random sequences
// (make faults SEED=… CYCLES=…). docs/reliability.md reports a long run.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../integration/harness.h"
#include "../integration/s3rver.h"
#include "config/config.h"

namespace steward::testing {

enum class FaultKind {
  kKillEtcd,           // kill -9 of a follower's etcd
  kKillAgent,          // kill -9 of an agent, restarted at once
  kKillNode,           // kill -9 of an agent and its etcd, restarted after a second
  kKillEtcdLeader,     // kill -9 of the etcd leader
  kKillStewardLeader,  // kill -9 of the steward leader's agent
  kKillLeaderMidJoin,  // a node is wiped; the steward leader is killed while it re-adds it
  kPauseAgent,         // SIGSTOP of an agent for 5 s
  kPauseEtcd,          // SIGSTOP of an etcd for 5 s
  kPauseNode,          // SIGSTOP of an agent and its etcd for 5 s (a minority)
  kPauseMajority,      // SIGSTOP of two of three members' nodes for 5 s
  kHangEtcd,           // SIGSTOP of a voter's etcd past the hang bound (10 s): its agent must
                       // restart it in place within 30 s (node/hang_decision.h), data kept
  kFlipValue,          // a byte of a stored value changed in a stopped follower's DB file: the
                       // leader's hash check must name it and rejoin it (reconcile/divergence.h)
  kWipe,               // a node's etcd data dir deleted (agent and etcd killed, agent restarted)
  kPartialDataDir,     // a node's WAL deleted, its snap dir left (a half-written data dir)
  kQuorumStop,         // two of three nodes killed, brought back 3 s later
  kTotalLoss,          // every node killed and its data deleted: a restore from backup
  kKillCoordinatorMidRestore,  // total loss; the restore's coordinator killed mid-restore
  kStoreMissing,               // the backup store's root moved away for 10 s while a node is killed
  kSkewedClock,  // an agent restarted with its clock 2 h ahead (faketime), a member lost
  kFullDisk,     // a node's data dir (a 512 MiB tmpfs) filled for 8 s (root only)
  // Network faults (root only: each node in a network namespace of its own).
  kPartitionNode,    // a member cut off from everyone for 4-14 s (replace_after is 8 s)
  kPartitionLeader,  // the steward leader's node cut off for 8 s
  kCutLink,          // the link between two members cut for 8 s; both reach the third
  kCutOneWay,        // what one member sends another dropped for 8 s; the reverse flows
  kMuteNode,         // what a member sends every other node dropped for 8 s; it still hears
  // Store faults (the S3 rig: s3rver in the test's namespace).
  kStoreDown,  // the store's server stopped while a member is wiped: membership
               // changes wait (rule V1) and say why; healed once it is back
  kStoreSlow,  // the store's server stopped 4/5 of every 0.5 s while a member is
               // wiped (it answers, slowly): healed while it crawls
  kCount,
};

const char* FaultName(FaultKind k);
// Kinds that need what this machine may not have (root for a tmpfs); empty if it can run,
// else why not.
std::string FaultUnavailable(FaultKind k);

// One acknowledged write.
struct Acked {
  std::string value;
  int64_t revision = 0;
};

// Puts f/<seq> = <value> every ~10 ms through every node's client URL and records each
// acknowledged one with the revision etcd gave it.
class Writer {
 public:
  explicit Writer(const TestCluster& c);
  ~Writer();
  void Stop();
  // The ledger so far, and the next sequence number (writes below it were tried).
  std::map<int64_t, Acked> Ledger();
  int64_t NextSeq() const { return seq_.load(); }
  // Forgets acknowledged writes below `seq` with a revision above `revision` (a total loss
  // restored an older backup); returns how many.
  size_t ForgetAfter(int64_t seq, int64_t revision);
  int64_t acked() const { return acked_.load(); }
  int64_t failed() const { return failed_.load(); }

 private:
  void Run();
  const TestCluster& c_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> seq_{0};
  std::atomic<int64_t> acked_{0};
  std::atomic<int64_t> failed_{0};
  std::mutex mu_;
  std::map<int64_t, Acked> ledger_;
  std::thread thread_;
};

struct CycleResult {
  FaultKind kind = FaultKind::kKillEtcd;
  bool skipped = false;
  std::string skip_reason;
  bool recovered = false;
  std::chrono::milliseconds to_healthy{0};  // from the fault's end to healthy at size
  int64_t acked = 0;                        // writes acknowledged during the cycle
  size_t lost = 0;                          // acknowledged writes missing (a violation)
  size_t restore_loss = 0;                  // writes after the restored backup (reported)
  bool restored = false;
  std::string note;                     // how the fault went, when it may differ
  std::vector<std::string> violations;  // what a check found, for the failure message
};

// Where the rig's backups go.
enum class StoreKind { kFile, kS3 };

// A cluster of `nodes` agents (`size` voters; the others spares) under faults. As root, each
// node runs in a network namespace of its own (TestCluster's netns mode), for the network
// faults. With StoreKind::kS3 the store is a real s3rver (on the namespaces' bridge as root).
class FaultRig {
 public:
  // `upgrade`: every node lists etcd 3.4 (Debian's, etcd.binary) and 3.5 in etcd.versions,
  // and Start() rolls the cluster to 3.5 before the faults (issue 32: capabilities proven
  // together): the faults then run on 3.5 while etcd.binary still names 3.4.
  FaultRig(int subnet, int nodes, int size = 3, StoreKind store = StoreKind::kFile,
           bool upgrade = false);
  ~FaultRig();
  TestCluster& cluster() { return *c_; }
  // Starts the agents and the writer (and, with `upgrade`, rolls the cluster to 3.5 first);
  // false if the cluster did not form or the roll did not finish.
  bool Start();
  // Injects `kind` (node choices from `rng`), waits for recovery and checks. One cycle.
  CycleResult Cycle(FaultKind kind, std::mt19937& rng);
  Writer& writer() { return *writer_; }

 private:
  struct Snapshot {
    std::map<uint64_t, uint64_t> raft_index;  // by member ID
  };
  Snapshot Observe() const;
  // Node index of the member named `name` (n1 -> 0), -1 if none.
  int NodeOf(const std::string& name) const;
  std::vector<int> MemberNodes() const;  // nodes whose members are voters now
  int EtcdLeaderNode() const;
  int StewardLeaderNode() const;
  void KillNode(int i);
  void Pause(const std::vector<pid_t>& pids, std::chrono::seconds d);
  bool WaitHealthyAtSize(std::chrono::seconds bound) const;
  BackupConfig StoreConfig() const;
  // Wipes a member's data dir (agent and etcd killed, agent restarted): a heal that wants a
  // backup first, for the store faults.
  void WipeNode(int i);
  void Check(const Snapshot& before, bool total_loss, int64_t loss_seq, CycleResult* r);
  std::string RestoredBackupRevision(int64_t* revision) const;

  int subnet_;
  int nodes_;
  int size_;
  StoreKind store_kind_;
  bool upgrade_;
  std::unique_ptr<S3rver> s3_;  // kS3 only
  std::unique_ptr<TestCluster> c_;
  std::unique_ptr<Writer> writer_;
  std::string tmpfs_;  // the mounted data dir of kFullDisk's node, "" if none
  int tmpfs_node_ = 2;
};

// The summary table: one row per kind, plus totals.
std::string SummaryTable(const std::vector<CycleResult>& results);

}  // namespace steward::testing
