// The backup encryption keys that backup.encryption names (key_file, old_key_files): reading a
// key file and naming a key. The config's validation reads them so that a bad key is a config
// error when the agent starts; the encrypted store (backup/encryption.h) uses them.
//
// Key files hold a 32-byte key in base64 (`openssl rand -base64 32`). A key's id is the first
// 8 bytes of sha256("etcd-steward backup key\0" | key), in hex: it names the key without
// revealing it.
//
// Pure functions but for the file read; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace steward {

inline constexpr size_t kEncryptionKeySize = 32;
// The bytes of a key's id (its hex form has twice as many characters).
inline constexpr size_t kEncryptionKeyIdSize = 8;

struct EncryptionKey {
  std::string id;   // 16 hex characters
  std::string key;  // 32 raw bytes
};

// Reads a key file: base64 of 32 bytes, surrounding whitespace ignored. Refuses a file that
// group or others may read. Errors name the file and the problem.
absl::StatusOr<EncryptionKey> LoadEncryptionKey(const std::string& path);
EncryptionKey MakeEncryptionKey(const std::string& raw32);

}  // namespace steward
