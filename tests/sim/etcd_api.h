// The etcd API the agents call (EtcdApi), served by the world's cluster model (etcd_cluster.h):
// a call goes to the first of its endpoints whose member runs, is not paused and is reachable
// from the caller. What etcd serves locally (3.4's member list) comes from that member's disk,
// stale out of quorum; everything else needs a member on the quorum side. Member changes follow
// etcd's rules: one learner at a time, promotion only once caught up, the strict
// reconfiguration check on removal, IDs from the peer URLs and the answering member's second.
// Every call is a crash point for the caller (World::CallPoint). Single-threaded.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "etcd/api.h"
#include "sim/etcd_cluster.h"

namespace steward::sim {

class World;

class SimEtcd : public EtcdApi {
 public:
  SimEtcd(World* w, int caller, std::vector<std::string> urls)
      : w_(w), caller_(caller), urls_(std::move(urls)) {}
  const std::vector<std::string>& endpoints() const override { return urls_; }
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cluster_id) override;
  // The member list node `n` serves (its own view, stale out of quorum).
  std::vector<MemberInfo> ListOf(int n, uint64_t* cluster_id);
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t* cluster_id) override;
  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>& peer_urls,
                                       bool learner) override;
  absl::Status MemberRemove(uint64_t id) override;
  absl::Status MemberPromote(uint64_t id) override;
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease) override;
  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override;
  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds ttl) override;
  absl::Status LeaseRevoke(int64_t lease) override;
  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override;
  absl::Status LeaseKeepAliveOnce(int64_t lease) override;
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) override;
  absl::StatusOr<MemberStatus> Status(const std::string& url, std::chrono::milliseconds) override;
  // Leadership to `target` if it is a voter on the quorum side with all the data.
  absl::Status MoveLeader(const std::string& leader_endpoint, uint64_t target,
                          std::chrono::milliseconds) override;
  // A hash of the cluster and the revision, different for a member whose disk diverged.
  absl::StatusOr<KvHash> HashKVOf(const std::string& url, int64_t revision,
                                  std::chrono::milliseconds) override;
  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    std::chrono::milliseconds) override;

 private:
  // The cluster behind the first answering endpoint whose member is on the quorum side, and
  // the node that answered.
  absl::StatusOr<std::pair<Cluster*, int>> Quorum();
  void PutKv(Cluster& cl, const std::string& key, const std::string& value, int64_t lease,
             int64_t rev = 0);
  static void DropLeaseKeys(Cluster& cl, int64_t lease);
  void Dirty();

  World* w_;
  int caller_;
  std::vector<std::string> urls_;
};

}  // namespace steward::sim
