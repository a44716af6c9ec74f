// How a node carries out a restore order: fetch and verify the backup before touching
// anything, set the old data aside, restore (etcdutl, or etcdctl), start etcd fenced until the
// coordinator settles the restore.
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "agent/agent.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "common/files.h"
#include "common/subprocess.h"
#include "etcd/flags.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string Agent::AppliedRestoreId() const {
  auto text = ReadFile(config_.node.data_dir + "/restore-id");
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

absl::Status Agent::Restore(const peer::RestoreRequest& req) {
  std::lock_guard<std::mutex> lock(order_mu_);
  // Applied already — unless this member lost its data since (the marker outlives a wiped data
  // dir): then it restores again, from the same backup, like the others did.
  const bool repeat = AppliedRestoreId() == req.restore_id();
  if (repeat && (!req.member() || HasMemberData())) return absl::OkStatus();
  auto fail = [this](absl::Status s) {
    restore_error_ = Msg(s);
    return s;
  };
  if (!store_) return fail(absl::FailedPreconditionError("no backup store is configured"));
  // Every member of one restored cluster must hold the same revisions: a node that cannot
  // raise them as ordered stays out, untouched (and is healed later by a join, which copies
  // them).
  if (req.member() && req.bump_revision() > 0 && config_.etcd.etcdutl.empty()) {
    return fail(absl::FailedPreconditionError(
        "this restore raises the revision, and etcd.etcdutl is not set on this node"));
  }
  const std::string cluster = config_.cluster.name;
  const fs::path work = fs::path(config_.node.data_dir) / "restore";
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  const std::string snapshot = (work / "snapshot.db").string();
  if (req.member()) {
    // Fetch and verify before anything is stopped: a bad backup leaves the node as it was.
    auto text = store_->Get(MetaKey(cluster, req.backup()));
    if (!text.ok()) return fail(Annotate(text.status(), "reading meta.json of " + req.backup()));
    auto meta = MetaFromJson(*text);
    if (!meta.ok()) return fail(meta.status());
    // Whoever chose this backup (the restore coordinator, or stewardctl restore-backup) has
    // checked its sha256 against meta.json. Here the size and zstd's frame checksum (xxh64 of
    // the content) guard the copy this node fetched; two more sha256 passes per member would
    // only cost time. etcdctl is then told to skip its own (slower) hash check.
    VerifyOptions opts;
    opts.hash_stored = false;
    opts.hash_content = false;
    opts.out_path = snapshot;
    if (absl::Status s = VerifyBackup(*store_, cluster, *meta, opts); !s.ok()) return fail(s);
  }
  held_ = true;
  if (absl::Status s = runner_->Stop(); !s.ok()) {
    held_ = false;
    return fail(s);
  }
  std::string aside;
  if (repeat) {
    // What is left is a partial dir of this same restore: removed/ keeps the data from before
    // it, which must never be put back (it is the lost cluster's).
    fs::remove_all(config_.EtcdDataDir(), ec);
  } else if (absl::Status s = SetDataAside("etcd-before-restore-" + req.restore_id(), &aside);
             !s.ok()) {
    held_ = false;
    return fail(s);
  }
  if (!aside.empty()) spdlog::warn("restore {}: previous data moved to {}", req.restore_id(), aside);
  auto put_back = [&] {
    if (!aside.empty()) fs::rename(aside, config_.EtcdDataDir(), ec);
    held_ = false;
  };
  if (req.member()) {
    std::string initial;
    EtcdLaunch l = BootstrapLaunch(config_);
    l.initial_cluster.clear();
    for (const auto& m : req.initial_cluster()) {
      if (!initial.empty()) initial += ",";
      initial += m.name() + "=" + m.peer_url();
      l.initial_cluster.emplace_back(m.name(), m.peer_url());
    }
    const std::string target = (work / "etcd").string();
    // etcdutl (etcd >= 3.5) can raise the revision past every one the lost cluster served, so
    // revisions are never reused; etcd 3.4's etcdctl cannot.
    const bool bump = req.bump_revision() > 0;
    std::vector<std::string> argv = {bump ? config_.etcd.etcdutl : config_.etcd.etcdctl,
                                     "snapshot", "restore", snapshot, "--skip-hash-check",
                                     "--name", config_.node.name, "--initial-cluster", initial,
                                     "--initial-cluster-token", req.token(),
                                     "--initial-advertise-peer-urls",
                                     config_.PeerUrl(config_.self()), "--data-dir", target};
    if (bump) {
      argv.push_back(absl::StrCat("--bump-revision=", req.bump_revision()));
      argv.push_back("--mark-compacted");
    }
    auto r = RunProcess(argv, {"ETCDCTL_API=3"}, std::chrono::minutes(30));
    if (!r.ok() || r->exit_code != 0) {
      put_back();
      return fail(absl::InternalError(absl::StrCat(
          argv[0], " snapshot restore failed: ", r.ok() ? r->output : Msg(r.status()))));
    }
    // The fence goes down before the restored data goes in: an agent that dies in between must
    // not start that data on the client port before its leases are revoked.
    const std::string fence_marker = config_.node.data_dir + "/fenced";
    if (req.fenced()) {
      if (absl::Status s = WriteFileAtomic(fence_marker, req.restore_id() + "\n"); !s.ok()) {
        put_back();
        return fail(s);
      }
    } else {
      std::error_code gone;
      fs::remove(fence_marker, gone);  // a fence of an earlier restore
    }
    fs::rename(target, config_.EtcdDataDir(), ec);
    if (ec) {
      std::error_code ignored;
      if (req.fenced()) fs::remove(fence_marker, ignored);
      put_back();
      return fail(absl::InternalError("installing the restored data dir: " + ec.message()));
    }
    fs::remove(snapshot, ec);
    l.token = req.token();
    l.new_cluster = true;
    if (req.fenced()) {
      // Only the agents may reach the restored cluster until its leases are revoked.
      l.client_url = config_.FenceUrl(config_.self());
    }
    if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/restore-id",
                                         req.restore_id() + "\n");
        !s.ok()) {
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
  // Not a member of the restored cluster: its old data is set aside; it waits as a spare.
  fs::remove(config_.node.data_dir + "/fenced", ec);
  if (absl::Status s = WriteFileAtomic(config_.node.data_dir + "/restore-id", req.restore_id() + "\n");
      !s.ok()) {
    return fail(s);
  }
  restore_error_.clear();
  held_ = false;
  return absl::OkStatus();
}

}  // namespace steward
