// A node's own start decision, taken while its etcd is neither running nor held by the leader:
// a pure function from what the agent observed to one action, with the reason. No I/O: the
// agent gathers the view (its data dir, the other nodes' etcd, the other initial agents, the
// backup store), then acts on the result; tests/unit/start_decision_test.cc tables each rule.
//
// Rules, in order (the first that applies decides):
//   SD1 a node that stopped its etcd for `stewardctl destroy` (its "destroyed" marker) stays
//       stopped, data or not, while the store marks the cluster destroyed or cannot be read;
//       once the store shows the mark gone (undestroy), it drops its marker and decides again;
//   SD2 a node without that marker, of a cluster the store marks destroyed (it missed the
//       order: its agent was down, or it is a new machine), records the marker (then SD1);
//   S1 a data dir with member/ but no WAL is a failed first start or join: set it aside;
//   S2 a data dir with a WAL is a member's: start etcd on it (it rejoins its cluster itself) —
//   RM3 unless that member is provably no longer in its cluster: a linearizable member list
//       from the same cluster (the WAL's cluster ID) lacks the WAL's member ID. etcd would only
//       exit again ("the member has been permanently removed"); wait for the leader to set the
//       data aside, or for `stewardctl readd-node` after a remove-node. (Also asked before the
//       runner restarts an etcd that exited: MemberRemoved.)
//   S3 a node that was part of a running cluster and lost its data waits for the leader;
//   S4 a spare (not among the first cluster.size nodes) waits for the leader;
//   S5 a running cluster without this node, or with an entry for it that has run (or is not its
//      initial entry), is the leader's to handle: wait; a running initial cluster whose entry
//      for this node never started is joined by starting it (that creates no cluster);
//   S6 while no cluster answers, bootstrap only if every other initial agent answers and none
//      was part of a running cluster or holds data other than this same bootstrap (a
//      re-imaged node must not start under its old identity while its peers restart);
//   S7 with a backup store: an unreadable store means wait; a store that shows the cluster
//      existed means wait for a restore — never an empty cluster over data we failed to see;
//   S8 otherwise: start as a member of the initial cluster.
// And while adopting a running cluster (cluster.adopt), after S2:
//   AD4 an empty node never bootstraps: it waits for the leader to add it to the adopted cluster
//      (the agents cannot tell "no cluster" from "the adopted members are unreachable").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "node/node_disk.h"

namespace steward {

// What the other nodes' etcd said about this node (S5).
enum class ClusterAnswer {
  kSilent,                // no member list answered
  kWithoutThisNode,       // a cluster runs and has no entry with this node's peer URL
  kEntryHasRun,           // its entry published client URLs, or is not its initial entry
  kInitialEntryUnstarted  // the initial cluster runs and waits for this node to start
};

struct StartView {
  std::string node;
  DataDirState data = DataDirState::kEmpty;
  bool ever_joined = false;  // the "joined" marker
  bool initial = false;      // among the first cluster.size nodes
  bool adopting = false;     // cluster.adopt is set (AD4)
  ClusterAnswer cluster = ClusterAnswer::kSilent;
  // S6, asked only while the cluster is silent.
  bool peers_allow = false;
  std::string peers_why;  // what the other initial agents said against it
  // S7.
  bool has_store = false;
  bool store_ok = true;
  std::string store_error;
  bool cluster_existed = false;
  // SD1/SD2: this node's "destroyed" marker (the destroy's id, "" if none), and the store's
  // destroy mark (read whenever a store is configured; starts are rare).
  std::string local_destroyed;
  bool destroy_store_ok = false;  // the mark was read (false without a store)
  std::string destroy_store_error;
  std::string destroyed;     // DescribeDestroyMark's text, "" if not marked
  std::string destroyed_id;  // the mark's id
  // RM3, asked only for a member's data: why its member is provably out of its cluster ("" if
  // it is not, or that cannot be shown).
  std::string member_removed;
};

enum class StartAction {
  kSetPartialAside,
  kStartOnData,
  kWait,
  kBootstrap,
  kForgetDestroyed,  // SD1: drop the node's "destroyed" marker, then decide again
  kRecordDestroyed,  // SD2: write the "destroyed" marker (the mark's id), then decide again
};

const char* StartActionName(StartAction a);

struct StartDecision {
  StartAction action = StartAction::kWait;
  std::string reason;
};

StartDecision DecideStart(const StartView& view);

// RM3's proof: the member list answered linearizably (`list_ok`) for the same cluster the WAL
// belongs to, and the WAL's member is not in it. A list from another cluster (etcd 3.4 serves
// lists locally: a stale member answers for its old cluster) or no list proves nothing.
bool MemberRemoved(uint64_t wal_member_id, uint64_t wal_cluster_id, bool list_ok,
                   uint64_t list_cluster_id, const std::vector<uint64_t>& member_ids);

// D1: the data dir of the member the runner keeps running is gone (deleted under a running
// etcd, a disk swapped): the runner must stop, not restart etcd on the empty dir — its flags
// would start a fresh member under the old identity. The node then counts as empty and the
// leader replaces its entry. `started_on_data`: etcd was started on member data in place (a join
// or a bootstrap starts on an empty dir, which fills); `member_data_seen`: the dir held member
// data since etcd was started.
bool DataLostUnderEtcd(bool wanted, bool started_on_data, bool member_data_seen, DataDirState now);

// J1: has this node's member been part of a running cluster? Its "joined" marker says so once
// the agent saw a leader; the WAL says so even if the agent never did (it died first): a commit
// index above the initial members' configuration entries (one per member) means a leader was
// elected and a majority accepted its entries. `wal_commit` is 0 without a WAL.
bool EverJoined(bool joined_marker, uint64_t wal_commit, int initial_members);

}  // namespace steward
