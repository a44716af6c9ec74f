#include "backup/drill_scheduler.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backup/pipeline.h"
#include "common/metrics.h"
#include "etcd/bolt.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

namespace {
// A cluster never drilled is drilled this soon after a leader takes over, at the latest.
constexpr std::chrono::hours kFirstDrillAtMost{1};
}  // namespace

DrillScheduler::DrillScheduler(const Config& config, BackupStore* store, EtcdApi* live,
                               Clock* clock)
    : config_(config), store_(store), live_(live), clock_(clock) {
  // A drill killed with its agent left its scratch dir: gone before anything else runs.
  RemoveStaleScratch(ScratchRoot(config_));
}

DrillScheduler::~DrillScheduler() {
  if (worker_.joinable()) worker_.join();
}

std::string DrillScheduler::ScratchRoot(const Config& config) {
  if (!config.backup.drill_scratch.empty()) return config.backup.drill_scratch;
  return config.node.data_dir + "/drill";
}

void DrillScheduler::SetOnDone(std::function<void(const DrillResult&)> fn) {
  MutexLock lock(&mu_);
  on_done_ = std::move(fn);
}

void DrillScheduler::OnNewLeadership() {
  MutexLock lock(&mu_);
  loaded_ = false;
  first_due_.reset();
}

int64_t DrillScheduler::NewestRecordedDrill() {
  auto listed = ListBackups(*store_, config_.cluster.name);
  if (!listed.ok()) return 0;
  int64_t newest = 0;
  for (const auto& b : *listed) {
    if (b.verified_json.empty()) continue;
    auto j = nlohmann::json::parse(b.verified_json, nullptr, false);
    if (j.is_object()) newest = std::max(newest, j.value("at", int64_t{0}));
  }
  return newest;
}

bool DrillScheduler::MaybeStart() {
  if (config_.backup.drill_interval.count() <= 0 || store_ == nullptr) return false;
  if (running_.load()) return false;
  const int64_t interval_s =
      std::chrono::duration_cast<std::chrono::seconds>(config_.backup.drill_interval).count();
  {
    MutexLock lock(&mu_);
    if (!loaded_) {
      loaded_ = true;
      if (const int64_t at = NewestRecordedDrill(); at > 0) {
        last_ = std::max(last_.value_or(0), at);
      } else if (!last_) {
        first_due_ = clock_->Now() + std::min<std::chrono::steady_clock::duration>(
                                         config_.backup.drill_interval, kFirstDrillAtMost);
      }
    }
    if (last_) {
      if (clock_->UnixSeconds() - *last_ < interval_s) return false;
    } else if (first_due_ && clock_->Now() < *first_due_) {
      return false;
    }
    last_ = clock_->UnixSeconds();  // tried now: the next is one interval away, pass or fail
  }
  if (worker_.joinable()) worker_.join();  // the previous drill's thread, finished
  running_ = true;
  worker_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-drill");
    RunOne();
    running_ = false;
  });
  return true;
}

std::string DrillScheduler::LastSummary() {
  MutexLock lock(&mu_);
  return last_summary_;
}

int64_t DrillScheduler::LastAt() {
  MutexLock lock(&mu_);
  return last_summary_at_;
}

void DrillScheduler::RunOne() {
  const auto started = std::chrono::steady_clock::now();
  DrillResult r;
  auto listed = ListBackups(*store_, config_.cluster.name);
  std::optional<BackupMeta> meta;
  if (listed.ok()) {
    for (const auto& b : *listed) {
      // The backup an automatic restore would take first (newest first, complete, the
      // cluster's own, not found damaged).
      if (b.meta && b.meta->imported_from.empty() && b.damaged.empty()) {
        meta = b.meta;
        break;
      }
    }
  }
  if (!listed.ok()) {
    r.failure = absl::StrCat("could not run: listing backups: ", listed.status().message());
  } else if (!meta) {
    r.skipped = true;
    r.failure = "skipped: no complete backup to drill yet";
  } else {
    DrillOptions options;
    options.etcd_binary = DrillEtcdFor(config_, meta->etcd_version);
    options.scratch_root = ScratchRoot(config_);
    spdlog::info("restore drill of backup {} (revision {}) with {} in {}", meta->name,
                 meta->revision, options.etcd_binary, options.scratch_root);
    auto ran = RunDrill(*store_, config_.cluster.name, *meta, *live_, options);
    if (ran.ok()) {
      r = *ran;
    } else {
      r.backup = meta->name;
      r.revision = meta->revision;
      r.failure = absl::StrCat("could not run: ", ran.status().message());
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const int64_t now = clock_->UnixSeconds();
  if (!r.backup.empty()) {
    if (absl::Status s = RecordDrill(*store_, config_.cluster.name, r, now); !s.ok()) {
      spdlog::warn("restore drill: recording the result in the store: {}",
                   std::string(s.message()));
    }
    if (!r.passed && absl::StrContains(r.failure, BoltFile::kDamaged)) {
      // As a restore would find it: no automatic restore or delta chain takes it again.
      if (absl::Status s = MarkBackupDamaged(*store_, config_.cluster.name, r.backup, r.failure,
                                             config_.node.name + " (restore drill)", now);
          !s.ok()) {
        spdlog::warn("restore drill: marking backup {} damaged: {}", r.backup,
                     std::string(s.message()));
      }
    }
  }
  Metrics& m = Metrics::Global();
  m.Set("steward_drill_last_timestamp_seconds", static_cast<double>(now));
  m.Set("steward_drill_duration_seconds", seconds);
  m.Set("steward_drill_last_passed", r.passed ? 1 : 0);
  if (!r.passed && !r.skipped) m.Add("steward_drill_failures_total");
  if (r.passed) {
    m.Set("steward_drill_last_success_timestamp_seconds", static_cast<double>(now));
    spdlog::info("restore drill of backup {} passed in {:.1f}s: {}", r.backup, seconds, r.compared);
  } else if (r.skipped) {
    spdlog::warn("restore drill {}", r.failure);
  } else {
    spdlog::error("restore drill of backup {} FAILED: {}", r.backup, r.failure);
  }
  std::function<void(const DrillResult&)> done;
  {
    MutexLock lock(&mu_);
    last_summary_ =
        r.passed ? absl::StrCat("backup ", r.backup, " passed (", r.keys, " keys)")
                 : absl::StrCat(r.backup.empty() ? "" : "backup " + r.backup + " ", r.failure);
    last_summary_at_ = now;
    last_ = now;
    done = on_done_;
  }
  if (done) done(r);
}

}  // namespace steward
