// The agent's Prometheus metrics: one process-wide registry that the parts of the agent write
// into (the reconciler, the backup scheduler, the agent at scrape time) and the admin server
// renders in Prometheus' text format (version 0.0.4). Names follow Prometheus' conventions:
// the steward_ prefix, _total for counters, _seconds and _bytes for units. Every name is
// declared once in metrics.cc with its type and help; writing an undeclared name is a bug
// (it aborts in debug builds and is dropped otherwise).
//
// It lives in common/ so that any layer may write into it without reaching up to the admin
// port, which only serves Render() (the agent hands it to admin/server.h as a callback).
//
// Thread-safe.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"

namespace steward {

using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  // The registry the agent uses.
  static Metrics& Global();

  void Set(const std::string& name, double value, const MetricLabels& labels = {});
  void Add(const std::string& name, double delta = 1, const MetricLabels& labels = {});
  // Forgets every series of `name` (a gauge that only the leader reports, after it stops).
  void Clear(const std::string& name);
  // The text format: # HELP and # TYPE for every declared metric with at least one series.
  std::string Render() const;
  // For tests: the value of one series, or `missing`.
  double Value(const std::string& name, const MetricLabels& labels = {}, double missing = -1) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::map<MetricLabels, double>> series_ ABSL_GUARDED_BY(mu_);
};

}  // namespace steward
