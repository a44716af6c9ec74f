#include "reconcile/restart_roll.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/rules.h"

namespace steward {

nlohmann::json RestartRollToJson(const RestartRoll& r) {
  return {{"id", r.id},
          {"by", r.by},
          {"reason", r.reason},
          {"since", r.since},
          {"pending_only", r.pending_only},
          {"nodes", r.nodes}};
}

absl::StatusOr<RestartRoll> RestartRollFromJson(const std::string& text) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the restart roll is not a JSON object");
  }
  RestartRoll r;
  auto string_field = [&](const char* key, std::string* out) -> absl::Status {
    if (!j.contains(key) || !j[key].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the restart roll's \"", key, "\" is missing or not a string"));
    }
    *out = j[key].get<std::string>();
    return absl::OkStatus();
  };
  for (auto [key, out] : {std::pair{"id", &r.id}, {"by", &r.by}, {"reason", &r.reason}}) {
    if (absl::Status s = string_field(key, out); !s.ok()) return s;
  }
  if (r.id.empty()) return absl::InvalidArgumentError("the restart roll's \"id\" is empty");
  if (!j.contains("since") || !j["since"].is_number_integer()) {
    return absl::InvalidArgumentError("the restart roll's \"since\" is not a number");
  }
  r.since = j["since"].get<int64_t>();
  r.pending_only = j.value("pending_only", false);
  if (!j.contains("nodes") || !j["nodes"].is_array()) {
    return absl::InvalidArgumentError("the restart roll's \"nodes\" is not a list");
  }
  for (const auto& n : j["nodes"]) {
    if (!n.is_string() || n.get<std::string>().empty()) {
      return absl::InvalidArgumentError("the restart roll's \"nodes\" holds a non-name");
    }
    r.nodes.push_back(n.get<std::string>());
  }
  return r;
}

namespace {

const NodeView* NodeNamed(const ClusterObservation& o, const std::string& name) {
  for (const auto& n : o.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

const MemberView* MemberOf(const ClusterObservation& o, const NodeView& n) {
  for (const auto& m : o.members) {
    if (m.peer_url == n.peer_url) return &m;
  }
  return nullptr;
}

// RS3: the healthy voter other than `leader` furthest along, or nullptr.
const MemberView* SuccessorOf(const ClusterObservation& o, const MemberView& leader) {
  const MemberView* best = nullptr;
  for (const auto& m : o.members) {
    if (m.id == leader.id || m.is_learner || !m.healthy) continue;
    if (best == nullptr || m.raft_index > best->raft_index) best = &m;
  }
  return best;
}

}  // namespace

std::vector<std::string> RestartsLeft(const RestartRoll& roll, const ClusterObservation& o) {
  std::vector<std::string> left;
  for (const auto& name : roll.nodes) {
    const NodeView* n = NodeNamed(o, name);
    if (n == nullptr || MemberOf(o, *n) == nullptr) continue;  // no longer a member's node
    if (n->restarted_for != roll.id) left.push_back(name);
  }
  return left;
}

Step PlanRestart(const ClusterObservation& o) {
  if (!o.restart) return MakeStep(StepKind::kNone, "no restart roll");
  const RestartRoll& roll = *o.restart;
  const std::vector<std::string> left = RestartsLeft(roll, o);
  if (left.empty()) {  // RS1
    return MakeStep(StepKind::kNone, absl::StrCat("restart roll ", roll.id, " done"));
  }
  const std::string head = absl::StrCat("restart roll ", roll.id, " (", roll.reason, "): ");
  // RS2: a follower first, in the order asked; the etcd leader only when it is the last.
  const NodeView* pick = nullptr;
  const MemberView* member = nullptr;
  for (const auto& name : left) {
    const NodeView* n = NodeNamed(o, name);
    const MemberView* m = MemberOf(o, *n);
    if (pick == nullptr || (member->is_etcd_leader && !m->is_etcd_leader)) {
      pick = n;
      member = m;
    }
  }
  if (!pick->paused.empty()) {  // RS4
    return MakeStep(StepKind::kWait,
                    absl::StrCat(head, "waits: node ", pick->name, " is paused ", pick->paused));
  }
  if (!pick->agent_up) {  // RS5
    return MakeStep(StepKind::kWait,
                    absl::StrCat(head, "waits: the agent on ", pick->name, " does not answer"));
  }
  const std::string which =
      absl::StrCat(left.size(), " of ", roll.nodes.size(), " left: ", absl::StrJoin(left, ", "));
  if (member->is_etcd_leader && !RuleOff("RS3")) {
    if (const MemberView* to = SuccessorOf(o, *member)) {
      Step s =
          MakeStep(StepKind::kMoveLeader,
                   absl::StrCat(head, "etcd leadership moves from ", MemberLabel(*member), " to ",
                                MemberLabel(*to), " before its restart (", which, ")"));
      s.node = pick->name;
      s.member_id = to->id;
      return s;
    }
  }
  Step s =
      MakeStep(StepKind::kRestart,
               absl::StrCat(head, "restarting ", MemberLabel(*member),
                            pick->pending_restart.empty()
                                ? ""
                                : absl::StrCat(" for ", absl::StrJoin(pick->pending_restart, " ")),
                            " (", which, ")"));
  s.node = pick->name;
  s.member_id = member->id;
  s.restart_id = roll.id;
  return s;
}

}  // namespace steward
