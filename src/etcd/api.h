// The calls the agent's control code makes to an etcd cluster, as an interface: EtcdClient
// (client.h) implements it over gRPC, and the deterministic simulation (tests/sim/) implements
// it over a model of etcd. Semantics, deadlines and error codes are EtcdClient's (client.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "etcd_rpc.pb.h"

namespace steward {

struct MemberInfo {
  uint64_t id = 0;
  std::string name;  // empty until the member has started and published itself
  std::vector<std::string> peer_urls;
  std::vector<std::string> client_urls;
  bool is_learner = false;
};

struct MemberStatus {
  std::string endpoint;
  uint64_t member_id = 0;
  uint64_t cluster_id = 0;
  int64_t revision = 0;  // the member's store revision
  std::string version;
  int64_t db_size = 0;
  int64_t db_size_in_use = 0;
  uint64_t leader = 0;  // 0: no leader known to this member
  uint64_t raft_index = 0;
  uint64_t raft_term = 0;
  uint64_t raft_applied_index = 0;
  bool is_learner = false;
  // Status.errors: etcd lists active alarms here ("memberID:... alarm:NOSPACE"); an alarm is
  // not a sign that the member is down (see FailureErrors).
  std::vector<std::string> errors;
};

// The entries of `errors` that are not alarms: what makes a member unhealthy.
std::vector<std::string> FailureErrors(const MemberStatus& st);
// The alarms among `errors` ("NOSPACE", "CORRUPT"), for display.
std::vector<std::string> AlarmErrors(const MemberStatus& st);
class EtcdApi;
// Several keys in one linearizable read (a transaction of ranges): nullopt for a missing key.
absl::StatusOr<std::vector<std::optional<std::string>>> GetKeys(
    EtcdApi& etcd, const std::vector<std::string>& keys);
// Member IDs in human output, as etcdctl prints them.
std::string HexId(uint64_t id);

// Changes to a few keys, pushed by etcd over one open stream (etcd's Watch).
class KeyWatch {
 public:
  virtual ~KeyWatch() = default;
  // Waits up to `timeout` for changes: the events (empty when none came in time). An error
  // when the stream broke (etcd went away, the start revision was compacted, Cancel()): the
  // watch is then useless, open another.
  virtual absl::StatusOr<std::vector<etcdserverpb::Event>> Wait(
      std::chrono::milliseconds timeout) = 0;
  // Thread-safe: a pending or later Wait returns CANCELLED at once.
  virtual void Cancel() = 0;
  // The member that serves the watch (0 if unknown).
  virtual uint64_t member_id() const { return 0; }
  // The member's revision when it created the watch (0 if unknown): every change up to it
  // comes through the watch before any later one.
  virtual int64_t created_revision() const { return 0; }
  // The member's revision as of the newest message read (0 if unknown): how far the changes
  // still to be read reach.
  virtual int64_t header_revision() const { return 0; }
};

// A lease kept alive over one open stream (etcd's LeaseKeepAlive).
class LeaseStream {
 public:
  virtual ~LeaseStream() = default;
  // One keep-alive round trip: NotFound when the lease has expired; any other error leaves the
  // stream broken (open another, or use EtcdApi::LeaseKeepAliveOnce).
  virtual absl::Status KeepAlive(int64_t lease, std::chrono::milliseconds timeout) = 0;
};

class EtcdApi {
 public:
  virtual ~EtcdApi() = default;

  // The client URLs this handle talks to.
  virtual const std::vector<std::string>& endpoints() const = 0;

  // --- cluster-wide ---
  // `cluster_id`, if given, receives the ID of the cluster that answered (etcd 3.4 serves the
  // member list locally, so a member that missed a restore answers with its old cluster).
  virtual absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cluster_id = nullptr) = 0;
  // The member list from a member that has just served a linearizable read, so it holds every
  // membership change committed before the call. A member cut off from its leader, or one that
  // was removed and has not learned it yet, serves a stale list under the same cluster ID: a
  // destructive decision (a wipe, a removal) must not rest on one.
  virtual absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(
      uint64_t* cluster_id = nullptr) = 0;
  virtual absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>& peer_urls,
                                               bool learner) = 0;
  virtual absl::Status MemberRemove(uint64_t id) = 0;
  virtual absl::Status MemberPromote(uint64_t id) = 0;
  virtual absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0) = 0;
  // nullopt when the key does not exist. Linearizable.
  virtual absl::StatusOr<std::optional<std::string>> Get(const std::string& key) = 0;
  virtual absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds ttl) = 0;
  virtual absl::Status LeaseRevoke(int64_t lease) = 0;
  virtual absl::StatusOr<std::vector<int64_t>> LeaseLeases() = 0;
  // NotFound when the lease has expired.
  virtual absl::Status LeaseKeepAliveOnce(int64_t lease) = 0;
  virtual absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) = 0;

  // Streams, opened on the endpoint that answered last. Unimplemented by default: callers then
  // poll (the simulation's etcd and the test fakes have no streams).
  // A watch on `keys` (each a single key) for every change after `after_revision`.
  virtual absl::StatusOr<std::unique_ptr<KeyWatch>> WatchKeys(
      const std::vector<std::string>& /*keys*/, int64_t /*after_revision*/,
      std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no watch streams");
  }
  // Every change to keys in [key, range_end) (etcd's range_end: "\0" with key "\0" is the
  // whole keyspace) after `after_revision`, over one stream. Nothing is read ahead of Wait()
  // beyond the transport's flow-control window (EtcdClient: 1 MiB, on a connection of its
  // own), and etcd sends no message larger than its request bound (a larger response comes
  // in pieces, which Wait() joins at revisions): the caller's pace sets the memory it costs,
  // and a slow reader leaves the backlog in etcd.
  virtual absl::StatusOr<std::unique_ptr<KeyWatch>> WatchRange(
      const std::string& /*key*/, const std::string& /*range_end*/, int64_t /*after_revision*/,
      std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no watch streams");
  }
  virtual absl::StatusOr<std::unique_ptr<LeaseStream>> OpenLeaseStream(
      std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no lease streams");
  }

  // --- one endpoint ---
  // Maintenance.HashKV of whichever member answers: etcd's hash of its MVCC keys and values
  // from after its compaction revision up to `revision`, and that compaction revision.
  // Unimplemented by default (the simulation's etcd and the test fakes have none).
  struct KvHash {
    uint32_t hash = 0;
    int64_t compact_revision = 0;
  };
  virtual absl::StatusOr<KvHash> HashKV(int64_t /*revision*/,
                                        std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no HashKV");
  }
  // Maintenance.MoveLeader, asked of `leader_endpoint` (the etcd leader's client URL), to
  // voting member `target`. Unimplemented by default.
  virtual absl::Status MoveLeader(const std::string& /*leader_endpoint*/, uint64_t /*target*/,
                                  std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no MoveLeader");
  }
  // Maintenance.Defragment of the member at `endpoint` (it blocks that member until done).
  // Unimplemented by default (the simulation's etcd has none).
  virtual absl::Status Defragment(const std::string& /*endpoint*/,
                                  std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no Defragment");
  }
  // The same of the member at `endpoint` (etcd/agreement.h compares members by it).
  virtual absl::StatusOr<KvHash> HashKVOf(const std::string& /*endpoint*/, int64_t /*revision*/,
                                          std::chrono::milliseconds /*timeout*/) {
    return absl::UnimplementedError("no HashKV");
  }
  virtual absl::StatusOr<MemberStatus> Status(const std::string& endpoint,
                                              std::chrono::milliseconds timeout) = 0;
  // Streams a snapshot of `endpoint`'s backend to `sink` (the last 32 bytes of the stream are
  // etcd's sha256 of the rest). Returns the number of bytes received.
  virtual absl::StatusOr<uint64_t> Snapshot(
      const std::string& endpoint, const std::function<absl::Status(std::string_view)>& sink,
      std::chrono::milliseconds timeout) = 0;
};

}  // namespace steward
