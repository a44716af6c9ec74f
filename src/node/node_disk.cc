#include "node/node_disk.h"

#include <chrono>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backup/pipeline.h"
#include "common/files.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "etcd/bolt.h"
#include "etcd/restore_in_place.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace fs = std::filesystem;

const char* MarkerName(Marker m) {
  switch (m) {
    case Marker::kJoined:
      return "joined";
    case Marker::kInitialBootstrap:
      return "initial-bootstrap";
    case Marker::kFenced:
      return "fenced";
    case Marker::kRestoreId:
      return "restore-id";
    case Marker::kLeaderTerm:
      return "leader-term";
    case Marker::kEtcdVersion:
      return "etcd-version";
    case Marker::kDestroyed:
      return "destroyed";
    case Marker::kRestartedFor:
      return "restarted-for";
  }
  return "?";
}

FsNodeDisk::FsNodeDisk(std::string node_dir, std::string etcd_data_dir,
                       std::function<bool()> cancelled)
    : node_dir_(std::move(node_dir)),
      etcd_dir_(std::move(etcd_data_dir)),
      cancelled_(std::move(cancelled)) {}

std::string FsNodeDisk::MarkerPath(Marker m) const {
  return (fs::path(node_dir_) / MarkerName(m)).string();
}

std::string FsNodeDisk::WorkDir() const { return (fs::path(node_dir_) / "restore").string(); }

DataDirState FsNodeDisk::State() {
  std::error_code ec;
  const fs::path member = fs::path(etcd_dir_) / "member";
  if (!fs::exists(member, ec)) return DataDirState::kEmpty;
  // etcd opens its backend (member/snap/db) before it creates the WAL; a WAL segment is what
  // shows that raft state, and so anything acknowledged, was ever written here.
  for (const auto& e : fs::directory_iterator(member / "wal", ec)) {
    if (e.path().extension() == ".wal") return DataDirState::kMember;
  }
  return DataDirState::kPartial;
}

absl::StatusOr<WalIdentity> FsNodeDisk::Identity() { return ReadWalIdentity(etcd_dir_); }

absl::StatusOr<uint64_t> FsNodeDisk::WalCommit() { return ReadWalCommit(etcd_dir_); }

absl::Status FsNodeDisk::SetAside(const std::string& label, std::string* moved_to) {
  moved_to->clear();
  const fs::path removed = fs::path(node_dir_) / "removed";
  std::error_code ec;
  if (!fs::exists(etcd_dir_, ec)) return absl::OkStatus();  // nothing to move
  const fs::path dest = removed / label;
  if (fs::exists(dest, ec)) {
    // A retried order: the first attempt already set the data aside here; keep that copy.
    fs::remove_all(etcd_dir_, ec);
    if (ec) return ErrnoStatus(ec.value(), "removing what is left of " + etcd_dir_);
    *moved_to = dest.string();
    return absl::OkStatus();
  }
  fs::remove_all(removed, ec);
  if (ec) return ErrnoStatus(ec.value(), "removing the older copy in " + removed.string());
  fs::create_directories(removed, ec);
  if (!ec) fs::rename(etcd_dir_, dest, ec);
  if (ec) return ErrnoStatus(ec.value(), "moving the data dir aside");
  *moved_to = dest.string();
  return absl::OkStatus();
}

absl::Status FsNodeDisk::SetPartialAside(std::string* moved_to) {
  const fs::path dest = fs::path(node_dir_) / "partial-aside";
  std::error_code ec;
  fs::remove_all(dest, ec);
  fs::rename(etcd_dir_, dest, ec);
  if (ec) return ErrnoStatus(ec.value(), "setting aside a partial data dir");
  *moved_to = dest.string();
  return absl::OkStatus();
}

absl::Status FsNodeDisk::PutBack(const std::string& aside) {
  std::error_code ec;
  fs::rename(aside, etcd_dir_, ec);
  if (ec) return ErrnoStatus(ec.value(), "putting " + aside + " back");
  return absl::OkStatus();
}

absl::Status FsNodeDisk::RemoveData() {
  std::error_code ec;
  fs::remove_all(etcd_dir_, ec);
  if (ec) return ErrnoStatus(ec.value(), "removing " + etcd_dir_);
  return absl::OkStatus();
}

bool FsNodeDisk::Has(Marker m) {
  std::error_code ec;
  return fs::exists(MarkerPath(m), ec);
}

std::string FsNodeDisk::Read(Marker m) {
  auto text = ReadFile(MarkerPath(m));
  return text.ok() ? std::string(absl::StripAsciiWhitespace(*text)) : "";
}

absl::Status FsNodeDisk::Write(Marker m, const std::string& content) {
  return Annotate(WriteFileAtomic(MarkerPath(m), content + "\n"),
                  absl::StrCat("writing the ", MarkerName(m), " marker"));
}

absl::Status FsNodeDisk::Remove(Marker m) {
  std::error_code ec;
  fs::remove(MarkerPath(m), ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("removing the ", MarkerName(m), " marker"));
  return absl::OkStatus();
}

namespace {
// The store as VerifyBackup reads it, with every chunk of a streamed object first asking
// whether the agent is shutting down: a download of a large backup ends at once.
class CancellableReads : public BackupStore {
 public:
  CancellableReads(BackupStore& store, const std::function<bool()>& cancelled)
      : store_(store), cancelled_(cancelled) {}
  std::string Describe() const override { return store_.Describe(); }
  std::string EncryptionKeyId() const override { return store_.EncryptionKeyId(); }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    return store_.Create(key);
  }
  absl::Status Put(const std::string& key, const std::string& content) override {
    return store_.Put(key, content);
  }
  absl::StatusOr<std::string> Get(const std::string& key) override { return store_.Get(key); }
  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    return store_.Read(key, [&](std::string_view chunk) {
      if (cancelled_ && cancelled_()) return absl::CancelledError("the agent is shutting down");
      return sink(chunk);
    });
  }
  absl::Status ReadEncrypted(const std::string& key, const std::string& key_id,
                             const std::function<absl::Status(std::string_view)>& sink) override {
    return store_.ReadEncrypted(key, key_id, [&](std::string_view chunk) {
      if (cancelled_ && cancelled_()) return absl::CancelledError("the agent is shutting down");
      return sink(chunk);
    });
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return store_.List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return store_.Delete(key); }

 private:
  BackupStore& store_;
  const std::function<bool()>& cancelled_;
};
}  // namespace

absl::Status FsNodeDisk::StageBackup(BackupStore& store, const std::string& cluster,
                                     const BackupMeta& meta) {
  const fs::path work = WorkDir();
  std::error_code ec;
  fs::remove_all(work, ec);
  fs::create_directories(work, ec);
  if (ec) return ErrnoStatus(ec.value(), "creating " + work.string());
  // Whoever chose this backup (the restore coordinator, or stewardctl restore-backup) has
  // checked its sha256 against meta.json. Here the size and zstd's frame checksum (xxh64 of
  // the content) guard the copy this node fetched; two more sha256 passes per member would
  // only cost time. The restore tool is then told to skip its own (slower) hash check.
  // The DB goes straight where the restored member keeps it: a restore in place edits it there
  // (no copy of a 1+ GB file); the restore tool gets it moved aside.
  const fs::path snap_dir = work / "etcd" / "member" / "snap";
  if (absl::Status s = MakeDirs(snap_dir.string(), 0700); !s.ok()) return s;
  VerifyOptions opts;
  opts.hash_stored = false;
  opts.hash_content = false;
  opts.out_path = (snap_dir / "db").string();
  CancellableReads reads(store, cancelled_);
  return VerifyBackup(reads, cluster, meta, opts);
}

namespace {

InPlaceRestore InPlaceOf(const SnapshotRestore& r, const std::string& data_dir) {
  InPlaceRestore ip;
  ip.data_dir = data_dir;
  ip.name = r.name;
  ip.peer_url = r.peer_url;
  ip.token = r.token;
  ip.initial_cluster = r.initial_cluster;
  ip.bump_revision = r.bump_revision;
  return ip;
}

}  // namespace

absl::Status FsNodeDisk::CheckStagedInPlace(const SnapshotRestore& r) {
  const fs::path target = fs::path(WorkDir()) / "etcd";
  std::error_code ec;
  if (!fs::exists(target / "member" / "snap" / "db", ec)) {
    return absl::FailedPreconditionError("no backup is staged");
  }
  InPlaceRestore ip = InPlaceOf(r, target.string());
  ip.check_only = true;
  return RestoreInPlace(ip);
}

absl::Status FsNodeDisk::RestoreStaged(const SnapshotRestore& r) {
  const fs::path work = WorkDir();
  const std::string target = (work / "etcd").string();
  const fs::path staged_db = work / "etcd" / "member" / "snap" / "db";
  std::error_code ec;
  if (!fs::exists(staged_db, ec)) return absl::FailedPreconditionError("no backup is staged");
  if (r.in_place || r.tool.empty()) {
    const InPlaceRestore ip = InPlaceOf(r, target);
    bool db_changed = false;
    const auto start = std::chrono::steady_clock::now();
    absl::Status s = RestoreInPlace(ip, &db_changed);
    if (s.ok()) {
      spdlog::info("restore: the staged backup's DB was restored in place in {} ms",
                   std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::steady_clock::now() - start)
                       .count());
      return s;
    }
    // A DB this code does not know how to edit is left as it was: the tool restores it. One
    // already edited is not handed on (the order fails and is staged afresh when retried).
    if (db_changed) return Annotate(s, "restoring the staged backup in place");
    // Damage the full walk found is the backup's, not this code's: no tool is handed it.
    if (IsDamagedDb(s)) return s;
    if (r.tool.empty()) {
      return Annotate(s,
                      "restoring the staged backup in place (no restore tool here can make "
                      "this restore: raising the revision needs etcd.etcdutl)");
    }
    spdlog::warn("restore in place: {}; running {} snapshot restore instead", s.message(), r.tool);
  }
  // The tool wants an empty data dir and the snapshot elsewhere.
  fs::rename(staged_db, work / "snapshot.db", ec);
  if (ec) return ErrnoStatus(ec.value(), "moving the staged backup aside");
  fs::remove_all(target, ec);
  std::vector<std::string> initial;
  for (const auto& [name, url] : r.initial_cluster) initial.push_back(absl::StrCat(name, "=", url));
  std::vector<std::string> argv = {r.tool,
                                   "snapshot",
                                   "restore",
                                   (work / "snapshot.db").string(),
                                   "--skip-hash-check",
                                   "--name",
                                   r.name,
                                   "--initial-cluster",
                                   absl::StrJoin(initial, ","),
                                   "--initial-cluster-token",
                                   r.token,
                                   "--initial-advertise-peer-urls",
                                   r.peer_url,
                                   "--data-dir",
                                   target};
  if (r.bump_revision > 0) {
    argv.push_back(absl::StrCat("--bump-revision=", r.bump_revision));
    argv.push_back("--mark-compacted");
  }
  auto run = RunProcess(argv, {"ETCDCTL_API=3"}, std::chrono::minutes(30), cancelled_);
  if (!run.ok()) return Annotate(run.status(), r.tool + " snapshot restore");
  if (run->exit_code != 0) {
    return absl::InternalError(absl::StrCat(r.tool, " snapshot restore failed: ", run->output));
  }
  return absl::OkStatus();
}

absl::Status FsNodeDisk::InstallStaged() {
  std::error_code ec;
  if (fs::exists(etcd_dir_, ec)) {
    return absl::FailedPreconditionError(etcd_dir_ + " exists; it must be set aside first");
  }
  fs::rename(fs::path(WorkDir()) / "etcd", etcd_dir_, ec);
  if (ec) return ErrnoStatus(ec.value(), "installing the restored data dir");
  return absl::OkStatus();
}

void FsNodeDisk::ClearStaging() {
  std::error_code ec;
  fs::remove(fs::path(WorkDir()) / "snapshot.db", ec);
  fs::remove_all(fs::path(WorkDir()) / "etcd", ec);  // nothing once installed
}

}  // namespace steward
