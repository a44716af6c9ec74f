// stewardctl pki rotate-ca: replaces the CA of tls.mode issued on a running cluster, node by
// node, in three phases (pki/ca_rotation.h), without taking the cluster down.
#pragma once

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

// Adds `rotate-ca` under `pki`.
void AddRotateCaCommand(CLI::App* pki, Common* common, Commands* commands);

}  // namespace steward
