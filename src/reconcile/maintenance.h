// Maintenance state: what the operator told the steward leader to leave alone, stored in etcd
// under MaintenanceKey (etcd/keys.h) as one JSON document that stewardctl rewrites by
// compare-and-swap and the leader reads once per pass.
//
//   - a pause (stewardctl pause, drain): on one node, or on the whole cluster (node ""). While
//     a node is paused the leader replaces nothing on it: its member is not removed or
//     re-added, its data is not wiped, it is not added as a spare, it is not switched to
//     another etcd version (plan.h, rules P1-P3). A pause has an end ("until"); an expired
//     pause is ignored, so a forgotten one cannot block healing for ever. Each has who set it,
//     why, and since when.
//   - a removed node (stewardctl remove-node): its member was removed for good; the leader does
//     not add it back (plan.h, rule RM1) until `stewardctl readd-node` clears the mark.
//
// Pure: parsing, printing and the merge into a ClusterObservation take the time as an argument.
// Thread-compatible.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "reconcile/plan.h"

namespace steward {

// --for's bounds: a pause without --for lasts an hour; none may last longer than a week.
inline constexpr std::chrono::seconds kDefaultPause = std::chrono::hours(1);
inline constexpr std::chrono::seconds kMaxPause = std::chrono::hours(24 * 7);

struct Pause {
  std::string node;  // "" = the whole cluster
  std::string by;    // user@host of the operator, or the node that asked
  std::string reason;
  int64_t since = 0;  // Unix seconds
  int64_t until = 0;  // Unix seconds; past it the pause is ignored
  bool ActiveAt(int64_t now) const { return now < until; }
};

struct RemovedNode {
  std::string node;
  std::string by;
  std::string reason;
  int64_t since = 0;
  uint64_t member_id = 0;  // the member removed (0 if it had none)
};

struct Maintenance {
  std::vector<Pause> pauses;  // at most one per node ("" included)
  std::vector<RemovedNode> removed;

  const Pause* PauseFor(const std::string& node) const;
  const RemovedNode* Removed(const std::string& node) const;
  // Drops `node`'s pause, or its removed mark (none: nothing changes).
  void DropPause(const std::string& node);
  void DropRemoved(const std::string& node);
  // Drops pauses that ended before `now` (stewardctl does when it rewrites the document).
  void DropExpired(int64_t now);
};

// The document as stored. FromJson accepts what ToJson writes; anything else is
// InvalidArgument naming the problem (the leader then ignores the document and says so).
nlohmann::json MaintenanceToJson(const Maintenance& m);
absl::StatusOr<Maintenance> MaintenanceFromJson(const std::string& text);

// "until 2026-11-26 18:00:00Z by alice@host: kernel upgrade"
std::string DescribePause(const Pause& p);
// "2026-11-26 17:00:00Z"
std::string UtcSeconds(int64_t unix_time);

// Parses --for: ParseDuration's forms plus whole days ("2d"). Must be positive and at most
// kMaxPause; InvalidArgument otherwise.
absl::StatusOr<std::chrono::seconds> ParsePauseDuration(const std::string& text);

// Copies what is in force at `now` into the observation: NodeView::paused and ::removed for
// configured nodes, ClusterObservation::cluster_paused. Expired pauses are left out.
void ApplyMaintenance(const Maintenance& m, int64_t now, ClusterObservation* obs);

}  // namespace steward
