// How a node carries out a restore order: fetch and verify the backup before touching
// anything, set the old data aside, restore (in place, or by etcdutl or etcdctl), start etcd
// fenced until the coordinator settles the restore.
#include "absl/strings/str_cat.h"
#include "agent/local_node.h"
#include "backup/layout.h"
#include "etcd/version.h"
#include "spdlog/spdlog.h"

namespace steward {

absl::Status LocalNode::Restore(const peer::RestoreRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = RefuseWhileDestroyed("restore"); !s.ok()) return s;
  // Applied already — unless this member lost its data since (the marker outlives a wiped data
  // dir): then it restores again, from the same backup, like the others did.
  const bool repeat = disk_.Read(Marker::kRestoreId) == req.restore_id();
  if (repeat && (!req.member() || HasMemberData())) return absl::OkStatus();
  auto fail = [this](absl::Status s) {
    restore_error_ = Msg(s);
    spdlog::error("restore order: {}", s.message());
    return s;
  };
  if (env_.store == nullptr) {
    return fail(absl::FailedPreconditionError("no backup store is configured"));
  }
  // Every member of one restored cluster must hold the same revisions: a node that cannot
  // raise them as ordered stays out, untouched (and is healed later by a join, which copies
  // them). The in-place edit raises them without etcdutl; etcd 3.4's etcdctl cannot.
  const bool only_in_place = req.bump_revision() > 0 && config_.etcd.etcdutl.empty();
  if (req.member() && only_in_place && !config_.etcd.restore_in_place) {
    return fail(absl::FailedPreconditionError(
        "this restore raises the revision, and on this node neither etcd.etcdutl is set nor "
        "etcd.restore_in_place on"));
  }
  if (req.member() && only_in_place && req.restore_id() == bump_refused_id_) {
    return fail(bump_refused_);  // the same backup: refused again, without fetching it again
  }
  const std::string cluster = config_.cluster.name;
  bool use_etcdutl = false;  // the node runs etcd >= 3.5, whose restore tool is etcdutl
  if (req.member()) {
    // Fetch and verify before anything is stopped: a bad backup leaves the node as it was.
    auto text = env_.store->Get(MetaKey(cluster, req.backup()));
    if (!text.ok()) return fail(Annotate(text.status(), "reading meta.json of " + req.backup()));
    auto meta = MetaFromJson(*text);
    if (!meta.ok()) return fail(meta.status());
    // etcd does not support downgrades: data from a newer minor version is not restored onto
    // an older one.
    // EV1: a node with no member data here (a total loss, a wiped node) restores with the
    // binary of the backup's version when it has one, rather than refuse it as a downgrade.
    if (env_.etcd_version && env_.binaries && !HasMemberData() &&
        MinorBelow(env_.etcd_version(), meta->etcd_version)) {
      if (const std::vector<EtcdBinary> binaries = env_.binaries();
          const EtcdBinary* b = PickBinary(binaries, meta->etcd_version)) {
        if (absl::Status s = UseBinary(*b); !s.ok()) return fail(s);
        spdlog::info("restore {}: backup {} is from etcd {}; restoring with {} (etcd {})",
                     req.restore_id(), req.backup(), meta->etcd_version, b->path, b->reported);
      }
    }
    const std::string mine = env_.etcd_version ? env_.etcd_version() : "";
    auto from = ParseVersion(meta->etcd_version);
    auto to = ParseVersion(mine);
    if (!to) {
      spdlog::warn("restore {}: the etcd version of this node is not known (a static pod's "
                   "image not listed in etcd.versions?); backup {} from etcd {} is restored "
                   "unchecked", req.restore_id(), req.backup(), meta->etcd_version);
    }
    if (from && to && ((*from)[0] > (*to)[0] || ((*from)[0] == (*to)[0] && (*from)[1] > (*to)[1]))) {
      return fail(absl::FailedPreconditionError(absl::StrCat(
          "backup ", req.backup(), " was taken from etcd ", meta->etcd_version, "; this node runs ",
          mine, ", an older version, and etcd does not support downgrades: switch the nodes to ",
          (*from)[0], ".", (*from)[1], " first (etcd.versions, configure-cluster --etcd-version)")));
    }
    use_etcdutl = to && ((*to)[0] > 3 || ((*to)[0] == 3 && (*to)[1] >= 5));
    if (absl::Status s = disk_.StageBackup(*env_.store, cluster, *meta); !s.ok()) return fail(s);
  }
  SnapshotRestore r;
  EtcdLaunch l = BootstrapLaunch(config_);
  l.data_dir = disk_.DataDir();
  l.initial_cluster.clear();
  for (const auto& m : req.initial_cluster()) {
    l.initial_cluster.emplace_back(m.name(), m.peer_url());
  }
  // The tool: etcdutl can raise the revision past every one the lost cluster served, so
  // revisions are never reused; etcd 3.4's etcdctl cannot, so then only the in-place edit can.
  // etcd 3.5 moved `snapshot restore` to etcdutl (3.6 removed it from etcdctl).
  r.tool = only_in_place ? ""
           : (req.bump_revision() > 0 || (use_etcdutl && !config_.etcd.etcdutl.empty()))
               ? config_.etcd.etcdutl
               : config_.etcd.etcdctl;
  r.name = config_.node.name;
  r.peer_url = config_.PeerUrl(config_.self());
  r.token = req.token();
  r.initial_cluster = l.initial_cluster;
  r.bump_revision = req.bump_revision();
  r.in_place = config_.etcd.restore_in_place;
  if (req.member() && only_in_place) {
    // No fallback: a DB the edit would refuse is found now, while the node is untouched.
    if (absl::Status s = disk_.CheckStagedInPlace(r); !s.ok()) {
      disk_.ClearStaging();
      // A DB (or input) the edit does not take is refused for good, whatever the code says
      // (DataLoss, FailedPrecondition, NotFound, ...); the file system's own failures
      // (ErrnoStatus: a read error, a full or read-only disk) fail this order, to be retried.
      if (absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsPermissionDenied(s)) {
        return fail(Annotate(s, "checking that the staged backup can be restored in place"));
      }
      bump_refused_id_ = req.restore_id();
      bump_refused_ = Annotate(s, "this restore raises the revision, which without etcd.etcdutl "
                                  "(etcd >= 3.5's) only the in-place restore can do, and it "
                                  "refuses the staged backup (the coordinator restores without "
                                  "raising the revision instead)");
      return fail(bump_refused_);
    }
  }
  held_ = true;
  if (absl::Status s = runner_.Stop(); !s.ok()) {
    held_ = false;
    return fail(s);
  }
  std::string aside;
  if (repeat) {
    // What is left is a partial dir of this same restore: removed/ keeps the data from before
    // it, which must never be put back (it is the lost cluster's).
    if (absl::Status s = disk_.RemoveData(); !s.ok()) {
      held_ = false;
      return fail(s);
    }
  } else if (absl::Status s = disk_.SetAside("etcd-before-restore-" + req.restore_id(), &aside);
             !s.ok()) {
    held_ = false;
    return fail(s);
  }
  if (!aside.empty()) spdlog::warn("restore {}: previous data moved to {}", req.restore_id(), aside);
  // A failed step puts the old data back: the node is left as it was.
  auto put_back = [&] {
    if (!aside.empty()) {
      if (absl::Status s = disk_.PutBack(aside); !s.ok()) spdlog::error("{}", s.message());
    }
    held_ = false;
  };
  if (!req.member()) {
    // Not a member of the restored cluster: its old data is set aside; it waits as a spare.
    if (absl::Status s = disk_.Remove(Marker::kFenced); !s.ok()) spdlog::warn("{}", s.message());
    if (absl::Status s = disk_.Write(Marker::kRestoreId, req.restore_id()); !s.ok()) {
      return fail(s);
    }
    restore_error_.clear();
    held_ = false;
    return absl::OkStatus();
  }
  if (absl::Status s = disk_.RestoreStaged(r); !s.ok()) {
    put_back();
    return fail(s);
  }
  // The fence goes down before the restored data goes in: an agent that dies in between must
  // not start that data on the client port before its leases are revoked.
  absl::Status fence = req.fenced() ? disk_.Write(Marker::kFenced, req.restore_id())
                                    : disk_.Remove(Marker::kFenced);  // an earlier restore's
  if (!fence.ok()) {
    put_back();
    return fail(fence);
  }
  if (absl::Status s = disk_.InstallStaged(); !s.ok()) {
    if (req.fenced()) {  // the old data goes back, unfenced as it was
      if (absl::Status r = disk_.Remove(Marker::kFenced); !r.ok()) spdlog::error("{}", r.message());
    }
    put_back();
    return fail(s);
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
    return fail(s);
  }
  MarkJoined();
  restore_error_.clear();
  held_ = false;
  spdlog::info("restore {}: backup {} restored; starting etcd{}", req.restore_id(), req.backup(),
               req.fenced() ? " fenced (clients wait until its leases are revoked)" : "");
  RunEtcd(l, /*on_data=*/true);
  return absl::OkStatus();
}

}  // namespace steward
