// stewardctl's plain snapshot files (issue 15, part 5):
//   snapshot save FILE          the live cluster as etcdctl snapshot save writes it
//   snapshot status FILE        what a snapshot file holds, checked without etcd
//   backup export NAME FILE     a stored backup as a plain .db file (etcdctl snapshot restore)
//   restore-backup --from-file FILE   the whole cluster from a snapshot file, through the store
// Each writes FILE.part and renames it only once verified; progress goes to stderr.
#pragma once

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "ctl/common.h"

namespace steward {

// Registers the commands above. Needs CtlMain's `backup` and `restore-backup` subcommands to
// exist already (it adds `export` under the first, --from-file to the second).
void AddSnapshotCommands(CLI::App& app, Common* common, Commands* commands);

// restore-backup --from-file: the file verified, imported into the store, restored by name
// (recover-quorum ends here too).
int RunRestoreFromFile(const Common& c, const std::string& file, bool skip_hash_check, bool yes,
                       bool force, int wait_seconds);

// Where restore-backup stops replaying deltas (0: no limit).
struct PointInTime {
  int64_t to_revision = 0;
  int64_t to_unix_ms = 0;
  bool deltas = false;  // replay the backup's deltas (up to the limits, else to their end)
};
// The named restore (ctl.cc): verify, safety backup, intent, wait. An empty `name`: the newest
// backup at or before the point, with its deltas.
int RunRestoreBackup(const Common& c, const std::string& name, bool yes, bool force,
                     int wait_seconds, PointInTime point = {});
// "2026-11-27T08:40:00Z" or Unix seconds, as ms since the epoch.
absl::StatusOr<int64_t> ParsePointTime(const std::string& text);

}  // namespace steward
