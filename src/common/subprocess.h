// Runs a helper program (etcdctl) to completion with a deadline.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace steward {

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together, truncated to the last 64 KiB
};

// The environment a child (etcd, etcdctl, etcdutl) gets: the agent's, minus cloud
// credentials (AWS_*: the backup store's, never etcd's) and minus etcd's and etcdctl's own
// variables (ETCD_*, ETCDCTL_*), minus systemd's to the agent (NOTIFY_SOCKET, WATCHDOG_*,
// LISTEN_*), then `extra` ("K=V"). etcd >= 3.4 exits when a variable and a
// flag set the same thing (an ETCD_NAME set for another purpose would crash-loop it), and the
// agent renders every flag it means etcd to have.
std::vector<std::string> ChildEnvironment(const std::vector<std::string>& extra = {});
// The names of the agent's own ETCD_* / ETCDCTL_* variables that ChildEnvironment drops.
std::vector<std::string> DroppedEtcdVariables();

// Runs argv (argv[0] an absolute path) with extra `env` entries ("K=V"), killing it (by its
// pid) after `timeout`. DeadlineExceeded on timeout; the output is returned either way.
// `cancelled`, if set, is asked every 20 ms: once it says true the program is killed and the
// result is Cancelled (a shutting-down agent does not wait for a long restore).
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env,
                                         std::chrono::milliseconds timeout,
                                         const std::function<bool()>& cancelled = nullptr);

}  // namespace steward
