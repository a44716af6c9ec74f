// Switching safety rules off, for mutation testing only: the deterministic simulation
// (tests/sim/) turns a rule off to show that it finds the data loss the rule prevents. Nothing
// in the agent or stewardctl calls SetRulesOffForTesting, so in production RuleOff() is false.
//
// Not thread-safe to set while decisions run; the simulation is single-threaded.
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace steward {

// True if `rule` (e.g. "R3", "S7", "W5") is switched off.
bool RuleOff(std::string_view rule);
void SetRulesOffForTesting(std::set<std::string> rules);

}  // namespace steward
