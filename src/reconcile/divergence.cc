#include "reconcile/divergence.h"

#include <algorithm>

#include "common/metrics.h"
#include "spdlog/spdlog.h"

namespace steward {

std::map<std::string, int> CountDiverged(const std::map<std::string, int>& streak,
                                         const HashVerdict& v) {
  std::map<std::string, int> out;
  for (const auto& m : v.differing) {
    auto it = streak.find(m);
    out[m] = (it == streak.end() ? 0 : it->second) + 1;
  }
  for (const auto& m : v.unknown) {
    if (auto it = streak.find(m); it != streak.end()) out[m] = it->second;
  }
  return out;
}

absl::StatusOr<HashVerdict> DivergenceWatch::CheckNow(EtcdApi& etcd) {
  last_run_ = clock_->Now();
  due_now_ = false;
  // HashKV reads the whole keyspace: generous, a large DB takes seconds.
  absl::StatusOr<HashVerdict> v = CompareMembers(etcd, std::chrono::seconds(30));
  if (!v.ok()) return v;
  streak_ = CountDiverged(streak_, *v);
  const char* result = !v->differing.empty() ? "differs"
                       : v->split            ? "split"
                       : v->majority         ? "agree"
                                             : "incomplete";
  Metrics::Global().Add("steward_hash_checks_total", 1, {{"result", result}});
  Metrics::Global().Clear("steward_member_data_differs");
  for (const auto& m : v->agreeing) {
    Metrics::Global().Set("steward_member_data_differs", 0, {{"member", m}});
  }
  for (const auto& m : v->differing) {
    Metrics::Global().Set("steward_member_data_differs", 1, {{"member", m}});
  }
  if (!last_ || last_->text != v->text) {
    if (!v->differing.empty() || v->split) {
      spdlog::warn("hash check {}", v->text);
    } else {
      spdlog::debug("hash check {}", v->text);
    }
  }
  last_ = *v;
  return v;
}

bool DivergenceWatch::Maybe(EtcdApi& etcd) {
  if (interval_.count() == 0) return false;  // cluster.hash_check_interval: 0 (off)
  // Named, not yet confirmed: look again soon. A confirmed one waits for the interval (it is
  // repaired, or with repair off only reported).
  const bool suspect = std::any_of(streak_.begin(), streak_.end(),
                                   [](const auto& e) { return e.second < kDivergedChecks; });
  const auto now = clock_->Now();
  // A suspect is looked at again at once (but not more than once a second).
  const auto wait = suspect ? std::chrono::milliseconds(1000) : interval_;
  if (!due_now_ && last_run_ && now - *last_run_ < wait) return false;
  if (absl::StatusOr<HashVerdict> v = CheckNow(etcd); !v.ok()) {
    spdlog::debug("hash check: {}", std::string(v.status().message()));
  }
  return true;
}

std::map<std::string, std::string> DivergenceWatch::Diverged() const {
  std::map<std::string, std::string> out;
  if (!last_) return out;
  for (const auto& [m, n] : streak_) {
    if (n >= kDivergedChecks && std::count(last_->differing.begin(), last_->differing.end(), m)) {
      out[m] = last_->text;
    }
  }
  return out;
}

}  // namespace steward
