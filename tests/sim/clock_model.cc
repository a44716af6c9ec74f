#include "sim/clock_model.h"

#include <algorithm>

#include "sim/world.h"

namespace steward::sim {

using std::chrono::milliseconds;

std::chrono::steady_clock::time_point SimClock::Now() {
  return std::chrono::steady_clock::time_point(milliseconds(w_->now() + 1'000'000));
}
std::chrono::system_clock::time_point SimClock::WallNow() {
  return std::chrono::system_clock::time_point(milliseconds(w_->Wall(node_)));
}
void SimClock::SleepFor(milliseconds d) {
  w_->CallPoint(node_);
  w_->Sleep(std::max<Ms>(1, d.count()));
}

}  // namespace steward::sim
