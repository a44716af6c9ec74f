#include "agent/control_wiring.h"

#include <chrono>
#include <utility>

#include "etcd/keys.h"

namespace steward {

ControlParts WireControl(ControlSeams seams) {
  const Config& config = *seams.config;
  ControlParts p;
  p.node = std::make_unique<LocalNode>(config, std::move(seams.node));
  p.leadership = std::make_unique<Leadership>(
      seams.cluster, LeaderKey(config), EpochKey(config), config.node.name,
      std::chrono::duration_cast<std::chrono::seconds>(config.cluster.leader_lease_ttl));
  if (seams.store != nullptr) {
    p.restorer = std::make_unique<RestoreCoordinator>(config, seams.store, seams.cluster,
                                                      std::move(seams.restore_env));
  }
  // The reconciler keeps its hands off while a restore is pending, acts only while this agent
  // still leads, and raises the leadership's epoch past what a restore recorded.
  RestoreCoordinator* restorer = p.restorer.get();
  Leadership* leadership = p.leadership.get();
  p.reconciler = std::make_unique<Reconciler>(
      config, seams.cluster, seams.store, seams.backups,
      [restorer] { return restorer != nullptr && restorer->RestorePending(); },
      [leadership] { return leadership->Confirm(); }, std::move(seams.reconcile_env),
      [leadership](uint64_t floor) { return leadership->Raise(floor); });
  return p;
}

}  // namespace steward
