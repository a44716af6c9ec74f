// The operator, as a model: `stewardctl destroy --force` and `undestroy` (Options::destroy_at,
// undestroy_at). Destroy writes the mark in the store (not while a restore is under way, X4)
// and has every agent that answers carry it out; the others do when they come back. While the
// mark stands, no agent may be asked to run etcd that is not running and no restore may be
// applied (SD1, SD2, R7: checked in runner_model.cc and backup_model.cc).
#include "absl/strings/str_cat.h"
#include "control/destroy.h"
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
