// The operator, as a model: `stewardctl destroy --force` and `undestroy` (Options::destroy_at,
// undestroy_at). Destroy writes the mark in the store (not while a restore is under way, X4)
// and has every agent that answers carry it out; the others do when they come back. While the
// mark stands, no agent may be asked to run etcd that is not running and no restore may be
// applied (SD1, SD2, R7: checked in runner_model.cc and backup_model.cc).
#include "absl/strings/str_cat.h"
#include "control/destroy.h"
#include "etcd/keys.h"
#include "reconcile/restart_roll.h"
#include "sim/world.h"

namespace steward::sim {

void World::OperatorDestroy() {
  const std::string cluster = nodes_[0]->config.cluster.name;
  // X4: not while a restore is under way (or the store cannot tell).
  auto intent = ReadRestoreIntent(store_, cluster);
  if (!intent.ok() || (intent->has_value() && !(*intent)->done && !(*intent)->cancelled)) return;
  if (!destroyed_) {
    DestroyMark mark;
    mark.id = absl::StrCat("sim-", result_.destroys + 1);
    mark.by = "operator";
    if (!WriteDestroyMark(store_, cluster, mark).ok()) return;  // the store is down: later
    destroyed_ = true;
    ++result_.destroys;
    Trace(absl::StrCat("OPERATOR destroy ", mark.id));
  }
  auto mark = ReadDestroyMark(store_, cluster);
  if (!mark.ok() || !mark->has_value()) return;
  // --force: the agents that answer carry it out; the others when they come back.
  for (auto& n : nodes_) {
    if (!n->agent_up || Paused(n->index) || !n->local) continue;
    peer::DestroyRequest req;
    req.set_destroy_id((*mark)->id);
    speaker_ = n->index;
    absl::Status s = n->local->Destroy(req);
    speaker_ = -1;
    Trace(n->index, absl::StrCat("destroy: ", s.ok() ? "carried out" : std::string(s.message())));
  }
  dirty_ = true;
}

void World::OperatorRestart() {
  // Written straight into the cluster that serves (stewardctl's put), if one has a leader.
  RestartRoll roll;
  roll.id = absl::StrCat("sim-r", ++result_.faults["restart-roll"]);
  roll.by = "operator";
  roll.reason = "sim";
  for (const auto& n : nodes_) roll.nodes.push_back(n->spec.name);
  const std::string key = RestartKey(nodes_[0]->config.cluster.name);
  for (auto& [id, c] : clusters_) {
    if (c.leader == 0) continue;
    Kv& kv = c.kv[key];
    ++c.rev;
    if (kv.create == 0) kv.create = c.rev;
    kv.mod = c.rev;
    ++kv.version;
    kv.value = RestartRollToJson(roll).dump();
    Trace(absl::StrCat("OPERATOR restart roll ", roll.id));
    dirty_ = true;
    return;
  }
}

void World::CheckRestartSafe(int n) {
  Cluster* c = ClusterOf(n);
  if (c == nullptr) return;
  ++result_.faults["restart-order"];
  if (nodes_[n]->mid_call_pauses != nodes_[n]->pauses_at_restart_order) {
    ++result_.faults["restart-after-own-pause"];  // RS7's window: not checked
    return;
  }
  for (const auto& m : c->members) {
    const int i = NodeOfMember(*c, m.id);
    if (m.learner) {
      Violation(absl::StrCat("a restart is ordered on node ", nodes_[n]->spec.name,
                             " while learner ", HexId(m.id), " is on its way"));
      return;
    }
    if (i == n) continue;
    if (i < 0 || !nodes_[i]->etcd_up || !InQuorum(i)) {
      Violation(absl::StrCat("a restart is ordered on node ", nodes_[n]->spec.name, " while voter ",
                             HexId(m.id), " is down"));
      return;
    }
  }
}

void World::OperatorUndestroy() {
  const std::string cluster = nodes_[0]->config.cluster.name;
  if (destroyed_) {
    if (!ClearDestroyMark(store_, cluster).ok()) return;  // the store is down: later
    destroyed_ = false;
    Trace("OPERATOR undestroy");
  }
  undestroy_pending_ = false;
  for (auto& n : nodes_) {
    if (!n->agent_up || Paused(n->index) || !n->local) continue;
    peer::DestroyRequest req;
    req.set_undo(true);
    speaker_ = n->index;
    absl::Status s = n->local->Destroy(req);
    speaker_ = -1;
    if (!s.ok()) undestroy_pending_ = true;
  }
  dirty_ = true;
}

}  // namespace steward::sim
