// The backups, as a model: the leader's backup scheduler (a snapshot of a member on the quorum
// side every 20 s, in the real layout, with its meta and the created marker) and, with
// Options::delta_every, its DeltaWriter (the acknowledged writes since the end of the chain it
// follows, written with the real WriteDelta; it follows a newer full backup only after a while).
// The world keeps what each backup and delta holds (BackupData, DeltaRecord) as ground truth.
// World::RestoreCluster builds what a restore's snapshot restore makes of a backup, and checks
// there that the restore was justified, chose the newest backup, gives up no write an intact
// chain holds, and raises the revision when it can. These are World methods, in
// backup_model.cc. Single-threaded.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "sim/etcd_cluster.h"
#include "sim/simulation.h"

namespace steward::sim {

// What a backup holds: the cluster's writes, keys and leases at its revision.
struct BackupData {
  int64_t revision = 0;
  Writes writes;
  int64_t generation = 0;
  std::map<std::string, Kv> kv;
  std::map<int64_t, Ms> lease_ttls;
  uint64_t cluster = 0;
};

// A stored delta backup, as the world wrote it: the acknowledged writes of (from, to].
struct DeltaRecord {
  int64_t from = 0, to = 0;
  Writes writes;
  std::string object_key, meta_key;
};

}  // namespace steward::sim
