// Small filesystem helpers with crash-safe semantics.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace steward {

// Writes `content` to `path` via a temp file in the same directory (a dot-file), fsyncs it,
// renames it over `path` and fsyncs the directory. On failure `path` is untouched.
absl::Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0644);

// Reads a whole (small) file. NotFound if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

// mkdir -p with the given mode for directories it creates.
absl::Status MakeDirs(const std::string& path, int mode = 0755);

// True if `path` exists and is a directory with at least one entry.
bool DirHasEntries(const std::string& path);

}  // namespace steward
