#include "restore/settle.h"

#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/layout.h"
#include "common/rules.h"
#include "common/status.h"
#include "control/report.h"
#include "etcd/keys.h"
#include "etcd/member_id.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {

std::string DescribePoint(const RestorePoint& p) {
  if (p.deltas == 0) return "";
  return absl::StrCat(
      " + ", p.deltas, " delta(s), to revision ", p.revision,
      p.stopped.empty() ? "" : absl::StrCat(" (the deltas stop there: ", p.stopped, ")"));
}

namespace {

// Transaction conditions on the fenced cluster's marks.
void RequireAbsent(etcdserverpb::TxnRequest& txn, const std::string& key) {
  auto* c = txn.add_compare();
  c->set_key(key);
  c->set_target(etcdserverpb::Compare::CREATE);
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_create_revision(0);
}
void RequireValue(etcdserverpb::TxnRequest& txn, const std::string& key, const std::string& value) {
  auto* c = txn.add_compare();
  c->set_key(key);
  c->set_target(etcdserverpb::Compare::VALUE);
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_value(value);
}

}  // namespace

namespace {

// etcd refuses a transaction over its --max-txn-ops or --max-request-bytes (gRPC may refuse
// the message first).
bool RefusedAsTooLarge(const absl::Status& s) {
  const std::string m(s.message());
  return absl::StrContains(m, "too many operations") ||
         absl::StrContains(m, "request is too large") || absl::StrContains(m, "larger than max");
}

// Sends `txn` (with the guard's compare); one that etcd refuses as too large goes again in two
// halves, in order (a packed transaction's operations name distinct keys, so any split holds).
absl::Status SendReplayTxn(EtcdApi& etcd, etcdserverpb::TxnRequest txn,
                           const std::string& guard_key, const std::string& guard, int64_t last) {
  etcdserverpb::TxnRequest sent = txn;
  RequireValue(sent, guard_key, guard);
  auto done = etcd.Txn(sent);
  if (!done.ok() && RefusedAsTooLarge(done.status()) && txn.success_size() > 1) {
    const int half = txn.success_size() / 2;
    etcdserverpb::TxnRequest first, second;
    for (int i = 0; i < txn.success_size(); ++i) {
      *(i < half ? first : second).add_success() = txn.success(i);
    }
    if (absl::Status s = SendReplayTxn(etcd, std::move(first), guard_key, guard, last); !s.ok()) {
      return s;
    }
    return SendReplayTxn(etcd, std::move(second), guard_key, guard, last);
  }
  if (!done.ok()) {
    return Annotate(done.status(), absl::StrCat("replaying the revisions up to ", last));
  }
  // Only while the guard still names this replay: a coordinator that took over wrote its own,
  // and a late transaction of this one must not put an older value over its replay.
  if (!done->succeeded())
    return absl::AbortedError("another coordinator took over replaying the deltas");
  return absl::OkStatus();
}

}  // namespace

absl::Status ReplayDeltas(BackupStore& store, const std::string& cluster, const std::string& backup,
                          int64_t to_revision, EtcdApi& etcd, const std::string& guard,
                          int64_t* replayed, bool* chain_broken, bool pack) {
  auto text = store.Get(MetaKey(cluster, backup));
  if (!text.ok()) return Annotate(text.status(), "reading the backup's meta.json");
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) return meta.status();
  // Nobody sees the cluster before it is settled, so a revision split in several
  // transactions (etcd's request limits), or packed with others, is never seen half applied.
  TxnPacker packer{ReplayShape{}};
  int64_t last = 0;  // the newest revision handed to the packer, for errors
  auto send = [&](std::vector<etcdserverpb::TxnRequest> txns) -> absl::Status {
    for (etcdserverpb::TxnRequest& txn : txns) {
      if (absl::Status s =
              SendReplayTxn(etcd, std::move(txn), ReplayGuardKey(cluster), guard, last);
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  };
  absl::Status sent;
  absl::Status read = ForEachDeltaRevision(
      store, *meta, to_revision,
      [&](const backup::DeltaRevision& r) {
        last = r.revision();
        for (const etcdserverpb::TxnRequest& txn : RevisionTxns(r, ReplayShape{})) {
          sent = send(pack ? packer.Add(txn) : std::vector<etcdserverpb::TxnRequest>{txn});
          if (!sent.ok()) return sent;
        }
        ++*replayed;
        return absl::OkStatus();
      },
      chain_broken);
  if (!sent.ok()) return sent;
  // What was read before a damaged delta is applied too, as it was before packing: a broken
  // chain's restore is replaced or waits, from the same state either way.
  if (absl::Status s = send(packer.Flush()); !s.ok()) return s;
  return read;
}

namespace {

// The marks one restore's settling is guarded by, in the fenced cluster.
struct Marks {
  std::string settled, replaced, guard;
};

// This very restore's cluster: a coordinator paused past a replacement must not settle (or
// replay into) the cluster of the restore that replaced it, on the same fence ports. Its
// members' IDs come from their peer URLs and the restore's token, as etcd derives them.
absl::Status CheckMembersAreOurs(const RestoreIntent& intent, EtcdApi& fenced) {
  auto listed = fenced.MemberList();
  if (!listed.ok()) return Annotate(listed.status(), "listing the restored members");
  std::set<uint64_t> ours;
  for (const auto& [name, url] : intent.initial_cluster) {
    ours.insert(InitialMemberId({url}, intent.token));
  }
  for (const MemberInfo& m : *listed) {
    if (!ours.count(m.id)) {
      return absl::AbortedError(absl::StrCat("the fenced members are not restore ", intent.id,
                                             "'s (member ", absl::StrFormat("%x", m.id),
                                             "): another restore replaced it"));
    }
  }
  return absl::OkStatus();
}

// Settled by another coordinator already (it may have unfenced members, whose clients' leases
// must not be revoked)?
absl::StatusOr<bool> SettledAlready(const RestoreIntent& intent, const Marks& marks,
                                    EtcdApi& fenced) {
  auto seen = fenced.Get(marks.settled);
  if (!seen.ok()) return Annotate(seen.status(), "reading whether the restore is settled");
  if (seen->has_value()) spdlog::info("restore {}: settled by another coordinator", intent.id);
  return seen->has_value();
}

// A lease in the backup still names the holder of a lock or a leader key at the moment of the
// backup, and a client that kept its lease ID would keep that lock alive after the restore
// (Patroni's former primary did). Revoking them deletes those keys: every holder must acquire
// again, in the restored cluster.
absl::Status RevokeBackupLeases(const RestoreIntent& intent, EtcdApi& fenced) {
  auto leases = fenced.LeaseLeases();
  if (!leases.ok()) return Annotate(leases.status(), "listing the restored leases");
  if (RuleOff("F1")) leases->clear();  // mutation tests only
  for (int64_t id : *leases) {
    absl::Status s = fenced.LeaseRevoke(id);
    if (!s.ok() && !absl::IsNotFound(s)) {
      return Annotate(s, absl::StrCat("revoking restored lease ", absl::StrFormat("%x", id)));
    }
  }
  if (!leases->empty()) {
    spdlog::info(
        "restore {}: revoked {} lease(s) that came with the backup (their keys are "
        "deleted)",
        intent.id, leases->size());
  }
  return absl::OkStatus();
}

absl::Status BeingReplaced(const RestoreIntent& intent, bool* deltas_lost) {
  if (intent.requested_by == "auto") *deltas_lost = true;
  return absl::AbortedError(absl::StrCat("restore ", intent.id,
                                         " is being replaced: its deltas "
                                         "were lost"));
}

// The changes stored after the backup, in order, under this coordinator's own mark, which every
// one of its transactions checks (ReplayDeltas); the mark is written only while no coordinator
// has finished settling this restore or marked it replaced. Replaying again after an
// interrupted settle leaves the same state: every key ends as its last change says.
// `*guard`: the mark ("" when another coordinator settled it meanwhile: nothing left to do).
absl::Status ReplayUnderGuard(const SettleContext& ctx, const RestoreIntent& intent,
                              const Marks& marks, EtcdApi& fenced, std::string* guard,
                              bool* deltas_lost) {
  const std::string mine =
      absl::StrCat(intent.id, "/", ctx.config.node.name, "/", absl::StrFormat("%08x", ctx.nonce()));
  etcdserverpb::TxnRequest mark;
  RequireAbsent(mark, marks.settled);
  RequireAbsent(mark, marks.replaced);  // nobody replays a restore that is being replaced
  auto* put = mark.add_success()->mutable_request_put();
  put->set_key(marks.guard);
  put->set_value(mine);
  auto marked = fenced.Txn(mark);
  if (!marked.ok()) return Annotate(marked.status(), "marking the replay of the deltas");
  if (!marked->succeeded()) {
    // A coordinator settled it meanwhile (its replay is complete, and one started now could
    // only write older values over it), or marked it replaced (then the replacement is still
    // due: it may have stopped before recording it).
    auto settled = SettledAlready(intent, marks, fenced);
    if (!settled.ok()) return settled.status();
    if (*settled) return absl::OkStatus();
    return BeingReplaced(intent, deltas_lost);
  }
  *guard = mine;
  int64_t replayed = 0;
  bool broken = false;
  // Packed only past a raised revision: one that could not be raised must not fall further
  // below what clients saw.
  if (absl::Status s = ReplayDeltas(ctx.store, ctx.config.cluster.name, intent.backup,
                                    intent.delta_to, fenced, mine, &replayed, &broken,
                                    /*pack=*/intent.bump_revision > 0);
      !s.ok()) {
    s = Annotate(s, "replaying the deltas");
    // Every delta was read and checked when the restore was chosen: one lost or damaged since
    // will not come back by waiting. An automatic restore is replaced (the caller's Supersede),
    // but only if this coordinator's mark still holds and nobody settled it: exclusive with the
    // settling, so a restore that may serve clients is never replaced. The operator's restore
    // waits, and says why.
    if (!broken || intent.requested_by != "auto") return s;
    etcdserverpb::TxnRequest replace;
    RequireValue(replace, marks.guard, mine);
    RequireAbsent(replace, marks.settled);
    auto* put_replaced = replace.add_success()->mutable_request_put();
    put_replaced->set_key(marks.replaced);
    put_replaced->set_value(mine);
    auto replaced = fenced.Txn(replace);
    if (!replaced.ok()) return Annotate(replaced.status(), "marking the restore replaced");
    if (!replaced->succeeded()) {
      return absl::AbortedError("another coordinator took over the restore meanwhile");
    }
    *deltas_lost = true;
    return s;
  }
  spdlog::info("restore {}: replayed {} revision(s) of deltas after backup {}, to revision {}",
               intent.id, replayed, intent.backup, intent.delta_to);
  return absl::OkStatus();
}

// The new generation, and a leader report in place of the one that came back with the backup
// (it describes the lost cluster at the time of the backup: status must never show it as now).
absl::Status WriteRestoredRecords(const SettleContext& ctx, const RestoreIntent& intent,
                                  EtcdApi& fenced) {
  const Config& config = ctx.config;
  if (absl::Status s =
          fenced.Put(EtcdGenerationKey(config.cluster.name), absl::StrCat(intent.generation));
      !s.ok()) {
    return Annotate(s, "recording the generation");
  }
  // The epoch came back with the backup; the lost cluster's leaders may have used the ones
  // after it. Never lowered (a coordinator with an older term settling late).
  if (ctx.epoch_floor > 0) {
    auto epoch = fenced.Get(EpochKey(config));
    if (!epoch.ok()) return Annotate(epoch.status(), "reading the restored epoch");
    uint64_t restored = 0;
    if (epoch->has_value() && !absl::SimpleAtoi(**epoch, &restored)) restored = 0;
    if (restored < ctx.epoch_floor) {
      if (absl::Status s = fenced.Put(EpochKey(config), absl::StrCat(ctx.epoch_floor)); !s.ok()) {
        return Annotate(s, "raising the restored epoch");
      }
      spdlog::info("restore {}: the restored epoch {} raised to {}, the restore's term", intent.id,
                   restored, ctx.epoch_floor);
    }
  }
  nlohmann::json report = {
      {"leader", config.node.name},
      {"term", ctx.epoch_floor},
      {"step", "restored"},
      {"detail", absl::StrCat("restored from backup ", intent.backup, " (restore ", intent.id,
                              "); the leader reports once it has looked")},
      {"at", ctx.now_unix},
      {"refresh", ReportRefreshSeconds(config)}};
  if (absl::Status s = fenced.Put(StatusKey(config), report.dump()); !s.ok()) {
    return Annotate(s, "replacing the restored leader report");
  }
  return absl::OkStatus();
}

// Drops the backup status that came with the backup and marks the restore settled, in one
// transaction: from here no replay of this restore may start, and no other coordinator settles
// it again (revoking the leases of clients it serves by then).
absl::Status MarkSettled(const SettleContext& ctx, const RestoreIntent& intent, const Marks& marks,
                         const std::string& guard, EtcdApi& fenced, bool* deltas_lost) {
  etcdserverpb::TxnRequest drop;
  // Not if a coordinator marked it replaced (its deltas were lost): then it never settles.
  RequireAbsent(drop, marks.replaced);
  // Nor if another coordinator has begun a replay of its own since this one's (it starts from
  // the backup, so the state is not yet the whole chain's): its settle is the one due.
  if (!guard.empty()) RequireValue(drop, marks.guard, guard);
  drop.add_success()->mutable_request_delete_range()->set_key(BackupStatusKey(ctx.config));
  drop.add_success()->mutable_request_delete_range()->set_key(marks.guard);
  auto* settled = drop.add_success()->mutable_request_put();
  settled->set_key(marks.settled);
  settled->set_value("settled");
  auto dropped = fenced.Txn(drop);
  if (!dropped.ok()) return Annotate(dropped.status(), "dropping the restored backup status");
  if (dropped->succeeded()) return absl::OkStatus();
  auto seen = fenced.Get(marks.replaced);
  if (seen.ok() && seen->has_value()) {
    // Marked replaced by a coordinator that then could not record the new intent: the
    // replacement is still due.
    return BeingReplaced(intent, deltas_lost);
  }
  return absl::AbortedError(absl::StrCat("restore ", intent.id,
                                         ": another coordinator "
                                         "replays its deltas now"));
}

}  // namespace

absl::Status SettleFenced(const SettleContext& ctx, const RestoreIntent& intent, EtcdApi& fenced,
                          bool* deltas_lost) {
  *deltas_lost = false;
  if (absl::Status s = CheckMembersAreOurs(intent, fenced); !s.ok()) return s;
  const std::string& cluster = ctx.config.cluster.name;
  const Marks marks{ReplaySettledKey(cluster, intent.id), ReplaySupersededKey(cluster, intent.id),
                    ReplayGuardKey(cluster)};
  auto settled = SettledAlready(intent, marks, fenced);
  if (!settled.ok()) return settled.status();
  if (*settled) return absl::OkStatus();
  if (absl::Status s = RevokeBackupLeases(intent, fenced); !s.ok()) return s;
  std::string guard;  // this coordinator's replay mark, if it replayed
  if (intent.delta_to > 0) {
    if (absl::Status s = ReplayUnderGuard(ctx, intent, marks, fenced, &guard, deltas_lost);
        !s.ok()) {
      return s;
    }
    if (guard.empty()) return absl::OkStatus();  // settled by another coordinator
  }
  if (absl::Status s = WriteRestoredRecords(ctx, intent, fenced); !s.ok()) return s;
  return MarkSettled(ctx, intent, marks, guard, fenced, deltas_lost);
}

}  // namespace steward
