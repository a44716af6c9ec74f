// Where backups live: a small object-store interface with two implementations, chosen by URL:
//   file:///path          a local or NFS directory (FileStore)
//   s3://bucket/prefix    any S3-compatible server (S3Store)
// Keys are '/'-separated paths relative to the store's root/prefix ("demo/backups/x/meta.json").
//
// Errors: Unavailable for faults worth retrying (network, 5xx); NotFound for a missing object;
// PermissionDenied / FailedPrecondition for what an operator must fix (credentials, a missing
// bucket) — with a message that says which. No credential ever appears in a message.
//
// Thread-safe: one store may be used from several threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace steward {

// A streaming upload. Nothing is visible under the key until Commit() succeeds; a writer that
// is destroyed without Commit() leaves nothing behind (best effort for remote stores).
class ObjectWriter {
 public:
  virtual ~ObjectWriter() = default;
  virtual absl::Status Write(std::string_view chunk) = 0;
  virtual absl::Status Commit() = 0;
};

struct ObjectInfo {
  std::string key;
  uint64_t size = 0;
};

class BackupStore {
 public:
  virtual ~BackupStore() = default;
  // "file:///var/backups" or "s3://bucket/prefix (endpoint ...)": safe to log.
  virtual std::string Describe() const = 0;
  virtual absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) = 0;
  // Small objects in one call.
  virtual absl::Status Put(const std::string& key, const std::string& content) = 0;
  virtual absl::StatusOr<std::string> Get(const std::string& key) = 0;
  // Streams the object to `sink` in order; an error from `sink` stops the read and is returned.
  virtual absl::Status Read(const std::string& key,
                            const std::function<absl::Status(std::string_view)>& sink) = 0;
  // Every object whose key starts with `prefix`, sorted by key (all pages).
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;
  // OK if the object did not exist.
  virtual absl::Status Delete(const std::string& key) = 0;
  // The id of the key new snapshot objects are encrypted with ("": not encrypted).
  virtual std::string EncryptionKeyId() const { return ""; }
  // Read, for an object meta.json says is encrypted with `key_id`: a store that decrypts
  // refuses an object that is not encrypted (a plaintext object put in its place) or is under
  // another key. Others read as Read does.
  virtual absl::Status ReadEncrypted(const std::string& key, const std::string& key_id,
                                     const std::function<absl::Status(std::string_view)>& sink) {
    (void)key_id;
    return Read(key, sink);
  }
};

// A local directory. `root` must exist: it is never created (every call fails with
// FailedPrecondition while it is missing, e.g. an NFS share that is not mounted).
std::unique_ptr<BackupStore> NewFileStore(const std::string& root);

struct S3Options {
  std::string bucket;
  std::string prefix;    // without leading or trailing '/'; may be empty
  std::string endpoint;  // e.g. "http://127.0.0.1:4568"; empty: https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  bool path_style = false;  // http://endpoint/bucket/key instead of http://bucket.endpoint/key
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;      // optional
  std::string ca_file;            // PEM CA bundle for the endpoint's certificate ("": system's)
  uint64_t part_size = 16 << 20;  // multipart part size (S3's minimum is 5 MiB)
  int timeout_seconds = 60;       // per request (low-speed abort after this many idle seconds)
};

std::unique_ptr<BackupStore> NewS3Store(const S3Options& options);

}  // namespace steward
