// Jittered, capped exponential backoff for retry loops (etcd restarts, RPC retries).
//
// Not thread-safe: each retry loop owns its own Backoff.
#pragma once

#include <chrono>
#include <cstdint>
#include <random>

namespace steward {

class Backoff {
 public:
  // initial > 0, max >= initial. jitter in [0, 1]: each delay is drawn uniformly from
  // [d * (1 - jitter), d] so agents that fail together do not retry in lockstep.
  Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter = 0.2,
          uint64_t seed = std::random_device{}());

  // The delay to wait before the next attempt; doubles the base up to max.
  std::chrono::milliseconds Next();
  // Back to the initial delay (call after a success).
  void Reset();
  // The un-jittered delay the next call to Next() starts from.
  std::chrono::milliseconds current() const { return current_; }

 private:
  std::chrono::milliseconds initial_;
  std::chrono::milliseconds max_;
  double jitter_;
  std::chrono::milliseconds current_;
  std::mt19937_64 rng_;
};

}  // namespace steward
