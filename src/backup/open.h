// Opens the backup store named by the config's backup.store URL.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "backup/store.h"
#include "config/config.h"

namespace steward {

// nullptr (and OK) when no store is configured. With backup.encryption, the store encrypts
// (backup/encryption.h). A key file that cannot be read is an error, unless
// `tolerate_unreadable_keys` (stewardctl, run by an operator who may not read the 0600 key):
// then the store still lists backups and reads the control records, and refuses, naming the
// file, to write or read a snapshot object.
absl::StatusOr<std::unique_ptr<BackupStore>> OpenStore(const BackupConfig& config,
                                                       bool tolerate_unreadable_keys = false);

}  // namespace steward
