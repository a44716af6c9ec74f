// Opens the backup store named by the config's backup.store URL.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backup/store.h"
#include "config/config.h"

namespace steward {

// nullptr (and OK) when no store is configured.
absl::StatusOr<std::unique_ptr<BackupStore>> OpenStore(const BackupConfig& config);

}  // namespace steward
