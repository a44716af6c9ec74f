#include "common/rules.h"

namespace steward {
namespace {
std::set<std::string>& Off() {
  static std::set<std::string> off;
  return off;
}
}  // namespace

bool RuleOff(std::string_view rule) {
  const auto& off = Off();
  return !off.empty() && off.count(std::string(rule)) > 0;
}

void SetRulesOffForTesting(std::set<std::string> rules) { Off() = std::move(rules); }

}  // namespace steward
