#include "control/history.h"

#include <pthread.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "spdlog/spdlog.h"

namespace steward {
namespace {

constexpr size_t kQueueMax = 256;
constexpr int kTrimEvery = 50;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The end of the range of keys that start with `prefix`.
std::string PrefixEnd(std::string prefix) {
  prefix.back() = static_cast<char>(prefix.back() + 1);  // prefixes end in '/'
  return prefix;
}

}  // namespace

nlohmann::json EventToJson(const Event& e) {
  return {{"at_ms", e.at_ms},   {"at", e.at_ms / 1000}, {"term", e.term},    {"node", e.node},
          {"action", e.action}, {"reason", e.reason},   {"result", e.result}};
}

Event EventFromJson(const nlohmann::json& j) {
  Event e;
  if (!j.is_object()) return e;
  e.at_ms = j.value("at_ms", static_cast<int64_t>(0));
  e.term = j.value("term", static_cast<uint64_t>(0));
  e.node = j.value("node", std::string());
  e.action = j.value("action", std::string());
  e.reason = j.value("reason", std::string());
  e.result = j.value("result", std::string());
  return e;
}

History::History(EtcdApi* etcd, std::string prefix, std::string node, size_t keep)
    : etcd_(etcd), prefix_(std::move(prefix)), node_(std::move(node)), keep_(keep) {
  writer_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "st-history");
    WriterLoop();
  });
}

History::~History() { Stop(std::chrono::milliseconds(0)); }

void History::Append(uint64_t term, const std::string& action, const std::string& reason,
                     const std::string& result) {
  Event e;
  e.term = term;
  e.action = action;
  e.reason = reason;
  e.result = result;
  Append(std::move(e));
}

void History::Append(Event e) {
  e.node = node_;
  if (e.at_ms == 0) e.at_ms = NowMs();
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    if (queue_.size() >= kQueueMax) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.emplace_back(++queued_, std::move(e));
  }
  cv_.NotifyAll();
}

void History::Stop(std::chrono::milliseconds timeout) {
  {
    MutexLock lock(&mu_);
    if (!writer_.joinable()) return;
    // Give the writer a moment to land what is queued (the last orders before a shutdown).
    cv_.WaitFor(&mu_, timeout,
                [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return queue_.empty(); });
    stopping_ = true;
  }
  cv_.NotifyAll();
  writer_.join();
}

void History::WriterLoop() {
  MutexLock lock(&mu_);
  while (true) {
    cv_.Wait(&mu_,
             [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !queue_.empty(); });
    if (stopping_) break;
    const auto [number, e] = queue_.front();
    lock.Unlock();
    // Keys sort by the writer's clock; readers order by etcd's creation revision instead.
    const std::string key =
        absl::StrCat(prefix_, absl::StrFormat("%016d", e.at_ms), "-", node_, "-", seq_);
    const absl::Status s = etcd_->Put(key, EventToJson(e).dump());
    lock.Lock();
    if (!s.ok()) {
      // etcd is down (a restore, a lost quorum): keep the event and try again in a while.
      cv_.WaitFor(&mu_, std::chrono::seconds(1),
                  [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; });
      continue;
    }
    ++seq_;
    // Append may have dropped this very event from the front meanwhile (the queue was full):
    // pop only the event just written.
    if (!queue_.empty() && queue_.front().first == number) queue_.pop_front();
    if (dropped_ > 0) {
      spdlog::warn("event history: {} event(s) dropped while etcd did not answer", dropped_);
      dropped_ = 0;
    }
    cv_.NotifyAll();
    if (++since_trim_ >= kTrimEvery && !stopping_) {
      since_trim_ = 0;
      lock.Unlock();
      Trim();
      lock.Lock();
    }
  }
}

void History::Trim() {
  etcdserverpb::TxnRequest count;
  auto* r = count.add_success()->mutable_request_range();
  r->set_key(prefix_);
  r->set_range_end(PrefixEnd(prefix_));
  r->set_count_only(true);
  auto counted = etcd_->Txn(count);
  if (!counted.ok() || counted->responses_size() < 1) return;
  const int64_t total = counted->responses(0).response_range().count();
  if (total <= static_cast<int64_t>(keep_)) return;
  int64_t excess = total - static_cast<int64_t>(keep_);
  etcdserverpb::TxnRequest oldest;
  auto* o = oldest.add_success()->mutable_request_range();
  o->set_key(prefix_);
  o->set_range_end(PrefixEnd(prefix_));
  o->set_keys_only(true);
  o->set_sort_target(etcdserverpb::RangeRequest::CREATE);
  o->set_sort_order(etcdserverpb::RangeRequest::ASCEND);
  o->set_limit(excess);
  auto listed = etcd_->Txn(oldest);
  if (!listed.ok() || listed->responses_size() < 1) return;
  const auto& kvs = listed->responses(0).response_range().kvs();
  // etcd refuses transactions of more than 128 operations by default.
  for (int from = 0; from < kvs.size(); from += 100) {
    etcdserverpb::TxnRequest del;
    for (int i = from; i < kvs.size() && i < from + 100; ++i) {
      del.add_success()->mutable_request_delete_range()->set_key(kvs[i].key());
    }
    if (!etcd_->Txn(del).ok()) return;
  }
}

absl::StatusOr<std::vector<Event>> ReadHistory(EtcdApi& etcd, const std::string& prefix,
                                               int64_t since_ms, size_t limit) {
  etcdserverpb::TxnRequest txn;
  auto* r = txn.add_success()->mutable_request_range();
  r->set_key(prefix);
  r->set_range_end(PrefixEnd(prefix));
  r->set_sort_target(etcdserverpb::RangeRequest::CREATE);
  r->set_sort_order(etcdserverpb::RangeRequest::DESCEND);  // the newest `limit`
  r->set_limit(static_cast<int64_t>(limit));
  auto resp = etcd.Txn(txn);
  if (!resp.ok()) return resp.status();
  std::vector<Event> out;
  if (resp->responses_size() < 1) return out;
  const auto& kvs = resp->responses(0).response_range().kvs();
  for (int i = kvs.size() - 1; i >= 0; --i) {
    auto j = nlohmann::json::parse(kvs[i].value(), nullptr, false);
    if (j.is_discarded()) continue;
    Event e = EventFromJson(j);
    if (e.at_ms >= since_ms) out.push_back(std::move(e));
  }
  // In time order, not etcd's: events queued while etcd was down (a restore's, on the nodes)
  // reach it after later ones. Events of one millisecond keep etcd's order.
  std::stable_sort(out.begin(), out.end(),
                   [](const Event& a, const Event& b) { return a.at_ms < b.at_ms; });
  return out;
}

}  // namespace steward
