// Time as the control code sees it, behind an interface so the deterministic simulation
// (tests/sim/) can run the same code on virtual time. Real() is the process's clocks.
//
// Thread-safe (Real()); a simulated clock belongs to its single-threaded simulation.
#pragma once

#include <chrono>

namespace steward {

class Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic: for intervals and deadlines.
  virtual std::chrono::steady_clock::time_point Now() = 0;
  // Wall time: for what is written down (backup names, records) and etcd's member-ID seconds.
  virtual std::chrono::system_clock::time_point WallNow() = 0;
  virtual void SleepFor(std::chrono::milliseconds d) = 0;

  // Whole Unix seconds of WallNow().
  int64_t UnixSeconds() {
    return std::chrono::duration_cast<std::chrono::seconds>(WallNow().time_since_epoch()).count();
  }

  static Clock* Real();
};

}  // namespace steward
