// `stewardctl status`: the cluster's view (reconcile/cluster_status.h, which the agent's status
// page gathers too) rendered for a terminal.
#pragma once

#include <cstdint>
#include <string>

#include "nlohmann/json.hpp"
#include "reconcile/cluster_status.h"

namespace steward {

std::string RenderStatusTable(const ClusterView& view);

// ReadStewardState's lines under `stewardctl status` and `get`, ages as of `now` (Unix seconds).
std::string DescribeStewardState(const nlohmann::json& steward, int64_t now);

// "1.5 MB" style sizes for tables.
std::string HumanBytes(int64_t n);

}  // namespace steward
