// Randomized test of the planner against a small simulated cluster.
//
// The model holds five configured nodes n1..n5 and etcd's member list. Each random sequence
// mixes faults (node loss, wipe of a stopped node's data dir, node return, partitions of etcd
// or of etcd and agent, an agent that cannot read its member ID, spec size changes, time
// passing) with planner steps applied to the model. Some sequences start mid-bootstrap, with a
// member whose node moved to another peer URL (its old host may still serve it), or with a
// stale never-started entry. The model computes the observation the way the leader agent would:
// a member is healthy when its node's etcd runs, is reachable and serves that member, as of the
// last Status poll (polled every tick, so health can lag the agents' reports between ticks);
// unhealthy_for and the learner's age grow with time. After every planner step the safety
// invariants of plan.h are checked against the observation the planner saw. After each
// sequence every fault is healed and, unless the voters' data is gone for good, repeated
// planning must converge. Adopt sequences (plan.h AD1-AD3) start from a cluster no agent
// created, whose members on no configured node have faults of their own and must never be
// removed; the managed voters must reach the desired size beside them. Fixed fault-free
// scenarios check convergence step by step.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "reconcile/plan.h"

namespace steward {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr int kNodes = 5;
constexpr uint64_t kIndexPerTick = 100;

std::string Hex(uint64_t v) { return absl::StrCat(absl::Hex(v)); }

struct SimNode {
  std::string name;
  std::string peer_url;
  uint64_t initial_id = 0;
  bool up = true;  // the machine and its agent run
  bool etcd_running = false;
  bool has_data = false;
  uint64_t local_id = 0;
  bool partitioned = false;        // the leader cannot reach this node's etcd
  bool agent_partitioned = false;  // ... nor its agent
  bool id_unknown = false;         // the agent cannot tell which member its data belongs to
};

struct SimMember {
  uint64_t id = 0;
  std::string name;
  std::string peer_url;
  bool started = false;
  bool is_learner = false;
  uint64_t raft_index = 0;
  milliseconds unhealthy_for{0};
  // What its last Status call said. The leader polls Status once per tick, so between ticks
  // the observation's health can lag behind what the agents report.
  bool status_healthy = false;
  // Served by a host outside the configured nodes (the old address of a node that moved).
  bool ghost = false;
  bool ghost_up = false;
  // ... and the leader cannot reach that host (adopt: an unmanaged member's partition).
  bool ghost_partitioned = false;
};

int VotersIn(const ClusterObservation& o) {
  int v = 0;
  for (const auto& m : o.members) v += m.is_learner ? 0 : 1;
  return v;
}
int HealthyVotersIn(const ClusterObservation& o) {
  int h = 0;
  for (const auto& m : o.members) h += (!m.is_learner && m.healthy) ? 1 : 0;
  return h;
}
const MemberView* FindMember(const ClusterObservation& o, uint64_t id) {
  for (const auto& m : o.members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}
const NodeView* FindNode(const ClusterObservation& o, const std::string& name) {
  for (const auto& n : o.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

std::string Describe(const ClusterObservation& o) {
  std::string s = absl::StrCat("  desired=", o.desired_size, o.adopting ? " adopting" : "",
                               " list_ok=", o.member_list_ok, " leader_index=", o.leader_raft_index,
                               " learner_age=", o.learner_age.count(), "ms\n");
  for (const auto& n : o.nodes) {
    absl::StrAppend(&s, "  node ", n.name, " agent_up=", n.agent_up, " running=", n.etcd_running,
                    " data=", n.has_data, " local=", Hex(n.local_member_id),
                    " initial=", Hex(n.initial_member_id), "\n");
  }
  for (const auto& m : o.members) {
    absl::StrAppend(&s, "  member ", Hex(m.id), " '", m.name, "' ", m.peer_url,
                    m.is_learner ? " learner" : " voter", " started=", m.started,
                    " healthy=", m.healthy, " index=", m.raft_index, " leader=", m.is_etcd_leader,
                    " unhealthy_for=", m.unhealthy_for.count(), "ms\n");
  }
  return s;
}

// The safety invariants of one planned step, judged on the observation the planner saw.
// Returns the violations (empty if none).
std::vector<std::string> CheckStep(const ClusterObservation& o, const Step& s) {
  std::vector<std::string> bad;
  const int v = VotersIn(o);
  const int h = HealthyVotersIn(o);
  int learners = 0;
  for (const auto& m : o.members) learners += m.is_learner ? 1 : 0;

  switch (s.kind) {
    case StepKind::kNone:
    case StepKind::kWait:
    case StepKind::kRemoveMember:
    case StepKind::kAddLearner:
    case StepKind::kJoin:
    case StepKind::kPromote:
    case StepKind::kWipe:
      break;
    default:
      bad.push_back(absl::StrCat("step kind ", static_cast<int>(s.kind), " outside the enum"));
      return bad;
  }
  // (d) Without a member list or without quorum, only waiting.
  if (!o.member_list_ok && s.kind != StepKind::kWait) {
    bad.push_back("planned something other than wait without a member list");
  }
  if (o.member_list_ok && h < Quorum(v) && s.kind != StepKind::kWait) {
    bad.push_back(
        absl::StrCat("planned something other than wait with quorum lost (", h, " of ", v, ")"));
  }
  switch (s.kind) {
    case StepKind::kRemoveMember: {
      const MemberView* m = FindMember(o, s.member_id);
      if (m == nullptr) {
        bad.push_back("removal of a member not in the list");
        break;
      }
      // (a') AD1: adopting, a member on no configured node is never removed.
      if (o.adopting && std::none_of(o.nodes.begin(), o.nodes.end(), [&](const NodeView& n) {
            return n.peer_url == m->peer_url;
          })) {
        bad.push_back(absl::StrCat("removal of unmanaged member ", Hex(m->id), " (AD1)"));
      }
      // (a) The voters that remain keep a healthy quorum.
      int v2 = v - (m->is_learner ? 0 : 1);
      int h2 = h - ((!m->is_learner && m->healthy) ? 1 : 0);
      if (h2 < Quorum(v2)) {
        bad.push_back(absl::StrCat("removal leaves ", h2, " healthy of ", v2, " voters"));
      }
      break;
    }
    case StepKind::kPromote: {
      const MemberView* m = FindMember(o, s.member_id);
      if (m == nullptr || !m->is_learner) {
        bad.push_back("promotion of a member that is not a listed learner");
        break;
      }
      int v2 = v + 1;
      int h2 = h + (m->healthy ? 1 : 0);
      if (h2 < Quorum(v2)) {
        bad.push_back(absl::StrCat("promotion leaves ", h2, " healthy of ", v2, " voters"));
      }
      break;
    }
    case StepKind::kWipe: {
      const NodeView* n = FindNode(o, s.node);
      if (n == nullptr) {
        bad.push_back("wipe of an unknown node");
        break;
      }
      // (b) Never the data of a member still in the list, never data of unknown identity.
      if (n->local_member_id == 0) bad.push_back("wipe of a node whose member ID is unknown");
      if (FindMember(o, n->local_member_id) != nullptr) {
        bad.push_back("wipe of a node whose member is still in the member list");
      }
      break;
    }
    case StepKind::kAddLearner: {
      const NodeView* n = FindNode(o, s.node);
      if (n == nullptr) {
        bad.push_back("add-learner for an unknown node");
        break;
      }
      // (c) At most one learner.
      if (learners > 0) bad.push_back("adds a second learner");
      for (const auto& m : o.members) {
        if (m.peer_url == n->peer_url) bad.push_back("adds a node whose peer URL is a member");
      }
      if (!n->agent_up || n->has_data || n->etcd_running) bad.push_back("adds a node not spare");
      break;
    }
    case StepKind::kJoin: {
      const NodeView* n = FindNode(o, s.node);
      const MemberView* m = FindMember(o, s.member_id);
      if (n == nullptr || m == nullptr || !m->is_learner || m->peer_url != n->peer_url) {
        bad.push_back("join of a node that is not the listed learner's");
        break;
      }
      if (n->has_data || n->etcd_running) bad.push_back("join of a node with data or etcd");
      if (s.initial_cluster.size() != o.members.size()) {
        bad.push_back("join's initial cluster does not list every member");
      }
      for (const auto& mm : o.members) {
        int seen = 0;
        for (const auto& [name, url] : s.initial_cluster) seen += url == mm.peer_url ? 1 : 0;
        if (seen != 1)
          bad.push_back(
              absl::StrCat("join's initial cluster lists ", mm.peer_url, " ", seen, " times"));
      }
      if (std::find(s.initial_cluster.begin(), s.initial_cluster.end(),
                    std::make_pair(n->name, n->peer_url)) == s.initial_cluster.end()) {
        bad.push_back("join's initial cluster lacks the learner under the node's name");
      }
      break;
    }
    case StepKind::kNone:
    case StepKind::kWait:
      break;
  }
  return bad;
}

class Sim {
 public:
  // `initial` nodes n1..n<initial> form the initial cluster; `late` marks those of them that
  // have not started yet (bootstrap in progress).
  Sim(uint64_t seed, int initial, std::vector<bool> late = {}) : rng_(seed) {
    late.resize(kNodes, false);
    desired_ = initial;
    for (int i = 0; i < kNodes; ++i) {
      SimNode n;
      n.name = absl::StrCat("n", i + 1);
      n.peer_url = absl::StrCat("http://10.0.0.", i + 1, ":2380");
      n.initial_id = 0x1000 + static_cast<uint64_t>(i + 1) * 0x11;
      if (i < initial && !late[i]) {
        n.etcd_running = true;
        n.has_data = true;
        n.local_id = n.initial_id;
      }
      nodes_.push_back(n);
    }
    for (int i = 0; i < initial; ++i) {
      SimMember m;
      m.id = nodes_[i].initial_id;
      m.name = nodes_[i].name;  // initial-cluster members carry their names from the start
      m.peer_url = nodes_[i].peer_url;
      m.started = !late[i];
      m.raft_index = m.started ? index_ : 0;
      members_.push_back(m);
    }
    UpdateLeader();
    PollStatus();
  }

  std::vector<SimNode>& nodes() { return nodes_; }
  std::vector<SimMember>& members() { return members_; }
  std::mt19937_64& rng() { return rng_; }
  int desired() const { return desired_; }
  void set_desired(int d) { desired_ = d; }
  bool adopting() const { return adopting_; }
  void set_adopting(bool a) { adopting_ = a; }
  void set_timeouts(milliseconds replace_after, milliseconds learner_timeout) {
    replace_after_ = replace_after;
    learner_timeout_ = learner_timeout;
  }

  ClusterObservation Observe(bool list_read_fails = false) const {
    ClusterObservation o;
    o.desired_size = desired_;
    o.replace_after = replace_after_;
    o.learner_timeout = learner_timeout_;
    o.adopting = adopting_;
    for (const auto& n : nodes_) {
      NodeView v;
      v.name = n.name;
      v.peer_url = n.peer_url;
      v.initial_member_id = n.initial_id;
      v.agent_up = n.up && !n.agent_partitioned;
      if (v.agent_up) {  // what we know of a node comes from its agent
        v.etcd_running = n.etcd_running;
        v.has_data = n.has_data;
        v.local_member_id = n.id_unknown ? 0 : n.local_id;
      }
      o.nodes.push_back(v);
    }
    // The list is read from a healthy member; a read can also fail by itself.
    bool any_healthy = false;
    for (const auto& m : members_) any_healthy = any_healthy || m.status_healthy;
    o.member_list_ok = any_healthy && !list_read_fails;
    if (o.member_list_ok) {
      for (const auto& m : members_) {
        MemberView v;
        v.id = m.id;
        v.name = m.name;
        v.peer_url = m.peer_url;
        v.started = m.started;
        v.is_learner = m.is_learner;
        v.healthy = m.status_healthy;
        v.raft_index = m.raft_index;
        v.is_etcd_leader = m.id == leader_;
        v.unhealthy_for = m.unhealthy_for;
        o.members.push_back(v);
      }
      o.leader_raft_index = leader_ != 0 ? index_ : 0;
      o.learner_age = learner_age_;
    }
    return o;
  }

  // Time passes: agents act, members publish, raft moves, the leader's clocks grow.
  void Tick(milliseconds dt) {
    for (auto& n : nodes_) {
      if (!n.up) continue;
      bool listed = Member(n.local_id) != nullptr;
      if (n.etcd_running && !listed) n.etcd_running = false;               // a removed member exits
      if (n.has_data && !n.etcd_running && listed) n.etcd_running = true;  // restart
      if (!n.has_data && !n.etcd_running) {
        // A late member of the initial cluster starts when its entry waits for it.
        const SimMember* m = Member(n.initial_id);
        if (m != nullptr && !m->started && !m->is_learner && m->peer_url == n.peer_url) {
          n.etcd_running = true;
          n.has_data = true;
          n.local_id = n.initial_id;
        }
      }
    }
    UpdateLeader();
    if (leader_ != 0) {
      index_ += kIndexPerTick;
      for (auto& m : members_) {
        const SimNode* n = NodeAt(m.peer_url);
        if (!m.started && n != nullptr && Serving(m)) {
          m.started = true;  // publishes its name and client URLs through raft
          m.name = n->name;
        }
        if (!Healthy(m)) continue;
        if (!m.is_learner) {
          m.raft_index = index_;
        } else {
          m.raft_index = m.raft_index == 0 ? index_ / 2 : index_;  // catches up in two ticks
        }
      }
    }
    for (auto& m : members_) {
      m.unhealthy_for = Healthy(m) ? milliseconds(0) : m.unhealthy_for + dt;
    }
    if (HasLearner()) learner_age_ += dt;
    UpdateLeader();
    PollStatus();
  }

  // The leader calls Status on every member.
  void PollStatus() {
    for (auto& m : members_) m.status_healthy = Healthy(m);
  }

  // Applies a planned step; returns an error if etcd or the agent could not carry it out.
  std::string Apply(const Step& s) {
    std::string err;
    switch (s.kind) {
      case StepKind::kNone:
      case StepKind::kWait:
        break;
      case StepKind::kRemoveMember: {
        auto it = std::find_if(members_.begin(), members_.end(),
                               [&](const SimMember& m) { return m.id == s.member_id; });
        if (it == members_.end()) return "remove: no such member";
        if (it->is_learner) learner_age_ = milliseconds(0);
        members_.erase(it);
        break;
      }
      case StepKind::kAddLearner: {
        SimNode* n = NodeNamed(s.node);
        if (n == nullptr) return "add-learner: no such node";
        if (NodeMember(*n) != nullptr) return "add-learner: etcd refuses a duplicate peer URL";
        if (HasLearner()) return "add-learner: etcd refuses a second learner";
        SimMember m;
        m.id = next_id_++;
        m.peer_url = n->peer_url;
        m.is_learner = true;
        members_.push_back(m);
        learner_age_ = milliseconds(0);
        break;
      }
      case StepKind::kJoin: {
        SimNode* n = NodeNamed(s.node);
        SimMember* m = Member(s.member_id);
        if (n == nullptr || m == nullptr) return "join: no such node or member";
        if (!n->up || n->has_data || n->etcd_running) return "join: node not ready";
        n->etcd_running = true;
        n->has_data = true;
        n->local_id = m->id;
        break;
      }
      case StepKind::kPromote: {
        SimMember* m = Member(s.member_id);
        if (m == nullptr || !m->is_learner || !m->started) return "promote: not a started learner";
        if (m->raft_index * 10 < index_ * 9) return "promote: etcd refuses a lagging learner";
        m->is_learner = false;
        learner_age_ = milliseconds(0);
        break;
      }
      case StepKind::kWipe: {
        SimNode* n = NodeNamed(s.node);
        if (n == nullptr || !n->up) return "wipe: node not reachable";
        n->etcd_running = false;
        n->has_data = false;
        n->local_id = 0;
        break;
      }
    }
    UpdateLeader();
    return err;
  }

  int Learners() const {
    int l = 0;
    for (const auto& m : members_) l += m.is_learner ? 1 : 0;
    return l;
  }
  int Voters() const { return static_cast<int>(members_.size()) - Learners(); }
  // Voters on a configured node's peer URL (adopting, the ones cluster.size counts).
  int ManagedVoters() const {
    int v = 0;
    for (const auto& m : members_) v += (!m.is_learner && NodeAt(m.peer_url) != nullptr) ? 1 : 0;
    return v;
  }
  int HealthyVoters() const {
    int h = 0;
    for (const auto& m : members_) h += (!m.is_learner && Healthy(m)) ? 1 : 0;
    return h;
  }
  // Could enough voters ever serve again? A voter can if its node holds its data, or if it is
  // an unstarted initial member whose node can still bootstrap it.
  bool QuorumRecoverable() const {
    int can = 0;
    for (const auto& m : members_) {
      if (m.is_learner) continue;
      if (m.ghost && m.ghost_up) ++can;
      const SimNode* n = NodeAt(m.peer_url);
      if (n == nullptr) continue;
      if ((n->has_data && n->local_id == m.id) ||
          (!n->has_data && !m.started && m.id == n->initial_id)) {
        ++can;
      }
    }
    return can >= Quorum(Voters());
  }
  // Raft elects a leader among the voters that serve when a quorum of them does (members
  // of the initial cluster serve before they have published).
  void UpdateLeader() {
    std::vector<uint64_t> c;
    for (const auto& m : members_) {
      if (!m.is_learner && Serving(m)) c.push_back(m.id);
    }
    if (static_cast<int>(c.size()) < Quorum(Voters())) {
      leader_ = 0;
      return;
    }
    if (std::find(c.begin(), c.end(), leader_) != c.end()) return;
    leader_ = c[rng_() % c.size()];
  }

 private:
  bool HasLearner() const { return Learners() > 0; }
  const SimNode* NodeAt(const std::string& url) const {
    for (const auto& n : nodes_) {
      if (n.peer_url == url) return &n;
    }
    return nullptr;
  }
  SimNode* NodeNamed(const std::string& name) {
    for (auto& n : nodes_) {
      if (n.name == name) return &n;
    }
    return nullptr;
  }
  const SimMember* NodeMember(const SimNode& n) const {
    for (const auto& m : members_) {
      if (m.peer_url == n.peer_url) return &m;
    }
    return nullptr;
  }
  const SimMember* Member(uint64_t id) const {
    for (const auto& m : members_) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  SimMember* Member(uint64_t id) {
    for (auto& m : members_) {
      if (m.id == id) return &m;
    }
    return nullptr;
  }
  // Its node's etcd runs this member and the leader can reach it.
  bool Serving(const SimMember& m) const {
    if (m.ghost) return m.ghost_up && !m.ghost_partitioned;
    const SimNode* n = NodeAt(m.peer_url);
    return n != nullptr && n->up && n->etcd_running && !n->partitioned && n->local_id == m.id;
  }
  // Answers Status as a member: serving, and it has published (started).
  bool Healthy(const SimMember& m) const { return Serving(m) && m.started; }

  std::mt19937_64 rng_;
  std::vector<SimNode> nodes_;
  std::vector<SimMember> members_;
  int desired_ = 3;
  milliseconds replace_after_ = seconds(60);
  milliseconds learner_timeout_ = seconds(60);
  uint64_t index_ = 1000;
  uint64_t leader_ = 0;
  uint64_t next_id_ = 0xa000;
  milliseconds learner_age_{0};
  bool adopting_ = false;
};

struct SimStats {
  int64_t steps = 0;               // planner steps checked
  int64_t kinds[7] = {};           // by StepKind
  int64_t healed = 0;              // sequences that converged after healing
  int64_t lost = 0;                // sequences whose cluster could not recover (data gone)
  int64_t quorum_guard_waits = 0;  // waits because a due removal would lose quorum
  int64_t lone_moved_member = 0;   // the known gap: see RunSequence
  // Adopt sequences: steps the planner would have taken with adopting=false that remove an
  // unmanaged member (the mutation check: CheckStep must reject them).
  int64_t mutant_unmanaged_removals = 0;
  int64_t unmanaged_unhealthy_steps = 0;  // steps planned with an unmanaged voter unhealthy
};

// Plans one step on the model, checks it, applies it. Appends to `log`; returns the
// violations (empty if none).
std::vector<std::string> PlanAndApply(Sim& sim, bool list_read_fails, std::vector<std::string>& log,
                                      SimStats& stats, Step* out = nullptr) {
  ClusterObservation o = sim.Observe(list_read_fails);
  Step s = PlanNextStep(o);
  ++stats.steps;
  ++stats.kinds[std::clamp(static_cast<int>(s.kind), 0, 6)];
  if (s.reason.find("would lose quorum") != std::string::npos) ++stats.quorum_guard_waits;
  std::string target = s.member_id != 0 ? absl::StrCat(" ", Hex(s.member_id)) : "";
  if (!s.node.empty()) absl::StrAppend(&target, " ", s.node);
  log.push_back(absl::StrCat("plan", list_read_fails ? " (list read fails)" : "", ": ",
                             StepKindName(s.kind), target, " -- ", s.reason));
  if (out != nullptr) *out = s;
  std::vector<std::string> bad = CheckStep(o, s);
  if (bad.empty()) {
    std::string err = sim.Apply(s);
    if (!err.empty()) bad.push_back(absl::StrCat("step could not be applied: ", err));
    if (sim.Learners() > 1) bad.push_back("more than one learner in the member list");
  }
  if (!bad.empty()) bad.push_back(absl::StrCat("observation the planner saw:\n", Describe(o)));
  return bad;
}

// Lets time pass and applies the planner until it says kNone with the desired number of
// voters (adopting: of managed voters), every voter healthy and no learner; at most
// `max_rounds` rounds of (tick, plan, apply).
// Returns the violations, or why it did not converge.
std::vector<std::string> Converge(Sim& sim, int max_rounds, std::vector<std::string>& log,
                                  SimStats& stats, int* rounds = nullptr) {
  Step s;
  for (int r = 1; r <= max_rounds; ++r) {
    sim.Tick(seconds(10));
    log.push_back("tick 10s");
    std::vector<std::string> bad = PlanAndApply(sim, false, log, stats, &s);
    if (!bad.empty()) return bad;
    const int counted = sim.adopting() ? sim.ManagedVoters() : sim.Voters();
    if (s.kind == StepKind::kNone && counted == sim.desired() &&
        sim.HealthyVoters() == sim.Voters() && sim.Learners() == 0) {
      if (rounds != nullptr) *rounds = r;
      return {};
    }
  }
  return {absl::StrCat("no convergence within ", max_rounds, " rounds; last step ",
                       StepKindName(s.kind), ": ", s.reason, "\n", Describe(sim.Observe()))};
}

// One event of the random fault mix, chosen by `r` in [0, 100): a planner step checked and
// applied (42%), a Status poll, time passing, a node lost or back, a stopped node's data dir
// wiped, partitions of etcd or of etcd and agent, an agent that cannot read its member ID, the
// hosts of members on no configured node (moved members; adopt: the unmanaged ones) all down
// or back, a spec size change. Returns the violations (empty if none).
std::vector<std::string> RandomEvent(Sim& sim, int r, std::vector<std::string>& log,
                                     SimStats& stats) {
  std::mt19937_64& rng = sim.rng();
  auto rnd = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  SimNode& n = sim.nodes()[static_cast<size_t>(rnd(kNodes))];
  if (r < 42) {
    std::vector<std::string> bad = PlanAndApply(sim, rnd(20) == 0, log, stats);
    if (!bad.empty()) return bad;
  } else if (r < 45) {
    sim.PollStatus();
    log.push_back("status poll");
  } else if (r < 65) {
    const int dts[] = {5, 10, 20, 30, 60};
    int dt = dts[rnd(5)];
    sim.Tick(seconds(dt));
    log.push_back(absl::StrCat("tick ", dt, "s"));
  } else if (r < 72) {
    if (!n.up) return {};
    n.up = false;
    n.etcd_running = false;
    log.push_back(absl::StrCat("lose ", n.name));
  } else if (r < 80) {
    if (n.up) return {};
    n.up = true;
    log.push_back(absl::StrCat("return ", n.name));
  } else if (r < 85) {
    if (n.etcd_running || !n.has_data) return {};
    n.has_data = false;
    n.local_id = 0;
    log.push_back(absl::StrCat("wipe data dir of ", n.name));
  } else if (r < 90) {
    if (n.partitioned) return {};
    n.partitioned = true;
    n.agent_partitioned = rnd(2) == 0;
    log.push_back(
        absl::StrCat("partition ", n.name, n.agent_partitioned ? " (etcd+agent)" : " (etcd)"));
  } else if (r < 94) {
    if (!n.partitioned) return {};
    n.partitioned = false;
    n.agent_partitioned = false;
    log.push_back(absl::StrCat("unpartition ", n.name));
  } else if (r < 96) {
    n.id_unknown = !n.id_unknown;
    log.push_back(absl::StrCat("agent of ", n.name, n.id_unknown ? " cannot" : " can",
                               " read its member ID"));
  } else if (r < 97) {
    for (auto& m : sim.members()) {
      if (!m.ghost) continue;
      m.ghost_up = !m.ghost_up;
      log.push_back(absl::StrCat(sim.adopting() ? "unmanaged member " : "old host of moved member ",
                                 m.name, m.ghost_up ? " back up" : " down"));
    }
  } else {
    int d = 1 + rnd(kNodes);
    sim.set_desired(d);
    log.push_back(absl::StrCat("spec size ", d));
  }
  sim.UpdateLeader();
  return {};
}

// One random sequence of `events` faults, ticks and planner steps, then all faults healed
// and convergence checked unless the cluster's data is gone. Returns the violations and fills
// `log`.
std::vector<std::string> RunSequence(uint64_t seed, int events, std::vector<std::string>& log,
                                     SimStats& stats) {
  std::mt19937_64 setup(seed);
  auto pick = [&](int n) { return static_cast<int>(setup() % static_cast<uint64_t>(n)); };
  const int sizes[] = {1, 3, 3, 3, 5};
  int initial = sizes[pick(5)];
  std::vector<bool> late(kNodes, false);
  bool bootstrapping = pick(5) == 0;
  for (int i = 0; bootstrapping && i < initial; ++i) late[i] = pick(3) == 0;
  Sim sim(seed ^ 0x9e3779b97f4a7c15ULL, initial, late);
  const milliseconds timeouts[] = {seconds(30), seconds(60), seconds(120)};
  sim.set_timeouts(timeouts[pick(3)], timeouts[pick(3)]);
  for (int i = 0; i < kNodes; ++i) {
    if (late[i] && pick(2) == 0) sim.nodes()[i].up = false;
  }
  // Leftovers of an earlier life: a member whose node moved to another peer URL, or a voter
  // entry for a spare's peer URL that never started and that this cluster did not create.
  std::string leftover;
  int variant = pick(10);
  if (variant == 0 && initial >= 3) {
    int k = pick(initial);
    if (!late[k]) {
      sim.members()[k].peer_url = absl::StrCat("http://10.0.1.", k + 1, ":2380");
      sim.members()[k].ghost = true;
      sim.members()[k].ghost_up = pick(2) == 0;  // the old host may still serve it
      SimNode& n = sim.nodes()[k];
      n.etcd_running = false;
      n.has_data = false;
      n.local_id = 0;
      leftover = absl::StrCat(" (member ", n.name, " moved away; old host ",
                              sim.members()[k].ghost_up ? "up)" : "down)");
    }
  } else if (variant == 1 && initial < kNodes) {
    SimMember m;
    m.id = 0xbad0 + static_cast<uint64_t>(initial);
    m.peer_url = sim.nodes()[initial].peer_url;
    sim.members().push_back(m);
    leftover = absl::StrCat(" (stale entry for ", sim.nodes()[initial].name, ")");
  }
  sim.UpdateLeader();
  log.push_back(absl::StrCat("seed ", seed, ": initial cluster of ", initial,
                             bootstrapping ? " (bootstrapping)" : "", leftover, "\n",
                             Describe(sim.Observe())));

  std::mt19937_64& rng = sim.rng();
  for (int e = 0; e < events; ++e) {
    int r = static_cast<int>(rng() % 100);
    std::vector<std::string> bad = RandomEvent(sim, r, log, stats);
    if (!bad.empty()) return bad;
  }

  // Heal every fault. Unless too many voters lost their data for a quorum ever to come back
  // (then the planner must only wait, which the invariants checked), it must converge.
  log.push_back("heal: every node up, no partitions");
  for (auto& n : sim.nodes()) {
    n.up = true;
    n.partitioned = false;
    n.agent_partitioned = false;
    n.id_unknown = false;
  }
  if (!sim.QuorumRecoverable()) {
    ++stats.lost;
    for (int r = 0; r < 5; ++r) {
      sim.Tick(seconds(10));
      std::vector<std::string> bad = PlanAndApply(sim, false, log, stats);
      if (!bad.empty()) return bad;
    }
    return {};
  }
  std::vector<std::string> bad = Converge(sim, 60, log, stats);
  // Known gap, not a safety matter: when the only voter left is a moved member still served by
  // its old host, removing it would leave no voter, and the planner does not grow past the
  // desired size to replace it, so with desired size 1 it waits for ever.
  const auto& ms = sim.members();
  if (!bad.empty() && bad[0].rfind("no convergence", 0) == 0 && sim.desired() == 1 &&
      ms.size() == 1 && ms[0].ghost && ms[0].ghost_up) {
    ++stats.lone_moved_member;
    return {};
  }
  ++stats.healed;
  return bad;
}

// Runs `sequences` seeded sequences of `run` from `base_seed` on (stopping after 3 failures,
// each reported with its log); returns the time taken.
using SequenceRunner = std::vector<std::string> (*)(uint64_t, int, std::vector<std::string>&,
                                                    SimStats&);
milliseconds RunSequences(const char* label, int sequences, int events, uint64_t base_seed,
                          SequenceRunner run, SimStats& stats) {
  int failures = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < sequences && failures < 3; ++i) {
    uint64_t seed = base_seed + static_cast<uint64_t>(i);
    std::vector<std::string> log;
    std::vector<std::string> bad = run(seed, events, log, stats);
    if (!bad.empty()) {
      ++failures;
      ADD_FAILURE() << label << "seed " << seed << ":\n  " << absl::StrJoin(bad, "\n  ")
                    << "\nsequence (" << label << "seed " << seed << "):\n"
                    << absl::StrJoin(log, "\n");
    }
  }
  return std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
}

// "none 12, wait 40, ..." for the summary line.
std::string KindsText(const SimStats& stats) {
  std::string kinds;
  for (int k = 0; k < 7; ++k) {
    absl::StrAppend(&kinds, k ? ", " : "", StepKindName(static_cast<StepKind>(k)), " ",
                    stats.kinds[k]);
  }
  return kinds;
}

TEST(PlanSimTest, RandomFaultSequencesKeepInvariantsAndHeal) {
  constexpr int kSequences = 10000;
  constexpr int kEvents = 40;
  SimStats stats;
  const milliseconds ms = RunSequences("", kSequences, kEvents, 20240601, &RunSequence, stats);
  const std::string kinds = KindsText(stats);
  std::cout << "[ SIM      ] " << kSequences << " sequences x " << kEvents
            << " events: " << stats.steps << " planner steps checked (" << kinds << "); "
            << stats.healed << " healed and converged, " << stats.lost << " lost quorum for good, "
            << stats.lone_moved_member << " left with only a moved member; "
            << stats.quorum_guard_waits << " waits where a removal would lose quorum; "
            << ms.count() << " ms\n";
  // The model must keep exercising every kind of step, or the invariants check nothing.
  for (int k = 0; k < 7; ++k) {
    EXPECT_GT(stats.kinds[k], 0) << "no " << StepKindName(static_cast<StepKind>(k)) << " step";
  }
  EXPECT_GT(stats.quorum_guard_waits, 0);
  EXPECT_GT(stats.healed, kSequences / 2);
}

// Adopting (plan.h AD1-AD3): a cluster no agent created. Its 3 (sometimes 5) voting members
// o1.. run on hosts outside the configured nodes (peer URLs 10.0.2.x), with faults of their
// own: down, back, partitioned from the leader, healed, and the fault mix's "all of them down
// or back". They keep their data: the model never wipes them or restarts them empty. The five
// configured nodes start empty with their agents up; cluster.size is 3, sometimes 1..5, and
// the fault mix changes it. Every planner step is checked by CheckStep, which for an adopting
// observation also rejects the removal of a member on no configured node (AD1); quorum counts
// every voter. After the faults heal, the managed voters must reach the desired size with
// every unmanaged member still listed and healthy.
std::vector<std::string> RunAdoptSequence(uint64_t seed, int events, std::vector<std::string>& log,
                                          SimStats& stats) {
  std::mt19937_64 setup(seed);
  auto pick = [&](int n) { return static_cast<int>(setup() % static_cast<uint64_t>(n)); };
  const int olds = pick(4) == 0 ? 5 : 3;
  const int desired = pick(3) == 0 ? 1 + pick(kNodes) : 3;
  Sim sim(seed ^ 0x9e3779b97f4a7c15ULL, 0);
  sim.set_adopting(true);
  sim.set_desired(desired);
  const milliseconds timeouts[] = {seconds(30), seconds(60), seconds(120)};
  sim.set_timeouts(timeouts[pick(3)], timeouts[pick(3)]);
  std::vector<uint64_t> unmanaged;
  for (int i = 0; i < olds; ++i) {
    SimMember m;
    m.id = 0x5000 + static_cast<uint64_t>(i + 1) * 0x11;
    m.name = absl::StrCat("o", i + 1);
    m.peer_url = absl::StrCat("http://10.0.2.", i + 1, ":2380");
    m.started = true;
    m.raft_index = 1000;
    m.ghost = true;  // served by a host that is no configured node
    m.ghost_up = true;
    sim.members().push_back(m);
    unmanaged.push_back(m.id);
  }
  if (pick(4) == 0) sim.members()[static_cast<size_t>(pick(olds))].ghost_up = false;
  sim.UpdateLeader();
  sim.PollStatus();
  log.push_back(absl::StrCat("seed ", seed, ": adopting ", olds, " unmanaged voters, size ",
                             desired, "\n", Describe(sim.Observe())));

  auto all_listed = [&]() -> std::vector<std::string> {
    for (uint64_t id : unmanaged) {
      bool listed = false;
      for (const auto& m : sim.members()) listed = listed || (m.id == id && !m.is_learner);
      if (!listed) return {absl::StrCat("unmanaged member ", Hex(id), " is no longer a voter")};
    }
    return {};
  };
  std::mt19937_64& rng = sim.rng();
  auto rnd = [&](int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); };
  for (int e = 0; e < events; ++e) {
    int r = rnd(130);
    if (r < 42) {
      // Mutation check: the same observation planned without adopt. The planner then treats
      // the unmanaged members as its own, and CheckStep must catch any removal of one.
      ClusterObservation o = sim.Observe();
      for (const auto& m : o.members) {
        if (!m.is_learner && !m.healthy &&
            std::find(unmanaged.begin(), unmanaged.end(), m.id) != unmanaged.end()) {
          ++stats.unmanaged_unhealthy_steps;
          break;
        }
      }
      ClusterObservation plain = o;
      plain.adopting = false;
      for (const auto& b : CheckStep(o, PlanNextStep(plain))) {
        if (b.find("(AD1)") != std::string::npos) {
          ++stats.mutant_unmanaged_removals;
          break;
        }
      }
    }
    if (r < 100) {
      std::vector<std::string> bad = RandomEvent(sim, r, log, stats);
      if (!bad.empty()) return bad;
    } else {
      uint64_t id = unmanaged[static_cast<size_t>(rnd(olds))];
      SimMember* m = nullptr;
      for (auto& mm : sim.members()) m = mm.id == id ? &mm : m;
      if (m == nullptr) return {absl::StrCat("unmanaged member ", Hex(id), " was removed")};
      if (r < 110) {
        m->ghost_up = false;
        log.push_back(absl::StrCat("unmanaged member ", m->name, " down"));
      } else if (r < 120) {
        m->ghost_up = true;
        log.push_back(absl::StrCat("unmanaged member ", m->name, " up"));
      } else if (r < 125) {
        m->ghost_partitioned = true;
        log.push_back(absl::StrCat("partition unmanaged member ", m->name));
      } else {
        m->ghost_partitioned = false;
        log.push_back(absl::StrCat("unpartition unmanaged member ", m->name));
      }
      sim.UpdateLeader();
    }
    if (auto bad = all_listed(); !bad.empty()) return bad;
  }

  log.push_back("heal: every node and unmanaged member up, no partitions");
  for (auto& n : sim.nodes()) {
    n.up = true;
    n.partitioned = false;
    n.agent_partitioned = false;
    n.id_unknown = false;
  }
  for (auto& m : sim.members()) {
    m.ghost_up = m.ghost;
    m.ghost_partitioned = false;
  }
  if (!sim.QuorumRecoverable()) {
    ++stats.lost;
    for (int r = 0; r < 5; ++r) {
      sim.Tick(seconds(10));
      std::vector<std::string> bad = PlanAndApply(sim, false, log, stats);
      if (!bad.empty()) return bad;
    }
    return all_listed();
  }
  std::vector<std::string> bad = Converge(sim, 80, log, stats);
  if (bad.empty()) bad = all_listed();
  if (bad.empty()) ++stats.healed;
  return bad;
}

TEST(PlanSimTest, AdoptSequencesNeverTouchUnmanagedMembersAndHeal) {
  constexpr int kSequences = 3000;
  constexpr int kEvents = 40;
  SimStats stats;
  const milliseconds ms =
      RunSequences("adopt ", kSequences, kEvents, 20250301, &RunAdoptSequence, stats);
  const std::string kinds = KindsText(stats);
  std::cout << "[ SIM      ] adopt: " << kSequences << " sequences x " << kEvents
            << " events: " << stats.steps << " planner steps checked (" << kinds << "); "
            << stats.healed << " healed and converged, " << stats.lost << " lost quorum for good; "
            << stats.unmanaged_unhealthy_steps << " steps with an unmanaged voter unhealthy; "
            << stats.quorum_guard_waits << " waits where a removal would lose quorum; "
            << "without adopt, " << stats.mutant_unmanaged_removals
            << " steps would remove an unmanaged member; " << ms.count() << " ms\n";
  for (StepKind k : {StepKind::kNone, StepKind::kWait, StepKind::kRemoveMember,
                     StepKind::kAddLearner, StepKind::kJoin, StepKind::kPromote, StepKind::kWipe}) {
    EXPECT_GT(stats.kinds[static_cast<int>(k)], 0) << "no " << StepKindName(k) << " step";
  }
  EXPECT_GT(stats.unmanaged_unhealthy_steps, 0);
  // The invariant can fail: the planner without adopt removes unmanaged members.
  EXPECT_GT(stats.mutant_unmanaged_removals, 0);
  EXPECT_GT(stats.healed, kSequences / 2);
}

// Fixed fault-free scenarios: applying the planner converges to kNone with the desired
// number of healthy voters within a bounded number of steps.
struct Scenario {
  std::string name;
  int initial;
  std::vector<bool> late;
  std::function<void(Sim&)> setup;
  int max_rounds;
  std::function<void(Sim&)> check = nullptr;
};

SimNode& N(Sim& sim, int i) { return sim.nodes()[static_cast<size_t>(i - 1)]; }
bool IsVoter(Sim& sim, int i) {
  for (const auto& m : sim.members()) {
    if (m.peer_url == N(sim, i).peer_url && !m.is_learner) return true;
  }
  return false;
}

TEST(PlanSimTest, FaultFreeScenariosConverge) {
  std::vector<Scenario> scenarios = {
      {"WipedNodeBack",
       3,
       {},
       [](Sim& sim) {
         N(sim, 2).up = false;
         N(sim, 2).etcd_running = false;
         N(sim, 2).has_data = false;
         N(sim, 2).local_id = 0;
         sim.Tick(seconds(10));
         N(sim, 2).up = true;
       },
       12,
       [](Sim& sim) {  // n2 comes first among the spares
         EXPECT_TRUE(IsVoter(sim, 2));
         EXPECT_FALSE(IsVoter(sim, 4));
       }},
      {"GrowThreeToFive",
       3,
       {},
       [](Sim& sim) { sim.set_desired(5); },
       16,
       [](Sim& sim) {
         for (int i = 1; i <= 5; ++i) EXPECT_TRUE(IsVoter(sim, i)) << i;
       }},
      {"GrowOneToThree",
       1,
       {},
       [](Sim& sim) { sim.set_desired(3); },
       12,
       [](Sim& sim) {
         for (int i = 1; i <= 3; ++i) EXPECT_TRUE(IsVoter(sim, i)) << i;
       }},
      {"ShrinkFiveToOne",
       5,
       {},
       [](Sim& sim) { sim.set_desired(1); },
       16,
       [](Sim& sim) {  // the etcd leader stays; the others' data is set aside
         int with_data = 0;
         for (int i = 1; i <= 5; ++i) {
           with_data += N(sim, i).has_data ? 1 : 0;
           EXPECT_EQ(N(sim, i).has_data, IsVoter(sim, i)) << "n" << i;
         }
         EXPECT_EQ(with_data, 1);
       }},
      {"LateInitialMember",
       3,
       {false, false, true},
       [](Sim&) {},
       6,
       [](Sim& sim) { EXPECT_TRUE(IsVoter(sim, 3)); }},
      {"DeadVoterReplacedThenBack",
       3,
       {},
       [](Sim& sim) {
         N(sim, 3).up = false;
         N(sim, 3).etcd_running = false;
         for (int i = 0; i < 7; ++i) sim.Tick(seconds(10));
       },
       12,
       [](Sim& sim) {
         EXPECT_TRUE(IsVoter(sim, 4));
         EXPECT_FALSE(IsVoter(sim, 3));
       }},
  };
  for (const auto& sc : scenarios) {
    SCOPED_TRACE(sc.name);
    Sim sim(1, sc.initial, sc.late);
    sc.setup(sim);
    SimStats stats;
    std::vector<std::string> log;
    int rounds = 0;
    std::vector<std::string> bad = Converge(sim, sc.max_rounds, log, stats, &rounds);
    ASSERT_TRUE(bad.empty()) << absl::StrJoin(bad, "\n") << "\nsequence:\n"
                             << absl::StrJoin(log, "\n");
    if (sc.check) sc.check(sim);
    if (sc.name == "DeadVoterReplacedThenBack") {
      // n3 returns with the data of its removed member: it is wiped and stays a spare.
      N(sim, 3).up = true;
      bad = Converge(sim, 6, log, stats, &rounds);
      ASSERT_TRUE(bad.empty()) << absl::StrJoin(bad, "\n") << "\nsequence:\n"
                               << absl::StrJoin(log, "\n");
      EXPECT_FALSE(N(sim, 3).has_data);
      EXPECT_FALSE(IsVoter(sim, 3));
    }
  }
}

}  // namespace
}  // namespace steward
