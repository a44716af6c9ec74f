#include "node/hang_decision.h"

#include "absl/strings/str_cat.h"
#include "common/rules.h"

namespace steward {

const char* HangActionName(HangAction a) {
  switch (a) {
    case HangAction::kHealthy:
      return "healthy";
    case HangAction::kWait:
      return "wait";
    case HangAction::kStuck:
      return "stuck";
    case HangAction::kRestart:
      return "restart";
  }
  return "?";
}

namespace {

HangDecision Decide(HangAction action, const char* rule, std::string reason) {
  return {action, rule, std::move(reason)};
}

std::string Secs(std::chrono::milliseconds d) { return absl::StrCat(d.count() / 1000, "s"); }

}  // namespace

HangDecision DecideHang(const HangView& v) {
  if (v.own_reads) return Decide(HangAction::kHealthy, "H1", "");
  const std::string who = absl::StrCat("etcd on ", v.node);
  if (!v.wanted || !v.has_pid) {
    return Decide(HangAction::kWait, "H2", absl::StrCat(who, " is not running"));
  }
  if (!v.busy.empty()) {
    return Decide(HangAction::kWait, "H2", absl::StrCat(who, " does not answer reads: ", v.busy));
  }
  if (!v.others_serve && !RuleOff("H3")) {
    return Decide(HangAction::kWait, "H3",
                  absl::StrCat(who,
                               " does not answer reads, nor do the other members: a quorum "
                               "problem, not this member's; not restarting it"));
  }
  if (v.defragmenting) {
    return Decide(HangAction::kWait, "H4",
                  absl::StrCat(who, " does not answer reads while it defragments"));
  }
  if (v.unanswered_for < v.bound) {
    return Decide(HangAction::kWait, "H5",
                  absl::StrCat(who, " has not answered a read for ", Secs(v.unanswered_for),
                               " while the other members serve; it is restarted in place after ",
                               Secs(v.bound)));
  }
  if (v.process_state == 'D') {
    return Decide(HangAction::kStuck, "H6",
                  absl::StrCat(who,
                               " does not respond: its data dir's filesystem does not "
                               "complete writes (the process waits in uninterruptible I/O "
                               "for ",
                               Secs(v.unanswered_for), "); a restart cannot help"));
  }
  if (v.restarts >= kMaxHangRestarts) {
    return Decide(HangAction::kStuck, "H7",
                  absl::StrCat(who, " still does not answer reads after ", v.restarts,
                               " restarts in place; left to the leader's rules for a dead "
                               "member"));
  }
  return Decide(
      HangAction::kRestart, "H8",
      absl::StrCat(
          who, " has not answered a read for ", Secs(v.unanswered_for),
          " while the other members serve",
          v.process_state == 'T' || v.process_state == 't' ? " (its process is stopped)" : "",
          ": restarting it in place"));
}

}  // namespace steward
