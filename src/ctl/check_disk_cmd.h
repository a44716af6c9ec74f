// stewardctl check-disk: how fast a disk completes small synced writes, measured the way etcd's
// hardware guidance does (fio --rw=write --ioengine=sync --fdatasync=1 --bs=2300 --size=22m,
// what a WAL does), before a node is given to etcd. etcd asks for a p99 fdatasync under 10 ms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "ctl/common.h"

namespace steward {

struct DiskCheck {
  int64_t writes = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
};

// Writes `bytes` in blocks of `block` to a new file in `dir`, fdatasync after each, and times
// the syncs; the file is removed after. An error if `dir` cannot take it.
absl::StatusOr<DiskCheck> MeasureSyncedWrites(const std::string& dir, int64_t bytes, int block);

// Registers check-disk.
void AddCheckDiskCommand(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
