// stewardctl retire-unmanaged: removes the adopted members no agent manages, one at a time,
// each step chosen by NextRetirement (ctl/retire.h) on a fresh status.
#pragma once

#include "ctl/common.h"

namespace steward {

// `yes`: do not ask; `force`: go on when the backup taken first fails.
int RunRetireUnmanaged(const Common& c, bool yes, bool force);

}  // namespace steward
