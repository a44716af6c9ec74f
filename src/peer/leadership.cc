#include "peer/leadership.h"

#include "common/status.h"
#include "spdlog/spdlog.h"

namespace steward {

Leadership::Leadership(EtcdClient* client, std::string key, std::string node_name,
                       std::chrono::seconds ttl)
    : client_(client), key_(std::move(key)), name_(std::move(node_name)), ttl_(ttl) {}

bool Leadership::Tick() {
  std::lock_guard<std::mutex> lock(mu_);
  if (lease_ != 0) {
    absl::Status s = client_->LeaseKeepAliveOnce(lease_);
    if (!s.ok()) {
      if (leading_) spdlog::warn("lost leadership (term {}): {}", term_, s.message());
      // An expired lease took the key with it; an unreachable etcd may have expired it too.
      if (absl::IsNotFound(s) || leading_) lease_ = 0;
      leading_ = false;
      if (!absl::IsNotFound(s)) return false;
    }
  }
  if (leading_) return true;
  if (lease_ == 0) {
    auto lease = client_->LeaseGrant(ttl_);
    if (!lease.ok()) return false;
    lease_ = *lease;
  }
  // Take the key if nobody holds it; otherwise read who does.
  etcdserverpb::TxnRequest txn;
  auto* cmp = txn.add_compare();
  cmp->set_key(key_);
  cmp->set_target(etcdserverpb::Compare::CREATE);
  cmp->set_result(etcdserverpb::Compare::EQUAL);
  cmp->set_create_revision(0);
  auto* put = txn.add_success()->mutable_request_put();
  put->set_key(key_);
  put->set_value(name_);
  put->set_lease(lease_);
  txn.add_failure()->mutable_request_range()->set_key(key_);
  auto resp = client_->Txn(txn);
  if (!resp.ok()) return false;
  if (resp->succeeded()) {
    leading_ = true;
    term_ = static_cast<uint64_t>(resp->header().revision());
    leader_ = name_;
    leader_term_ = term_;
    spdlog::info("became the steward leader (term {})", term_);
    return true;
  }
  if (resp->responses_size() > 0 && resp->responses(0).response_range().kvs_size() > 0) {
    const auto& kv = resp->responses(0).response_range().kvs(0);
    leader_ = kv.value();
    leader_term_ = static_cast<uint64_t>(kv.create_revision());
    // An earlier campaign whose reply was lost may have won with this very lease.
    if (kv.value() == name_ && kv.lease() == lease_) {
      leading_ = true;
      term_ = leader_term_;
      spdlog::info("became the steward leader (term {})", term_);
      return true;
    }
  }
  return false;
}

bool Leadership::Confirm() {
  int64_t lease;
  uint64_t term;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!leading_) return false;
    lease = lease_;
    term = term_;
  }
  // A linearizable read: the key must still be ours, under our lease, at our term.
  etcdserverpb::TxnRequest txn;
  txn.add_success()->mutable_request_range()->set_key(key_);
  auto resp = client_->Txn(txn);
  if (!resp.ok() || resp->responses_size() == 0) return false;
  const auto& range = resp->responses(0).response_range();
  if (range.kvs_size() == 0) return false;
  const auto& kv = range.kvs(0);
  return kv.value() == name_ && kv.lease() == lease &&
         static_cast<uint64_t>(kv.create_revision()) == term;
}

void Leadership::Resign() {
  std::lock_guard<std::mutex> lock(mu_);
  if (lease_ != 0) {
    (void)client_->LeaseRevoke(lease_);
    if (leading_) spdlog::info("resigned leadership (term {})", term_);
  }
  lease_ = 0;
  leading_ = false;
}

bool Leadership::leading() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leading_;
}
uint64_t Leadership::term() const {
  std::lock_guard<std::mutex> lock(mu_);
  return term_;
}
std::string Leadership::leader() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_;
}
uint64_t Leadership::leader_term() const {
  std::lock_guard<std::mutex> lock(mu_);
  return leader_term_;
}

}  // namespace steward
