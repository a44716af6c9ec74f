// Whether a node admits an order, and whether it may wipe its member: pure functions of what
// the agent knows when the order arrives. No I/O: the peer server and the agent gather the
// views (the caller's certificate, the persisted newest term, the WAL's identity, the other
// members' list) and act on the result; tests/unit/admission_test.cc tables each rule.
//
// Order admission (AdmitOrder), in order, the first rule that refuses decides:
//   A1 with TLS, only a certificate carrying this cluster's agent role may give orders
//      (PermissionDenied); an operator's or an application's certificate may only read state;
//   A2 a term above kMaxTerm is refused (InvalidArgument): `newest + 1` must never wrap;
//   A3 a term more than kMaxTermJump above the newest admitted is refused (InvalidArgument): a
//      persisted absurd term would fence out every real leader for good;
//   A4 one term, one leader: an order with the newest term from another leader is stale
//      (FailedPrecondition) — the first holder of a term may still be giving orders with it;
//   A5 an order older than the newest term is stale; a promise must be strictly newer
//      (FailedPrecondition), so two coordinators never both collect a majority for one term;
//   A6 otherwise admitted; the term is recorded (persisted) before the order runs.
//
// Wipe admission (DecideWipe), the first rule that applies decides:
//   W1 no member data: nothing to wipe (OK, nothing done);
//   W2 the WAL does not say which member the data is: refuse (FailedPrecondition);
//   W3 the other members' list cannot be read: refuse (Unavailable);
//   W4 the list came from another cluster than the leader's (etcd 3.4 serves member lists
//      locally, so a member that missed a restore answers for its old cluster): refuse
//      (Unavailable);
//   W5 the member is still in the list: refuse (FailedPrecondition) — only a member that was
//      removed is provably replaced;
//   W6 otherwise: set the data aside.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace steward {

inline constexpr uint64_t kMaxTerm = uint64_t{1} << 62;
inline constexpr uint64_t kMaxTermJump = uint64_t{1} << 48;

struct OrderView {
  std::string what;  // "join", "wipe", "promise"... for messages
  bool is_promise = false;
  bool roles_checked = false;  // TLS on: the caller's role is known
  bool caller_is_agent = false;
  std::string role_error;  // why the caller is not an agent of this cluster
  uint64_t term = 0;
  std::string leader;
  uint64_t newest_term = 0;   // the newest term admitted (persisted)
  std::string newest_leader;  // who gave it ("" if unknown: agents before roles)
};

struct Admission {
  absl::Status status;  // OK: admit, and record `term`
  std::string rule;     // "A1".."A6"
};

Admission AdmitOrder(const OrderView& v);

struct WipeView {
  bool has_member_data = false;
  // The member the WAL belongs to; unset with `identity_error` when it cannot be read.
  std::optional<uint64_t> member_id;
  std::string identity_error;
  bool list_ok = false;
  std::string list_error;
  uint64_t list_cluster_id = 0;    // the cluster whose member answered the list
  uint64_t leader_cluster_id = 0;  // the cluster the leader's order names (0: an old leader)
  std::vector<uint64_t> member_ids;
};

enum class WipeAction { kNothing, kRefuse, kSetAside };

struct WipeDecision {
  WipeAction action = WipeAction::kRefuse;
  absl::Status status;  // the refusal
  std::string rule;     // "W1".."W6"
};

WipeDecision DecideWipe(const WipeView& v);

}  // namespace steward
