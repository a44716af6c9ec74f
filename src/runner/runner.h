// Runs the node's etcd and keeps it running.
//
// A Runner owns one etcd on one data dir. After Run(flags) it starts etcd and restarts it
// whenever it exits, with jittered, capped exponential backoff, until Stop(). It never starts a
// second etcd on the same data dir: an etcd left running by a previous agent (found by Adopt())
// is supervised as it is, not restarted.
//
// Thread-safe: all public methods may be called from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace steward {

class Runner {
 public:
  virtual ~Runner() = default;
  // Looks for an etcd a previous agent left running on this data dir and, if found, supervises
  // it from now on. Returns its pid. Call before Run().
  virtual std::optional<pid_t> Adopt() = 0;
  // Desired state: etcd running with `flags` (argv without argv[0]). If etcd already runs
  // (started earlier or adopted), it keeps running; `flags` apply from its next start.
  virtual void Run(std::vector<std::string> flags) = 0;
  // Stops etcd (SIGTERM, SIGKILL after the stop timeout) and supervising it. Blocks until the
  // process is gone. OK if nothing was running.
  virtual absl::Status Stop() = 0;
  // The same with a grace period of its own before SIGKILL: for an etcd whose acknowledged
  // writes are all on disk (etcd fsyncs before it acknowledges) and that must be back fast.
  virtual absl::Status Stop(std::chrono::milliseconds grace) = 0;
  // Whether etcd should be running (Run() was called and Stop() was not since).
  virtual bool wanted() const = 0;
  // The pid of the running etcd, if one runs now.
  virtual std::optional<pid_t> pid() const = 0;
  // How many times etcd was started by this runner after exiting on its own.
  virtual int restarts() const = 0;
  // The etcd binary (process runner) or image (static-pod runner) for the next start: a
  // rolling upgrade's step stops etcd, calls this, and runs it again.
  virtual void SetBinary(const std::string& binary_or_image) = 0;
  // The binary or image the next start uses.
  virtual std::string binary() const = 0;
  // The flags the etcd running now was started with (argv without argv[0]): what a changed
  // config waits on (a pending restart). nullopt if none runs or they cannot be read.
  virtual std::optional<std::vector<std::string>> running_flags() const = 0;
};

}  // namespace steward
