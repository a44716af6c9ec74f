#include "sim/store_model.h"

#include <utility>

namespace steward::sim {

absl::Status SimStore::Check() const {
  if (mode == Mode::kDown) return absl::UnavailableError("store down");
  if (mode == Mode::kMissing)
    return absl::FailedPreconditionError("store root missing (not mounted?)");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ObjectWriter>> SimStore::Create(const std::string& key) {
  if (auto s = Check(); !s.ok()) return s;
  return std::unique_ptr<ObjectWriter>(new Writer(this, key));
}

absl::Status SimStore::Put(const std::string& key, const std::string& content) {
  if (auto s = Check(); !s.ok()) return s;
  objects[key] = content;
  return absl::OkStatus();
}

absl::StatusOr<std::string> SimStore::Get(const std::string& key) {
  if (auto s = Check(); !s.ok()) return s;
  auto it = objects.find(key);
  if (it == objects.end()) return absl::NotFoundError(key);
  return it->second;
}

absl::Status SimStore::Read(const std::string& key,
                            const std::function<absl::Status(std::string_view)>& sink) {
  auto text = Get(key);
  if (!text.ok()) return text.status();
  return sink(*text);
}

absl::StatusOr<std::vector<ObjectInfo>> SimStore::List(const std::string& prefix) {
  if (auto s = Check(); !s.ok()) return s;
  std::vector<ObjectInfo> out;
  for (auto it = objects.lower_bound(prefix); it != objects.end(); ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    out.push_back({it->first, it->second.size()});
  }
  return out;
}

absl::Status SimStore::Delete(const std::string& key) {
  if (auto s = Check(); !s.ok()) return s;
  objects.erase(key);
  return absl::OkStatus();
}

}  // namespace steward::sim
