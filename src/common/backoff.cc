#include "common/backoff.h"

#include <algorithm>

namespace steward {

Backoff::Backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double jitter,
                 uint64_t seed)
    : initial_(initial),
      max_(std::max(max, initial)),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      current_(initial),
      rng_(seed) {}

std::chrono::milliseconds Backoff::Next() {
  const auto base = current_;
  current_ = std::min(max_, current_ * 2);
  std::uniform_real_distribution<double> dist(1.0 - jitter_, 1.0);
  return std::chrono::milliseconds(static_cast<int64_t>(base.count() * dist(rng_)));
}

void Backoff::Reset() { current_ = initial_; }

}  // namespace steward
