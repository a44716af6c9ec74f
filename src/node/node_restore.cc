// How a node carries out a restore order, in three phases:
//   1. (under the node's lock) what needs nothing fetched: a destroyed node, a restore applied
//      already, a backup refused already; then the staging area is claimed for this restore;
//   2. (without the lock, which State() and the other orders need meanwhile) fetch meta.json,
//      decide (PlanNodeRestore: rules NR1-NR4, restore_plan.h; the binary: EV1), fetch, verify
//      and decompress the backup into the staging area;
//   3. (under the lock, the state checked again) set the old data aside, restore in place (or
//      by etcdutl or etcdctl), start etcd fenced until the coordinator settles the restore.
// Nothing is stopped or set aside before phase 3: a bad backup leaves the node as it was.
#include "absl/strings/str_cat.h"
#include "backup/layout.h"
#include "etcd/bolt.h"
#include "etcd/version.h"
#include "node/local_node.h"
#include "spdlog/spdlog.h"

namespace steward {

absl::Status LocalNode::RestoreFailed(absl::Status s) {
  {
    MutexLock lock(&restore_mu_);
    restore_error_ = Msg(s);
  }
  spdlog::error("restore order: {}", s.message());
  return s;
}

// Phase 1 of a restore order: refused while destroyed or while another restore fetches; its
// staging claimed (restoring_). `*applied`: this order was carried out here already.
absl::Status LocalNode::BeginRestore(const peer::RestoreRequest& req, bool* repeat, bool* applied) {
  MutexLock lock(&mu_);
  if (absl::Status s = RefuseWhileDestroyed("restore"); !s.ok()) return s;
  // Applied already — unless this member lost its data since (the marker outlives a wiped
  // data dir): then it restores again, from the same backup, like the others did.
  *repeat = disk_.Read(Marker::kRestoreId) == req.restore_id();
  if (*repeat && (!req.member() || HasMemberData())) {
    *applied = true;
    return absl::OkStatus();
  }
  if (env_.store == nullptr) {
    return RestoreFailed(absl::FailedPreconditionError("no backup store is configured"));
  }
  MutexLock state(&restore_mu_);
  const bool only_in_place = req.bump_revision() > 0 && config_.etcd.etcdutl.empty();
  if (req.member() && only_in_place && req.restore_id() == bump_refused_id_) {
    restore_error_ = Msg(bump_refused_);
    return bump_refused_;  // the same backup: refused again, without fetching it again
  }
  if (!restoring_.empty()) {
    return absl::UnavailableError(
        absl::StrCat("restore ", restoring_, " is fetching its backup on this node"));
  }
  restoring_ = req.restore_id();
  return absl::OkStatus();
}

absl::Status LocalNode::Restore(const peer::RestoreRequest& req) {
  bool repeat = false, applied = false;
  if (absl::Status s = BeginRestore(req, &repeat, &applied); !s.ok() || applied) return s;
  struct Release {  // the staging area, whichever way this returns
    LocalNode* n;
    ~Release() {
      MutexLock state(&n->restore_mu_);
      n->restoring_.clear();
    }
  } release{this};

  // Phase 2.
  const std::string cluster = config_.cluster.name;
  NodeRestoreFacts facts;
  facts.member = req.member();
  facts.bump_revision = req.bump_revision();
  facts.etcdutl = config_.etcd.etcdutl;
  facts.etcdctl = config_.etcd.etcdctl;
  facts.restore_in_place = config_.etcd.restore_in_place;
  facts.backup = req.backup();
  facts.node_version = env_.etcd_version ? env_.etcd_version() : "";
  std::optional<EtcdBinary> switch_to;  // EV1, applied in phase 3
  std::optional<BackupMeta> meta;
  if (req.member()) {
    auto text = env_.store->Get(MetaKey(cluster, req.backup()));
    if (!text.ok()) {
      return RestoreFailed(Annotate(text.status(), "reading meta.json of " + req.backup()));
    }
    auto parsed = MetaFromJson(*text);
    if (!parsed.ok()) return RestoreFailed(parsed.status());
    meta = *parsed;
    facts.backup_version = meta->etcd_version;
    // EV1: a node with no member data here (a total loss, a wiped node) restores with the
    // binary of the backup's version when it has one, rather than refuse it as a downgrade.
    if (env_.binaries && !HasMemberData() && MinorBelow(facts.node_version, meta->etcd_version)) {
      const std::vector<EtcdBinary> binaries = env_.binaries();
      if (const EtcdBinary* b = PickBinary(binaries, meta->etcd_version)) {
        switch_to = *b;
        facts.node_version = b->reported;
      }
    }
  }
  const NodeRestorePlan plan = PlanNodeRestore(facts);
  if (!plan.refusal.ok()) return RestoreFailed(plan.refusal);
  if (plan.unknown_version && req.member()) {
    spdlog::warn(
        "restore {}: the etcd version of this node is not known (a static pod's image "
        "not listed in etcd.versions?); backup {} from etcd {} is restored unchecked",
        req.restore_id(), req.backup(), facts.backup_version);
  }
  if (meta) {
    // Fetched and verified before anything is stopped: a bad backup leaves the node as it was.
    if (absl::Status s = disk_.StageBackup(*env_.store, cluster, *meta); !s.ok()) {
      return RestoreFailed(s);
    }
  }

  // Phase 3.
  MutexLock lock(&mu_);
  if (absl::Status s = RefuseWhileDestroyed("restore"); !s.ok()) {
    disk_.ClearStaging();
    return s;
  }
  if (switch_to) {
    if (HasMemberData()) {  // data came meanwhile: not an empty node any more
      disk_.ClearStaging();
      return RestoreFailed(absl::UnavailableError(
          "member data appeared here while the backup was fetched; the order is retried"));
    }
    if (absl::Status s = UseBinary(*switch_to); !s.ok()) return RestoreFailed(s);
    spdlog::info("restore {}: backup {} is from etcd {}; restoring with {} (etcd {})",
                 req.restore_id(), req.backup(), facts.backup_version, switch_to->path,
                 switch_to->reported);
  }
  return ApplyRestoreLocked(req, repeat, plan);
}

absl::Status LocalNode::CheckStagedLocked(const peer::RestoreRequest& req,
                                          const NodeRestorePlan& plan, const SnapshotRestore& r) {
  if (!req.member()) return absl::OkStatus();
  // Every page of the staged DB is walked before the node is touched: a backup whose DB was
  // damaged before it was taken (its checksums valid) is refused here, naming the damage,
  // instead of an etcd that panics on every start after the old data was set aside. With
  // only the in-place edit (NR4) any refusal counts; else only damage (the tool takes a DB
  // the edit merely does not know).
  absl::Status s = disk_.CheckStagedInPlace(r);
  if (!s.ok() && IsDamagedDb(s)) {
    disk_.ClearStaging();
    return RestoreFailed(Annotate(
        s, absl::StrCat("backup ", req.backup(), " cannot be restored; the node is untouched")));
  }
  if (!s.ok() && plan.check_in_place_first) {
    disk_.ClearStaging();
    // A DB (or input) the edit does not take is refused for good, whatever the code says
    // (DataLoss, FailedPrecondition, NotFound, ...); the file system's own failures
    // (ErrnoStatus: a read error, a full or read-only disk) fail this order, to be retried.
    if (absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsPermissionDenied(s)) {
      return RestoreFailed(Annotate(s, "checking that the staged backup can be restored in place"));
    }
    absl::Status refused = Annotate(
        s,
        "this restore raises the revision, which without etcd.etcdutl (etcd >= 3.5's) only "
        "the in-place restore can do, and it refuses the staged backup (the coordinator "
        "restores without raising the revision instead)");
    {
      MutexLock state(&restore_mu_);
      bump_refused_id_ = req.restore_id();
      bump_refused_ = refused;
    }
    return RestoreFailed(refused);
  }
  return absl::OkStatus();
}

absl::Status LocalNode::SetAsideForRestoreLocked(const peer::RestoreRequest& req, bool repeat,
                                                 std::string* aside_out) {
  std::string& aside = *aside_out;
  held_ = true;
  if (absl::Status s = runner_.Stop(); !s.ok()) {
    held_ = false;
    return RestoreFailed(s);
  }
  if (repeat) {
    // What is left is a partial dir of this same restore: removed/ keeps the data from before
    // it, which must never be put back (it is the lost cluster's).
    if (absl::Status s = disk_.RemoveData(); !s.ok()) {
      held_ = false;
      return RestoreFailed(s);
    }
  } else if (absl::Status s = disk_.SetAside("etcd-before-restore-" + req.restore_id(), &aside);
             !s.ok()) {
    held_ = false;
    return RestoreFailed(s);
  }
  if (!aside.empty())
    spdlog::warn("restore {}: previous data moved to {}", req.restore_id(), aside);
  return absl::OkStatus();
}

absl::Status LocalNode::ApplyRestoreLocked(const peer::RestoreRequest& req, bool repeat,
                                           const NodeRestorePlan& plan) {
  SnapshotRestore r;
  EtcdLaunch l = BootstrapLaunch(config_);
  l.data_dir = disk_.DataDir();
  l.initial_cluster.clear();
  for (const auto& m : req.initial_cluster()) {
    l.initial_cluster.emplace_back(m.name(), m.peer_url());
  }
  r.tool = plan.tool;
  r.name = config_.node.name;
  r.peer_url = config_.PeerUrl(config_.self());
  r.token = req.token();
  r.initial_cluster = l.initial_cluster;
  r.bump_revision = req.bump_revision();
  r.in_place = config_.etcd.restore_in_place;
  if (absl::Status s = CheckStagedLocked(req, plan, r); !s.ok()) return s;
  std::string aside;
  if (absl::Status s = SetAsideForRestoreLocked(req, repeat, &aside); !s.ok()) return s;
  // A failed step puts the old data back: the node is left as it was.
  auto put_back = [&] {
    if (!aside.empty()) {
      if (absl::Status s = disk_.PutBack(aside); !s.ok()) spdlog::error("{}", s.message());
    }
    held_ = false;
  };
  auto done = [this] {
    MutexLock state(&restore_mu_);
    restore_error_.clear();
  };
  if (!req.member()) {
    // Not a member of the restored cluster: its old data is set aside; it waits as a spare.
    if (absl::Status s = disk_.Remove(Marker::kFenced); !s.ok()) spdlog::warn("{}", s.message());
    if (absl::Status s = disk_.Write(Marker::kRestoreId, req.restore_id()); !s.ok()) {
      return RestoreFailed(s);
    }
    done();
    held_ = false;
    return absl::OkStatus();
  }
  if (absl::Status s = disk_.RestoreStaged(r); !s.ok()) {
    put_back();
    return RestoreFailed(s);
  }
  // The fence goes down before the restored data goes in: an agent that dies in between must
  // not start that data on the client port before its leases are revoked.
  absl::Status fence = req.fenced() ? disk_.Write(Marker::kFenced, req.restore_id())
                                    : disk_.Remove(Marker::kFenced);  // an earlier restore's
  if (!fence.ok()) {
    put_back();
    return RestoreFailed(fence);
  }
  if (absl::Status s = disk_.InstallStaged(); !s.ok()) {
    if (req.fenced()) {  // the old data goes back, unfenced as it was
      if (absl::Status r = disk_.Remove(Marker::kFenced); !r.ok()) spdlog::error("{}", r.message());
    }
    put_back();
    return RestoreFailed(s);
  }
  disk_.ClearStaging();
  l.token = req.token();
  l.new_cluster = true;
  if (req.fenced()) {
    // Only the agents may reach the restored cluster until its leases are revoked.
    l.client_url = config_.FenceUrl(config_.self());
  }
  if (absl::Status s = disk_.Write(Marker::kRestoreId, req.restore_id()); !s.ok()) {
    held_ = false;  // the restored data is in place; run it, and let the order be retried
    RunEtcd(l, /*on_data=*/true);
    return RestoreFailed(s);
  }
  MarkJoined();
  done();
  held_ = false;
  spdlog::info("restore {}: backup {} restored; starting etcd{}", req.restore_id(), req.backup(),
               req.fenced() ? " fenced (clients wait until its leases are revoked)" : "");
  RunEtcd(l, /*on_data=*/true);
  return absl::OkStatus();
}

}  // namespace steward
