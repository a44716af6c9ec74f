// The etcd model's state: clusters (their member lists, learners started or not, the raft
// leader, the committed revision, the acknowledged writes as a ledger, a small KV store with
// leases for the steward's own keys), and the etcd binaries' versions (Options::upgraded).
//
// What a cluster does on its own (elect a leader among a reachable majority of its voters,
// bring the quorum side up to date, stop a removed member, expire leases) and what etcd does
// when the runner starts it (start on its data, bootstrap, join) are World methods, in
// etcd_cluster.cc; the API the agents call is SimEtcd (etcd_api.h). Single-threaded, as the
// whole simulation.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "sim/simulation.h"

namespace steward::sim {

// Options::upgraded: the two binaries, and what each says to --version.
inline constexpr char kEtcd34[] = "/usr/bin/etcd";
inline constexpr char kEtcd35[] = "/opt/etcd-3.5.16/etcd";
inline std::string VersionOfBinary(const std::string& path) {
  return path == kEtcd35 ? "3.5.16" : "3.4.23";
}

struct Kv {
  std::string value;
  int64_t create = 0, mod = 0, version = 0, lease = 0;
};

struct Member {
  uint64_t id = 0;
  std::string name;  // empty until started (runtime-added members)
  std::string peer_url;
  bool learner = false;
  bool started = false;
};

using Writes = std::vector<std::pair<int64_t, int>>;  // (revision, write id), acknowledged

struct Cluster {
  uint64_t id = 0;
  std::vector<Member> members;
  std::set<uint64_t> removed;
  int64_t rev = 1;
  Writes writes;
  std::map<std::string, Kv> kv;
  std::map<int64_t, std::pair<Ms, Ms>> leases;  // id -> (expiry, ttl)
  int64_t next_lease = 0x1000;
  uint64_t leader = 0;
  bool had_leader = false;
  std::string origin;  // "bootstrap" or "restore <id>"
  // Whether any member has served clients. A restored cluster does only once a member drops its
  // fence: before that it holds nothing but the backup and the deltas replayed (all in the
  // store), and replacing it loses nothing (RestoreCoordinator::Supersede).
  bool served = true;
};

// The key an acknowledged write is stored under in a delta (the model's etcd keeps writes as a
// ledger, not as keys): a replay putting it back brings the write back.
inline constexpr absl::string_view kWriteKeyPrefix = "sim-w/";

// "--name=value" flags as the runner gets them (RenderEtcdFlags).
inline std::string Flag(const std::vector<std::string>& flags, const std::string& name) {
  const std::string prefix = "--" + name + "=";
  for (const auto& f : flags) {
    if (f.rfind(prefix, 0) == 0) return f.substr(prefix.size());
  }
  return "";
}

// Folds member IDs into a cluster ID (the same members and token: the same cluster).
inline uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

}  // namespace steward::sim
