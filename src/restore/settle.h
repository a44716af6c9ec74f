// Settling a restored cluster while it is fenced (it serves only on the fence port, so no
// client sees it yet): the leases that came with the backup revoked, the backup's deltas replayed,
// the new generation and a fresh leader report written, and the restore marked settled. Every
// step is guarded by marks in the fenced cluster itself (etcd/keys.h: ReplayGuardKey,
// ReplaySettledKey, ReplaySupersededKey), so two coordinators never both settle or replay it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "backup/delta.h"
#include "backup/store.h"
#include "config/config.h"
#include "control/records.h"
#include "etcd/api.h"

namespace steward {

// Replays the deltas of `backup` (backup/delta.h) up to `to_revision` onto `etcd`: with `pack`
// (the restore raised the revision), the revisions' writes packed into as few transactions as
// etcd's default limits allow (TxnPacker; a transaction etcd refuses as too large, its limits
// lowered by etcd.extra_args, is sent again in halves); without, one transaction per revision.
// Keys put under a lease are deleted instead. Every transaction applies only while ReplayGuardKey
// holds `guard` (Aborted once another coordinator has marked its own replay). `replayed` counts the
// revisions. `chain_broken` as ForEachDeltaRevision's (etcd's errors never set it).
absl::Status ReplayDeltas(BackupStore& store, const std::string& cluster, const std::string& backup,
                          int64_t to_revision, EtcdApi& etcd, const std::string& guard,
                          int64_t* replayed, bool* chain_broken = nullptr, bool pack = true);

// " + N delta(s), to revision R" for a log line ("" without deltas).
std::string DescribePoint(const RestorePoint& p);

// What settling needs besides the intent and the fenced cluster.
struct SettleContext {
  const Config& config;
  BackupStore& store;
  int64_t now_unix = 0;
  std::function<uint32_t()> nonce;  // for this coordinator's replay mark
  // The coordinator's promised term: above every term a majority of the agents admitted, so
  // above the epochs the lost cluster's leaders used. The restored cluster's epoch key is
  // raised to it, and its first leader takes the next: an epoch is never taken twice.
  uint64_t epoch_floor = 0;
};
// Before the restored cluster is declared done: revoke every lease the backup brought back
// (no lock or leader key of the lost cluster survives), replay the deltas up to
// `intent.delta_to`, record the new generation, raise the epoch to `ctx.epoch_floor` and mark
// the restore settled. OK when another
// coordinator settled it already. `*deltas_lost`: the deltas an automatic restore is to replay
// can no longer be read to `delta_to` (lost or damaged since it was chosen), and the restore is
// marked replaced in the fenced cluster (ReplaySupersededKey, exclusive with settling), so it
// never settles: the caller must replace it.
absl::Status SettleFenced(const SettleContext& ctx, const RestoreIntent& intent, EtcdApi& fenced,
                          bool* deltas_lost);

}  // namespace steward
