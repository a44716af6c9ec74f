#include "backup/delta_writer.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backup/delta.h"
#include "backup/pipeline.h"
#include "backup/scheduler.h"
#include "common/metrics.h"
#include "common/status.h"
#include "etcd/keys.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace {

constexpr std::chrono::seconds kOpenTimeout{5};
// The longest a leader waits after reading changes before it reads again (below).
constexpr std::chrono::milliseconds kReadPause{1000};
// The backlog a catch-up aims at: under etcd's 1000-revision batch (CatchUpPause).
constexpr double kCatchUpRevisions = 600;
// etcd's interval between syncs of a watch opened in the past: the backlog grows meanwhile.
constexpr std::chrono::milliseconds kEtcdSyncEvery{100};
// The shortest pause: below it the reopening costs more than the batching saves.
constexpr std::chrono::milliseconds kShortestPause{50};
// Events read since the watch opened that make the keyspace busy enough for catch-ups (a few
// writes now and then, such as the agents' own status, are cheaper on a standing watch).
constexpr size_t kBusy = 64;
// The longest wait for the next message of a backlog etcd is sending.
constexpr std::chrono::milliseconds kCatchUpWait{500};
// Revisions between etcd's newest (as of the last message read) and the last one read past
// which the writer counts as behind (logged, in status()); back under kCaughtUp it has caught up.
constexpr int64_t kBehind = 5000;
constexpr int64_t kCaughtUp = 1000;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The newest complete backup of the cluster `cluster_id`, if any.
absl::StatusOr<std::optional<BackupMeta>> NewestBase(BackupStore& store, const std::string& cluster,
                                                     uint64_t cluster_id) {
  auto listed = ListBackups(store, cluster);
  if (!listed.ok()) return listed.status();
  for (const auto& b : *listed) {
    // A backup a restore found damaged is no base: its chain would be restored on nothing.
    if (b.meta && b.meta->cluster_id == cluster_id && b.damaged.empty()) return b.meta;
  }
  return std::optional<BackupMeta>();
}

}  // namespace

DeltaWriter::DeltaWriter(const Config& config, BackupStore* store, EtcdApi* etcd,
                         std::function<bool()> leading)
    : config_(config), store_(store), etcd_(etcd), leading_(std::move(leading)) {}

void DeltaWriter::Stop() {
  MutexLock lock(&mu_);
  stopping_ = true;
  if (watch_ != nullptr) watch_->Cancel();
  wake_.NotifyAll();
}

std::string DeltaWriter::status() const {
  MutexLock lock(&mu_);
  return status_;
}

void DeltaWriter::SetStatus(std::string s) {
  MutexLock lock(&mu_);
  status_ = std::move(s);
}

void DeltaWriter::Sleep(std::chrono::milliseconds d) {
  MutexLock lock(&mu_);
  wake_.WaitFor(&mu_, d, [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
}

bool DeltaWriter::Keep(const std::string& key) const {
  return KeptInDeltas(config_.cluster.name, key);
}

void DeltaWriter::Run() {
  const auto interval = config_.backup.delta_interval;
  Metrics::Global().Add("steward_delta_backup_failures_total", 0);  // present from the start
  while (true) {
    {
      MutexLock lock(&mu_);
      if (stopping_) return;
    }
    if (!leading_()) {
      SetStatus("not leading");
      Sleep(interval);
      continue;
    }
    bool newer_base = false;
    absl::Status s = Session(&newer_base);
    {
      MutexLock lock(&mu_);
      if (stopping_) return;  // Stop() cancelled the watch: not a failure
    }
    if (!s.ok()) {
      Metrics::Global().Add("steward_delta_backup_failures_total");
      spdlog::warn(
          "delta backups: {}; starting again from the store in {}s", s.message(),
          std::max<int64_t>(1, std::chrono::duration_cast<std::chrono::seconds>(interval).count()));
      SetStatus(absl::StrCat("interrupted: ", s.message()));
    }
    if (s.ok() && newer_base) continue;  // its chain starts now, not an interval later
    Sleep(interval);
  }
}

std::chrono::milliseconds DeltaWriter::CatchUpPause(double revisions_per_second,
                                                    std::chrono::milliseconds longest) {
  const auto floor = std::min(kShortestPause, longest);
  if (!(revisions_per_second > 0)) return longest;  // nothing measured (or NaN): as before
  const double ms = kCatchUpRevisions / revisions_per_second * 1000.0 -
                    static_cast<double>(kEtcdSyncEvery.count());
  if (ms >= static_cast<double>(longest.count())) return longest;
  if (ms <= static_cast<double>(floor.count())) return floor;
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

absl::Status DeltaWriter::Session(bool* newer_base) {
  const auto interval = config_.backup.delta_interval;
  uint64_t cluster_id = 0;
  if (auto members = etcd_->MemberList(&cluster_id); !members.ok()) return members.status();
  auto base = NewestBase(*store_, config_.cluster.name, cluster_id);
  if (!base.ok()) return Annotate(base.status(), "finding the full backup to follow");
  if (!base->has_value()) {
    SetStatus("waiting for a full backup of this cluster");
    return absl::OkStatus();
  }
  const BackupMeta& b = **base;
  auto chain = ListDeltaChain(*store_, b);
  if (!chain.ok()) return chain.status();
  if (!chain->stopped.empty()) {
    // What follows a gap cannot be applied; the chain goes on from where it is whole.
    spdlog::warn("delta backups of {}: {}; going on from revision {}", b.name, chain->stopped,
                 chain->end_revision);
  }
  int64_t cursor = chain->end_revision;
  // etcd no longer holds the changes after `cursor` (it answers so at once, or right after
  // accepting the watch): only a new full backup can start a chain again.
  auto compacted = [&](const absl::Status& why) -> absl::Status {
    spdlog::warn(
        "delta backups: etcd no longer holds the changes after revision {} ({}); "
        "taking a full backup to start a new chain from",
        cursor, why.message());
    auto taken = BackupAndPrune(config_, *store_, *etcd_, config_.node.name);
    if (!taken.ok()) return Annotate(taken.status(), "the full backup after a compaction");
    return absl::OkStatus();
  };
  std::shared_ptr<KeyWatch> watch;
  // (Re)opens the watch from `cursor`. OK with no watch when stopping.
  auto open_watch = [&]() -> absl::Status {
    {
      MutexLock lock(&mu_);
      if (stopping_) return absl::OkStatus();
    }
    auto opened =
        etcd_->WatchRange(std::string(1, '\0'), std::string(1, '\0'), cursor, kOpenTimeout);
    if (!opened.ok()) return opened.status();
    MutexLock lock(&mu_);
    if (stopping_) return absl::OkStatus();
    watch = std::move(*opened);
    watch_ = watch;
    return absl::OkStatus();
  };
  auto close_watch = [&] {
    {
      MutexLock lock(&mu_);
      watch_.reset();
    }
    watch.reset();  // the stream closes outside the lock: Stop() and status() need not wait
  };
  auto open_failed = [&](const absl::Status& s) {
    return absl::IsOutOfRange(s) ? compacted(s) : Annotate(s, "watching the keyspace");
  };
  struct Unset {
    DeltaWriter* w;
    ~Unset() {
      MutexLock lock(&w->mu_);
      w->watch_.reset();
    }
  } unset{this};
  if (absl::Status s = open_watch(); !s.ok()) return open_failed(s);
  if (watch == nullptr) return absl::OkStatus();  // stopping
  spdlog::info("delta backups: following backup {} from revision {}", b.name, cursor);
  SetStatus(absl::StrCat("backup ", b.name, " + ", chain->deltas.size(), " delta(s), to revision ",
                         cursor));
  Metrics::Global().Set("steward_delta_backup_behind_revisions", 0);

  backup::DeltaChunk pending;
  size_t pending_bytes = 0;
  auto reset = [&] {
    pending = backup::DeltaChunk();  // Clear() would keep the stored values' buffers
    pending.set_cluster(b.cluster);
    pending.set_cluster_id(b.cluster_id);
    pending.set_base(b.name);
    pending.set_from_revision(cursor);
    pending_bytes = 0;
  };
  reset();
  int64_t stored = chain->deltas.size();
  // Memory stays bounded under any write rate because this thread is the only reader of the
  // watch and stores before it reads on: the pending delta (kMaxPendingBytes and one message
  // more), one message that etcd keeps under its request bound (fragments) and gRPC's window.
  // Writes faster than the store takes them wait in etcd's history instead: the writer falls
  // behind (logged and in status()), and if etcd compacts past it, a full backup starts a new
  // chain (compacted(), above).
  int64_t lag = 0;  // revisions etcd had past `cursor` at the last message read
  bool falling_behind = false;
  int64_t most_behind = 0;
  auto behind_since = std::chrono::steady_clock::now();
  auto chain_status = [&] {
    std::string line =
        absl::StrCat("backup ", b.name, " + ", stored, " delta(s), to revision ", cursor);
    if (falling_behind) {
      absl::StrAppend(&line, "; ", lag, " revision(s) behind etcd (reading no faster than ",
                      "deltas are stored; etcd holds the backlog)");
    }
    return line;
  };
  auto flush = [&]() -> absl::Status {
    if (pending.revisions().empty()) return absl::OkStatus();
    pending.set_to_revision(cursor);
    auto m = WriteDelta(*store_, pending, config_.node.name);
    if (!m.ok()) return m.status();
    ++stored;
    spdlog::debug("delta backups: stored {} ({} events)", m->name, m->events);
    Metrics::Global().Set("steward_delta_backup_revision", static_cast<double>(cursor));
    Metrics::Global().Set("steward_delta_backup_last_success_timestamp_seconds",
                          static_cast<double>(NowMs() / 1000));
    SetStatus(chain_status());
    reset();
    return absl::OkStatus();
  };
  auto next_flush = std::chrono::steady_clock::now() + interval;
  auto next_base_check = std::chrono::steady_clock::now() + kBaseCheckEvery;
  size_t read_since_open = 0;  // events
  // Where the last catch-up cycle began: its revisions over its time give the write rate.
  int64_t cycle_cursor = cursor;
  auto cycle_start = std::chrono::steady_clock::now();
  while (leading_()) {
    {
      MutexLock lock(&mu_);
      if (stopping_) break;  // store what came (below)
    }
    const auto now = std::chrono::steady_clock::now();
    auto until = [&](std::chrono::steady_clock::time_point t) {
      return std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(1),
          std::chrono::duration_cast<std::chrono::milliseconds>(t - now));
    };
    const auto wait = until(next_flush);
    // Catching up: what etcd had when the watch opened comes without waiting long. Idle, no
    // longer than the next look for a newer full backup.
    const bool behind = cursor < watch->created_revision();
    const auto idle = std::min(interval, until(next_base_check));
    auto events = watch->Wait(behind                        ? std::min(kCatchUpWait, wait)
                              : pending.revisions().empty() ? idle
                                                            : wait);
    if (!events.ok()) {
      // Whatever was received is history all the same: keep it before starting again (and
      // before a compaction's full backup, whose retention may prune this chain's base).
      if (absl::Status s = flush(); !s.ok()) {
        spdlog::warn("delta backups: storing what came before the watch ended: {}", s.message());
      }
      if (absl::IsOutOfRange(events.status())) return compacted(events.status());
      return Annotate(events.status(), "the watch ended");
    }
    // A revision may hold many events (a transaction, a delete of a range): all of them are
    // stored. Only what is at or before the revision stored last is skipped.
    const int64_t read_to = cursor;
    for (auto& e : *events) {
      const int64_t rev = e.kv().mod_revision();
      if (rev <= read_to) continue;  // cannot happen on one stream; never store twice
      if (Keep(e.kv().key())) {
        if (pending.revisions().empty() ||
            pending.revisions(pending.revisions_size() - 1).revision() != rev) {
          auto* r = pending.add_revisions();
          r->set_revision(rev);
          r->set_unix_ms(NowMs());
        }
        pending_bytes += e.kv().key().size() + e.kv().value().size() + 32;
        *pending.mutable_revisions(pending.revisions_size() - 1)->add_events() = std::move(e);
      }
      // etcd sends a revision's events together: the cursor is a whole revision.
      cursor = std::max(cursor, rev);
    }
    lag = std::max<int64_t>(0, watch->header_revision() - cursor);
    Metrics::Global().Set("steward_delta_backup_behind_revisions", static_cast<double>(lag));
    if (!falling_behind && lag >= kBehind) {
      falling_behind = true;
      most_behind = lag;
      behind_since = std::chrono::steady_clock::now();
      spdlog::warn(
          "delta backups: {} revisions behind etcd (at revision {}, etcd at {}): "
          "writes come faster than deltas are stored; reading no faster than storing, "
          "so etcd holds the backlog (a compaction past revision {} would end this "
          "chain and start a new one from a full backup)",
          lag, cursor, watch->header_revision(), cursor);
      SetStatus(chain_status());
    } else if (falling_behind) {
      most_behind = std::max(most_behind, lag);
      if (lag < kCaughtUp) {
        falling_behind = false;
        spdlog::info("delta backups: caught up with etcd after {}s (at most {} revisions behind)",
                     std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::steady_clock::now() - behind_since)
                         .count(),
                     most_behind);
        SetStatus(chain_status());
      }
    }
    // A newer full backup (the scheduler's, or an operator's `stewardctl backup`) is followed
    // from the next session, also when no writes come: a restore then needs its chain, not
    // this one (checked even when idle: with nothing to flush the writer never noticed it).
    if (std::chrono::steady_clock::now() >= next_base_check) {
      next_base_check = std::chrono::steady_clock::now() + kBaseCheckEvery;
      auto newest = NewestBase(*store_, config_.cluster.name, b.cluster_id);
      if (newest.ok() && newest->has_value() && (*newest)->name != b.name) {
        if (absl::Status s = flush(); !s.ok()) return s;
        spdlog::info("delta backups: backup {} is newer; following it", (*newest)->name);
        *newer_base = true;
        return absl::OkStatus();
      }
    }
    const bool due = std::chrono::steady_clock::now() >= next_flush;
    if ((due || pending_bytes >= kMaxPendingBytes) && !pending.revisions().empty()) {
      if (absl::Status s = flush(); !s.ok()) return s;
    }
    if (due) next_flush = std::chrono::steady_clock::now() + interval;
    // Under a steady stream of writes etcd would send each revision in a message of its own,
    // and each costs this agent (and etcd) a round of transport work and thread wake-ups; read
    // in catch-ups instead (below). The pause only delays when changes are read, never which:
    // the watch reopens from the last revision read, and the delta interval is unchanged.
    read_since_open += events->size();
    const int64_t created = watch->created_revision();  // 0: unknown, so no catch-ups
    if (read_since_open >= kBusy && created > 0 && cursor >= created) {
      // Many changes came and etcd's backlog is read: close the watch for a moment and open it
      // again from here, so etcd sends the changes of the pause as a backlog, in few large
      // messages, rather than each revision in a message of its own as it happens.
      read_since_open = 0;
      close_watch();
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - cycle_start).count();
      const double rate = seconds > 0 ? static_cast<double>(cursor - cycle_cursor) / seconds : 0;
      cycle_cursor = cursor;
      cycle_start = now;
      Sleep(CatchUpPause(rate, std::min<std::chrono::milliseconds>(kReadPause, interval / 2)));
      if (!leading_()) break;  // store what came (below)
      absl::Status reopened = open_watch();
      if (!reopened.ok() || watch == nullptr) {
        // Stopping, or etcd went away or compacted: what came before the pause is stored
        // first (it follows the stored chain without a gap).
        absl::Status stored = flush();
        if (reopened.ok()) return stored;
        if (!stored.ok()) spdlog::warn("delta backups: storing a delta: {}", stored.message());
        return open_failed(reopened);
      }
    }
  }
  // No longer leading, or stopping: the next leader goes on from what is stored.
  return flush();
}

}  // namespace steward
