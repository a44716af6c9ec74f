#include "control/destroy.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backup/layout.h"
#include "common/log_format.h"
#include "common/rules.h"
#include "nlohmann/json.hpp"

namespace steward {

absl::StatusOr<std::optional<DestroyMark>> ReadDestroyMark(BackupStore& store,
                                                           const std::string& cluster) {
  auto text = store.Get(DestroyMarkKey(cluster));
  if (absl::IsNotFound(text.status())) return std::optional<DestroyMark>();
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  // A damaged mark is not "no mark": reading it as none would let the agents restore.
  if (j.is_discarded() || !j.is_object()) {
    return absl::DataLossError(absl::StrCat(DestroyMarkKey(cluster), " is not JSON"));
  }
  try {
    DestroyMark m;
    m.id = j.at("id").get<std::string>();
    m.by = j.value("by", "");
    m.unix_time = j.value("unix_time", int64_t{0});
    m.final_backup = j.value("final_backup", "");
    m.revision = j.value("revision", int64_t{0});
    m.reason = j.value("reason", "");
    if (m.id.empty()) throw nlohmann::json::other_error::create(501, "empty id", nullptr);
    return std::optional<DestroyMark>(std::move(m));
  } catch (const nlohmann::json::exception& e) {
    return absl::DataLossError(absl::StrCat(DestroyMarkKey(cluster), ": ", e.what()));
  }
}

absl::Status WriteDestroyMark(BackupStore& store, const std::string& cluster,
                              const DestroyMark& m) {
  nlohmann::json j = {{"id", m.id},
                      {"by", m.by},
                      {"unix_time", m.unix_time},
                      {"final_backup", m.final_backup},
                      {"revision", m.revision},
                      {"reason", m.reason}};
  return store.Put(DestroyMarkKey(cluster), j.dump(2));
}

absl::Status ClearDestroyMark(BackupStore& store, const std::string& cluster) {
  return store.Delete(DestroyMarkKey(cluster));
}

std::string DescribeDestroyMark(const std::string& cluster, const DestroyMark& m) {
  std::string s = absl::StrCat("cluster ", cluster, " was destroyed");
  if (!m.by.empty()) absl::StrAppend(&s, " by ", m.by);
  if (m.unix_time > 0) {
    absl::StrAppend(&s, " at ",
                    FormatUtcTimestamp(std::chrono::system_clock::from_time_t(m.unix_time)));
  }
  if (!m.reason.empty()) absl::StrAppend(&s, " (", m.reason, ")");
  if (!m.final_backup.empty()) absl::StrAppend(&s, "; its last state is backup ", m.final_backup);
  absl::StrAppend(&s, "; `stewardctl undestroy` brings it back");
  return s;
}

DestroyPlan PlanDestroy(const DestroyView& v) {
  using S = DestroyStep;
  if (!v.has_store) {
    return {S::kRefuse, "X1",
            "no backup store is configured: the final backup and the mark "
            "that keeps the agents from bringing the cluster back live there"};
  }
  if (!v.store_ok) {
    return {S::kRefuse, "X2", absl::StrCat("the backup store cannot be read: ", v.store_error)};
  }
  if (v.mark) return {S::kAlready, "X3", "the store already marks this cluster destroyed"};
  if (v.restore_may_be_under_way) {
    return {S::kRefuse, "X4", "a restore is under way; let it finish (stewardctl status)"};
  }
  if (v.adopting && !RuleOff("X5")) {
    return {S::kRefuse, "X5",
            "cluster.adopt is set: the members no agent manages would keep "
            "running; retire them first (retire-unmanaged)"};
  }
  if (!v.silent_agents.empty() && !v.force) {
    return {S::kRefuse, "X6",
            absl::StrCat("the agent of ", absl::StrJoin(v.silent_agents, ", "),
                         " does not answer, so its etcd would keep running; bring it back, or "
                         "pass --force (its agent stops its etcd when it comes back)")};
  }
  if (v.quorum) return {S::kFinalBackupFirst, "X7", "a quorum answers: final backup first"};
  if (v.force && v.newest_backup) {
    return {S::kKeepNewestBackup, "X8",
            absl::StrCat("no quorum answers; --force keeps the newest backup, ", *v.newest_backup,
                         ", as the last state")};
  }
  if (!v.newest_backup) {
    return {S::kRefuse, "X8",
            "no quorum answers, so no final backup can be taken, and the store "
            "holds no valid backup of this cluster: destroying it would keep "
            "nothing"};
  }
  return {S::kRefuse, "X8",
          absl::StrCat("no quorum answers, so no final backup can be taken; pass --force to keep "
                       "the newest backup, ",
                       *v.newest_backup, ", as the last state")};
}

}  // namespace steward
