// `make sim`: runs SEEDS seeds from SEED on, STEPS steps each, and prints a summary. The same
// command always prints the same results (virtual time, seeded randomness, one thread).
//
//   steward_sim [--seeds N] [--steps M] [--seed S] [--nodes K] [--no-faults]
//               [--rules-off R1,W5,...] [--trace] [--trace-lines N]
//               [--fault-rate P] [--crash-rate P] [--lose-first-leader]
//               [--destroy-at STEP --undestroy-at STEP]   (the operator destroys, then undoes)
//               [--deltas MS]   (delta backups every MS virtual ms; default none)
//               [--no-etcdutl]  (etcd 3.4 alone: restores raise the revision in place)
//               [--in-place-refusals P]  (the share of backups the in-place edit refuses)
//               [--etcdutl-nodes K]  (only the first K nodes have etcdutl)
//               [--upgraded]  (the cluster runs 3.5.16, every etcd.binary is 3.4.23)
//               [--diverge]  (flip-value faults: a member's data differs; the hash check)
//               [--restart-every N]  (stewardctl restart every N steps: the restart roll)
// Exit status: 0 if every seed kept every invariant, 1 otherwise (the first failing seed's
// trace is printed, with the command that replays it).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <string>

#include "absl/strings/str_split.h"
#include "sim/simulation.h"

int main(int argc, char** argv) {
  int seeds = 1, steps = 5000, nodes = 4;
  uint64_t seed = 1;
  bool faults = true, trace = false, lose_first_leader = false, etcdutl = true, upgraded = false,
       diverge = false;
  int restart_every = 0;
  int etcdutl_nodes = -1;
  size_t trace_lines = 60;
  int destroy_at = -1, undestroy_at = -1;
  long long delta_every = 0;
  double in_place_refusals = 0;
  double fault_rate = steward::sim::Options().fault_rate;
  double crash_rate = steward::sim::Options().crash_point_rate;
  std::set<std::string> off;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seeds")
      seeds = std::stoi(next());
    else if (a == "--steps")
      steps = std::stoi(next());
    else if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--nodes")
      nodes = std::stoi(next());
    else if (a == "--no-faults")
      faults = false;
    else if (a == "--lose-first-leader")
      lose_first_leader = true;
    else if (a == "--trace")
      trace = true;
    else if (a == "--fault-rate")
      fault_rate = std::stod(next());
    else if (a == "--crash-rate")
      crash_rate = std::stod(next());
    else if (a == "--trace-lines")
      trace_lines = std::stoul(next());
    else if (a == "--destroy-at")
      destroy_at = std::stoi(next());
    else if (a == "--undestroy-at")
      undestroy_at = std::stoi(next());
    else if (a == "--deltas")
      delta_every = std::stoll(next());
    else if (a == "--no-etcdutl")
      etcdutl = false;
    else if (a == "--upgraded")
      upgraded = true;
    else if (a == "--diverge")
      diverge = true;
    else if (a == "--restart-every")
      restart_every = std::stoi(next());
    else if (a == "--etcdutl-nodes")
      etcdutl_nodes = std::stoi(next());
    else if (a == "--in-place-refusals")
      in_place_refusals = std::stod(next());
    else if (a == "--rules-off") {
      for (auto r : absl::StrSplit(next(), ',', absl::SkipEmpty())) off.insert(std::string(r));
    } else {
      std::cerr << "usage: steward_sim [--seeds N] [--steps M] [--seed S] [--nodes K] "
                   "[--no-faults] [--rules-off R1,W5] [--trace] [--destroy-at STEP "
                   "--undestroy-at STEP] [--deltas MS] [--no-etcdutl] [--etcdutl-nodes K] "
                   "[--in-place-refusals P] [--diverge] [--restart-every N]\n";
      return 2;
    }
  }
  std::map<std::string, int> faults_total;
  long long total_steps = 0, virtual_ms = 0;
  int failed = 0, live = 0, waiting = 0;
  long long acked = 0, lost_faults = 0, lost_restores = 0, restores = 0, bootstraps = 0, wipes = 0;
  long long deltas = 0, replayed = 0;
  std::string first_failure;
  const auto t0 = std::chrono::steady_clock::now();
  for (int k = 0; k < seeds; ++k) {
    steward::sim::Options o;
    o.seed = seed + static_cast<uint64_t>(k);
    o.steps = steps;
    o.nodes = nodes;
    o.faults = faults;
    o.lose_first_leader = lose_first_leader;
    o.disabled_rules = off;
    o.trace_lines = trace_lines;
    o.fault_rate = fault_rate;
    o.crash_point_rate = crash_rate;
    o.destroy_at = destroy_at;
    o.undestroy_at = undestroy_at;
    o.delta_every = delta_every;
    o.etcdutl = etcdutl;
    o.etcdutl_nodes = etcdutl_nodes;
    o.in_place_refusals = in_place_refusals;
    o.upgraded = upgraded;
    o.diverge = diverge;
    o.restart_every = restart_every;
    auto r = steward::sim::RunSimulation(o);
    total_steps += r.steps;
    virtual_ms += r.virtual_ms;
    for (const auto& [kind, n] : r.faults) faults_total[kind] += n;
    acked += r.writes_acked;
    lost_faults += r.writes_lost_to_faults;
    lost_restores += r.writes_lost_to_restores;
    restores += r.restores;
    deltas += r.deltas;
    replayed += r.writes_replayed;
    bootstraps += r.bootstraps;
    wipes += r.wipes;
    if (r.live_at_end)
      ++live;
    else if (r.ok)
      ++waiting;
    if (trace || (!r.ok && failed == 0)) {
      std::cout << "--- seed " << o.seed << (r.ok ? " ok" : " FAILED") << ": "
                << (r.ok ? r.end_state : r.violation) << "\n";
      for (const auto& line : r.trace) std::cout << "  " << line << "\n";
    }
    if (!r.ok) {
      if (failed == 0) {
        std::cout << "replay: steward_sim --seed " << o.seed << " --steps " << steps << " --nodes "
                  << nodes << (off.empty() ? "" : " --rules-off ...") << "\n";
        first_failure = "seed " + std::to_string(o.seed) + ": " + r.violation;
      }
      ++failed;
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("seeds %d (from %llu), steps %lld, virtual time %.1f h\n", seeds,
              static_cast<unsigned long long>(seed), total_steps, virtual_ms / 3.6e6);
  std::printf("faults:");
  for (const auto& [kind, n] : faults_total) std::printf(" %s=%d", kind.c_str(), n);
  std::printf(
      "\nwrites acknowledged %lld, lost to faults that took every copy %lld, given up "
      "by justified restores %lld\n",
      acked, lost_faults, lost_restores);
  std::printf(
      "restores %lld, bootstraps %lld, wipes %lld; healthy at the end %d, waiting for "
      "an operator %d\n",
      restores, bootstraps, wipes, live, waiting);
  if (delta_every > 0) {
    std::printf("delta backups stored %lld; writes restores replayed from them %lld\n", deltas,
                replayed);
  }
  std::fflush(stdout);
  std::printf("violations: %d%s%s\n", failed, failed ? " — first: " : "", first_failure.c_str());
  // Wall-clock speed goes to stderr: stdout is the same on every run.
  std::fprintf(stderr, "%.0f steps/s (%.2f s)\n", total_steps / secs, secs);
  return failed == 0 ? 0 : 1;
}
