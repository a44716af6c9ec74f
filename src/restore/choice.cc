// How the restore coordinator chooses what to restore: the newest valid backup, how far its
// deltas reach, the intent for it (PrepareRestoreIntent), and the replacement of an automatic
// restore that can never settle. The rest of the coordinator is in coordinator.cc.
#include "absl/strings/str_cat.h"
#include "backup/delta.h"
#include "backup/drill.h"
#include "backup/pipeline.h"
#include "common/status.h"
#include "restore/coordinator.h"
#include "spdlog/spdlog.h"

namespace steward {

void RestoreCoordinator::Start(const std::string& why) {
  auto backup = NewestValidBackup();
  if (!backup) {
    Note("every member is lost and no valid backup is found; waiting for an operator");
    return;
  }
  // The deltas stored after it, each read and checked: what the restore replays (possibly
  // from the backup before it, whose chain may reach further right after a full backup).
  auto point = DeltaPointFor(&*backup);
  if (!point.ok()) {
    Note(absl::StrCat("cannot read the deltas of backup ", *backup, ": ", point.status().message(),
                      "; waiting"));
    return;
  }
  // Choosing and verifying the backup and its deltas took a while: decide again on a fresh
  // observation.
  Observed again = Observe();
  if (RestoreDecision d2 = DecideRestore(again.view); d2.action != RestoreAction::kStart) {
    Note(absl::StrCat("not restoring after all: ", d2.reason));
    return;
  }
  auto chosen = FreshIntent(again.states, *backup, *point);
  if (!chosen.ok()) {
    Note(absl::StrCat("cannot prepare the restore: ", chosen.status().message()));
    return;
  }
  RestoreIntent fresh = std::move(*chosen);
  spdlog::warn("restore: {}; restoring backup {}{} (restore {})", why, *backup,
               DescribePoint(*point), fresh.id);
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, fresh); !s.ok()) {
    Note(absl::StrCat("cannot record the restore intent: ", s.message()));
    return;
  }
  if (history_ != nullptr) {
    history_->Append(Event{0, 0, "", "restore",
                           absl::StrCat(why, "; restoring backup ", *backup, DescribePoint(*point),
                                        " (restore ", fresh.id, ")"),
                           "started"});
  }
  if (absl::Status s = Execute(fresh); !s.ok()) {
    Note(absl::StrCat("restore ", fresh.id, " not finished yet: ", s.message()));
  }
}

std::optional<std::string> RestoreCoordinator::NewestValidBackup() {
  auto backups = ListBackups(*store_, config_.cluster.name);
  if (!backups.ok()) {
    Note(absl::StrCat("cannot list backups: ", backups.status().message()));
    return std::nullopt;
  }
  for (const auto& b : *backups) {
    if (!b.meta) {
      spdlog::warn("restore: skipping backup {}: {}", b.name, b.error);
      continue;
    }
    if (!b.meta->imported_from.empty()) continue;  // an operator's file, for their command only
    if (!b.damaged.empty()) {
      spdlog::warn("restore: skipping backup {}: {}", b.name, b.damaged);
      continue;
    }
    if (std::string refuted = DrillRefutes(b.verified_json); !refuted.empty()) {
      spdlog::warn("restore: skipping backup {}: {}", b.name, refuted);
      continue;
    }
    // The stored bytes against meta.json; every node checks them again as it fetches them,
    // before it touches its data.
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(*store_, config_.cluster.name, *b.meta, opts);
    if (s.ok()) return b.name;
    if (!absl::IsDataLoss(s)) {
      // A store that failed to answer says nothing about the backup: an older one must not
      // win because the newest could not be read this time.
      Note(absl::StrCat("cannot read backup ", b.name, " (", s.message(), "); waiting"));
      return std::nullopt;
    }
    spdlog::error("restore: skipping backup {}: it fails verification: {}", b.name, s.message());
  }
  return std::nullopt;
}

absl::StatusOr<RestorePoint> RestoreCoordinator::DeltaPointFor(std::string* backup) {
  auto listed = ListBackups(*store_, config_.cluster.name);
  if (!listed.ok()) return listed.status();
  // The chosen backup and the complete ones older than it, as the restore may take them.
  std::vector<BackupMeta> candidates;
  for (const auto& b : *listed) {
    if (!b.meta || !b.meta->imported_from.empty() || !b.damaged.empty()) continue;
    if (!DrillRefutes(b.verified_json).empty()) continue;
    if (candidates.empty() && b.name != *backup) continue;
    candidates.push_back(*b.meta);
  }
  if (candidates.empty()) return absl::NotFoundError(absl::StrCat("backup ", *backup, " is gone"));
  auto choice = ChooseRestoreBase(*store_, candidates);
  if (!choice.ok()) return choice.status();
  auto& [index, point] = *choice;
  if (index != 0) {
    const BackupMeta& older = candidates[index];
    VerifyOptions opts;
    opts.hash_content = false;
    absl::Status s = VerifyBackup(*store_, config_.cluster.name, older, opts);
    // A store that did not answer says nothing about the backup: wait rather than lose the
    // writes only its chain holds.
    if (!s.ok() && !absl::IsDataLoss(s)) return s;
    if (s.ok()) {
      spdlog::warn(
          "restore: the deltas of backup {} reach revision {}, past those of the newer "
          "{}: restoring {} with them",
          older.name, point.revision, *backup, older.name);
      *backup = older.name;
    } else {
      // The older one does not check out: the newest with its own deltas.
      auto own = FindRestorePoint(*store_, candidates[0]);
      if (!own.ok()) return own.status();
      point = *own;
    }
  }
  if (!point.stopped.empty()) {
    spdlog::error("restore: the deltas of backup {} stop at revision {}: {}", *backup,
                  point.revision, point.stopped);
  }
  return point;
}

absl::Status RestoreCoordinator::Supersede(const RestoreIntent& intent, const absl::Status& why,
                                           const std::string& unbumped_backup) {
  // Chosen as Pass() chooses, from what the store holds now (the damaged chain ends earlier).
  Observed o = Observe();
  auto backup = NewestValidBackup();
  if (!backup) return Annotate(why, "and no valid backup is found to restore instead");
  auto point = DeltaPointFor(&*backup);
  if (!point.ok()) return Annotate(point.status(), "choosing the restore that replaces it");
  auto fresh = FreshIntent(o.states, *backup, *point, *backup != unbumped_backup);
  if (!fresh.ok()) return Annotate(fresh.status(), "choosing the restore that replaces it");
  // Its members restored the old one and wait, fenced, for it: the new one carries its orders
  // on (R6), and orders them to restore again.
  fresh->ordered = true;
  fresh->supersedes = intent.id;
  // Still this intent, and not settled by another coordinator meanwhile (then it stands).
  RestoreIntent current = intent;
  if (absl::Status s = Sync(current); !s.ok()) return s;
  if (current.settled) return absl::AbortedError("settled by another coordinator meanwhile");
  spdlog::error(
      "restore {}: {}; nothing has served clients from it, so restore {} of backup "
      "{}{} replaces it",
      intent.id, why.message(), fresh->id, *backup, DescribePoint(*point));
  if (absl::Status s = WriteRestoreIntent(*store_, config_.cluster.name, *fresh); !s.ok()) {
    return Annotate(s, "recording the restore that replaces it");
  }
  if (history_ != nullptr) {
    history_->Append(
        Event{0, 0, "", "restore",
              absl::StrCat("restore ", intent.id, " replaced by ", fresh->id, ": ", why.message()),
              "started"});
  }
  // Its orders go out from the next pass (a fresh observation, and no recursion).
  return absl::AbortedError(absl::StrCat("replaced by restore ", fresh->id));
}

absl::StatusOr<RestoreIntent> RestoreCoordinator::FreshIntent(
    const std::map<std::string, peer::NodeState>& states, const std::string& backup,
    const RestorePoint& point, bool bump_wanted) {
  IntentRequest request;
  request.backup = backup;
  request.requested_by = "auto";
  request.delta_to = point.deltas > 0 ? point.revision : 0;
  if (!bump_wanted) request.no_bump = "a restore of it could not raise it";
  // All members must restore the same revisions: raise them only if every member that answers
  // can (one that cannot would refuse, and be healed by a join later).
  for (const auto& [name, st] : states) {
    if (!request.no_bump.empty()) break;
    if (!st.can_bump_revision()) {
      request.no_bump = absl::StrCat("node ", name,
                                     " can raise no revision (neither "
                                     "etcd.etcdutl nor etcd.restore_in_place)");
    }
  }
  if (!request.no_bump.empty()) {
    spdlog::warn(
        "restore: the restored revision is not raised ({}), so revisions served since "
        "the backup will be served again",
        request.no_bump);
  }
  request.now_unix = env_.clock->UnixSeconds();
  request.nonce = [this] { return env_.nonce(); };
  return PrepareRestoreIntent(*store_, config_, request);
}

absl::StatusOr<int64_t> RestoreCoordinator::BumpFor(const std::string& backup,
                                                    int64_t* backup_revision) {
  auto text = store_->Get(MetaKey(config_.cluster.name, backup));
  if (!text.ok()) return text.status();
  auto meta = MetaFromJson(*text);
  if (!meta.ok()) return meta.status();
  *backup_revision = meta->revision;
  auto highest = ReadHighestRevision(*store_, config_.cluster.name);
  if (!highest.ok()) return highest.status();
  return RevisionBump(*highest, meta->revision);
}

}  // namespace steward
