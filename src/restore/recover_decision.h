// stewardctl recover-quorum's decision: a pure function from what it observed (the cluster's
// answers, each member's own status, the member list its survivors serve, the agents of the
// silent nodes, the backup store) to "refuse, and why" or "recover from this survivor". No I/O:
// src/ctl/recover_cmd.cc gathers the view, asks this, prints the plan, and gathers and asks
// again right before it acts; tests/unit/recover_decision_test.cc tables each rule.
//
// Rules, the first that refuses decides:
//   Q1 a linearizable read succeeds: a quorum answers, and the leader heals by itself;
//   Q2 that read failed for another reason than unavailable or timed out (a refused
//      certificate, a permission error): nothing is known about the quorum;
//   Q3 an answering member sees a leader: a quorum works, only not from here;
//   Q4 answering members belong to two clusters: a leftover member answers, and nothing here
//      says which cluster is the real one;
//   Q5 no member answers, or none answers a member list: there is nothing to recover from
//      (restore a backup instead);
//   Q6 no voting member answers, or a majority of the voters answers (they elect a leader);
//   Q7 a silent member's agent answers and holds member data: that member is not gone, it may
//      be cut off from this host only, and may be ahead;
//   Q8 --from names a node whose etcd does not answer as a voting member;
//   Q9 the store cannot be listed; or it holds a backup of this cluster past the chosen
//      survivor's revision (members out of sight got further) — unless --force.
// Otherwise: recover from the voter with the highest raft index (ties: the lowest name), or the
// one --from names.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace steward {

struct RecoverView {
  std::string cluster;  // its name, for messages
  // Q1/Q2: the linearizable member list.
  bool linearizable_ok = false;
  bool linearizable_unavailable = true;  // failed as unavailable or timed out
  std::string linearizable_error;
  // Q3-Q8: each configured node, in config order.
  struct Node {
    std::string name;
    std::string endpoint;  // its client URL
    bool etcd_answered = false;
    uint64_t member_id = 0, cluster_id = 0, leader = 0, raft_index = 0;
    int64_t revision = 0;
    bool is_learner = false;
    // Asked only of the nodes whose etcd is silent.
    bool agent_answered = false;
    bool agent_has_data = false;
    bool agent_etcd_running = false;
  };
  std::vector<Node> nodes;
  // The member list the survivors serve (locally, without a quorum).
  bool list_ok = false;
  std::string list_error;
  uint64_t list_cluster_id = 0;
  std::vector<uint64_t> voter_ids;
  // Q9: the newest backup of this cluster (same cluster ID, not an imported file), if any.
  bool backups_ok = true;
  std::string backups_error;
  std::optional<std::string> newest_backup;
  int64_t newest_backup_revision = 0;
  // The operator's choices.
  std::string from;
  bool force = false;
};

struct RecoverDecision {
  std::string refusal;            // non-empty: do nothing, and say this
  std::string rule;               // "Q1".."Q9" for a refusal
  std::vector<size_t> survivors;  // indexes into view.nodes: the answering voters, best first
  std::optional<size_t> chosen;   // index into view.nodes
  size_t voters = 0;
  std::vector<std::string> gone;  // silent nodes, with why they count as gone
  std::string newer_backup;       // "NAME (revision R)" past the chosen survivor (with --force)
};

RecoverDecision DecideRecover(const RecoverView& view);

}  // namespace steward
