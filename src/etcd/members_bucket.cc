#include "etcd/members_bucket.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "etcd/bolt.h"
#include "nlohmann/json.hpp"

namespace steward {

absl::StatusOr<std::vector<BoltMember>> ReadMembersBucket(const std::string& db_path) {
  auto db = BoltFile::Open(db_path, /*writable=*/false);
  if (!db.ok()) return db.status();
  auto bucket = (*db)->ReadBucket("members");
  if (!bucket.ok()) return bucket.status();
  std::vector<BoltMember> out;
  for (const auto& [key, value] : *bucket) {
    const nlohmann::json j = nlohmann::json::parse(value, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned()) {
      return absl::DataLossError(
          absl::StrCat(db_path, ": members bucket entry ", key, " is not a member as JSON"));
    }
    BoltMember m;
    m.id = j["id"].get<uint64_t>();
    m.name = j.value("name", std::string());
    m.is_learner = j.value("isLearner", false);
    out.push_back(std::move(m));
  }
  return out;
}

std::vector<std::string> MembershipDisagreements(const std::vector<BoltMember>& db,
                                                 const std::vector<MemberInfo>& live) {
  auto label = [](uint64_t id, const std::string& name) {
    return absl::StrCat(name.empty() ? "(unnamed)" : name, " (", HexId(id), ")");
  };
  std::vector<std::string> out;
  for (const auto& m : live) {
    auto it = std::find_if(db.begin(), db.end(), [&](const BoltMember& b) { return b.id == m.id; });
    if (it == db.end()) {
      out.push_back(absl::StrCat("member ", label(m.id, m.name),
                                 " is in the member list but not in the DB's members bucket"));
    } else if (it->is_learner != m.is_learner) {
      out.push_back(absl::StrCat("member ", label(m.id, m.name), " is a ",
                                 m.is_learner ? "learner" : "voter", " in the member list but a ",
                                 it->is_learner ? "learner" : "voter",
                                 " in the DB's members bucket (etcd #19557)"));
    }
  }
  for (const auto& b : db) {
    if (std::none_of(live.begin(), live.end(), [&](const MemberInfo& m) { return m.id == b.id; })) {
      out.push_back(
          absl::StrCat("member ", label(b.id, b.name),
                       " is in the DB's members bucket but no longer in the member list"));
    }
  }
  return out;
}

}  // namespace steward
