#include "control/records.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "common/status.h"
#include "nlohmann/json.hpp"

namespace steward {

absl::StatusOr<std::optional<RestoreIntent>> ReadRestoreIntent(BackupStore& store,
                                                               const std::string& cluster) {
  auto text = store.Get(RestoreIntentKey(cluster));
  if (absl::IsNotFound(text.status())) return std::optional<RestoreIntent>();
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded()) return absl::DataLossError("restore.json is not JSON");
  try {
    RestoreIntent r;
    r.id = j.at("id").get<std::string>();
    r.backup = j.at("backup").get<std::string>();
    r.token = j.at("token").get<std::string>();
    r.requested_by = j.value("requested_by", "");
    r.done = j.value("done", false);
    r.settled = j.value("settled", false);
    r.ordered = j.value("ordered", false);
    r.generation = j.value("generation", int64_t{1});
    r.bump_revision = j.value("bump_revision", int64_t{0});
    r.delta_to = j.value("delta_to", int64_t{0});
    r.cancelled = j.value("cancelled", false);
    r.cancel_reason = j.value("cancel_reason", "");
    r.supersedes = j.value("supersedes", "");
    r.created_at = j.value("created_at", int64_t{0});
    for (const auto& m : j.at("initial_cluster")) {
      r.initial_cluster.emplace_back(m.at("name").get<std::string>(),
                                     m.at("peer_url").get<std::string>());
    }
    return std::optional<RestoreIntent>(r);
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("restore.json: ", e.what()));
  }
}

absl::Status WriteRestoreIntent(BackupStore& store, const std::string& cluster,
                                const RestoreIntent& r) {
  nlohmann::json members = nlohmann::json::array();
  for (const auto& [name, url] : r.initial_cluster)
    members.push_back({{"name", name}, {"peer_url", url}});
  nlohmann::json j = {{"id", r.id},
                      {"backup", r.backup},
                      {"token", r.token},
                      {"requested_by", r.requested_by},
                      {"generation", r.generation},
                      {"bump_revision", r.bump_revision},
                      {"delta_to", r.delta_to},
                      {"done", r.done},
                      {"settled", r.settled},
                      {"ordered", r.ordered},
                      {"created_at", r.created_at},
                      {"initial_cluster", members}};
  if (!r.supersedes.empty()) j["supersedes"] = r.supersedes;
  if (r.cancelled) {
    j["cancelled"] = true;
    j["cancel_reason"] = r.cancel_reason;
  }
  return store.Put(RestoreIntentKey(cluster), j.dump(2));
}

absl::StatusOr<int64_t> NextGeneration(BackupStore& store, const std::string& cluster) {
  auto listed = ListBackups(store, cluster);
  if (!listed.ok()) return listed.status();
  int64_t highest = 0;
  for (const auto& b : *listed) {
    if (b.meta) highest = std::max(highest, b.meta->generation);
  }
  return highest + 1;
}

absl::StatusOr<int64_t> ReadHighestRevision(BackupStore& store, const std::string& cluster) {
  auto text = store.Get(RevisionRecordKey(cluster));
  if (absl::IsNotFound(text.status())) return int64_t{0};
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.contains("revision") || !j["revision"].is_number_integer()) {
    return absl::DataLossError(absl::StrCat(RevisionRecordKey(cluster), " is malformed"));
  }
  return j["revision"].get<int64_t>();
}

absl::Status WriteHighestRevision(BackupStore& store, const std::string& cluster, int64_t revision,
                                  int64_t now_unix) {
  nlohmann::json j = {{"revision", revision}, {"updated_at", now_unix}};
  return store.Put(RevisionRecordKey(cluster), j.dump());
}

absl::Status RaiseHighestRevision(BackupStore& store, const std::string& cluster, int64_t revision,
                                  int64_t now_unix) {
  auto stored = ReadHighestRevision(store, cluster);
  if (!stored.ok()) return stored.status();
  if (*stored >= revision) return absl::OkStatus();
  return WriteHighestRevision(store, cluster, revision, now_unix);
}

absl::StatusOr<uint64_t> ReadHighestEpoch(BackupStore& store, const std::string& cluster) {
  auto text = store.Get(EpochRecordKey(cluster));
  if (absl::IsNotFound(text.status())) return uint64_t{0};
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.contains("epoch") || !j["epoch"].is_number_unsigned()) {
    return absl::DataLossError(absl::StrCat(EpochRecordKey(cluster), " is malformed"));
  }
  return j["epoch"].get<uint64_t>();
}

absl::Status RaiseHighestEpoch(BackupStore& store, const std::string& cluster, uint64_t epoch,
                               int64_t now_unix) {
  auto stored = ReadHighestEpoch(store, cluster);
  // A malformed record is replaced (it bounds nothing); the store's own errors are returned.
  if (!stored.ok() && !absl::IsDataLoss(stored.status())) return stored.status();
  if (stored.ok() && *stored >= epoch) return absl::OkStatus();
  nlohmann::json j = {{"epoch", epoch}, {"updated_at", now_unix}};
  return store.Put(EpochRecordKey(cluster), j.dump());
}

int64_t RevisionBump(int64_t highest_recorded, int64_t backup_revision) {
  return std::max<int64_t>(0, highest_recorded - backup_revision) + kRevisionBumpMargin;
}

RestoreIntent NewRestoreIntent(const Config& config, const std::string& backup,
                               const std::string& requested_by, int64_t generation,
                               int64_t bump_revision, int64_t created_at, uint32_t nonce) {
  RestoreIntent r;
  r.generation = generation;
  r.bump_revision = bump_revision;
  r.created_at = created_at;
  r.id = absl::StrFormat("%d-%04x", r.created_at, nonce & 0xffff);
  r.backup = backup;
  // A new token: the restored cluster must not be mistaken for the one it replaces.
  r.token = absl::StrCat(config.ClusterToken(), "-r", r.id);
  r.requested_by = requested_by;
  for (int i = 0; i < config.cluster.size; ++i) {
    const NodeSpec& n = config.cluster.nodes[static_cast<size_t>(i)];
    r.initial_cluster.emplace_back(n.name, config.PeerUrl(n));
  }
  return r;
}

absl::StatusOr<std::optional<std::vector<std::string>>> ReadLastVoters(BackupStore& store,
                                                                       const std::string& cluster) {
  using Result = std::optional<std::vector<std::string>>;
  auto text = store.Get(MembersRecordKey(cluster));
  if (absl::IsNotFound(text.status())) return Result();
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  try {
    if (j.is_discarded()) throw nlohmann::json::other_error::create(501, "not JSON", nullptr);
    std::vector<std::string> voters = j.at("voters").get<std::vector<std::string>>();
    if (voters.empty()) throw nlohmann::json::other_error::create(501, "no voters", nullptr);
    return Result(std::move(voters));
  } catch (const nlohmann::json::exception& e) {
    // A damaged record is not "no record": the coordinator must not fall back to a guess.
    return absl::DataLossError(absl::StrCat(MembersRecordKey(cluster), ": ", e.what()));
  }
}

absl::Status WriteLastVoters(BackupStore& store, const std::string& cluster,
                             const std::vector<std::string>& voters, int64_t now_unix) {
  nlohmann::json j = {{"voters", voters}, {"updated_at", now_unix}};
  return store.Put(MembersRecordKey(cluster), j.dump(2));
}

absl::StatusOr<bool> ClusterEverExisted(BackupStore& store, const std::string& cluster) {
  auto marker = store.Get(CreatedMarkerKey(cluster));
  if (marker.ok()) return true;
  if (!absl::IsNotFound(marker.status())) return marker.status();
  auto objects = store.List(BackupsPrefix(cluster));
  if (!objects.ok()) return objects.status();
  return !objects->empty();
}

absl::StatusOr<RestoreIntent> PrepareRestoreIntent(BackupStore& store, const Config& config,
                                                   const IntentRequest& request) {
  const std::string& cluster = config.cluster.name;
  auto generation = NextGeneration(store, cluster);
  if (!generation.ok()) return Annotate(generation.status(), "listing backups");
  auto text = store.Get(MetaKey(cluster, request.backup));
  if (!text.ok()) return Annotate(text.status(), "reading the backup's meta.json");
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) return Annotate(meta.status(), "reading the backup's meta.json");
  auto highest = ReadHighestRevision(store, cluster);
  if (!highest.ok()) return Annotate(highest.status(), "reading the revision record");
  // Past every revision the lost (or replaced) cluster served: all members must restore the
  // same revisions, so it is raised only if every one can.
  const int64_t bump = request.no_bump.empty()
                           ? RevisionBump(std::max(*highest, request.served), meta->revision)
                           : 0;
  if (bump > 0) {
    if (absl::Status s = RaiseHighestRevision(
            store, cluster, RestoredStartRevision(meta->revision, request.delta_to, bump),
            request.now_unix);
        !s.ok()) {
      return Annotate(s, "recording the restored cluster's revision");
    }
  }
  RestoreIntent intent = NewRestoreIntent(config, request.backup, request.requested_by, *generation,
                                          bump, request.now_unix, request.nonce());
  intent.delta_to = request.delta_to;
  return intent;
}

}  // namespace steward
