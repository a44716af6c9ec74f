#include "restore/decision.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rules.h"

namespace steward {

const char* RestoreActionName(RestoreAction a) {
  switch (a) {
    case RestoreAction::kNothing:
      return "nothing";
    case RestoreAction::kWait:
      return "wait";
    case RestoreAction::kStart:
      return "start";
    case RestoreAction::kContinue:
      return "continue";
    case RestoreAction::kCancel:
      return "cancel";
  }
  return "?";
}

namespace {

RestoreDecision Make(RestoreAction a, std::string reason) { return {a, std::move(reason)}; }

// The first agent (by name) that holds data or runs etcd other than the restore `own_id`
// produced; "" if none.
std::string LiveAgent(const RestoreView& v, const std::string& own_id) {
  for (const auto& [name, a] : v.answered) {
    const bool own = !own_id.empty() && a.restore_id == own_id;
    if ((a.has_data || a.etcd_running) && !own) return name;
  }
  return "";
}

// R1: how many of the last known voters answered, and who did not.
bool VotersProveLoss(const RestoreView& v, std::string* why) {
  if (RuleOff("R1")) return true;
  std::vector<std::string> silent;
  size_t answered = 0;
  for (const auto& n : v.last_voters) {
    if (v.answered.count(n)) {
      ++answered;
    } else {
      silent.push_back(n);
    }
  }
  if (v.last_voters.empty() || answered < v.last_voters.size() / 2 + 1) {
    *why = absl::StrCat("only ", answered, " of the last known voting members {",
                        absl::StrJoin(v.last_voters, ","),
                        "} answer (silent: ", absl::StrJoin(silent, ","),
                        "); they may still hold the cluster's data, so no restore");
    return false;
  }
  return true;
}

// R2: a majority of all configured agents answers (they will be asked for promises).
bool MajorityAnswers(const RestoreView& v, std::string* why) {
  if (v.answered.size() >= v.configured.size() / 2 + 1) return true;
  *why = absl::StrCat("only ", v.answered.size(), " of ", v.configured.size(),
                      " agents answer; a majority is needed to restore");
  return false;
}

}  // namespace

RestoreDecision DecideRestore(const RestoreView& v) {
  // R3: one coordinator.
  if (v.answered.empty() || v.answered.begin()->first != v.self) {
    return Make(RestoreAction::kNothing, "another agent coordinates restores");
  }
  if (!v.store_ok) {
    return Make(RestoreAction::kWait,
                absl::StrCat("the backup store cannot be read (", v.store_error, "); waiting"));
  }
  // R7 for a pending automatic restore whose orders have not gone out (one that began before
  // the mark was written): the cluster was retired on purpose, so it is not restored.
  if (v.pending && v.pending->automatic && !v.pending->ordered && !v.destroyed.empty() &&
      !RuleOff("R7")) {
    return Make(RestoreAction::kCancel, v.destroyed);
  }
  if (v.pending) {
    if (!v.pending->automatic) {
      // An operator's command: the live cluster is being replaced on purpose. R2 still holds
      // (the promises need a majority), which the coordinator checks when it collects them.
      return Make(RestoreAction::kContinue, "the operator's restore is pending");
    }
    bool applied_somewhere = false;
    for (const auto& [name, a] : v.answered) {
      if (a.restore_id == v.pending->id) applied_somewhere = true;
    }
    const bool may_have_applied = v.pending->ordered && !RuleOff("R6");
    if (!applied_somewhere && !may_have_applied) {
      // R5: re-prove total loss before the first node restores.
      if (std::string live = LiveAgent(v, v.pending->id); !live.empty() && !RuleOff("R5")) {
        return Make(RestoreAction::kCancel,
                    absl::StrCat("node ", live, " holds data or runs etcd of the live cluster"));
      }
      if (v.etcd_answers) {
        return Make(RestoreAction::kCancel, "an etcd member of the live cluster answers");
      }
      std::string why;
      if (!VotersProveLoss(v, &why)) return Make(RestoreAction::kWait, why);
    }
    // Once a node has restored, the restored cluster is the cluster: total loss was proven
    // right before the first order, so a member that returns later with old data is a minority
    // of the lost cluster, and its data is set aside by its own restore order. Cancelling now
    // would strand the nodes that restored (fenced, their data counted as live).
    if (std::string why; !MajorityAnswers(v, &why)) return Make(RestoreAction::kWait, why);
    return Make(RestoreAction::kContinue, "total loss is still proven");
  }
  if (!v.destroyed.empty() && !RuleOff("R7")) return Make(RestoreAction::kWait, v.destroyed);
  if (v.etcd_answers) return Make(RestoreAction::kNothing, "an etcd member answers");
  if (std::string live = LiveAgent(v, ""); !live.empty()) {
    return Make(RestoreAction::kNothing, absl::StrCat("node ", live, " holds data"));
  }
  // R4.
  if (!v.cluster_existed) {
    return Make(RestoreAction::kNothing, "no sign that this cluster ever existed");
  }
  std::string why;
  if (!VotersProveLoss(v, &why)) return Make(RestoreAction::kWait, why);
  if (!MajorityAnswers(v, &why)) return Make(RestoreAction::kWait, why);
  if (v.adopting && !RuleOff("AD5")) {
    return Make(RestoreAction::kWait,
                "no member answers, but cluster.adopt is set: the members no agent manages may "
                "still hold the cluster, so no restore starts by itself (`stewardctl "
                "restore-backup NAME` restores on purpose)");
  }
  if (!v.auto_restore) {
    return Make(RestoreAction::kWait,
                "every member is lost; backup.auto_restore is off, so waiting for "
                "`stewardctl restore-backup NAME`");
  }
  return Make(RestoreAction::kStart,
              absl::StrCat("every member is lost: ", v.answered.size(),
                           " agents answer, among them a majority of the last voting members {",
                           absl::StrJoin(v.last_voters, ","), "}, and none holds data"));
}

DamagedBackupVerdict JudgeDamagedBackup(size_t members, size_t applied, size_t refused_damaged,
                                        bool automatic, bool settled) {
  DamagedBackupVerdict v;
  if (RuleOff("R8") || members == 0) return v;
  const size_t majority = members / 2 + 1;
  // Enough refusals that no majority can restore it; a member that applied it proves the DB
  // whole (the verdict is the same on every node), so then nothing is judged.
  if (applied > 0 || refused_damaged <= members - majority) return v;
  v.mark = true;
  v.replace = automatic && !settled;
  return v;
}

const char* RoundVerdictName(RoundVerdict v) {
  switch (v) {
    case RoundVerdict::kSettle:
      return "settle";
    case RoundVerdict::kWait:
      return "wait";
    case RoundVerdict::kMarkDamaged:
      return "mark-damaged";
    case RoundVerdict::kReplaceDamaged:
      return "replace-damaged";
    case RoundVerdict::kReplaceUnbumped:
      return "replace-unbumped";
  }
  return "?";
}

RoundVerdict JudgeRound(const RoundView& v) {
  if (DamagedBackupVerdict d =
          JudgeDamagedBackup(v.members, v.applied, v.refused_damaged, v.automatic, v.settled);
      d.mark) {
    return d.replace ? RoundVerdict::kReplaceDamaged : RoundVerdict::kMarkDamaged;
  }
  const size_t majority = v.members / 2 + 1;
  if (v.applied >= majority || (RuleOff("R10") && v.applied > 0)) return RoundVerdict::kSettle;
  // R9: those that can raise it are no majority, so it can never settle as ordered.
  if (v.bumped && v.automatic && !v.settled && v.cannot_bump > v.members - majority &&
      !RuleOff("R9")) {
    return RoundVerdict::kReplaceUnbumped;
  }
  return RoundVerdict::kWait;
}

bool CloseLostRestore(bool settled, size_t members, size_t empty) {
  if (RuleOff("R11")) return false;
  return settled && members > 0 && empty >= members / 2 + 1;
}

const char* RestoreStepName(RestoreStep s) {
  switch (s) {
    case RestoreStep::kPromise:
      return "promise";
    case RestoreStep::kRecheck:
      return "recheck";
    case RestoreStep::kOrder:
      return "order";
    case RestoreStep::kSettle:
      return "settle";
    case RestoreStep::kUnfence:
      return "unfence";
    case RestoreStep::kFinish:
      return "finish";
    case RestoreStep::kStop:
      return "stop";
  }
  return "?";
}

RestoreStep NextRestoreStep(const RestoreStepView& v) {
  if (!v.promised && !RuleOff("RC1")) return RestoreStep::kPromise;
  if (!v.rechecked && !RuleOff("RC2")) return RestoreStep::kRecheck;
  if (!v.settled || RuleOff("RC3")) {
    if (!v.round_done) return RestoreStep::kOrder;
    if (!v.round_settles && !RuleOff("RC4")) return RestoreStep::kStop;
    if (!v.settled) return RestoreStep::kSettle;
  }
  if (!v.unfenced && !RuleOff("RC5")) return RestoreStep::kUnfence;
  return RestoreStep::kFinish;
}

}  // namespace steward
