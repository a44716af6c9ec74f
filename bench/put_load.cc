// bench/put_load: a steady writer, for bench/deltas. CLIENTS threads each put sequential keys
// PREFIX/<thread>/<n> with a VALUE_BYTES value, one put at a time (each acknowledged before the
// next), for SECONDS; every put's latency is recorded. Prints one line:
//   puts N errors E seconds S throughput T/s p50_ms X p99_ms Y
// (throughput and percentiles over the acknowledged puts only; E counts the failed ones),
// then the bytes of values acknowledged and the longest put.
// With --cacert/--cert/--key (etcdctl's names) it dials https endpoints with that client
// certificate, as bench/snapshot_probe does. For bench/scale:
//   --values k8s      Kubernetes-like values of 1-10 KiB under /registry/configmaps/...
//                     (bench/k8s_values.h); PREFIX is then ignored and VALUE_BYTES must be 0
//   --until-bytes N   stop once N bytes of values are acknowledged (SECONDS stays the bound)
//   --batch N         N puts per transaction (default 1; a fill, not a client's pattern)
//   --ack-log FILE    one line per acknowledged put: "<unix ms> <thread> <n>"
//   --stop-file FILE  stop once FILE exists (SECONDS stays the bound)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "client_args.h"
#include "etcd/client.h"
#include "k8s_values.h"

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
  bench::ClientArgs cli = bench::ParseClientArgs(argc, argv);
  bool k8s = false;
  long until_bytes = 0, batch = 1;
  std::string ack_log, stop_file;
  std::vector<std::string> args;
  for (size_t i = 0; i < cli.positional.size(); ++i) {
    const std::string& a = cli.positional[i];
    const bool has_value = i + 1 < cli.positional.size();
    if (a == "--values" && has_value) {
      k8s = cli.positional[++i] == "k8s";
      if (!k8s) until_bytes = -1;  // the only kind there is: refused below
    } else if (a == "--until-bytes" && has_value) {
      until_bytes = ParseCount(cli.positional[++i], false);
    } else if (a == "--batch" && has_value) {
      batch = ParseCount(cli.positional[++i], false);
    } else if (a == "--ack-log" && has_value) {
      ack_log = cli.positional[++i];
    } else if (a == "--stop-file" && has_value) {
      stop_file = cli.positional[++i];
    } else {
      args.push_back(a);
    }
  }
  const long clients = args.size() == 5 ? ParseCount(args[1], false) : -1;
  const long seconds = args.size() == 5 ? ParseCount(args[2], false) : -1;
  const long value_bytes = args.size() == 5 ? ParseCount(args[3], true) : -1;
  if (args.size() != 5 || clients < 0 || seconds < 0 || value_bytes < 0 || args[4].empty() ||
      until_bytes < 0 || batch < 1 || (k8s && value_bytes != 0)) {
    std::fprintf(stderr,
                 "usage: put_load [--cacert CA --cert CERT --key KEY] [--values k8s] "
                 "[--until-bytes N] [--batch N] [--ack-log FILE] [--stop-file FILE] ENDPOINTS "
                 "CLIENTS SECONDS "
                 "VALUE_BYTES PREFIX\n"
                 "  ENDPOINTS comma-separated; CLIENTS, SECONDS >= 1; VALUE_BYTES >= 0 "
                 "(0 with --values k8s)\n");
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
  std::vector<std::vector<std::pair<int64_t, uint64_t>>> acks(clients);  // (unix ms, n)
  std::atomic<long> bytes_acked{0};
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
      auto done = [&] {
        return std::chrono::steady_clock::now() >= deadline ||
               (until_bytes > 0 && bytes_acked.load() >= until_bytes) ||
               (!stop_file.empty() && std::filesystem::exists(stop_file));
      };
      for (uint64_t n = 0; !done(); n += static_cast<uint64_t>(batch)) {
        etcdserverpb::TxnRequest txn;
        long bytes = 0;
        for (long b = 0; b < batch; ++b) {
          auto* put = txn.add_success()->mutable_request_put();
          if (k8s) {
            put->set_key(bench::K8sKey(t, n + b));
            put->set_value(bench::K8sValue(rng, t, n + b));
          } else {
            for (auto& c : value) c = static_cast<char>(rng());
            put->set_key(key_prefix + std::to_string(n + b));
            put->set_value(value);
          }
          bytes += static_cast<long>(put->value().size());
        }
        const auto t0 = std::chrono::steady_clock::now();
        absl::Status s;
        if (batch == 1) {
          s = etcd.Put(txn.success(0).request_put().key(), txn.success(0).request_put().value());
        } else {
          s = etcd.Txn(txn).status();
        }
        const auto t1 = std::chrono::steady_clock::now();
        if (s.ok()) {
          lat.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
          bytes_acked += bytes;
          if (!ack_log.empty()) {
            const int64_t ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
            for (long b = 0; b < batch; ++b) acks[t].emplace_back(ms, n + b);
          }
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
  if (!ack_log.empty()) {
    std::FILE* f = std::fopen(ack_log.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "put_load: cannot write %s\n", ack_log.c_str());
      return 1;
    }
    for (long t = 0; t < clients; ++t) {
      for (const auto& [ms, n] : acks[t]) {
        std::fprintf(f, "%lld %ld %llu\n", static_cast<long long>(ms), t,
                     static_cast<unsigned long long>(n));
      }
    }
    std::fclose(f);
  }
  if (!first_error.empty()) {
    std::fprintf(stderr, "put_load: %ld put(s) failed; the first: %s\n", failed,
                 first_error.c_str());
  }
  // A "put" is one request: with --batch N, one transaction of N puts.
  std::printf(
      "puts %zu errors %ld seconds %.2f throughput %.1f/s p50_ms %.2f p99_ms %.2f bytes %ld "
      "max_ms %.2f\n",
      all.size(), failed, elapsed, all.size() / elapsed, Percentile(all, 50), Percentile(all, 99),
      bytes_acked.load(), all.empty() ? 0.0 : all.back());
  return all.empty() ? 1 : 0;
}
