// The steward leader's check that every member holds the same data (etcd/agreement.h), run
// every cluster.hash_check_interval, at once after a member (re)starts or a restore ends, and
// on every pass while a member is suspected. A member counts as diverged (MemberView.diverged,
// plan rule DV4) only once two checks in a row have named it; the reconciler checks once more
// right before it removes one.
//
// Not thread-safe: the reconcile thread owns it.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "common/clock.h"
#include "etcd/agreement.h"
#include "etcd/api.h"

namespace steward {

// How many checks in a row must name a member before it counts as diverged.
inline constexpr int kDivergedChecks = 2;

// The counting alone (pure): `streak` holds, per member, how many checks in a row named it;
// returns it after `v`. A member the verdict does not name starts again from 0; a member not
// compared (DV1) keeps its count, so a check it missed neither confirms nor clears it.
std::map<std::string, int> CountDiverged(const std::map<std::string, int>& streak,
                                         const HashVerdict& v);

class DivergenceWatch {
 public:
  DivergenceWatch(Clock* clock, std::chrono::milliseconds interval)
      : clock_(clock), interval_(interval) {}

  // Check now at the next Maybe() (a member restarted, a restore ended).
  void Soon() { due_now_ = true; }
  // Runs a check if one is due; returns whether it ran.
  bool Maybe(EtcdApi& etcd);
  // One check now; the verdict (or why there is none).
  absl::StatusOr<HashVerdict> CheckNow(EtcdApi& etcd);

  // Members named in kDivergedChecks checks in a row, with the last verdict's text.
  std::map<std::string, std::string> Diverged() const;
  // The last verdict ("" before the first), for status and the history.
  const std::optional<HashVerdict>& last() const { return last_; }
  // Forget a member (it was removed: its next incarnation starts clean).
  void Forget(const std::string& member) { streak_.erase(member); }

 private:
  Clock* clock_;
  std::chrono::milliseconds interval_;
  bool due_now_ = true;  // the first pass of a new leader checks
  std::optional<std::chrono::steady_clock::time_point> last_run_;
  std::map<std::string, int> streak_;
  std::optional<HashVerdict> last_;
};

}  // namespace steward
