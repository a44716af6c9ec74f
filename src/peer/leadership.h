// Leader election among the agents, through etcd: the holder of a lease-backed key under the
// cluster's reserved prefix leads. The key's create revision is the leader's term: it grows
// with every new leader, so orders can be fenced by it. A dead leader blocks for at most the
// lease TTL.
//
// While etcd has no quorum nobody can win, so nobody leads: the reconciler then does nothing,
// and agents keep restarting their members with data (they are never wiped).
//
// Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

#include "etcd/client.h"

namespace steward {

class Leadership {
 public:
  Leadership(EtcdClient* client, std::string key, std::string node_name, std::chrono::seconds ttl);

  // One round: keep the lease alive if leading, else try to take the key. Call about every
  // ttl/3. Returns whether this agent leads now.
  bool Tick();
  // Re-checks in etcd (linearizably) that this agent still holds the key at its term. Called
  // right before every mutating step, so a leader that was paused past its lease cannot act.
  bool Confirm();
  // Gives up the leadership (revokes the lease) so another agent can take over at once.
  void Resign();

  bool leading() const;
  uint64_t term() const;       // this agent's term while leading
  std::string leader() const;  // the leader as last seen ("" if unknown)
  uint64_t leader_term() const;

 private:
  EtcdClient* client_;
  const std::string key_;
  const std::string name_;
  const std::chrono::seconds ttl_;
  mutable std::mutex mu_;
  int64_t lease_ = 0;
  bool leading_ = false;
  uint64_t term_ = 0;
  std::string leader_;
  uint64_t leader_term_ = 0;
};

}  // namespace steward
