// Backups encrypted at rest (backup.encryption, docs/backup-layout.md "Encryption").
//
// A store decorator: the snapshot objects (<...>/snapshot.db.zst) are encrypted on their way in
// and decrypted on their way out; every other object (meta.json, control records: no data of
// the cluster's) passes through. Above it, the pipeline hashes and sizes the compressed stream
// as before, so meta.json's checks still hold after decryption.
//
// Format of an encrypted object (AES-256-GCM in the STREAM construction, chunk by chunk):
//   header  "STWDENC1" | key id (8 bytes) | chunk size (4 bytes, big-endian) | nonce prefix (7)
//   chunks  ciphertext of `chunk size` plaintext bytes | 16-byte tag, repeated; the last chunk
//           holds 0..chunk size bytes.
// Chunk i's nonce is prefix | i (4 bytes, big-endian) | 1 if it is the last chunk else 0, and
// the header is its additional data. So a chunk moved, dropped, repeated or cut off, a stream
// truncated at a chunk boundary, or a header changed, fails authentication; the random prefix
// (per object) keeps nonces unique under one key.
//
// Keys and key files: config/encryption_key.h. Objects written before encryption was on (no
// header) are read as they are.
//
// Thread-safe as the wrapped store is.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backup/store.h"
#include "config/encryption_key.h"

namespace steward {

inline constexpr uint32_t kDefaultEncryptionChunk = 1u << 20;
inline constexpr uint32_t kMaxEncryptionChunk = 64u << 20;

// Whether `key` names an object the decorator encrypts.
bool IsEncryptedObjectKey(const std::string& key);

// Wraps `inner`: new snapshot objects are encrypted with `current`; reads decrypt with any key
// of `current` and `old` (by the id in the object's header). An object encrypted with a key not
// given is a FailedPrecondition naming its id and the ids at hand; one that does not
// authenticate is DataLoss.
// REQUIRES: 0 < chunk_size <= kMaxEncryptionChunk.
std::unique_ptr<BackupStore> NewEncryptedStore(std::unique_ptr<BackupStore> inner,
                                               EncryptionKey current,
                                               std::vector<EncryptionKey> old,
                                               uint32_t chunk_size = kDefaultEncryptionChunk);

// Encryption is configured but the keys cannot be read (`why`): snapshot objects are neither
// written nor read (FailedPrecondition with `why`); the rest passes through.
std::unique_ptr<BackupStore> NewLockedEncryptedStore(std::unique_ptr<BackupStore> inner,
                                                     std::string why);

}  // namespace steward
