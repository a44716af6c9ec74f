#include "ctl/backup_cmd.h"

#include <iostream>
#include <memory>
#include <set>

#include "absl/strings/str_cat.h"
#include "backup/pipeline.h"
#include "backup/scheduler.h"
#include "control/records.h"

namespace steward {
namespace {

struct BackupArgs {
  std::vector<std::string> names;
  bool force = false;
  bool dry_run = false;
};

int RunBackupDelete(const Common& c, const BackupArgs& a) {
  WithStore w = OpenFromConfig(c, "backup delete", /*store_only=*/true);
  if (w.rc != 0) return w.rc;
  const std::string& cluster = w.config->cluster.name;
  auto listed = ListBackups(*w.store, cluster);
  if (!listed.ok()) {
    std::cerr << "stewardctl: " << listed.status().message() << "\n";
    return 1;
  }
  // What a restore would take now (the newest complete backup of this cluster that is neither
  // an import nor damaged), and what a pending restore is restoring.
  std::string newest;
  std::set<std::string> present;
  for (const auto& b : *listed) {
    present.insert(b.name);
    if (newest.empty() && b.meta && b.meta->imported_from.empty() && b.damaged.empty()) {
      newest = b.name;
    }
  }
  auto intent = ReadRestoreIntent(*w.store, cluster);
  if (!intent.ok() && !a.force) {
    std::cerr << "stewardctl: cannot read the restore intent (" << intent.status().message()
              << "): a restore may be using these backups; nothing was deleted (--force)\n";
    return 1;
  }
  std::string pending;
  if (intent.ok() && intent->has_value() && !(*intent)->done && !(*intent)->cancelled) {
    pending = (*intent)->backup;
  }
  for (const auto& name : a.names) {
    if (!present.count(name)) {
      std::cerr << "stewardctl: no backup named " << name << "; nothing was deleted\n";
      return 1;
    }
    if (a.force) continue;
    if (name == newest) {
      std::cerr << "stewardctl: refusing to delete " << name << ": it is the newest backup a "
                << "restore would take; nothing was deleted (--force)\n";
      return 1;
    }
    if (name == pending) {
      std::cerr << "stewardctl: refusing to delete " << name << ": restore " << (*intent)->id
                << " is restoring it; nothing was deleted (--force)\n";
      return 1;
    }
  }
  for (const auto& name : a.names) {
    if (absl::Status s = DeleteBackup(*w.store, cluster, name); !s.ok()) {
      std::cerr << "stewardctl: deleting " << name << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << "deleted " << name << "\n";
  }
  return 0;
}

int RunBackupPrune(const Common& c, const BackupArgs& a) {
  WithStore w = OpenFromConfig(c, "backup prune", /*store_only=*/true);
  if (w.rc != 0) return w.rc;
  std::string skew;
  auto prune = BackupsToPrune(*w.config, *w.store, UnixNow(), &skew);
  if (!prune.ok()) {
    std::cerr << "stewardctl: " << prune.status().message() << "\n";
    return 1;
  }
  if (!skew.empty()) std::cerr << "warning: " << skew << "\n";
  if (prune->empty()) std::cout << "retention keeps every backup\n";
  for (const auto& name : *prune) {
    if (a.dry_run) {
      std::cout << "would delete " << name << "\n";
      continue;
    }
    if (absl::Status s = DeleteBackup(*w.store, w.config->cluster.name, name); !s.ok()) {
      std::cerr << "stewardctl: deleting " << name << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << "deleted " << name << "\n";
  }
  return 0;
}

}  // namespace

void AddBackupCommands(CLI::App& app, Common* common, Commands* commands) {
  CLI::App* backup = app.get_subcommand("backup");
  if (backup == nullptr) return;
  auto args = std::make_shared<BackupArgs>();
  CLI::App* del = backup->add_subcommand(
      "delete",
      "delete backups and their deltas (not the newest restorable one, nor one a "
      "restore is using, without --force)");
  AddCommonFlags(del, common, false);
  del->add_option("name", args->names, "the backups (see list-backups)")->required();
  del->add_flag("--force", args->force, "delete even the newest or one a restore is using");
  commands->push_back({del, [common, args] { return RunBackupDelete(*common, *args); }});
  CLI::App* prune = backup->add_subcommand(
      "prune", "apply the retention policy (backup.retention) now and print what goes");
  AddCommonFlags(prune, common, false);
  prune->add_flag("--dry-run", args->dry_run, "only print what would be deleted");
  commands->push_back({prune, [common, args] { return RunBackupPrune(*common, *args); }});
}

}  // namespace steward
