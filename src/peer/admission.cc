#include "peer/admission.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rules.h"

namespace steward {
namespace {

std::string Hex(uint64_t id) { return absl::StrFormat("%x", id); }

}  // namespace

Admission AdmitOrder(const OrderView& v) {
  if (v.roles_checked && !v.caller_is_agent) {
    return {absl::PermissionDeniedError(
                v.role_error.empty() ? std::string("the caller is not an agent of this cluster")
                                     : v.role_error),
            "A1"};
  }
  if (v.term > kMaxTerm) {
    return {
        absl::InvalidArgumentError(absl::StrCat("order from ", v.leader, ": term ", v.term,
                                                " is beyond any real term (max ", kMaxTerm, ")")),
        "A2"};
  }
  if (v.term > v.newest_term && v.term - v.newest_term > kMaxTermJump) {
    return {absl::InvalidArgumentError(absl::StrCat("order from ", v.leader, ": term ", v.term,
                                                    " jumps more than ", kMaxTermJump, " above ",
                                                    v.newest_term)),
            "A3"};
  }
  if (!v.is_promise && v.term == v.newest_term && !v.newest_leader.empty() &&
      v.leader != v.newest_leader) {
    return {absl::FailedPreconditionError(absl::StrCat("order from ", v.leader, ": term ", v.term,
                                                       " is held by ", v.newest_leader)),
            "A4"};
  }
  if ((v.is_promise ? v.term <= v.newest_term : v.term < v.newest_term) && !RuleOff("A5")) {
    return {absl::FailedPreconditionError(absl::StrCat(
                v.is_promise ? "promise to " : "stale order from ", v.leader, ": term ", v.term,
                v.is_promise ? " is not newer than " : " is older than term ", v.newest_term)),
            "A5"};
  }
  return {absl::OkStatus(), "A6"};
}

WipeDecision DecideWipe(const WipeView& v) {
  if (!v.has_member_data) return {WipeAction::kNothing, absl::OkStatus(), "W1"};
  if (!v.member_id) {
    return {
        WipeAction::kRefuse,
        absl::FailedPreconditionError(absl::StrCat(
            "refusing to wipe: cannot tell which member the data belongs to: ", v.identity_error)),
        "W2"};
  }
  if (!v.list_ok) {
    return {WipeAction::kRefuse,
            absl::UnavailableError(
                absl::StrCat("refusing to wipe: cannot read the member list: ", v.list_error)),
            "W3"};
  }
  if (v.leader_cluster_id != 0 && v.list_cluster_id != v.leader_cluster_id && !RuleOff("W4")) {
    return {WipeAction::kRefuse,
            absl::UnavailableError(absl::StrCat(
                "refusing to wipe: the member list came from cluster ", Hex(v.list_cluster_id),
                ", not from the leader's cluster ", Hex(v.leader_cluster_id))),
            "W4"};
  }
  for (uint64_t id : v.member_ids) {
    if (id == *v.member_id && !RuleOff("W5")) {
      return {WipeAction::kRefuse,
              absl::FailedPreconditionError(absl::StrCat("refusing to wipe: member ", Hex(id),
                                                         " is still in the member list")),
              "W5"};
    }
  }
  return {WipeAction::kSetAside, absl::OkStatus(), "W6"};
}

}  // namespace steward
