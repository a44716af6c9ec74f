#include "peer/leadership.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "spdlog/spdlog.h"

namespace steward {

Leadership::Leadership(EtcdApi* client, std::string key, std::string epoch_key,
                       std::string node_name, std::chrono::seconds ttl)
    : client_(client),
      key_(std::move(key)),
      epoch_key_(std::move(epoch_key)),
      name_(std::move(node_name)),
      ttl_(ttl) {}

namespace {
constexpr std::chrono::milliseconds kStreamTimeout(1000);
}  // namespace

void Leadership::Answered(std::chrono::steady_clock::duration valid_for) {
  answer_valid_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(valid_for).count();
  answered_at_ns_ = std::chrono::steady_clock::now().time_since_epoch().count();
}

absl::Status Leadership::KeepAliveLocked() {
  // Over the open stream when there is one; else (it broke, or cannot be had) one round trip
  // that fails over between the endpoints, and a new stream next time.
  if (lease_stream_ == nullptr) {
    if (auto opened = client_->OpenLeaseStream(kStreamTimeout); opened.ok()) {
      lease_stream_ = std::move(*opened);
    }
  }
  if (lease_stream_ != nullptr) {
    // A short bound: a member gone silent must leave the fallback time within the TTL.
    const auto budget = std::clamp<std::chrono::milliseconds>(
        std::chrono::duration_cast<std::chrono::milliseconds>(ttl_) / 10,
        std::chrono::milliseconds(200), kStreamTimeout);
    absl::Status s = lease_stream_->KeepAlive(lease_, budget);
    if (s.ok() || absl::IsNotFound(s)) return s;
    spdlog::debug("lease keep-alive stream: {}", s.message());
    lease_stream_.reset();
  }
  return client_->LeaseKeepAliveOnce(lease_);
}

bool Leadership::Tick() {
  MutexLock lock(&mu_);
  if (leading_) {
    absl::Status s = KeepAliveLocked();
    if (!s.ok()) {
      lease_stream_.reset();
      if (leading_) spdlog::warn("lost leadership (term {}): {}", term_, s.message());
      // An expired lease took the key with it; an unreachable etcd may have expired it too.
      if (absl::IsNotFound(s) || leading_) lease_ = 0;
      leading_ = false;
      if (!absl::IsNotFound(s)) return false;
    }
  }
  if (leading_) {
    Answered(ttl_);
    return true;
  }
  // While another agent holds the key, a follower only looks (one linearizable read of the key
  // and the epoch): no lease of its own kept alive, no failed transaction every round.
  {
    etcdserverpb::TxnRequest look;
    look.add_success()->mutable_request_range()->set_key(key_);
    look.add_success()->mutable_request_range()->set_key(epoch_key_);
    auto seen = client_->Txn(look);
    look_revision_ = 0;  // no watch rests on a failed look: poll until one succeeds
    if (!seen.ok() || seen->responses_size() < 2) {
      answer_valid_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(ttl_).count();
      return false;
    }
    Answered(ttl_);
    const auto& held = seen->responses(0).response_range();
    // Ours (a campaign whose reply was lost) or nobody's: campaign below.
    if (held.kvs_size() == 0) leader_.clear();  // nobody leads until a campaign wins
    if (held.kvs_size() > 0 && held.kvs(0).value() != name_) {
      leader_ = held.kvs(0).value();
      const auto& epoch = seen->responses(1).response_range();
      uint64_t e = 0;
      if (epoch.kvs_size() > 0 && absl::SimpleAtoi(epoch.kvs(0).value(), &e)) leader_term_ = e;
      look_revision_ = seen->header().revision();  // another agent leads: watch from here
      look_member_ = seen->header().member_id();
      return false;
    }
  }
  // A lease left from an earlier campaign is only used if it is still alive.
  if (lease_ != 0 && !client_->LeaseKeepAliveOnce(lease_).ok()) lease_ = 0;
  if (lease_ == 0) {
    auto lease = client_->LeaseGrant(ttl_);
    if (!lease.ok()) return false;
    lease_ = *lease;
  }
  // The epoch: read it, then take the leader key and raise the epoch in one transaction that
  // fails if either changed meanwhile. The epoch (not a revision, which a restore can send
  // backwards) is the term every order carries.
  auto epoch = ReadEpochLocked();
  if (!epoch.ok()) return false;
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(key_);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* ecmp = txn.add_compare();
  ecmp->set_key(epoch_key_);
  ecmp->set_target(etcdserverpb::Compare::MOD);
  ecmp->set_result(etcdserverpb::Compare::EQUAL);
  ecmp->set_mod_revision(epoch->mod_revision);
  const uint64_t next = epoch->value + 1;
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key_);
  put->set_value(name_);
  put->set_lease(lease_);
  auto* eput = txn.add_success()->mutable_request_put();
  eput->set_key(epoch_key_);
  eput->set_value(absl::StrCat(next));
  txn.add_failure()->mutable_request_range()->set_key(key_);
  auto resp = client_->Txn(txn);
  if (!resp.ok()) return false;
  if (resp->succeeded()) {
    leading_ = true;
    term_ = next;
    key_revision_ = resp->header().revision();
    epoch_mod_revision_ = resp->header().revision();
    leader_ = name_;
    leader_term_ = term_;
    spdlog::info("became the steward leader (epoch {})", term_);
    DropWatch();
    return true;
  }
  if (resp->responses_size() > 0 && resp->responses(0).response_range().kvs_size() > 0) {
    const auto& kv = resp->responses(0).response_range().kvs(0);
    leader_ = kv.value();
    leader_term_ = epoch->value;
    if (kv.value() != name_) {  // lost: watch from here
      look_revision_ = resp->header().revision();
      look_member_ = resp->header().member_id();
    }
    // An earlier campaign whose reply was lost may have won with this very lease.
    if (kv.value() == name_ && kv.lease() == lease_) {
      leading_ = true;
      term_ = epoch->value;
      key_revision_ = kv.create_revision();
      epoch_mod_revision_ = epoch->mod_revision;
      spdlog::info("became the steward leader (epoch {})", term_);
      DropWatch();
      return true;
    }
  }
  return false;
}

absl::StatusOr<Leadership::Epoch> Leadership::ReadEpochLocked() {
  etcdserverpb::TxnRequest txn;  // a linearizable read
  txn.add_success()->mutable_request_range()->set_key(epoch_key_);
  auto resp = client_->Txn(txn);
  if (!resp.ok()) return resp.status();
  Epoch e;
  if (resp->responses_size() > 0 && resp->responses(0).response_range().kvs_size() > 0) {
    const auto& kv = resp->responses(0).response_range().kvs(0);
    if (!absl::SimpleAtoi(kv.value(), &e.value)) {
      spdlog::error("{} holds \"{}\", not an epoch; not campaigning", epoch_key_, kv.value());
      return absl::DataLossError("malformed epoch");
    }
    e.mod_revision = kv.mod_revision();
  }
  return e;
}

bool Leadership::Raise(uint64_t floor) {
  MutexLock lock(&mu_);
  if (!leading_ || floor < term_) return leading_;
  // Some agent has seen a term at or above ours (a restore coordinator's promises): take an
  // epoch above it, still holding the key at our lease, or not at all.
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(key_);
  cmp->set_target(etcdserverpb::Compare::LEASE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_lease(lease_);
  auto* ecmp = txn.add_compare();
  ecmp->set_key(epoch_key_);
  ecmp->set_target(etcdserverpb::Compare::MOD);
  ecmp->set_result(etcdserverpb::Compare::EQUAL);
  ecmp->set_mod_revision(epoch_mod_revision_);
  const uint64_t next = floor + 1;
  auto* eput = txn.add_success()->mutable_request_put();
  eput->set_key(epoch_key_);
  eput->set_value(absl::StrCat(next));
  auto resp = client_->Txn(txn);
  if (!resp.ok()) return false;
  if (!resp->succeeded()) {
    spdlog::warn("lost leadership (epoch {}): the leader key or the epoch changed", term_);
    leading_ = false;
    lease_stream_.reset();
    return false;
  }
  spdlog::info("raised the epoch from {} to {} (an agent had seen term {})", term_, next, floor);
  term_ = next;
  leader_term_ = next;
  epoch_mod_revision_ = resp->header().revision();
  return true;
}

bool Leadership::Confirm() {
  int64_t lease;
  uint64_t term;
  {
    MutexLock lock(&mu_);
    if (!leading_) return false;
    lease = lease_;
    term = term_;
  }
  // A linearizable read: the key must still be ours, under our lease, and the epoch ours.
  etcdserverpb::TxnRequest txn;
  txn.add_success()->mutable_request_range()->set_key(key_);
  txn.add_success()->mutable_request_range()->set_key(epoch_key_);
  auto resp = client_->Txn(txn);
  if (!resp.ok() || resp->responses_size() < 2) return false;
  const auto& range = resp->responses(0).response_range();
  const auto& epoch = resp->responses(1).response_range();
  if (range.kvs_size() == 0 || epoch.kvs_size() == 0) return false;
  const auto& kv = range.kvs(0);
  return kv.value() == name_ && kv.lease() == lease && epoch.kvs(0).value() == absl::StrCat(term);
}

void Leadership::Resign() {
  MutexLock lock(&mu_);
  if (lease_ != 0) {
    // Best effort: if it fails, the lease expires within its TTL and the key with it.
    if (absl::Status s = client_->LeaseRevoke(lease_); !s.ok()) {
      spdlog::warn("resigning: revoking the leader lease: {}", s.message());
    }
    if (leading_) spdlog::info("resigned leadership (term {})", term_);
  }
  lease_ = 0;
  leading_ = false;
  lease_stream_.reset();
}

bool Leadership::WaitForChange(std::chrono::milliseconds max) {
  int64_t after = 0;
  uint64_t member = 0;
  {
    MutexLock lock(&mu_);
    // Only while another agent holds the key: a free key is campaigned for every round.
    if (leading_ || look_revision_ == 0) return false;
    after = look_revision_;
    member = look_member_;
  }
  std::shared_ptr<KeyWatch> watch;
  std::chrono::steady_clock::time_point opened;
  {
    MutexLock lock(&watch_mu_);
    if (interrupted_) return true;
    // The looks moved to another member (the watch's may be gone without a word, its host
    // down): watch where the last look was answered.
    if (watch_ != nullptr && member != 0 && watch_->member_id() != 0 &&
        watch_->member_id() != member) {
      watch_.reset();
    }
    watch = watch_;
    opened = watch_opened_;
  }
  if (watch == nullptr) {
    // From the last look on: a change between that look and now is delivered at once.
    auto made = client_->WatchKeys({key_, epoch_key_}, after, kStreamTimeout);
    if (!made.ok()) {
      if (!absl::IsUnimplemented(made.status())) {
        spdlog::debug("watching the leader key: {}", made.status().message());
      }
      return false;
    }
    watch = std::move(*made);
    MutexLock lock(&watch_mu_);
    if (interrupted_) return true;
    watch_ = watch;
    watch_opened_ = opened = std::chrono::steady_clock::now();
  }
  // The watch is open: the last answer stands while it is (the caller waits up to `max`).
  answer_valid_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(ttl_ + max + std::chrono::seconds(1))
          .count();
  auto events = watch->Wait(max);
  if (events.ok()) return true;  // changed, or quiet for `max`: look again either way
  spdlog::debug("watch on the leader key ended: {}", events.status().message());
  // Its member may be gone: no answer counts any more until the next look.
  answered_at_ns_ = 0;
  {
    MutexLock lock(&watch_mu_);
    if (watch_ == watch) watch_.reset();
  }
  // Look again at once (the leader's member may have gone with the key's last change), unless
  // watches keep breaking as soon as they open: then poll.
  return std::chrono::steady_clock::now() - opened > std::chrono::seconds(1);
}

void Leadership::DropWatch() {
  MutexLock lock(&watch_mu_);
  watch_.reset();
}

void Leadership::Interrupt() {
  MutexLock lock(&watch_mu_);
  interrupted_ = true;
  if (watch_ != nullptr) watch_->Cancel();
}

bool Leadership::leading() const {
  MutexLock lock(&mu_);
  return leading_;
}
uint64_t Leadership::term() const {
  MutexLock lock(&mu_);
  return term_;
}
std::string Leadership::leader() const {
  MutexLock lock(&mu_);
  return leader_;
}
uint64_t Leadership::leader_term() const {
  MutexLock lock(&mu_);
  return leader_term_;
}
bool Leadership::Answering() const {
  return AnsweredWithin(std::chrono::nanoseconds(answer_valid_ns_.load()));
}

bool Leadership::AnsweredWithin(std::chrono::steady_clock::duration d) const {
  const int64_t at = answered_at_ns_.load();
  return at != 0 && std::chrono::steady_clock::now().time_since_epoch() -
                            std::chrono::steady_clock::duration(at) <
                        d;
}

}  // namespace steward
