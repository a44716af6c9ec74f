// The words the membership planner (plan.cc) and the upgrade planner (plan_upgrade.cc) build
// their steps' reasons with.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "reconcile/plan.h"

namespace steward::plan_text {

inline std::string Hex(uint64_t id) { return absl::StrFormat("%x", id); }

// "n2 (8e9e05c52164694d)"
inline std::string Label(const MemberView& m) {
  return absl::StrCat(m.name.empty() ? "(unnamed)" : m.name, " (", Hex(m.id), ")");
}

inline std::string Secs(std::chrono::milliseconds d) {
  return absl::StrCat(d.count() / 1000, "s");
}

inline Step Make(StepKind kind, std::string reason) {
  Step s;
  s.kind = kind;
  s.reason = std::move(reason);
  return s;
}

}  // namespace steward::plan_text
