// A small etcd v3 client over gRPC: the calls the agent and stewardctl make.
//
// Every call has a deadline (Options::timeout unless said otherwise). Cluster-wide calls try
// the endpoints in turn, starting with the last one that answered; idempotent calls move on
// after UNAVAILABLE or DEADLINE_EXCEEDED, mutating ones (MemberAdd, MemberRemove, MemberPromote)
// only after UNAVAILABLE, because a timed-out change may still have been applied (re-read the
// member list before retrying one). Member IDs are uint64 throughout.
//
// Thread-safe: calls may be made from several threads; channels are shared.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"
#include "etcd/api.h"
#include "etcd_rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace steward {

// A role's key permission (etcd's authpb.Permission). range_end empty: the one key `key`;
// "\0": every key from `key` on; otherwise [key, range_end).
struct RolePermission {
  enum Type { kRead = 0, kWrite = 1, kReadWrite = 2 } type = kRead;
  std::string key;
  std::string range_end;
};

struct AlarmInfo {
  uint64_t member_id = 0;
  std::string alarm;  // "NOSPACE", "CORRUPT"
};

// "http://host:port" -> "host:port"; returns the input when it has no scheme.
std::string GrpcTarget(const std::string& url);

class EtcdClient : public EtcdApi {
 public:
  struct ChannelPool;  // one channel per endpoint, shared by clients (Options::channels)
  struct Options {
    std::chrono::milliseconds timeout{5000};
    // Plain-text when null; TLS credentials plug in here.
    std::shared_ptr<grpc::ChannelCredentials> credentials;
    // Per endpoint, when set (an adopted cluster's members may need other credentials than
    // the agents' own); a null result falls back to `credentials`.
    std::function<std::shared_ptr<grpc::ChannelCredentials>(const std::string& endpoint)>
        credentials_for;
    // Clients given the same pool share one channel (one connection) per endpoint; each keeps
    // its own endpoints, timeout and preferred member. They must dial with the same
    // credentials. Null: the client's channels are its own.
    std::shared_ptr<ChannelPool> channels;
    // Snapshot() on a connection of its own whose receive window stays at 64 KiB (backup.
    // low_memory_stream): the process's memory stays flat whatever the DB's size and however
    // far the reader falls behind, for a stream about half as fast over TLS. Off: gRPC grows the
    // window with the measured bandwidth, and what the reader has not taken yet waits in
    // memory (tens of MiB under contention).
    bool low_memory_snapshots = false;
  };
  // A pool for Options::channels.
  static std::shared_ptr<ChannelPool> NewChannelPool();

  explicit EtcdClient(std::vector<std::string> endpoints);
  EtcdClient(std::vector<std::string> endpoints, Options options);

  const std::vector<std::string>& endpoints() const override { return endpoints_; }

  // --- cluster-wide, with failover ---
  // `cluster_id`, if given, receives the ID of the cluster that answered: etcd 3.4's member list
  // is served locally, so a member that missed a restore still answers with its old cluster.
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cluster_id = nullptr) override;
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(
      uint64_t* cluster_id = nullptr) override;
  // Returns the new member (ID assigned, name empty until it starts).
  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>& peer_urls,
                                       bool learner) override;
  absl::Status MemberRemove(uint64_t id) override;
  absl::Status MemberPromote(uint64_t id) override;
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0) override;
  // nullopt when the key does not exist. Linearizable.
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override;
  // A serializable read: what the member asked holds, answered without a quorum (may be
  // stale). For showing state while the quorum is lost.
  absl::StatusOr<std::optional<std::string>> GetLocal(const std::string& key);
  absl::StatusOr<std::vector<AlarmInfo>> AlarmList();

  // --- authentication and roles ---
  // Whether etcd's authentication is on. etcd 3.4 has no AuthStatus call: this asks to
  // authenticate a user that cannot exist, which etcd refuses with "not enabled" or "failed".
  absl::StatusOr<bool> AuthEnabled();
  // Logs `name` in with `password` (what gateway clients such as Patroni do); the token.
  absl::StatusOr<std::string> Authenticate(const std::string& name, const std::string& password);
  absl::Status AuthEnable();
  absl::Status AuthDisable();
  absl::StatusOr<std::vector<std::string>> UserList();
  // The user's roles; NotFound-like FailedPrecondition ("user name not found") if absent.
  absl::StatusOr<std::vector<std::string>> UserGet(const std::string& name);
  // `password` empty: a user without a password (certificate common name only).
  absl::Status UserAdd(const std::string& name, const std::string& password);
  absl::Status UserDelete(const std::string& name);
  absl::Status UserGrantRole(const std::string& user, const std::string& role);
  absl::StatusOr<std::vector<std::string>> RoleList();
  absl::StatusOr<std::vector<RolePermission>> RoleGet(const std::string& role);
  absl::Status RoleAdd(const std::string& role);
  absl::Status RoleDelete(const std::string& role);
  absl::Status RoleGrantPermission(const std::string& role, const RolePermission& perm);
  absl::Status AlarmDisarm(uint64_t member_id, const std::string& alarm);
  // Raises an alarm by hand, as etcd itself would (fault tests use it for NOSPACE).
  absl::Status AlarmActivate(uint64_t member_id, const std::string& alarm);
  // Leases, for leadership keys.
  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds ttl) override;
  absl::Status LeaseRevoke(int64_t lease) override;
  // Every lease the cluster holds (etcd >= 3.3).
  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override;
  // One keep-alive round trip; NotFound when the lease has expired.
  absl::Status LeaseKeepAliveOnce(int64_t lease) override;
  // A raw transaction, for compare-and-swap on the reserved prefix.
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) override;
  // Streams on the endpoint that answered last (see EtcdApi).
  absl::StatusOr<std::unique_ptr<KeyWatch>> WatchKeys(const std::vector<std::string>& keys,
                                                      int64_t after_revision,
                                                      std::chrono::milliseconds timeout) override;
  absl::StatusOr<std::unique_ptr<KeyWatch>> WatchRange(const std::string& key,
                                                       const std::string& range_end,
                                                       int64_t after_revision,
                                                       std::chrono::milliseconds timeout) override;
  absl::StatusOr<std::unique_ptr<LeaseStream>> OpenLeaseStream(
      std::chrono::milliseconds timeout) override;

  // --- one endpoint ---
  absl::StatusOr<MemberStatus> Status(const std::string& endpoint);
  absl::StatusOr<MemberStatus> Status(const std::string& endpoint,
                                      std::chrono::milliseconds timeout) override;
  absl::Status Defragment(const std::string& endpoint, std::chrono::milliseconds timeout) override;
  // KV.Compact: discards the history below `revision` (cluster-wide, through any member; a
  // revision already compacted answers OutOfRange "required revision has been compacted").
  // `physical`: returns once the compaction has been applied to the backend.
  absl::Status Compact(int64_t revision, bool physical, std::chrono::milliseconds timeout);
  absl::StatusOr<KvHash> HashKV(int64_t revision, std::chrono::milliseconds timeout) override;
  absl::StatusOr<KvHash> HashKVOf(const std::string& endpoint, int64_t revision,
                                  std::chrono::milliseconds timeout) override;
  // Maintenance.MoveLeader: asks `leader_endpoint`, which must be the current etcd leader's
  // client URL (any other member answers FailedPrecondition "not leader"), to hand leadership
  // to voting member `target`. etcd returns once the transfer is done or has timed out.
  absl::Status MoveLeader(const std::string& leader_endpoint, uint64_t target,
                          std::chrono::milliseconds timeout) override;
  // Streams a snapshot of `endpoint`'s backend. `sink` receives each chunk in order (the last
  // 32 bytes of the whole stream are etcd's sha256 of the rest); an error from `sink` cancels the
  // stream and is returned. Returns the number of bytes received.
  absl::StatusOr<uint64_t> Snapshot(const std::string& endpoint,
                                    const std::function<absl::Status(std::string_view)>& sink,
                                    std::chrono::milliseconds timeout) override;

 private:
  absl::StatusOr<std::optional<std::string>> GetOne(const std::string& key, bool serializable);
  struct Stubs {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<etcdserverpb::KV::Stub> kv;
    std::unique_ptr<etcdserverpb::Cluster::Stub> cluster;
    std::unique_ptr<etcdserverpb::Maintenance::Stub> maintenance;
    std::unique_ptr<etcdserverpb::Lease::Stub> lease;
    std::unique_ptr<etcdserverpb::Auth::Stub> auth;
    std::unique_ptr<etcdserverpb::Watch::Stub> watch;
  };
  Stubs& StubsFor(const std::string& endpoint);
  // The watch stub on `endpoint`'s connection for WatchRange, whose read-ahead is bounded
  // (ChannelPool::bulk_watch).
  etcdserverpb::Watch::Stub* BulkWatchStub(const std::string& endpoint);
  std::string PreferredEndpoint();
  // The etcd leader's client URL as the members answer ("" if none is known).
  std::string LeaderClientUrl();
  absl::Status AlarmAction(uint64_t member_id, const std::string& alarm, bool on);
  void SetDeadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) const;
  // Runs `call` on each endpoint in turn until one succeeds or fails with an error that says
  // the request reached a working member. `what` prefixes the error.
  absl::Status CallAny(const char* what, bool idempotent,
                       const std::function<grpc::Status(Stubs&, grpc::ClientContext&)>& call);

  std::vector<std::string> endpoints_;
  Options options_;
  std::shared_ptr<ChannelPool> channels_;
  Mutex mu_;
  size_t preferred_ ABSL_GUARDED_BY(mu_) = 0;
};

absl::Status FromGrpc(const grpc::Status& s, const std::string& context);

}  // namespace steward
