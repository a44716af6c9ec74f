// The backup store, as a model: objects in memory, written whole at commit; it can be down
// (Unavailable), not mounted (FailedPrecondition, as FileStore says for a missing root) or
// emptied. The agents reach it through the real BackupStore interface, so ListBackups,
// VerifyBackup, the restore intent and the destroy mark are read in their real layout. The
// world reads and edits `objects` directly (ground truth, faults). Single-threaded.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "backup/store.h"

namespace steward::sim {

class SimStore : public BackupStore {
 public:
  // kDown: every call fails Unavailable; kMissing: FailedPrecondition.
  enum class Mode { kUp, kDown, kMissing };
  Mode mode = Mode::kUp;
  std::map<std::string, std::string> objects;

  std::string Describe() const override { return "sim://store"; }
  absl::Status Check() const;
  // The object appears whole at Commit (as a file renamed into place, or an S3 upload).
  class Writer : public ObjectWriter {
   public:
    Writer(SimStore* store, std::string key) : store_(store), key_(std::move(key)) {}
    absl::Status Write(std::string_view chunk) override {
      if (auto s = store_->Check(); !s.ok()) return s;
      bytes_.append(chunk);
      return absl::OkStatus();
    }
    absl::Status Commit() override { return store_->Put(key_, bytes_); }

   private:
    SimStore* store_;
    std::string key_, bytes_;
  };
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override;
  absl::Status Put(const std::string& key, const std::string& content) override;
  absl::StatusOr<std::string> Get(const std::string& key) override;
  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
};

}  // namespace steward::sim
