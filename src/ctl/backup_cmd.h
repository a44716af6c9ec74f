// stewardctl backup delete / backup prune: housekeeping of the backup store, with or without
// etcd (--backup-store works too).
#pragma once

#include "ctl/common.h"

namespace steward {

// After the "backup" subcommand exists.
void AddBackupCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
