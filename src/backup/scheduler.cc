#include "backup/scheduler.h"

#include "absl/strings/str_cat.h"
#include "backup/delta.h"
#include "backup/pipeline.h"
#include "backup/retention.h"
#include "common/metrics.h"
#include "common/status.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

using WallClock = std::chrono::system_clock;

absl::Status DeleteBackup(BackupStore& store, const std::string& cluster, const std::string& name) {
  // meta.json first: a half-deleted backup is then an incomplete one, never a listed one.
  if (absl::Status s = store.Delete(MetaKey(cluster, name)); !s.ok()) {
    return Annotate(s, "deleting its meta.json (nothing else was deleted)");
  }
  if (absl::Status s = store.Delete(SnapshotKey(cluster, name)); !s.ok()) return s;
  // Its deltas apply to it alone (metas first).
  if (absl::Status s = DeleteDeltas(store, cluster, name); !s.ok()) return s;
  // Then whatever is left under it: the marks, and deltas a leader stored onto it while it was
  // being deleted (seen over S3: three deltas and a stray .json stayed for good).
  auto rest = store.List(absl::StrCat(BackupsPrefix(cluster), name, "/"));
  if (!rest.ok()) return rest.status();
  for (const auto& o : *rest) {
    if (absl::Status s = store.Delete(o.key); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> BackupsToPrune(const Config& config, BackupStore& store,
                                                        int64_t now, std::string* skew) {
  auto listed = ListBackups(store, config.cluster.name);
  if (!listed.ok()) return listed.status();
  std::vector<RetentionItem> items;
  for (const auto& b : *listed) {
    auto parsed = ParseBackupName(b.name);
    RetentionItem item{b.name, b.meta ? b.meta->unix_time : parsed->first, b.meta.has_value()};
    if (b.meta) {
      item.generation = b.meta->generation;
      item.revision = b.meta->revision;
    }
    items.push_back(item);
  }
  for (const auto& b : *listed) {
    if (b.meta && BackupTimeInFuture(*b.meta, now)) {
      spdlog::warn(
          "backup {} is dated {}s in the future: its taker's clock was ahead; it is "
          "ordered by its revision and never pruned by age",
          b.name, b.meta->unix_time - now);
    }
  }
  return PlanRetention(items, now, config.backup.retention, skew);
}

absl::StatusOr<BackupMeta> BackupAndPrune(const Config& config, BackupStore& store, EtcdApi& etcd,
                                          const std::string& taken_by,
                                          const std::function<void(uint64_t)>& progress) {
  auto source = PickBackupSource(etcd);
  if (!source.ok()) return source.status();
  auto meta = TakeBackup(etcd, *source, store, config.cluster.name, taken_by,
                         std::chrono::minutes(30), progress);
  if (!meta.ok()) return meta.status();
  const int64_t now =
      std::chrono::duration_cast<std::chrono::seconds>(WallClock::now().time_since_epoch()).count();
  std::string skew;
  auto prune = BackupsToPrune(config, store, now, &skew);
  if (prune.ok()) {
    for (const auto& name : *prune) {
      spdlog::info("retention: deleting backup {}", name);
      if (absl::Status s = DeleteBackup(store, config.cluster.name, name); !s.ok()) {
        spdlog::warn("retention: deleting {}: {}", name, s.message());
      }
    }
    if (!skew.empty()) spdlog::warn("retention: {}", skew);
  }
  return meta;
}

BackupScheduler::BackupScheduler(const Config& config, BackupStore* store, EtcdApi* etcd,
                                 Clock* clock)
    : config_(config),
      store_(store),
      etcd_(etcd),
      clock_(clock),
      backoff_(std::chrono::seconds(5), std::chrono::minutes(5)) {
  // Present from the start, so increase() sees the first failure.
  Metrics::Global().Add("steward_backup_failures_total", 0);
}

void BackupScheduler::LoadFromStore() {
  if (checked_store_) return;
  auto listed = ListBackups(*store_, config_.cluster.name);
  if (!listed.ok()) return;  // try again next time
  checked_store_ = true;
  uint64_t cluster_id = 0;
  for (const auto& url : etcd_->endpoints()) {
    if (auto st = etcd_->Status(url, std::chrono::milliseconds(1000)); st.ok()) {
      cluster_id = st->cluster_id;
      break;
    }
  }
  for (const auto& b : *listed) {
    if (!b.meta) continue;
    if (b.meta->cluster_id == cluster_id) {
      // A backup dated in the future (its taker's clock was ahead) must not hold off the next.
      last_success_ = std::min(WallClock::time_point(std::chrono::seconds(b.meta->unix_time)),
                               clock_->WallNow());
      last_name_ = b.name;
      // A new leader (or a restarted agent) reports the newest backup at once, so an alert
      // on its age does not wait for the next one.
      Metrics::Global().Set("steward_backup_last_success_timestamp_seconds",
                            static_cast<double>(b.meta->unix_time));
      // And in the cluster's status: the last report may be an earlier leader's, older.
      Publish();
    }
    break;  // only the newest complete backup matters
  }
}

void BackupScheduler::MaybePeriodic() {
  if (store_ == nullptr) return;
  LoadFromStore();
  if (!last_success_ || clock_->WallNow() - *last_success_ >= config_.backup.interval) {
    Run(last_success_ ? "scheduled" : "no backup of this cluster yet");
  }
  if (drills_ == nullptr) return;
  drills_->MaybeStart();
  // The last drill's result for status, once it is in.
  if (std::string drill = drills_->LastSummary(); drill != published_drill_) Publish();
}

void BackupScheduler::BeforeChange(const std::string& why) {
  if (store_ == nullptr) return;
  LoadFromStore();
  if (last_success_ &&
      clock_->WallNow() - *last_success_ < config_.backup.before_change_min_interval) {
    return;
  }
  Run(absl::StrCat("before ", why));
}

void BackupScheduler::Run(const std::string& why) {
  if (clock_->Now() < next_try_) return;
  const auto started = std::chrono::steady_clock::now();
  auto meta = BackupAndPrune(config_, *store_, *etcd_, config_.node.name);
  Metrics& metrics = Metrics::Global();
  if (meta.ok()) {
    metrics.Set("steward_backup_duration_seconds",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    metrics.Set("steward_backup_size_bytes", static_cast<double>(meta->compressed_size));
    metrics.Set("steward_backup_last_success_timestamp_seconds",
                static_cast<double>(meta->unix_time));
    last_success_ = clock_->WallNow();
    last_name_ = meta->name;
    last_error_.clear();
    backoff_.Reset();
    next_try_ = {};
    spdlog::info("backup {} ({}): revision {}, {} bytes, {} compressed, to {}", meta->name, why,
                 meta->revision, meta->db_size, meta->compressed_size, store_->Describe());
  } else {
    metrics.Add("steward_backup_failures_total");
    last_error_ = Msg(meta.status());
    last_error_at_ = clock_->WallNow();
    auto delay = backoff_.Next();
    next_try_ = clock_->Now() + delay;
    spdlog::error("backup ({}) failed, retrying in {}s: {}", why,
                  std::chrono::duration_cast<std::chrono::seconds>(delay).count(), last_error_);
  }
  Publish();
}

void BackupScheduler::Publish() {
  auto secs = [](WallClock::time_point t) {
    return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
  };
  nlohmann::json j = {{"store", store_->Describe()},
                      {"last_success", last_name_},
                      {"encryption_key_id", store_->EncryptionKeyId()}};
  if (last_success_) j["last_success_at"] = secs(*last_success_);
  if (drills_ != nullptr) {
    published_drill_ = drills_->LastSummary();
    if (!published_drill_.empty()) {
      j["last_drill"] = published_drill_;
      j["last_drill_at"] = drills_->LastAt();
    }
  }
  if (!last_error_.empty()) {
    j["last_error"] = last_error_;
    j["last_error_at"] = secs(last_error_at_);
  }
  if (absl::Status s = etcd_->Put(BackupStatusKey(config_), j.dump()); !s.ok()) {
    spdlog::warn("publishing the backup status: {}", s.message());  // status only; next time
  }
}

}  // namespace steward
