// Small filesystem helpers with crash-safe semantics.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace steward {

// errno as a Status, the code chosen by what the caller does next: NotFound (ENOENT),
// PermissionDenied (EACCES, EPERM, EROFS: an operator must fix it), AlreadyExists (EEXIST),
// ResourceExhausted (ENOSPC, EDQUOT), Unavailable otherwise (worth retrying). The message is
// "<what>: <strerror>". The only errno mapping in this tree.
absl::Status ErrnoStatus(int err, const std::string& what);

// Makes the entries of directory `dir` durable (fsyncs it): a file created, renamed or removed
// in it survives a crash. An empty `dir` is the working directory. The only directory fsync in
// this tree. Errors: ErrnoStatus, naming the directory.
absl::Status SyncDir(const std::string& dir);

// A file that appears whole or not at all: the bytes go to a unique dot-file beside the target
// (created 0600, given `mode` less the process umask — or exactly `mode` with `exact_mode` —
// before any byte is written, so a secret is never readable by others), which Commit() fsyncs,
// renames into place and makes durable (the directory is fsynced). Destroyed before Commit(), it
// leaves nothing behind. The only atomic-write helper in this tree: WriteFileAtomic, the file
// store, the PKI's key pairs and stewardctl's snapshot files all use it.
class AtomicFile {
 public:
  static absl::StatusOr<AtomicFile> Create(const std::string& target, int mode,
                                           bool exact_mode = false);
  // Takes a file already written whole at `written` (by a download checked before it is
  // published, say) in place of the temp file: Commit() fsyncs it and renames it over `target`.
  // Its name and mode stay the caller's. REQUIRES: `written` is on `target`'s filesystem.
  // Destroyed before Commit(), it removes `written`.
  static absl::StatusOr<AtomicFile> Adopt(const std::string& written, const std::string& target);
  AtomicFile(AtomicFile&& o) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  ~AtomicFile();

  absl::Status Write(std::string_view chunk);
  // Reserves the file's blocks up to `size` bytes (zeros past what was written), as etcd does
  // for a WAL segment, so a disk too small fails here and not later. Where the filesystem
  // cannot reserve (EOPNOTSUPP), the file is extended sparse, as etcd then does.
  absl::Status Preallocate(uint64_t size);
  // With replace=false an existing target is never replaced (AlreadyExists), even one created
  // concurrently. With sync_dir=false the directory is left to the caller (SyncDir), who renames
  // several files first (a key and its certificate) so that no error stops between the renames.
  // An error after the rename (the directory's fsync) leaves the target in place.
  absl::Status Commit(bool replace = true, bool sync_dir = true);
  const std::string& target() const { return target_; }

 private:
  AtomicFile(std::string target, std::string tmp, int fd)
      : target_(std::move(target)), tmp_(std::move(tmp)), fd_(fd) {}
  std::string target_;
  std::string tmp_;  // empty once committed or moved from
  int fd_ = -1;
};

// Writes `content` to `path` through an AtomicFile. On failure `path` is untouched.
absl::Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0644);

// Reads a whole (small) file. NotFound if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// mkdir -p with the given mode for directories it creates.
absl::Status MakeDirs(const std::string& path, int mode = 0755);

// True if `path` exists and is a directory with at least one entry.
bool DirHasEntries(const std::string& path);

}  // namespace steward
