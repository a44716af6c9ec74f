#include "ctl/snapshot_cmd.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "backup/snapshot_file.h"
#include "common/files.h"
#include "common/status.h"
#include "control/records.h"
#include "ctl/progress.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct SnapshotArgs {
  std::string file;
  std::string backup_name;
  bool force = false;
  std::string from_file;
  bool skip_hash_check = false;
};

// Publishes the finished file `from` under `to` through AtomicFile: fsynced, renamed (never over
// an existing `to` unless `replace`), and the directory synced. On failure `from` is removed.
absl::Status Publish(const std::string& from, const std::string& to, bool replace) {
  auto file = AtomicFile::Adopt(from, to);
  if (!file.ok()) return file.status();
  absl::Status s = file->Commit(replace);
  if (absl::IsAlreadyExists(s)) {
    return absl::AlreadyExistsError(absl::StrCat(to, " exists (pass --force to replace it)"));
  }
  return s;
}

// `stewardctl snapshot save FILE`: Maintenance.Snapshot of a caught-up member, raw.
int RunSnapshotSave(const Common& c, const std::string& file) {
  if (file.empty()) {
    std::cerr << "stewardctl: snapshot save needs FILE\n";
    return 2;
  }
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o = ClientOptions(c);
  EtcdClient client(endpoints, o);
  auto source = PickUpToDateSource(client, std::chrono::seconds(5));
  if (!source.ok()) {
    std::cerr << "stewardctl: snapshot save: " << source.status().message() << "\n";
    return 1;
  }
  auto st = client.Status(source->endpoint, std::chrono::milliseconds(3000));
  const uint64_t estimate = st.ok() && st->db_size > 0 ? static_cast<uint64_t>(st->db_size) : 0;
  const std::string part = file + ".part";
  int fd = ::open(part.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    std::cerr << "stewardctl: snapshot save: creating " << part << ": " << std::strerror(errno)
              << "\n";
    return 1;
  }
  auto fail = [&](const std::string& why) {
    ::unlink(part.c_str());
    std::cerr << "stewardctl: snapshot save: " << why << " (nothing written to " << file << ")\n";
    return 1;
  };
  const auto started = std::chrono::steady_clock::now();
  Progress progress = Progress::ToStderr(absl::StrCat("snapshot of ", source->member), estimate);
  uint64_t seen = 0;
  auto received = client.Snapshot(
      source->endpoint,
      [&](std::string_view chunk) -> absl::Status {
        for (size_t at = 0; at < chunk.size();) {
          ssize_t n = ::write(fd, chunk.data() + at, chunk.size() - at);
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) return ErrnoStatus(errno, absl::StrCat("writing ", part));
          at += static_cast<size_t>(n);
        }
        seen += chunk.size();
        progress.Update(seen);
        return absl::OkStatus();
      },
      std::chrono::minutes(30));
  ::close(fd);
  progress.Done(received.ok());
  if (!received.ok()) return fail(Msg(received.status()));
  // What is on disk, not what went by: etcd's trailer against the file, then its structure.
  if (absl::Status s = CheckSnapshotTrailer(part); !s.ok()) return fail(Msg(s));
  auto info = InspectSnapshotFile(part);
  if (!info.ok()) return fail(Msg(info.status()));
  if (absl::Status s = Publish(part, file, /*replace=*/true); !s.ok()) return fail(Msg(s));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (c.output == "json") {
    nlohmann::json j = {{"file", file},
                        {"member", source->member},
                        {"endpoint", source->endpoint},
                        {"revision", info->revision},
                        {"raft_index", info->consistent_index},
                        {"size", info->size},
                        {"sha256_trailer", "ok"},
                        {"seconds", seconds}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "saved snapshot of member " << source->member << " (" << source->endpoint
              << ") at revision " << info->revision << " to " << file << ": "
              << HumanBytes(static_cast<int64_t>(info->size)) << ", sha256 trailer verified\n";
  }
  return 0;
}

// `stewardctl snapshot status FILE`: the file checked without etcd.
int RunSnapshotStatus(const Common& c, const std::string& file) {
  auto info = InspectSnapshotFile(file);
  if (!info.ok()) {
    std::cerr << "stewardctl: " << info.status().message() << "\n";
    return 1;
  }
  std::string trailer = "none (a copy of a db file: restore it with --skip-hash-check)";
  bool ok = true;
  if (info->has_trailer) {
    Progress progress = Progress::ToStderr("checking " + file, info->size);
    absl::Status s = CheckSnapshotTrailer(file, progress.Callback());
    progress.Done(s.ok());
    ok = s.ok();
    trailer = s.ok() ? "ok" : std::string(s.message());
  }
  if (c.output == "json") {
    nlohmann::json j = {{"file", file},
                        {"size", info->size},
                        {"revision", info->revision},
                        {"revisions_stored", info->keys},
                        {"raft_index", info->consistent_index},
                        {"cluster_version", info->cluster_version},
                        {"page_size", info->page_size},
                        {"sha256_trailer", info->has_trailer ? (ok ? "ok" : "mismatch") : "none"}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "file:              " << file << "\n"
              << "size:              " << HumanBytes(static_cast<int64_t>(info->size)) << " ("
              << info->size << " bytes)\n"
              << "revision:          " << info->revision << "\n"
              << "revisions stored:  " << info->keys << "\n"
              << "raft index:        " << info->consistent_index << "\n"
              << "cluster version:   "
              << (info->cluster_version.empty() ? "-" : info->cluster_version) << "\n"
              << "sha256 trailer:    " << trailer << "\n";
  }
  return ok ? 0 : 1;
}

// `stewardctl backup export NAME FILE`: the stored backup, decompressed and verified.
int RunBackupExport(const Common& c, const std::string& name, const std::string& file, bool force) {
  // The store alone will do (--backup-store URL --cluster NAME): no node config needed.
  WithStore w = OpenFromConfig(c, "backup export", /*store_only=*/true);
  if (w.rc != 0) return w.rc;
  const std::string cluster = w.config->cluster.name;
  std::error_code ec;
  if (!force && fs::exists(file, ec)) {
    std::cerr << "stewardctl: backup export: " << file
              << " exists; refusing to overwrite it (pass --force to replace it)\n";
    return 1;
  }
  auto text = w.store->Get(MetaKey(cluster, name));
  if (!text.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << text.status().message()
              << " (see list-backups)\n";
    return 1;
  }
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) {
    std::cerr << "stewardctl: backup " << name << ": " << meta.status().message() << "\n";
    return 1;
  }
  // VerifyBackup writes <out>.part and renames it to <out> only when every check passed; the
  // verified copy is then published under FILE without replacing one that appeared meanwhile.
  const std::string staged = file + ".part";
  Progress progress = Progress::ToStderr("reading backup " + name, meta->compressed_size);
  VerifyOptions opts;
  opts.out_path = staged;
  opts.progress = progress.Callback();
  absl::Status s = VerifyBackup(*w.store, cluster, *meta, opts);
  progress.Done(s.ok());
  if (!s.ok()) {
    std::cerr << "stewardctl: backup export: " << s.message() << " (nothing written to " << file
              << ")\n";
    return 1;
  }
  if (absl::Status p = Publish(staged, file, force); !p.ok()) {
    ::unlink(staged.c_str());
    std::cerr << "stewardctl: backup export: " << p.message() << "\n";
    return 1;
  }
  if (c.output == "json") {
    nlohmann::json j = {{"backup", name},
                        {"file", file},
                        {"size", meta->db_size},
                        {"revision", meta->revision},
                        {"etcd_version", meta->etcd_version},
                        {"db_sha256", meta->db_sha256},
                        {"verified", true}};
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << "exported backup " << name << " (revision " << meta->revision << ", taken "
              << UtcTime(meta->unix_time) << ") to " << file << ": "
              << HumanBytes(static_cast<int64_t>(meta->db_size))
              << ", verified against meta.json's sha256 and etcd's trailer\n";
  }
  return 0;
}

}  // namespace

// `stewardctl restore-backup --from-file FILE`: verify, import as a backup, restore by name.
int RunRestoreFromFile(const Common& c, const std::string& file, bool skip_hash_check, bool yes,
                       bool force, int wait_seconds) {
  WithStore w = OpenFromConfig(c, "restore-backup");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  if (config.cluster.adopt.enabled()) {
    std::cerr << "stewardctl: refusing to restore while cluster.adopt is set (see "
                 "restore-backup NAME's message; retire or stop the unmanaged members first)\n";
    return 1;
  }
  if (RestoreMayBeUnderWay(*w.store, config.cluster.name)) return 1;
  if (DestroyedRefuses(*w.store, config.cluster.name)) return 1;
  // The file first, before anything is written anywhere: its bbolt structure now, its sha256
  // trailer as it streams into the store (nothing is committed unless it matches).
  auto info = InspectSnapshotFile(file);
  if (!info.ok()) {
    std::cerr << "stewardctl: refusing to restore: " << info.status().message() << "\n";
    return 1;
  }
  if (!info->has_trailer && !skip_hash_check) {
    std::cerr << "stewardctl: refusing to restore: " << file
              << " has no sha256 trailer (not what a snapshot save writes; perhaps a copy of a "
                 "member's db file), so it cannot be checked for corruption. Pass "
                 "--skip-hash-check to restore it anyway\n";
    return 1;
  }
  if (!yes) {
    std::cout << "This stops every etcd member of cluster " << config.cluster.name
              << " and replaces all of its data with the snapshot file " << file << " (revision "
              << info->revision << ", " << HumanBytes(static_cast<int64_t>(info->size)) << ", "
              << (info->has_trailer ? "sha256 trailer checked next" : "NO sha256 trailer")
              << "). The file is imported into the backup store first, and a fresh backup of "
                 "the current cluster is taken before anything is stopped.\n";
    if (!Confirmed()) {
      std::cout << "not restoring\n";
      return 1;
    }
  }
  // Generation: the store's current one (it sorts with this cluster's backups by revision); the
  // restore itself raises it for the restored cluster.
  auto next = NextGeneration(*w.store, config.cluster.name);
  if (!next.ok()) {
    std::cerr << "stewardctl: listing backups: " << next.status().message() << "\n";
    return 1;
  }
  fs::path absolute = fs::absolute(file);
  Progress progress = Progress::ToStderr("import of " + file, info->size);
  ImportOptions opts;
  opts.skip_hash_check = skip_hash_check;
  opts.progress = progress.Callback();
  auto meta = ImportSnapshotFile(*w.store, config.cluster.name, absolute.string(), *info,
                                 std::max<int64_t>(0, *next - 1), opts);
  progress.Done(meta.ok());
  if (!meta.ok()) {
    std::cerr << "stewardctl: refusing to restore: " << meta.status().message()
              << ". Nothing was changed.\n";
    return 1;
  }
  std::cerr << "imported " << file << " as backup " << meta->name << " (revision " << meta->revision
            << ")\n";
  return RunRestoreBackup(c, meta->name, /*yes=*/true, force, wait_seconds);
}

void AddSnapshotCommands(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<SnapshotArgs>();
  CLI::App* snapshot = app.add_subcommand("snapshot", "plain etcd snapshot files");
  snapshot->require_subcommand(1);
  CLI::App* save = snapshot->add_subcommand(
      "save", "save a snapshot of the live cluster to FILE, as etcdctl snapshot save does");
  AddCommonFlags(save, common, true);
  save->add_option("file", args->file, "where to write it (FILE.part until verified)")->required();
  commands->push_back({save, [common, args] { return RunSnapshotSave(*common, args->file); }});
  CLI::App* status = snapshot->add_subcommand(
      "status", "check a snapshot file without etcd: bbolt structure, sha256 trailer, revision");
  AddCommonFlags(status, common, true);
  status->add_option("file", args->file, "the snapshot file")->required();
  commands->push_back({status, [common, args] { return RunSnapshotStatus(*common, args->file); }});

  if (CLI::App* backup = app.get_subcommand("backup")) {
    CLI::App* exp = backup->add_subcommand(
        "export", "write a stored backup to FILE as a plain snapshot (etcdctl snapshot restore)");
    AddCommonFlags(exp, common, true);
    exp->add_option("name", args->backup_name, "the backup's name (see list-backups)")->required();
    exp->add_option("file", args->file, "where to write it (FILE.part until verified)")->required();
    exp->add_flag("--force", args->force, "replace FILE if it exists");
    commands->push_back({exp, [common, args] {
                           return RunBackupExport(*common, args->backup_name, args->file,
                                                  args->force);
                         }});
  }
  if (CLI::App* restore = app.get_subcommand("restore-backup")) {
    restore->get_option("name")->required(false);
    restore->add_option("--from-file", args->from_file,
                        "restore from this snapshot file (etcdctl snapshot save's, or ours) "
                        "instead of a stored backup: it is verified and imported first");
    restore->add_flag("--skip-hash-check", args->skip_hash_check,
                      "with --from-file: accept a file without etcd's sha256 trailer (a copy of "
                      "a member's db file)");
    commands->push_back(
        {restore, [common, args, restore] {
           const std::string name = restore->get_option("name")->count() > 0
                                        ? restore->get_option("name")->as<std::string>()
                                        : "";
           const bool yes = restore->get_option("--yes")->count() > 0;
           const bool force = restore->get_option("--force")->count() > 0;
           const int wait = restore->get_option("--wait")->count() > 0
                                ? restore->get_option("--wait")->as<int>()
                                : 300;
           if (!name.empty() && !args->from_file.empty()) {
             std::cerr << "stewardctl: restore-backup takes NAME or --from-file "
                          "FILE, not both\n";
             return 2;
           }
           // A point in time: the backup's deltas, up to it.
           PointInTime pit;
           if (restore->get_option("--to-revision")->count() > 0) {
             pit.to_revision = restore->get_option("--to-revision")->as<int64_t>();
           }
           if (restore->get_option("--to-time")->count() > 0) {
             auto t = ParsePointTime(restore->get_option("--to-time")->as<std::string>());
             if (!t.ok()) {
               std::cerr << "stewardctl: " << t.status().message() << "\n";
               return 2;
             }
             pit.to_unix_ms = *t;
           }
           const bool latest = restore->get_option("--latest")->count() > 0;
           pit.deltas = latest || pit.to_revision != 0 || pit.to_unix_ms != 0;
           if (latest && !name.empty()) {
             std::cerr << "stewardctl: restore-backup takes NAME or --latest, "
                          "not both\n";
             return 2;
           }
           if (args->from_file.empty()) {
             // A restore replaces everything: its target is never implied.
             if (name.empty() && !pit.deltas) {
               std::cerr << "stewardctl: restore-backup needs NAME (see "
                            "list-backups), --latest, --to-revision R, "
                            "--to-time T, or --from-file FILE\n";
               return 2;
             }
             if (args->skip_hash_check) {
               std::cerr << "stewardctl: --skip-hash-check goes with --from-file\n";
               return 2;
             }
             // No name: the newest backup at or before the point, with its deltas.
             return RunRestoreBackup(*common, name, yes, force, wait, pit);
           }
           if (pit.deltas) {
             std::cerr << "stewardctl: --latest, --to-revision and --to-time go "
                          "with a stored backup, not --from-file\n";
             return 2;
           }
           return RunRestoreFromFile(*common, args->from_file, args->skip_hash_check, yes, force,
                                     wait);
         }});
  }
}

}  // namespace steward
