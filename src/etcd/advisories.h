// Known problems of etcd releases, as data: one table of version ranges, each with the upstream
// issue, what it breaks and what to do (docs/etcd-versions.md lists the same table). Status,
// /metrics and adoption show a member's advisories; configure-cluster refuses a roll to a version
// whose advisory breaks data or membership, unless --force.
// Thread-safe: a constant table and pure functions.
#pragma once

#include <string>
#include <vector>

namespace steward {

enum class AdvisoryEffect {
  kEndOfLife,   // no longer supported upstream: no fixes, security ones included
  kWarning,     // a known problem; running it is allowed
  kRefuseRoll,  // a roll to it breaks data or membership: refused unless --force
};

struct EtcdAdvisory {
  const char* id;     // stable name, the metric's label: "eol-3.4", "etcd-13766"
  const char* first;  // the first affected version, inclusive ("3.5.0")
  const char* last;   // the last affected version, inclusive ("3.5.2")
  AdvisoryEffect effect;
  const char* issue;   // the upstream reference ("etcd #13766")
  const char* breaks;  // what goes wrong, in a sentence
  const char* action;  // what to do about it
};

// Every advisory, in the order of the table.
const std::vector<EtcdAdvisory>& EtcdAdvisories();
// Those whose range holds `version` ("3.5.16"); none for a string that is not a version.
std::vector<const EtcdAdvisory*> AdvisoriesFor(const std::string& version);
// The first of them that refuses a roll to `version`, or nullptr.
const EtcdAdvisory* RollRefusal(const std::string& version);
// "end of life", "warning", "refuses a roll".
const char* EffectName(AdvisoryEffect e);
// One line: "etcd-13766 (3.5.0-3.5.2, etcd #13766): <breaks> <action>".
std::string AdvisoryLine(const EtcdAdvisory& a);

// The patch etcd's upgrade guide requires every member to run before a minor upgrade: a roll
// into `to_minor` ("3.6") starts only once every member runs `at_least` or later of the minor
// below (rule U9, reconcile/plan.h).
struct UpgradeRequirement {
  const char* to_minor;
  const char* at_least;
  const char* source;
};
// The requirement for a roll to `version` ("3.6.4"), or nullptr if the table has none.
const UpgradeRequirement* UpgradeRequirementFor(const std::string& version);

}  // namespace steward
