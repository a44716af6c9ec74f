// Leader election among the agents, through etcd: the holder of a lease-backed key under the
// cluster's reserved prefix leads. Taking the key raises an epoch key in the same transaction
// (compare-and-swap on both), and that epoch is the leader's term: every order carries it, and
// agents refuse terms older than the newest they have admitted. Revisions are not used as
// terms: a restore sends them backwards. A dead leader blocks for at most the lease TTL.
//
// While etcd has no quorum nobody can win, so nobody leads: the reconciler then does nothing,
// and agents keep restarting their members with data (they are never wiped).
//
// What an idle agent costs is mostly this loop, so nothing is polled that etcd can push: a
// follower waits on a watch of the leader key and the epoch (a leader that dies or resigns
// frees the key, and the followers campaign at once), and looks again only when the watch
// fires or has been quiet for its bound; the leader renews its lease over one open stream.
// Without streams (the simulation) it polls.
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "etcd/api.h"

namespace steward {

class Leadership {
 public:
  Leadership(EtcdApi* client, std::string key, std::string epoch_key, std::string node_name,
             std::chrono::seconds ttl);

  // One round: keep the lease alive if leading; else read the key, and try to take it only
  // when nobody holds it. Call about every ttl/4. Returns whether this agent leads now.
  bool Tick();
  // Re-checks in etcd (linearizably) that this agent still holds the key at its term. Called
  // right before every mutating step, so a leader that was paused past its lease cannot act.
  bool Confirm();
  // While leading: if `floor` (the newest term any agent has admitted) is not below this
  // leader's epoch, raise the epoch to floor + 1 (a compare-and-swap that also checks the key is
  // still ours). Returns whether this agent still leads.
  bool Raise(uint64_t floor);
  // Gives up the leadership (revokes the lease) so another agent can take over at once.
  void Resign();

  bool leading() const;
  uint64_t term() const;       // this agent's epoch while leading
  std::string leader() const;  // the leader as last seen ("" if unknown, or the key is free)
  uint64_t leader_term() const;
  // Whether etcd answered this agent's last round within `d` (a quorum was reachable then).
  bool AnsweredWithin(std::chrono::steady_clock::duration d) const;
  // Whether etcd answers lately: it answered within the TTL, or a follower's watch has stayed
  // open since its last answer (a watch breaks when its member goes away).
  bool Answering() const;

  // Following: waits until the leader key or the epoch changes after this agent's last look
  // (on a watch, kept open across calls), or `max` passes, or the watch breaks: returns true
  // when the caller should look again now. False when no watch can be had (or watches break
  // as soon as they open): the caller polls instead.
  bool WaitForChange(std::chrono::milliseconds max);
  // Thread-safe: ends a WaitForChange under way; later ones return at once.
  void Interrupt();

 private:
  struct Epoch {
    uint64_t value = 0;
    int64_t mod_revision = 0;  // 0: no epoch key yet
  };
  absl::StatusOr<Epoch> ReadEpochLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status KeepAliveLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Answered(std::chrono::steady_clock::duration valid_for);
  void DropWatch();  // a leader needs no watch

  EtcdApi* client_;
  const std::string key_;
  const std::string epoch_key_;
  const std::string name_;
  const std::chrono::seconds ttl_;
  mutable Mutex mu_;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  bool leading_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t term_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t key_revision_ ABSL_GUARDED_BY(mu_) = 0;  // create revision of our leader key
  // Mod revision of the epoch key as we last wrote it.
  int64_t epoch_mod_revision_ ABSL_GUARDED_BY(mu_) = 0;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  uint64_t leader_term_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t look_revision_ ABSL_GUARDED_BY(mu_) = 0;  // etcd's revision at a follower's last look
  uint64_t look_member_ ABSL_GUARDED_BY(mu_) = 0;   // the member that answered it
  // The leader's keep-alive stream.
  std::unique_ptr<LeaseStream> lease_stream_ ABSL_GUARDED_BY(mu_);
  // The follower's watch; its own lock, so that Interrupt() never waits behind a tick.
  Mutex watch_mu_;
  std::shared_ptr<KeyWatch> watch_ ABSL_GUARDED_BY(watch_mu_);
  bool interrupted_ ABSL_GUARDED_BY(watch_mu_) = false;
  std::chrono::steady_clock::time_point watch_opened_ ABSL_GUARDED_BY(watch_mu_);
  // Steady-clock ns of etcd's last answer to a tick; atomic so that AnsweredWithin never waits
  // behind a tick that is waiting on etcd (the control loop asks it every pass).
  std::atomic<int64_t> answered_at_ns_{0};
  std::atomic<int64_t> answer_valid_ns_{0};  // how long that answer counts (Answering)
};

}  // namespace steward
