// The words the membership planner (plan.cc) and the upgrade planner (plan_upgrade.cc) build
// their steps' reasons with. Only plain values here: what names a member or makes a step is
// in plan.h (MemberLabel, MakeStep), so that this header needs nothing of the planner's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace steward::plan_text {

inline std::string Hex(uint64_t id) { return absl::StrFormat("%x", id); }

inline std::string Secs(std::chrono::milliseconds d) { return absl::StrCat(d.count() / 1000, "s"); }

}  // namespace steward::plan_text
