// Restart rolls (stewardctl restart): etcd restarted on its data one member at a time, so that
// flags the config changed since it started (NodeView::pending_restart, etcd/flags.h) take
// effect. The request is one JSON document in etcd under RestartKey (etcd/keys.h), written by
// stewardctl and read by the steward leader every pass. It names the nodes to restart; each
// node records the roll it restarted for last (NodeView::restarted_for), so the roll is done
// when every named node says so, and a leader that takes over mid-roll goes on where the last
// one stopped. Nothing about the roll is kept in a leader's memory.
//
// Rules, each with a table test (tests/unit/restart_roll_test.cc), asked by PlanNextStep only
// once the cluster is healthy at its size and no rolling upgrade has a step (every voter
// healthy, no learner: so never while degraded, and the member restarted last is healthy
// again before the next one goes):
//   RS0 (PlanNextStep) a roll's step only once the cluster is healthy at its size, as above.
//   RS1 no roll, or every named node that still holds a member has restarted for it: nothing.
//   RS2 followers first; one member per step.
//   RS3 the etcd leader last, and never while it leads: first leadership moves to the healthy
//       voter furthest along (kMoveLeader); the restart comes in a later pass, re-observed.
//       A single voter restarts as it is (there is no one to move to).
//   RS4 a paused node's member is not restarted (P1-P4): the roll waits, saying so.
//   RS5 a named node whose agent does not answer: the roll waits, saying so.
//   RS6 (the reconciler, right before the order) a fresh member list and Status of every other
//       member: no restart while one does not answer with a leader or a learner is there.
//   RS7 (the node, right before it stops etcd, node/orders.cc) the same look once more, through
//       its own etcd: an order that waited (a slow or paused leader) restarts nothing unless the
//       other members serve now. Between that look and the stop there is no wait but a pause
//       of the node itself.
// Pure. Thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reconcile/plan.h"

namespace steward {

// RestartRoll, the request, is in plan.h (ClusterObservation::restart).
nlohmann::json RestartRollToJson(const RestartRoll& r);
// InvalidArgument naming the problem for anything RestartRollToJson does not write.
absl::StatusOr<RestartRoll> RestartRollFromJson(const std::string& text);

// The named nodes that hold a member and have not restarted for `roll` yet, in roll order.
std::vector<std::string> RestartsLeft(const RestartRoll& roll, const ClusterObservation& o);

// PlanRestart (rules RS1-RS5) is declared in plan.h, which asks it.

}  // namespace steward
