// Rolling etcd upgrades (and the way back): which member switches its etcd version next, or why
// none may yet. Pure, as the membership planner in plan.cc is; rules U1-U8 are in plan.h.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rules.h"
#include "etcd/advisories.h"
#include "reconcile/plan.h"
#include "reconcile/plan_text.h"

namespace steward {

std::string ClusterVersion(const ClusterObservation& o) {
  std::string highest;
  bool all_desired = !o.desired_version.empty();
  bool any = false;
  for (const auto& m : o.members) {
    if (!ParseVersion(m.version)) continue;
    any = true;
    all_desired = all_desired && m.version == o.desired_version;
    if (highest.empty() || *ParseVersion(m.version) > *ParseVersion(highest)) highest = m.version;
  }
  if (!any) return "";
  return all_desired ? o.desired_version : highest;
}

std::string VersionBlock(const NodeView& n, const std::string& version) {
  if (version.empty() || n.binaries.empty() || RuleOff("EV2")) return "";
  if (PickBinary(n.binaries, version) != nullptr) return "";
  return NoBinaryFor(n.name, version, n.binaries);
}

std::optional<Step> PlanVersionRecovery(const ClusterObservation& o, const MemberView& down) {
  const std::string& desired = o.desired_version;
  auto want = ParseVersion(desired);
  if (!want || std::find(o.available_versions.begin(), o.available_versions.end(), desired) ==
                   o.available_versions.end()) {
    return std::nullopt;
  }
  const NodeView* node = nullptr;
  for (const auto& n : o.nodes) {
    if (n.peer_url == down.peer_url) node = &n;
  }
  if (node == nullptr || !node->agent_up || !node->has_data || node->switched_version.empty() ||
      node->switched_version == desired) {
    return std::nullopt;
  }
  // Only back to the minor version the running members have: never below it (U4), and never
  // above it — a member restarting in the middle of a round (switched to this round's target,
  // not yet healthy) must not be jumped a further minor version ahead of the others.
  bool any = false;
  for (const auto& m : o.members) {
    if (!m.healthy) continue;
    auto v = ParseVersion(m.version);
    if (!v) return std::nullopt;
    any = true;
    if ((*want)[0] != (*v)[0] || (*want)[1] != (*v)[1]) return std::nullopt;
  }
  if (!any) return std::nullopt;
  Step s =
      MakeStep(StepKind::kSwitchVersion, absl::StrCat("member ", MemberLabel(down),
                                                      " has been down since it was switched to "
                                                      "etcd ",
                                                      node->switched_version, "; back to ", desired,
                                                      " as the spec now says"));
  s.node = node->name;
  s.member_id = down.id;
  s.version = desired;
  return s;
}

// U2, on every node: the target's binary is there and is that version. Checked before any
// member switches: a careful operator runs `etcd --version` on every node first.
static std::optional<Step> BinaryNotReady(const ClusterObservation& o, const std::string& target) {
  for (const auto& n : o.nodes) {
    if (!n.agent_up || n.removed || n.binaries.empty()) continue;
    const EtcdBinary* b = nullptr;
    for (const auto& x : n.binaries) {
      if (x.key == target) b = &x;
    }
    if (b != nullptr && b->reported == target) continue;
    return MakeStep(
        StepKind::kWait,
        absl::StrCat("rolling upgrade to etcd ", target, " waits: on node ", n.name, ", ",
                     b == nullptr          ? "etcd.versions has no entry for it"
                     : b->reported.empty() ? absl::StrCat("etcd.versions[", target, "] (", b->path,
                                                          ") reports no version: ", b->error)
                                           : absl::StrCat("etcd.versions[", target, "] (", b->path,
                                                          ") reports etcd ", b->reported),
                     "; fix it there (the agent checks again when it restarts)"));
  }
  return std::nullopt;
}

// A member no agent manages (an adopted cluster's) cannot be switched: a roll that left the
// cluster half upgraded for good helps nobody. Retire those first.
static std::optional<Step> UnmanagedMemberBlocks(const ClusterObservation& o,
                                                 const std::string& desired) {
  for (const auto& m : o.adopting ? o.members : std::vector<MemberView>{}) {
    bool managed = false;
    for (const auto& n : o.nodes) managed = managed || n.peer_url == m.peer_url;
    if (!managed) {
      return MakeStep(StepKind::kWait,
                      absl::StrCat("etcd ", desired, " is desired, but member ", MemberLabel(m),
                                   " is on no configured node and no agent can upgrade it "
                                   "(retire the unmanaged members first: stewardctl "
                                   "retire-unmanaged)"));
    }
  }
  return std::nullopt;
}

// U3: the cluster's version, the lowest minor any member runs, into `*lowest`.
static std::optional<Step> ClusterVersion(const ClusterObservation& o, std::vector<int>* lowest) {
  for (const auto& m : o.members) {
    auto v = ParseVersion(m.version);
    if (!v) {
      return MakeStep(StepKind::kWait, absl::StrCat("the etcd version of member ", MemberLabel(m),
                                                    " is not known yet"));
    }
    if (lowest->empty() || (*v)[0] < (*lowest)[0] ||
        ((*v)[0] == (*lowest)[0] && (*v)[1] < (*lowest)[1])) {
      *lowest = *v;
    }
  }
  return std::nullopt;
}

// U4 and U5: this round's target, the next minor above the cluster's `lowest` up to the
// desired `want`, into `*target` (the desired version itself when it is that minor).
static std::optional<Step> RoundTarget(const ClusterObservation& o, const std::vector<int>& want,
                                       const std::vector<int>& lowest, std::string* target) {
  const std::string& desired = o.desired_version;
  if (want[0] < lowest[0] || (want[0] == lowest[0] && want[1] < lowest[1])) {
    return MakeStep(StepKind::kWait,
                    absl::StrCat("etcd ", desired, " is older than the cluster's version ",
                                 lowest[0], ".", lowest[1],
                                 ": etcd does not support downgrades (restore a "
                                 "backup taken on that version instead)"));
  }
  if (want[0] != lowest[0]) {
    return MakeStep(StepKind::kWait, absl::StrCat("etcd ", desired,
                                                  ": a change of major version "
                                                  "is not a rolling upgrade"));
  }
  *target = desired;
  if (want[1] <= lowest[1] + 1) return std::nullopt;
  const int minor = lowest[1] + 1;
  target->clear();
  std::vector<int> best;
  for (const auto& v : o.available_versions) {
    auto p = ParseVersion(v);
    if (p && (*p)[0] == lowest[0] && (*p)[1] == minor && (best.empty() || *p > best)) {
      best = *p;
      *target = v;
    }
  }
  if (!target->empty()) return std::nullopt;
  return MakeStep(StepKind::kWait,
                  absl::StrCat("etcd ", desired, " is ", want[1] - lowest[1],
                               " minor versions above the cluster's ", lowest[0], ".", lowest[1],
                               "; upgrades go one minor version at a time, and etcd.versions has "
                               "no ",
                               lowest[0], ".", minor, " binary"));
}

// U9: into a minor the upgrade guide gates on a patch of the minor below (etcd/advisories.h),
// only once every member runs it or later.
static std::optional<Step> BelowRequiredPatch(const ClusterObservation& o,
                                              const std::string& target) {
  const UpgradeRequirement* req = UpgradeRequirementFor(target);
  if (req == nullptr || RuleOff("U9")) return std::nullopt;
  const auto at_least = ParseVersion(req->at_least);
  for (const auto& m : o.members) {
    if (m.version == target) continue;  // switched already
    const auto v = ParseVersion(m.version);
    if (v && at_least && *v >= *at_least) continue;
    return MakeStep(
        StepKind::kWait,
        absl::StrCat("rolling upgrade to etcd ", target, " waits: member ", MemberLabel(m),
                     " runs etcd ", m.version, "; ", req->source, " require ", req->at_least,
                     " or later on every member first: "
                     "roll to ",
                     req->at_least,
                     " or later first "
                     "(configure-cluster --etcd-version)"));
  }
  return std::nullopt;
}

// U6: a follower not yet at `target` switches; the etcd leader last.
static Step SwitchNextMember(const ClusterObservation& o, const std::string& target) {
  const std::string& desired = o.desired_version;
  const MemberView* pick = nullptr;
  for (const auto& m : o.members) {
    if (m.version == target) continue;
    if (pick == nullptr || (pick->is_etcd_leader && !m.is_etcd_leader)) pick = &m;
  }
  if (pick == nullptr) return MakeStep(StepKind::kNone, "every member runs etcd " + target);
  const NodeView* node = nullptr;
  for (const auto& n : o.nodes) {
    if (n.peer_url == pick->peer_url) node = &n;
  }
  if (node == nullptr || !node->agent_up) {
    return MakeStep(StepKind::kWait,
                    absl::StrCat("member ", MemberLabel(*pick), " runs etcd ", pick->version,
                                 ", and its agent does not answer"));
  }
  Step s =
      MakeStep(StepKind::kSwitchVersion,
               absl::StrCat("rolling upgrade to etcd ", desired,
                            target == desired ? "" : absl::StrCat(" (this round: ", target, ")"),
                            ": member ", MemberLabel(*pick), " from ", pick->version,
                            pick->is_etcd_leader ? " (the etcd leader, last)" : ""));
  s.node = node->name;
  s.member_id = pick->id;
  s.version = target;
  return s;
}

Step PlanUpgrade(const ClusterObservation& o) {
  const std::string& desired = o.desired_version;
  if (desired.empty()) return MakeStep(StepKind::kNone, "no desired etcd version");
  auto want = ParseVersion(desired);
  if (!want)
    return MakeStep(StepKind::kWait,
                    absl::StrCat("desired etcd version \"", desired, "\" is not a version"));
  // U1: everyone is there.
  bool all = true;
  for (const auto& m : o.members) all = all && m.version == desired;
  if (all) return MakeStep(StepKind::kNone, absl::StrCat("every member runs etcd ", desired));
  if (auto wait = UnmanagedMemberBlocks(o, desired)) return *wait;
  // U2
  if (std::find(o.available_versions.begin(), o.available_versions.end(), desired) ==
      o.available_versions.end()) {
    return MakeStep(StepKind::kWait, absl::StrCat("etcd ", desired,
                                                  " is desired, but etcd.versions "
                                                  "has no binary for it"));
  }
  std::vector<int> lowest;
  if (auto wait = ClusterVersion(o, &lowest)) return *wait;
  std::string target;
  if (auto wait = RoundTarget(o, *want, lowest, &target)) return *wait;
  if (auto wait = BinaryNotReady(o, target)) return *wait;      // U2, on every node
  if (auto wait = BelowRequiredPatch(o, target)) return *wait;  // U9
  return SwitchNextMember(o, target);
}

}  // namespace steward
