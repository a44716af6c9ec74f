// The steward leader's delta backups (backup/delta.h): one watch on the whole keyspace from
// the end of the newest full backup's chain, and every backup.delta_interval (or once the
// pending changes pass a size bound) a delta of what came, stored with BackupStore.
//
// - Under a steady stream of writes the watch is read in catch-ups: once it has read many
//   changes and what etcd had when it opened, it is closed for up to a second (shorter the
//   busier the keyspace: CatchUpPause) and opened again from the last revision read, so etcd
//   sends the backlog in few messages instead of one per revision (which cost the agent ~12 %
//   of a core at ~2500 writes/s).
//
// - Memory is bounded under any write rate (issue 35: a 1 GiB fill of 100 KiB values took
//   the leader's agent to 459 MiB). Run()'s thread is the watch's only reader and stores
//   before it reads on, so it never reads faster than it stores. What it holds: the pending
//   delta (kMaxPendingBytes and the one message that passed it); that message, which etcd
//   keeps under its --max-request-bytes (the watch asks etcd to fragment larger responses and
//   hands on whole revisions); gRPC's read-ahead on the watch's own connection (1 MiB,
//   EtcdClient::WatchRange); and while a delta is stored, zstd's window and one piece
//   (WriteDelta streams). Before, etcd sent a catch-up's backlog of up to 1000 revisions as
//   one message, gRPC read tens of MiB ahead, and each delta was copied twice to be stored.
//   Writes faster than the store wait in etcd's history instead: the writer falls behind
//   (over 5000 revisions: logged, in status(), on /leader and in
//   steward_delta_backup_behind_revisions; "caught up" is logged when it is back under 1000),
//   and if etcd compacts past it, a full backup starts a new chain (below).
//
// - A new leader resumes where the store's chain ends: etcd still holds that history (unless
//   compacted), so nothing is skipped and nothing stored twice.
// - A newer full backup moves the chain to it (the old chain is finished first).
// - A start revision etcd has compacted cannot be watched from: a full backup is taken, logged,
//   and the chain starts again from it.
// - The agents' own keys under the reserved prefix are left out, except the operator's
//   (the spec and the maintenance document): a restore writes the rest anew.
//
// Run() is the body of one thread; Stop() and status() are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "backup/store.h"
#include "common/mutex.h"
#include "config/config.h"
#include "etcd/api.h"

namespace steward {

class DeltaWriter {
 public:
  // `leading`: whether this agent leads now. `etcd` must be thread-safe.
  DeltaWriter(const Config& config, BackupStore* store, EtcdApi* etcd,
              std::function<bool()> leading);

  // Until Stop(): while leading, keeps the chain going; otherwise looks again every interval.
  void Run();
  void Stop();
  // One line for logs and status: how far the chain reaches, or why it does not.
  std::string status() const;

  // The pending changes are stored once they pass this many bytes, whatever the interval.
  static constexpr size_t kMaxPendingBytes = 8u << 20;
  // How often the writer asks the store whether a newer full backup exists (one listing), idle
  // or not: it then follows that one.
  static constexpr std::chrono::seconds kBaseCheckEvery{10};

  // How long the watch stays closed before the next catch-up, given the rate of revisions the
  // last cycle read. etcd (3.4 and 3.5) sends a reopened watch's backlog at most 1000 revisions
  // per sync, one sync every 100 ms, and each sync reads the *whole* remaining backlog from
  // its database while holding the lock its writes take to notify watchers: a backlog of
  // several thousand revisions is read several times over, at the writers' expense. The pause
  // keeps the backlog within one batch (the sync's 100 ms included), at most `longest`.
  static std::chrono::milliseconds CatchUpPause(double revisions_per_second,
                                                std::chrono::milliseconds longest);

 private:
  // One leadership's worth (a Session over the newest full backup and its chain): returns
  // when leadership or the watch ends, on an error, or (with `*newer_base` set) when a newer
  // full backup is to be followed at once.
  class Session;
  absl::Status RunSession(bool* newer_base);
  bool Keep(const std::string& key) const;
  void SetStatus(std::string s);
  void Sleep(std::chrono::milliseconds d);

  const Config& config_;
  BackupStore* store_;
  EtcdApi* etcd_;
  std::function<bool()> leading_;

  mutable Mutex mu_;
  CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<KeyWatch> watch_ ABSL_GUARDED_BY(mu_);  // the open watch, for Stop()
  std::string status_ ABSL_GUARDED_BY(mu_) = "not leading";
};

}  // namespace steward
