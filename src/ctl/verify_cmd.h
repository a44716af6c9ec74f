// stewardctl verify-backup: a restore drill (backup/drill.h) of one backup, on demand.
#pragma once

#include "ctl/common.h"

namespace steward {

void AddVerifyCommands(CLI::App& app, Common* common, Commands* commands);

}  // namespace steward
