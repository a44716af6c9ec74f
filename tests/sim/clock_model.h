// Time, as a model: one virtual steady time for all nodes (World::now), and each node's wall
// clock with its skew (a fault sets it, or makes it jump). Sleeping advances virtual time and is
// a crash point: the agent's code may die or stop there. Single-threaded.
#pragma once

#include <chrono>

#include "common/clock.h"

namespace steward::sim {

class World;

// Virtual time, per node: one steady time for all, wall time with the node's skew.
class SimClock : public Clock {
 public:
  SimClock(World* w, int node) : w_(w), node_(node) {}
  std::chrono::steady_clock::time_point Now() override;
  std::chrono::system_clock::time_point WallNow() override;
  void SleepFor(std::chrono::milliseconds d) override;

 private:
  World* w_;
  int node_;
};

}  // namespace steward::sim
