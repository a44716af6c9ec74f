// Every key etcd-steward keeps in etcd, under the cluster's reserved prefix
// "/steward/<cluster>/" (the store's own names are in backup/layout.h). Applications must not
// write under it. Pure.
#pragma once

#include <string>

#include "config/config.h"

namespace steward {

// Every cluster's reserved prefix starts with this.
inline constexpr char kStewardKeyRoot[] = "/steward/";
inline std::string ReservedPrefix(const std::string& cluster) {
  return kStewardKeyRoot + cluster + "/";
}
// The steward leader's lease-backed election key; its value is the leader's node name.
inline std::string LeaderKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "leader";
}
// The leaders' epoch counter, raised with the leader key in one transaction: the leader's term.
inline std::string EpochKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "epoch";
}
// The desired spec written by `stewardctl configure-cluster` ({"size": N}).
inline std::string SpecKey(const std::string& cluster) { return ReservedPrefix(cluster) + "spec"; }
// The leader's last decision, for `stewardctl status`.
inline std::string StatusKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "status";
}
// The backup scheduler's last result.
inline std::string BackupStatusKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "backup-status";
}
// How many restores lie behind this cluster; written by the restore coordinator while fenced.
inline std::string EtcdGenerationKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "generation";
}
// Set once the leader marked the backup store as this cluster's (a store that loses its marker
// while this key exists is the wrong store).
inline std::string StoreMarkedKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "store-marked";
}

// Maintenance (reconcile/maintenance.h): the pauses (stewardctl pause, drain) and the nodes
// removed for good (remove-node), one JSON document written by compare-and-swap.
inline std::string MaintenanceKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "maintenance";
}

// The restart roll stewardctl restart asked for last (reconcile/restart_roll.h), one JSON
// document; a new request replaces it.
inline std::string RestartKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "restart";
}

// The event history (control/history.h): one key per event, the oldest trimmed past 1,000.
inline std::string EventsPrefix(const std::string& cluster) {
  return ReservedPrefix(cluster) + "events/";
}

// While a restored cluster is fenced: which coordinator's replay of the deltas may write, and
// that restore `id` was settled (no replay of it may start again).
inline std::string ReplayGuardKey(const std::string& cluster) {
  return ReservedPrefix(cluster) + "restore-replay";
}
inline std::string ReplaySettledKey(const std::string& cluster, const std::string& id) {
  return ReservedPrefix(cluster) + "restore-settled/" + id;
}
// That restore `id` is being replaced (its deltas were lost): it may no longer settle.
inline std::string ReplaySupersededKey(const std::string& cluster, const std::string& id) {
  return ReservedPrefix(cluster) + "restore-superseded/" + id;
}
inline std::string ReservedPrefix(const Config& c) { return ReservedPrefix(c.cluster.name); }
inline std::string EventsPrefix(const Config& c) { return EventsPrefix(c.cluster.name); }
inline std::string LeaderKey(const Config& c) { return LeaderKey(c.cluster.name); }
inline std::string EpochKey(const Config& c) { return EpochKey(c.cluster.name); }
inline std::string SpecKey(const Config& c) { return SpecKey(c.cluster.name); }
inline std::string StatusKey(const Config& c) { return StatusKey(c.cluster.name); }
inline std::string BackupStatusKey(const Config& c) { return BackupStatusKey(c.cluster.name); }

}  // namespace steward
