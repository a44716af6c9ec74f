// Runs a helper program (etcdctl) to completion with a deadline.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace steward {

struct ProcessResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together, truncated to the last 64 KiB
};

// Runs argv (argv[0] an absolute path) with extra `env` entries ("K=V"), killing it (by its
// pid) after `timeout`. DeadlineExceeded on timeout; the output is returned either way.
absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::vector<std::string>& env,
                                         std::chrono::milliseconds timeout);

}  // namespace steward
