// A deterministic simulation of etcd-steward: N nodes, each running the agent's real decision
// and control code (GatherStartView + DecideStart, AdmitOrder, DecideWipe, Leadership, the
// Reconciler with PlanNextStep, the RestoreCoordinator with DecideRestore), on virtual time,
// single-threaded and seeded, against models of what they talk to:
//   - etcd: clusters with member lists (learners, started or not), a raft leader that needs a
//     majority of the voters up and reachable, a committed revision per cluster and the
//     revision each member's disk holds, a small KV store with leases for the steward's own
//     keys, etcd 3.4's locally served (possibly stale) member lists, one learner at a time,
//     promotion only once caught up, and the strict reconfiguration check on removal;
//   - the peers' API: a call reaches a node's agent only if it runs, is not paused and the link
//     works;
//   - the backup store (an in-memory BackupStore that can be down, unmounted or emptied), with
//     backups in the real layout (ListBackups/VerifyBackup read them), and, with
//     Options::delta_every, the leader's delta backups written with the real WriteDelta: each
//     delta holds the acknowledged writes of its revisions, the writer follows a newer full
//     backup only after a while (as DeltaWriter notices one), and a fault can take a delta
//     object away; a restore replays its chain through the etcd model (ReplayDeltas);
//   - disks (empty, partial, member data; markers; the persisted newest term) and the network
//     (links cut one way or both).
// Faults: crashes of an etcd, an agent or both (also in the middle of a call: a crash point
// unwinds the agent's code), pauses, partitions, clock skew and jumps, wiped and partial data
// dirs, store outages, total loss.
//
// After every step the world checks its invariants (invariants.cc); a violation stops the run
// with a readable trace of the last events. The same seed always gives the same run.
//
// Where things are (one model or checker per file, as TigerBeetle's src/testing/):
//   simulation.h      this: the options, the result, RunSimulation
//   world.{h,cc}      the World that ties the models together: nodes, the step loop (Run),
//                     clients' writes, the trace; RunSimulation
//   agent_wiring.cc   World::Boot/Kill: an agent's objects wired over the seams, torn down
//   etcd_cluster.{h,cc}  clusters, members and raft leaders (World::Refresh); what etcd does
//                     when started (bootstrap, join)
//   etcd_api.{h,cc}   SimEtcd: the etcd API the agents call, served by the cluster model
//   network.{h,cc}    links between nodes (World::Reach) and SimPeer, the peers' API over them
//   disk_model.{h,cc} a node's disk (Disk) and SimDisk, the NodeDisk seam over it
//   runner_model.{h,cc}  SimRunner: etcd's process as the agent asks for it
//   clock_model.{h,cc}   SimClock: virtual time, per-node wall clock skew
//   store_model.{h,cc}   SimStore: the backup store in memory
//   backup_model.{h,cc}  the leader's backups and deltas as a model; what a restore builds
//   operator_model.cc the operator's destroy/undestroy
//   faults.cc         the fault injector: crash points, pauses, faults per step, scripted
//                     faults, healing
//   invariants.cc     the ground-truth checks: writes kept, no wipe of a live member, one
//                     quorum, no bootstrap over a cluster that existed, liveness
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace steward::sim {

using Ms = int64_t;  // virtual milliseconds since the start of the run

struct Options {
  uint64_t seed = 1;
  int steps = 2000;
  int nodes = 4;  // cluster.size is 3; the rest are spares
  bool faults = true;
  double fault_rate = 0.03;         // chance of a fault per step
  double crash_point_rate = 0.002;  // chance that a call crashes its caller
  // Liveness: after the fault phase, everything is healed and the cluster must be healthy at
  // its desired size within this much virtual time.
  Ms liveness_bound = 10LL * 60 * 1000;
  // Safety rules to switch off (mutation testing: the simulation must then find the loss the
  // rule prevents), e.g. "R-majority".
  std::set<std::string> disabled_rules;
  size_t trace_lines = 60;  // events kept for a violation's trace
  // A scripted fault: the moment the first leader is elected, every node dies before its agent
  // can have seen it, and the first node that held data comes back re-imaged.
  bool lose_first_leader = false;
  // The operator's `stewardctl destroy --force` at this step (-1: never), run again every 200
  // steps while the cluster stays destroyed, and `undestroy` at `undestroy_at`. While the store
  // marks the cluster destroyed, no agent may be asked to run etcd that is not running, and no
  // restore may be applied (rules SD1, SD2, R7).
  int destroy_at = -1;
  int undestroy_at = -1;
  // Delta backups every this much virtual time (0: none, as before they existed). With them:
  // a restore must give up no acknowledged write that the intact chain of the newest backup,
  // or of the one before it (which the writer may still be following), holds; what it
  // replays must be in the restored cluster before any member serves clients.
  Ms delta_every = 0;
  // false: the nodes have no etcdutl (etcd 3.4 alone), so only the in-place edit can raise a
  // restore's revision. Either way, while every node can raise it, a restored cluster must
  // start above every revision a cluster before it served.
  bool etcdutl = true;
  int etcdutl_nodes = -1;  // >= 0: only the first this many nodes have etcdutl
  // The share of backups the in-place edit refuses (the same backup on every node); without
  // etcdutl such a restore must then go ahead without the bump rather than wait for good.
  double in_place_refusals = 0;
  // Versions (issue 32): every node's etcd.binary is 3.4.23 and etcd.versions lists 3.4.23 and
  // 3.5.16; the cluster was rolled to 3.5.16 before the run (each initial node starts with the
  // etcd-version marker 3.5.16; the spares, never switched, have none), and a reimaged node
  // loses the marker. etcd refuses a join
  // from a binary of a lower minor than a running member's ("incompatible with current running
  // cluster"): the join must use the cluster's version (rules EV1-EV2, etcd/version.h).
  bool upgraded = false;
  // A scripted fault at this step (-1: never): the first node whose etcd runs a member is
  // re-imaged (killed with its disk, markers included) and comes back empty.
  int reimage_at = -1;
  // flip-value faults (drawn from a stream of their own, so runs without them are unchanged): a
  // member's data changes behind etcd's back, so its HashKV differs. The leader checks every 5 s
  // (cluster.hash_check_interval; off otherwise). Only a member whose data differs may be
  // repaired for it (rules DV1-DV5), and at the end no such member may still vote.
  bool diverge = false;
  // The operator's `stewardctl restart` (every node) every this many steps (0: never). A node
  // may stop its etcd for a restart roll only while every other voter of its cluster runs and
  // is on the quorum side, and no learner is on its way (never two down, never while degraded).
  int restart_every = 0;
};

struct Result {
  bool ok = true;
  std::string violation;           // what broke
  std::vector<std::string> trace;  // the last events before it
  int steps = 0;
  Ms virtual_ms = 0;
  // Counters for the summary.
  std::map<std::string, int> faults;
  int writes_acked = 0;
  int writes_lost_to_faults = 0;    // lost by a fault that took every copy
  int writes_lost_to_restores = 0;  // newer than a justified restore's backup
  int restores = 0;
  // Restored clusters whose revision was raised, and not.
  int bumped_restores = 0, unbumped_restores = 0;
  int deltas = 0;           // delta backups stored
  int writes_replayed = 0;  // acknowledged writes a restore brought back from deltas
  int bootstraps = 0;
  int wipes = 0;
  int destroys = 0;  // the operator's destroys that marked the store
  bool live_at_end = false;
  std::string end_state;
};

Result RunSimulation(const Options& options);

}  // namespace steward::sim
