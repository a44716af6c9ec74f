#include "ctl/verify_cmd.h"

#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backup/drill.h"
#include "backup/pipeline.h"
#include "etcd/bolt.h"
#include "etcd/version.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

struct VerifyArgs {
  std::string name;
  bool latest = false;
  std::string scratch = "/var/tmp";
  std::string etcd;
};

int RunVerifyBackup(const Common& c, const VerifyArgs& a) {
  WithStore w = OpenFromConfig(c, "verify-backup");
  if (w.rc != 0) return w.rc;
  const Config& config = *w.config;
  auto listed = ListBackups(*w.store, config.cluster.name);
  if (!listed.ok()) {
    std::cerr << "stewardctl: " << listed.status().message() << "\n";
    return 1;
  }
  std::optional<BackupMeta> meta;
  for (const auto& b : *listed) {
    if (!b.meta) continue;
    if (a.name.empty() ? (b.meta->imported_from.empty() && b.damaged.empty()) : b.name == a.name) {
      meta = b.meta;
      break;
    }
  }
  if (!meta) {
    std::cerr << "stewardctl: "
              << (a.name.empty() ? "no complete backup to verify"
                                 : "no complete backup named " + a.name)
              << "\n";
    return 1;
  }
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) return rc;
  EtcdClient::Options o = ClientOptions(c);
  o.timeout = std::max(o.timeout, std::chrono::milliseconds(10000));
  EtcdClient live(endpoints, o);
  DrillOptions d;
  d.etcd_binary = a.etcd.empty() ? DrillEtcdFor(config, meta->etcd_version) : a.etcd;
  d.scratch_root = a.scratch;
  std::cerr << "restore drill of backup " << meta->name << " (revision " << meta->revision
            << ", etcd " << meta->etcd_version << ") with " << d.etcd_binary << " in "
            << d.scratch_root << "\n";
  auto r = RunDrill(*w.store, config.cluster.name, *meta, live, d);
  if (!r.ok()) {
    std::cerr << "stewardctl: the drill could not run: " << r.status().message() << "\n";
    return 1;
  }
  if (absl::Status s = RecordDrill(*w.store, config.cluster.name, *r, UnixNow()); !s.ok()) {
    std::cerr << "warning: recording the result in the store: " << s.message() << "\n";
  }
  if (!r->passed && absl::StrContains(r->failure, BoltFile::kDamaged)) {
    // As a restore would find it: no automatic restore takes it from now on.
    if (absl::Status s = MarkBackupDamaged(*w.store, config.cluster.name, meta->name, r->failure,
                                           "stewardctl verify-backup", UnixNow());
        !s.ok()) {
      std::cerr << "warning: " << s.message() << "\n";
    }
  }
  if (c.output == "json") {
    nlohmann::json j = {
        {"backup", r->backup},         {"revision", r->revision},       {"passed", r->passed},
        {"skipped", r->skipped},       {"failure", r->failure},         {"compared", r->compared},
        {"deltas", r->deltas},         {"to_revision", r->to_revision}, {"keys", r->keys},
        {"restore_ms", r->restore_ms}, {"start_ms", r->start_ms},       {"hash_ms", r->hash_ms},
        {"replay_ms", r->replay_ms},   {"compare_ms", r->compare_ms}};
    std::cout << j.dump(2) << "\n";
  } else if (r->skipped) {
    std::cout << "backup " << r->backup << ": drill " << r->failure << "\n";
  } else {
    std::cout << "backup " << r->backup << ": restored in " << r->restore_ms
              << " ms, etcd served it after " << r->start_ms << " ms";
    if (r->deltas > 0) {
      std::cout << ", " << r->deltas << " delta(s) replayed to revision " << r->to_revision
                << " in " << r->replay_ms << " ms";
    }
    if (r->passed) std::cout << ", compared in " << r->compare_ms << " ms";
    std::cout << "\n" << (r->passed ? "PASSED: " + r->compared : "FAILED: " + r->failure) << "\n";
  }
  if (r->skipped) return 3;
  return r->passed ? 0 : 1;
}

}  // namespace

void AddVerifyCommands(CLI::App& app, Common* common, Commands* commands) {
  auto args = std::make_shared<VerifyArgs>();
  CLI::App* verify = app.add_subcommand(
      "verify-backup",
      "restore drill: restore a backup (the newest by default) and its deltas into a scratch "
      "etcd on loopback and compare every key with the live cluster at the revision they reach");
  AddCommonFlags(verify, common, true);
  auto* name =
      verify->add_option("name", args->name, "the backup (see list-backups); default: the newest");
  verify
      ->add_flag("--latest", args->latest,
                 "the newest backup an automatic restore would take (the default)")
      ->excludes(name);
  verify->add_option("--scratch", args->scratch,
                     "where the scratch data dir is made (needs the DB's size + 128 MiB free)");
  verify->add_option("--etcd", args->etcd,
                     "the etcd binary to run (default: the config's for the backup's version)");
  commands->push_back({verify, [common, args] { return RunVerifyBackup(*common, *args); }});
}

}  // namespace steward
