// bench/put_load: a steady writer, for bench/deltas. CLIENTS threads each put sequential keys
// PREFIX/<thread>/<n> with a VALUE_BYTES value, one put at a time (each acknowledged before the
// next), for SECONDS; every put's latency is recorded. Prints one line:
//   puts N errors E seconds S throughput T/s p50_ms X p99_ms Y
// (throughput and percentiles over the acknowledged puts only; E counts the failed ones).
// With --cacert/--cert/--key (etcdctl's names) it dials https endpoints with that client
// certificate, as bench/snapshot_probe does.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "client_args.h"
#include "etcd/client.h"

namespace {

// A positive (or, with allow_zero, non-negative) integer argument, or -1.
long ParseCount(const std::string& s, bool allow_zero) {
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < (allow_zero ? 0 : 1)) return -1;
  return v;
}

// Nearest-rank percentile of sorted values.
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

}  // namespace

int main(int argc, char** argv) {
  const bench::ClientArgs cli = bench::ParseClientArgs(argc, argv);
  const std::vector<std::string>& args = cli.positional;
  const long clients = args.size() == 5 ? ParseCount(args[1], false) : -1;
  const long seconds = args.size() == 5 ? ParseCount(args[2], false) : -1;
  const long value_bytes = args.size() == 5 ? ParseCount(args[3], true) : -1;
  if (args.size() != 5 || clients < 0 || seconds < 0 || value_bytes < 0 || args[4].empty()) {
    std::fprintf(stderr,
                 "usage: put_load [--cacert CA --cert CERT --key KEY] ENDPOINTS CLIENTS SECONDS "
                 "VALUE_BYTES PREFIX\n"
                 "  ENDPOINTS comma-separated; CLIENTS, SECONDS >= 1; VALUE_BYTES >= 0\n");
    return 2;
  }
  const std::vector<std::string> endpoints = absl::StrSplit(args[0], ',', absl::SkipEmpty());
  const std::string prefix = args[4];
  if (endpoints.empty()) {
    std::fprintf(stderr, "put_load: no endpoints\n");
    return 2;
  }

  steward::EtcdClient::Options options;
  if (!bench::ApplyTls(cli, "put_load", &options)) return 2;
  // One connection per endpoint, shared by the threads. EtcdClient sends every call to the
  // endpoint that answered last, so one client would put everything through one member: each
  // thread gets its own client with the endpoint list rotated by its index, which spreads the
  // threads over the members (as etcd's own client balances) and keeps failover.
  options.channels = steward::EtcdClient::NewChannelPool();

  std::vector<std::vector<double>> latencies(clients);
  std::vector<long> errors(clients, 0);
  std::mutex first_error_mu;
  std::string first_error;
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(seconds);
  std::vector<std::thread> threads;
  for (long t = 0; t < clients; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::string> mine;
      for (size_t i = 0; i < endpoints.size(); ++i) {
        mine.push_back(endpoints[(t + i) % endpoints.size()]);
      }
      steward::EtcdClient etcd(mine, options);
      const std::string key_prefix = prefix + "/" + std::to_string(t) + "/";
      auto& lat = latencies[t];
      lat.reserve(static_cast<size_t>(seconds) * 2000);
      // Fresh random bytes for every value: the deltas compress what is written, and repeated
      // content (even slices of one random buffer) would make that cost look smaller than
      // real data would.
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      std::string value(static_cast<size_t>(value_bytes), '\0');
      for (uint64_t n = 0; std::chrono::steady_clock::now() < deadline; ++n) {
        for (auto& c : value) c = static_cast<char>(rng());
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s = etcd.Put(key_prefix + std::to_string(n), value);
        const auto t1 = std::chrono::steady_clock::now();
        if (s.ok()) {
          lat.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        } else {
          ++errors[t];
          std::lock_guard<std::mutex> lock(first_error_mu);
          if (first_error.empty()) first_error = std::string(s.message());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  // Until the last put returned: the puts in flight at the deadline are counted, so is their time.
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<double> all;
  long failed = 0;
  for (long t = 0; t < clients; ++t) {
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
    failed += errors[t];
  }
  std::sort(all.begin(), all.end());
  if (!first_error.empty()) {
    std::fprintf(stderr, "put_load: %ld put(s) failed; the first: %s\n", failed,
                 first_error.c_str());
  }
  std::printf("puts %zu errors %ld seconds %.2f throughput %.1f/s p50_ms %.2f p99_ms %.2f\n",
              all.size(), failed, elapsed, all.size() / elapsed, Percentile(all, 50),
              Percentile(all, 99));
  return all.empty() ? 1 : 0;
}
