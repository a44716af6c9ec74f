#include "backup/layout.h"

#include <ctime>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rules.h"

namespace steward {

std::string BackupName(std::chrono::system_clock::time_point t, int64_t revision) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  return absl::StrFormat("%04d%02d%02dT%02d%02d%02dZ-%020d", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, revision);
}

std::optional<std::pair<int64_t, int64_t>> ParseBackupName(const std::string& name) {
  // YYYYMMDDTHHMMSSZ-<20 digits>
  if (name.size() != 16 + 1 + 20 || name[8] != 'T' || name[15] != 'Z' || name[16] != '-') {
    return std::nullopt;
  }
  auto digits = [&](size_t from, size_t n, int* out) {
    int v = 0;
    for (size_t i = from; i < from + n; ++i) {
      if (name[i] < '0' || name[i] > '9') return false;
      v = v * 10 + (name[i] - '0');
    }
    *out = v;
    return true;
  };
  std::tm tm{};
  int y, mo, d, h, mi, s;
  if (!digits(0, 4, &y) || !digits(4, 2, &mo) || !digits(6, 2, &d) || !digits(9, 2, &h) ||
      !digits(11, 2, &mi) || !digits(13, 2, &s)) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return std::nullopt;
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  int64_t rev = 0;
  for (size_t i = 17; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    rev = rev * 10 + (name[i] - '0');
  }
  return std::make_pair(static_cast<int64_t>(timegm(&tm)), rev);
}

std::string BackupsPrefix(const std::string& cluster) { return cluster + "/backups/"; }
std::string SnapshotKey(const std::string& cluster, const std::string& name) {
  return absl::StrCat(BackupsPrefix(cluster), name, "/snapshot.db.zst");
}
std::string MetaKey(const std::string& cluster, const std::string& name) {
  return absl::StrCat(BackupsPrefix(cluster), name, "/meta.json");
}
std::string DamagedMarkKey(const std::string& cluster, const std::string& name) {
  return absl::StrCat(BackupsPrefix(cluster), name, "/damaged.json");
}
std::string RestoreIntentKey(const std::string& cluster) {
  return cluster + "/control/restore.json";
}
std::string RevisionRecordKey(const std::string& cluster) {
  return cluster + "/control/revision.json";
}
std::string EpochRecordKey(const std::string& cluster) { return cluster + "/control/epoch.json"; }
std::string MembersRecordKey(const std::string& cluster) {
  return cluster + "/control/members.json";
}

std::string DestroyMarkKey(const std::string& cluster) {
  return cluster + "/control/destroyed.json";
}

std::string CreatedMarkerKey(const std::string& cluster) {
  return cluster + "/control/created.json";
}

bool BackupNewer(const BackupMeta& a, const BackupMeta& b) {
  // B1 off (mutation tests only): the old order, by the name, i.e. the taker's clock.
  if (RuleOff("B1")) return a.name > b.name;
  if (a.generation != b.generation) return a.generation > b.generation;
  if (a.revision != b.revision) return a.revision > b.revision;
  return a.name > b.name;
}

bool BackupTimeInFuture(const BackupMeta& m, int64_t now, int64_t tolerance_s) {
  return m.unix_time > now + tolerance_s;
}

nlohmann::json MetaToJson(const BackupMeta& m) {
  // IDs as hex strings: uint64 values do not survive JSON tools that use doubles.
  nlohmann::json j = {{"format", 1},
                      {"name", m.name},
                      {"cluster", m.cluster},
                      {"etcd_version", m.etcd_version},
                      {"cluster_id", absl::StrFormat("%x", m.cluster_id)},
                      {"revision", m.revision},
                      {"raft_index", m.raft_index},
                      {"db_size", m.db_size},
                      {"compressed_size", m.compressed_size},
                      {"sha256", m.sha256},
                      {"db_sha256", m.db_sha256},
                      {"compression", m.compression},
                      {"member", m.member},
                      {"node", m.node},
                      {"unix_time", m.unix_time},
                      {"generation", m.generation}};
  if (!m.imported_from.empty()) j["imported_from"] = m.imported_from;
  if (m.revision_max != 0) j["revision_max"] = m.revision_max;
  if (m.finished_unix_ms != 0) j["finished_unix_ms"] = m.finished_unix_ms;
  if (!m.encryption_key_id.empty()) {
    j["encryption"] = {{"cipher", "aes-256-gcm"}, {"key_id", m.encryption_key_id}};
  }
  return j;
}

absl::StatusOr<BackupMeta> MetaFromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("meta.json is not JSON");
  try {
    BackupMeta m;
    m.name = j.at("name").get<std::string>();
    m.cluster = j.value("cluster", "");
    m.etcd_version = j.value("etcd_version", "");
    std::string cid = j.value("cluster_id", "0");
    if (!absl::SimpleHexAtoi(cid, &m.cluster_id)) m.cluster_id = 0;
    m.revision = j.at("revision").get<int64_t>();
    m.raft_index = j.value("raft_index", uint64_t{0});
    m.db_size = j.at("db_size").get<uint64_t>();
    m.compressed_size = j.at("compressed_size").get<uint64_t>();
    m.sha256 = j.at("sha256").get<std::string>();
    m.db_sha256 = j.value("db_sha256", "");
    m.compression = j.value("compression", "zstd");
    m.member = j.value("member", "");
    m.node = j.value("node", "");
    m.unix_time = j.at("unix_time").get<int64_t>();
    m.generation = j.value("generation", int64_t{0});
    m.imported_from = j.value("imported_from", "");
    m.revision_max = j.value("revision_max", int64_t{0});
    m.finished_unix_ms = j.value("finished_unix_ms", int64_t{0});
    if (j.contains("encryption") && j["encryption"].is_object()) {
      m.encryption_key_id = j["encryption"].value("key_id", "");
    }
    if (m.sha256.size() != 64) return absl::DataLossError("meta.json: sha256 is malformed");
    return m;
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat("meta.json: ", e.what()));
  }
}

}  // namespace steward
