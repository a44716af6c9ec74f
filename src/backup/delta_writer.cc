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
    absl::Status s = RunSession(&newer_base);
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

// One leadership's worth of the chain that follows `base`: the watch, the pending delta and
// the catch-up rhythm (delta_writer.h says why each is so). Owned by Run()'s thread.
class DeltaWriter::Session {
 public:
  Session(DeltaWriter* w, BackupMeta base, const DeltaChain& chain)
      : w_(w),
        interval_(w->config_.backup.delta_interval),
        b_(std::move(base)),
        cursor_(chain.end_revision),
        stored_(static_cast<int64_t>(chain.deltas.size())) {}
  ~Session() {
    MutexLock lock(&w_->mu_);
    w_->watch_.reset();
  }

  // Until leadership or the watch ends, on an error, or (`*newer_base` set) when a newer full
  // backup is to be followed at once.
  absl::Status Run(bool* newer_base);

 private:
  using TimePoint = std::chrono::steady_clock::time_point;
  // etcd no longer holds the changes after the cursor (it answers so at once, or right after
  // accepting the watch): only a new full backup can start a chain again.
  absl::Status Compacted(const absl::Status& why);
  // (Re)opens the watch from the cursor. OK with no watch when stopping.
  absl::Status OpenWatch();
  void CloseWatch();
  absl::Status OpenFailed(const absl::Status& s) {
    return absl::IsOutOfRange(s) ? Compacted(s) : Annotate(s, "watching the keyspace");
  }
  bool Stopping() {
    MutexLock lock(&w_->mu_);
    return w_->stopping_;
  }
  void ResetPending();
  std::string ChainStatus() const;
  // Stores the pending delta, if any.
  absl::Status Flush();
  // The next message's events into the pending delta (a revision is never stored twice).
  void Take(std::vector<etcdserverpb::Event>& events);
  // How far behind etcd the cursor is: logged when it falls behind and when it catches up.
  void TrackLag();
  // True (after storing what came) when a newer full backup is to be followed.
  absl::StatusOr<bool> NewerBase();
  // After many changes, with etcd's backlog read: closes the watch for a pause and opens it
  // again from the cursor. `*end`: the session ends with the returned status.
  absl::Status CatchUp(size_t events_read, bool* end);

  DeltaWriter* w_;
  const std::chrono::milliseconds interval_;
  const BackupMeta b_;
  int64_t cursor_;  // the last revision read (a whole revision)
  int64_t stored_;  // deltas in the chain
  std::shared_ptr<KeyWatch> watch_;
  backup::DeltaChunk pending_;
  size_t pending_bytes_ = 0;
  int64_t lag_ = 0;  // revisions etcd had past the cursor at the last message read
  bool falling_behind_ = false;
  int64_t most_behind_ = 0;
  TimePoint behind_since_ = std::chrono::steady_clock::now();
  TimePoint next_flush_ = std::chrono::steady_clock::now();
  TimePoint next_base_check_ = std::chrono::steady_clock::now() + kBaseCheckEvery;
  size_t read_since_open_ = 0;  // events
  // Where the last catch-up cycle began: its revisions over its time give the write rate.
  int64_t cycle_cursor_ = 0;
  TimePoint cycle_start_ = std::chrono::steady_clock::now();
};

absl::Status DeltaWriter::Session::Compacted(const absl::Status& why) {
  spdlog::warn(
      "delta backups: etcd no longer holds the changes after revision {} ({}); "
      "taking a full backup to start a new chain from",
      cursor_, why.message());
  auto taken = BackupAndPrune(w_->config_, *w_->store_, *w_->etcd_, w_->config_.node.name);
  if (!taken.ok()) return Annotate(taken.status(), "the full backup after a compaction");
  return absl::OkStatus();
}

absl::Status DeltaWriter::Session::OpenWatch() {
  if (Stopping()) return absl::OkStatus();
  auto opened =
      w_->etcd_->WatchRange(std::string(1, '\0'), std::string(1, '\0'), cursor_, kOpenTimeout);
  if (!opened.ok()) return opened.status();
  MutexLock lock(&w_->mu_);
  if (w_->stopping_) return absl::OkStatus();
  watch_ = std::move(*opened);
  w_->watch_ = watch_;
  return absl::OkStatus();
}

void DeltaWriter::Session::CloseWatch() {
  {
    MutexLock lock(&w_->mu_);
    w_->watch_.reset();
  }
  watch_.reset();  // the stream closes outside the lock: Stop() and status() need not wait
}

void DeltaWriter::Session::ResetPending() {
  pending_ = backup::DeltaChunk();  // Clear() would keep the stored values' buffers
  pending_.set_cluster(b_.cluster);
  pending_.set_cluster_id(b_.cluster_id);
  pending_.set_base(b_.name);
  pending_.set_from_revision(cursor_);
  pending_bytes_ = 0;
}

std::string DeltaWriter::Session::ChainStatus() const {
  std::string line =
      absl::StrCat("backup ", b_.name, " + ", stored_, " delta(s), to revision ", cursor_);
  if (falling_behind_) {
    absl::StrAppend(&line, "; ", lag_, " revision(s) behind etcd (reading no faster than ",
                    "deltas are stored; etcd holds the backlog)");
  }
  return line;
}

absl::Status DeltaWriter::Session::Flush() {
  if (pending_.revisions().empty()) return absl::OkStatus();
  pending_.set_to_revision(cursor_);
  auto m = WriteDelta(*w_->store_, pending_, w_->config_.node.name);
  if (!m.ok()) return m.status();
  ++stored_;
  spdlog::debug("delta backups: stored {} ({} events)", m->name, m->events);
  Metrics::Global().Set("steward_delta_backup_revision", static_cast<double>(cursor_));
  Metrics::Global().Set("steward_delta_backup_last_success_timestamp_seconds",
                        static_cast<double>(NowMs() / 1000));
  w_->SetStatus(ChainStatus());
  ResetPending();
  return absl::OkStatus();
}

void DeltaWriter::Session::Take(std::vector<etcdserverpb::Event>& events) {
  // A revision may hold many events (a transaction, a delete of a range): all of them are
  // stored. Only what is at or before the revision stored last is skipped.
  const int64_t read_to = cursor_;
  for (auto& e : events) {
    const int64_t rev = e.kv().mod_revision();
    if (rev <= read_to) continue;  // cannot happen on one stream; never store twice
    if (w_->Keep(e.kv().key())) {
      if (pending_.revisions().empty() ||
          pending_.revisions(pending_.revisions_size() - 1).revision() != rev) {
        auto* r = pending_.add_revisions();
        r->set_revision(rev);
        r->set_unix_ms(NowMs());
      }
      pending_bytes_ += e.kv().key().size() + e.kv().value().size() + 32;
      *pending_.mutable_revisions(pending_.revisions_size() - 1)->add_events() = std::move(e);
    }
    // etcd sends a revision's events together: the cursor is a whole revision.
    cursor_ = std::max(cursor_, rev);
  }
}

void DeltaWriter::Session::TrackLag() {
  lag_ = std::max<int64_t>(0, watch_->header_revision() - cursor_);
  Metrics::Global().Set("steward_delta_backup_behind_revisions", static_cast<double>(lag_));
  if (!falling_behind_ && lag_ >= kBehind) {
    falling_behind_ = true;
    most_behind_ = lag_;
    behind_since_ = std::chrono::steady_clock::now();
    spdlog::warn(
        "delta backups: {} revisions behind etcd (at revision {}, etcd at {}): "
        "writes come faster than deltas are stored; reading no faster than storing, "
        "so etcd holds the backlog (a compaction past revision {} would end this "
        "chain and start a new one from a full backup)",
        lag_, cursor_, watch_->header_revision(), cursor_);
    w_->SetStatus(ChainStatus());
  } else if (falling_behind_) {
    most_behind_ = std::max(most_behind_, lag_);
    if (lag_ < kCaughtUp) {
      falling_behind_ = false;
      spdlog::info("delta backups: caught up with etcd after {}s (at most {} revisions behind)",
                   std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::steady_clock::now() - behind_since_)
                       .count(),
                   most_behind_);
      w_->SetStatus(ChainStatus());
    }
  }
}

absl::StatusOr<bool> DeltaWriter::Session::NewerBase() {
  // A newer full backup (the scheduler's, or an operator's `stewardctl backup`) is followed
  // from the next session, also when no writes come: a restore then needs its chain, not
  // this one (checked even when idle: with nothing to flush the writer never noticed it).
  if (std::chrono::steady_clock::now() < next_base_check_) return false;
  next_base_check_ = std::chrono::steady_clock::now() + kBaseCheckEvery;
  auto newest = NewestBase(*w_->store_, w_->config_.cluster.name, b_.cluster_id);
  if (!newest.ok() || !newest->has_value() || (*newest)->name == b_.name) return false;
  if (absl::Status s = Flush(); !s.ok()) return s;
  spdlog::info("delta backups: backup {} is newer; following it", (*newest)->name);
  return true;
}

absl::Status DeltaWriter::Session::CatchUp(size_t events_read, bool* end) {
  // Under a steady stream of writes etcd would send each revision in a message of its own,
  // and each costs this agent (and etcd) a round of transport work and thread wake-ups; read
  // in catch-ups instead. The pause only delays when changes are read, never which: the watch
  // reopens from the last revision read, and the delta interval is unchanged.
  read_since_open_ += events_read;
  const int64_t created = watch_->created_revision();  // 0: unknown, so no catch-ups
  if (read_since_open_ < kBusy || created <= 0 || cursor_ < created) return absl::OkStatus();
  // Many changes came and etcd's backlog is read: close the watch for a moment and open it
  // again from here, so etcd sends the changes of the pause as a backlog, in few large
  // messages, rather than each revision in a message of its own as it happens.
  read_since_open_ = 0;
  CloseWatch();
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - cycle_start_).count();
  const double rate = seconds > 0 ? static_cast<double>(cursor_ - cycle_cursor_) / seconds : 0;
  cycle_cursor_ = cursor_;
  cycle_start_ = now;
  w_->Sleep(CatchUpPause(rate, std::min<std::chrono::milliseconds>(kReadPause, interval_ / 2)));
  if (!w_->leading_()) {  // store what came (Run, after the loop)
    *end = true;
    return Flush();
  }
  absl::Status reopened = OpenWatch();
  if (reopened.ok() && watch_ != nullptr) return absl::OkStatus();
  // Stopping, or etcd went away or compacted: what came before the pause is stored first (it
  // follows the stored chain without a gap).
  *end = true;
  absl::Status stored = Flush();
  if (reopened.ok()) return stored;
  if (!stored.ok()) spdlog::warn("delta backups: storing a delta: {}", stored.message());
  return OpenFailed(reopened);
}

absl::Status DeltaWriter::Session::Run(bool* newer_base) {
  if (absl::Status s = OpenWatch(); !s.ok()) return OpenFailed(s);
  if (watch_ == nullptr) return absl::OkStatus();  // stopping
  spdlog::info("delta backups: following backup {} from revision {}", b_.name, cursor_);
  w_->SetStatus(ChainStatus());
  Metrics::Global().Set("steward_delta_backup_behind_revisions", 0);
  ResetPending();
  // Memory stays bounded under any write rate because this thread is the only reader of the
  // watch and stores before it reads on: the pending delta (kMaxPendingBytes and one message
  // more), one message that etcd keeps under its request bound (fragments) and gRPC's window.
  // Writes faster than the store takes them wait in etcd's history instead: the writer falls
  // behind (logged and in status()), and if etcd compacts past it, a full backup starts a new
  // chain (Compacted).
  next_flush_ = std::chrono::steady_clock::now() + interval_;
  cycle_cursor_ = cursor_;
  while (w_->leading_() && !Stopping()) {
    const auto now = std::chrono::steady_clock::now();
    auto until = [&](TimePoint t) {
      return std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(1),
          std::chrono::duration_cast<std::chrono::milliseconds>(t - now));
    };
    const auto wait = until(next_flush_);
    // Catching up: what etcd had when the watch opened comes without waiting long. Idle, no
    // longer than the next look for a newer full backup.
    const bool behind = cursor_ < watch_->created_revision();
    const auto idle = std::min(interval_, until(next_base_check_));
    auto events = watch_->Wait(behind                         ? std::min(kCatchUpWait, wait)
                               : pending_.revisions().empty() ? idle
                                                              : wait);
    if (!events.ok()) {
      // Whatever was received is history all the same: keep it before starting again (and
      // before a compaction's full backup, whose retention may prune this chain's base).
      if (absl::Status s = Flush(); !s.ok()) {
        spdlog::warn("delta backups: storing what came before the watch ended: {}", s.message());
      }
      if (absl::IsOutOfRange(events.status())) return Compacted(events.status());
      return Annotate(events.status(), "the watch ended");
    }
    Take(*events);
    TrackLag();
    auto newer = NewerBase();
    if (!newer.ok()) return newer.status();
    if (*newer) {
      *newer_base = true;
      return absl::OkStatus();
    }
    const bool due = std::chrono::steady_clock::now() >= next_flush_;
    if ((due || pending_bytes_ >= kMaxPendingBytes) && !pending_.revisions().empty()) {
      if (absl::Status s = Flush(); !s.ok()) return s;
    }
    if (due) next_flush_ = std::chrono::steady_clock::now() + interval_;
    bool end = false;
    absl::Status s = CatchUp(events->size(), &end);
    if (end) return s;
  }
  // No longer leading, or stopping: the next leader goes on from what is stored.
  return Flush();
}

absl::Status DeltaWriter::RunSession(bool* newer_base) {
  uint64_t cluster_id = 0;
  if (auto members = etcd_->MemberList(&cluster_id); !members.ok()) return members.status();
  auto base = NewestBase(*store_, config_.cluster.name, cluster_id);
  if (!base.ok()) return Annotate(base.status(), "finding the full backup to follow");
  if (!base->has_value()) {
    SetStatus("waiting for a full backup of this cluster");
    return absl::OkStatus();
  }
  auto chain = ListDeltaChain(*store_, **base);
  if (!chain.ok()) return chain.status();
  if (!chain->stopped.empty()) {
    // What follows a gap cannot be applied; the chain goes on from where it is whole.
    spdlog::warn("delta backups of {}: {}; going on from revision {}", (*base)->name,
                 chain->stopped, chain->end_revision);
  }
  Session session(this, **base, *chain);
  return session.Run(newer_base);
}

}  // namespace steward
