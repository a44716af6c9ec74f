#include "etcd/advisories.h"

#include "absl/strings/str_cat.h"
#include "etcd/version.h"

namespace steward {

// Sources: etcd's support policy (the current and the previous minor are supported; the 3.6
// announcement gave 3.4 one extended year, to 2026-05-15), the etcd issues named, and gardener's
// etcd-druid upgrade notes for the 3.5.24 boundary. "x.y.999" closes a whole minor.
const std::vector<EtcdAdvisory>& EtcdAdvisories() {
  static const std::vector<EtcdAdvisory> table = {
      {"eol-3.3", "3.3.0", "3.3.999", AdvisoryEffect::kEndOfLife, "etcd support policy",
       "etcd 3.3 has had no fixes, security ones included, since etcd 3.5.0 (2021-06).",
       "Roll to 3.5.24 or later, one minor at a time (configure-cluster --etcd-version 3.4.x, "
       "then 3.5.x)."},
      {"eol-3.4", "3.4.0", "3.4.999", AdvisoryEffect::kEndOfLife, "etcd support policy",
       "etcd 3.4 has had no fixes, security ones included, since 2026-05-15.",
       "Roll to 3.5.24 or later (configure-cluster --etcd-version 3.5.x; docs/etcd-versions.md "
       "says how to get one on Debian 12)."},
      {"etcd-13766", "3.5.0", "3.5.2", AdvisoryEffect::kRefuseRoll, "etcd #13766",
       "A member that crashes at the wrong moment can come back with data that differs from the "
       "others'; the etcd maintainers advised against these releases in production.",
       "Run 3.5.3 or later; the leader's divergence check (docs/running.md, \"A member whose "
       "data differs\") shows whether members already differ."},
      {"etcd-19557", "3.5.1", "3.5.23", AdvisoryEffect::kWarning, "etcd #19557, #20793",
       "A learner's promotion is not written to the backend (bbolt), so a cluster that grew by "
       "learners, as etcd-steward's always does, later fails to upgrade to 3.6 (\"membership: "
       "too many learner members in cluster\").",
       "Roll to 3.5.24 or later before any upgrade to 3.6: a fixed 3.5 rewrites the backend's "
       "membership from its raft state when it starts. Each agent checks its member's backend "
       "(steward_etcd_membership_mismatch)."},
      // Fixed on the release-3.5 branch on 2026-05-11 (etcd #21737); the range takes 3.5.30,
      // the first patch Debian shipped after that, as the first fixed one.
      {"etcd-21694", "3.4.0", "3.5.29", AdvisoryEffect::kWarning, "etcd #21694",
       "A MemberUpdate (new peer URLs) on a learner clears its learner flag: the member list "
       "shows a voter that raft still treats as a learner, and a second learner can be added.",
       "Never update a learner's peer URLs on these versions: remove it and add it again "
       "(etcd-steward updates no learner)."},
  };
  return table;
}

namespace {
bool InRange(const std::vector<int>& v, const EtcdAdvisory& a) {
  auto first = ParseVersion(std::string(a.first));
  auto last = ParseVersion(std::string(a.last));
  return first && last && v >= *first && v <= *last;
}
}  // namespace

std::vector<const EtcdAdvisory*> AdvisoriesFor(const std::string& version) {
  std::vector<const EtcdAdvisory*> out;
  auto v = ParseVersion(version);
  if (!v) return out;
  for (const auto& a : EtcdAdvisories()) {
    if (InRange(*v, a)) out.push_back(&a);
  }
  return out;
}

const EtcdAdvisory* RollRefusal(const std::string& version) {
  for (const EtcdAdvisory* a : AdvisoriesFor(version)) {
    if (a->effect == AdvisoryEffect::kRefuseRoll) return a;
  }
  return nullptr;
}

const char* EffectName(AdvisoryEffect e) {
  switch (e) {
    case AdvisoryEffect::kEndOfLife:
      return "end of life";
    case AdvisoryEffect::kWarning:
      return "warning";
    case AdvisoryEffect::kRefuseRoll:
      return "refuses a roll";
  }
  return "?";
}

std::string AdvisoryLine(const EtcdAdvisory& a) {
  return absl::StrCat(a.id, " (", a.first, "-", a.last, ", ", a.issue, ", ", EffectName(a.effect),
                      "): ", a.breaks, " ", a.action);
}

const UpgradeRequirement* UpgradeRequirementFor(const std::string& version) {
  // Raised with the guide: docs/etcd-3.6.md ("Plan (U9)") says where each figure comes from.
  static const UpgradeRequirement kTable[] = {
      {"3.6", "3.5.32", "etcd's 3.5 -> 3.6 upgrade guide and the July 2026 patch releases"},
  };
  auto v = ParseVersion(version);
  if (!v) return nullptr;
  for (const auto& r : kTable) {
    auto minor = ParseVersion(std::string(r.to_minor) + ".0");
    if (minor && (*minor)[0] == (*v)[0] && (*minor)[1] == (*v)[1]) return &r;
  }
  return nullptr;
}

}  // namespace steward
