// stewardctl: the operator's command-line tool. A library so tests can drive it in-process.
#pragma once

namespace steward {

// Exit status: 0 success (for `status`: the cluster is healthy), 1 the command ran but the
// cluster is not healthy or the operation failed, 2 bad usage or config.
int CtlMain(int argc, char** argv);

}  // namespace steward
