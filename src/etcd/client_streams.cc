// EtcdClient's long-lived streams: watches on keys or a range (KeyWatch) and a lease
// keep-alive stream (LeaseStream). The rest is in client.cc.
#include "absl/strings/str_cat.h"
#include "etcd/client.h"
#include "etcd/stream.h"

namespace steward {

namespace {

// etcd's "require leader" metadata (clientv3.WithRequireLeader): the member refuses the stream,
// and cancels it later, while it has no raft leader. Without it a watch on a member cut off
// from its quorum would stay open and silent.
void RequireLeader(grpc::ClientContext* ctx) { ctx->AddMetadata("hasleader", "true"); }

class GrpcKeyWatch : public KeyWatch {
 public:
  explicit GrpcKeyWatch(const std::string& endpoint)
      : stream_(absl::StrCat("watch on ", endpoint)) {}

  // `keys`: (key, range_end) pairs, one watch each on the stream. `fragment`: etcd sends a
  // response larger than its request bound (--max-request-bytes, 1.5 MiB by default) in
  // pieces, so no message read holds more than about that (only for a single watch: the
  // pieces of two would interleave). Without it a backlog of 1000 revisions of 100 KiB values
  // comes as one 100 MB message.
  absl::Status Open(etcdserverpb::Watch::Stub* stub,
                    const std::vector<std::pair<std::string, std::string>>& keys,
                    int64_t after_revision, std::chrono::milliseconds timeout,
                    bool fragment = false) {
    absl::Status s = stream_.Start(
        [stub](grpc::ClientContext* ctx, grpc::CompletionQueue* cq) {
          RequireLeader(ctx);
          return stub->PrepareAsyncWatch(ctx, cq);
        },
        timeout);
    if (!s.ok()) return s;
    for (const auto& [key, range_end] : keys) {
      etcdserverpb::WatchRequest req;
      auto* create = req.mutable_create_request();
      create->set_key(key);
      if (!range_end.empty()) create->set_range_end(range_end);
      create->set_start_revision(after_revision + 1);
      create->set_fragment(fragment && keys.size() == 1);
      if (s = stream_.Write(req, timeout); !s.ok()) return s;
    }
    // etcd answers each create in order ("created"); events may already follow.
    size_t created = 0;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (created < keys.size()) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return absl::DeadlineExceededError("watch: not created in time");
      auto resp = stream_.Read(left);
      if (!resp.ok()) return resp.status();
      if (!resp->has_value()) continue;
      if (absl::Status bad = Check(**resp); !bad.ok()) return bad;
      if ((*resp)->created()) {
        ++created;
        created_revision_ = std::max(created_revision_, (*resp)->header().revision());
      }
      member_id_ = (*resp)->header().member_id();
      Take(**resp, &early_);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<etcdserverpb::Event>> Wait(
      std::chrono::milliseconds timeout) override {
    if (!early_.empty()) return std::exchange(early_, {});
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<etcdserverpb::Event> events;
    // A piece that holds only part of one revision gives nothing yet: read on for its rest.
    while (events.empty()) {
      const auto left = std::max<std::chrono::milliseconds>(
          std::chrono::milliseconds(0), std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now()));
      auto resp = stream_.Read(left);
      if (!resp.ok()) return resp.status();
      if (!resp->has_value()) break;
      if (absl::Status bad = Check(**resp); !bad.ok()) return bad;
      Take(**resp, &events);
      if (left.count() == 0) break;
    }
    return events;
  }

  void Cancel() override { stream_.Cancel(); }
  uint64_t member_id() const override { return member_id_; }
  int64_t created_revision() const override { return created_revision_; }
  int64_t header_revision() const override { return header_revision_; }

 private:
  // Moves the events of `resp` to `out`, but those of a revision whose rest comes in the next
  // piece of a fragmented response: they wait in partial_, so a caller gets whole revisions.
  void Take(etcdserverpb::WatchResponse& resp, std::vector<etcdserverpb::Event>* out) {
    header_revision_ = std::max(header_revision_, resp.header().revision());
    std::vector<etcdserverpb::Event> events = std::exchange(partial_, {});
    for (auto& e : *resp.mutable_events()) events.push_back(std::move(e));
    size_t whole = events.size();
    if (resp.fragment() && !events.empty()) {
      const int64_t last = events.back().kv().mod_revision();
      while (whole > 0 && events[whole - 1].kv().mod_revision() == last) --whole;
      for (size_t i = whole; i < events.size(); ++i) partial_.push_back(std::move(events[i]));
    }
    for (size_t i = 0; i < whole; ++i) out->push_back(std::move(events[i]));
  }

  static absl::Status Check(const etcdserverpb::WatchResponse& resp) {
    if (resp.canceled()) {
      if (resp.compact_revision() != 0) {
        return absl::OutOfRangeError(absl::StrCat(
            "watch: the start revision is compacted (oldest kept: ", resp.compact_revision(), ")"));
      }
      return absl::AbortedError(absl::StrCat("watch cancelled by etcd: ", resp.cancel_reason()));
    }
    return absl::OkStatus();
  }

  BidiStream<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> stream_;
  std::vector<etcdserverpb::Event> early_;    // events that came with the creation answers
  std::vector<etcdserverpb::Event> partial_;  // a revision whose next piece is yet to come
  uint64_t member_id_ = 0;
  int64_t created_revision_ = 0;
  int64_t header_revision_ = 0;
};

class GrpcLeaseStream : public LeaseStream {
 public:
  explicit GrpcLeaseStream(const std::string& endpoint)
      : stream_(absl::StrCat("lease keep-alive on ", endpoint)) {}

  absl::Status Open(etcdserverpb::Lease::Stub* stub, std::chrono::milliseconds timeout) {
    return stream_.Start(
        [stub](grpc::ClientContext* ctx, grpc::CompletionQueue* cq) {
          RequireLeader(ctx);
          return stub->PrepareAsyncLeaseKeepAlive(ctx, cq);
        },
        timeout);
  }

  absl::Status KeepAlive(int64_t lease, std::chrono::milliseconds timeout) override {
    if (!broken_.ok()) return broken_;
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    absl::Status s = stream_.Write(req, timeout);
    if (s.ok()) {
      auto resp = stream_.Read(timeout);
      if (!resp.ok()) {
        s = resp.status();
      } else if (!resp->has_value()) {
        // A late answer would be taken for the next round's: the stream is done.
        s = absl::DeadlineExceededError("lease keep-alive: no answer in time");
      } else if ((*resp)->id() != lease) {
        s = absl::InternalError("lease keep-alive: an answer for another lease");
      } else if ((*resp)->ttl() <= 0) {
        return absl::NotFoundError(absl::StrCat("lease ", lease, " has expired"));
      } else {
        return absl::OkStatus();
      }
    }
    broken_ = s;
    return s;
  }

 private:
  BidiStream<etcdserverpb::LeaseKeepAliveRequest, etcdserverpb::LeaseKeepAliveResponse> stream_;
  absl::Status broken_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<KeyWatch>> EtcdClient::WatchKeys(
    const std::vector<std::string>& keys, int64_t after_revision,
    std::chrono::milliseconds timeout) {
  const std::string endpoint = PreferredEndpoint();
  if (endpoint.empty()) return absl::InvalidArgumentError("watch: no endpoints");
  std::vector<std::pair<std::string, std::string>> ranges;
  for (const std::string& k : keys) ranges.emplace_back(k, "");
  auto watch = std::make_unique<GrpcKeyWatch>(endpoint);
  if (absl::Status s = watch->Open(StubsFor(endpoint).watch.get(), ranges, after_revision, timeout);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<KeyWatch>(std::move(watch));
}

absl::StatusOr<std::unique_ptr<KeyWatch>> EtcdClient::WatchRange(
    const std::string& key, const std::string& range_end, int64_t after_revision,
    std::chrono::milliseconds timeout) {
  const std::string endpoint = PreferredEndpoint();
  if (endpoint.empty()) return absl::InvalidArgumentError("watch: no endpoints");
  etcdserverpb::Watch::Stub* stub = BulkWatchStub(endpoint);
  auto watch = std::make_unique<GrpcKeyWatch>(endpoint);
  if (absl::Status s = watch->Open(stub, {{key, range_end}}, after_revision, timeout,
                                   /*fragment=*/true);
      !s.ok()) {
    return s;
  }
  return std::unique_ptr<KeyWatch>(std::move(watch));
}

absl::StatusOr<std::unique_ptr<LeaseStream>> EtcdClient::OpenLeaseStream(
    std::chrono::milliseconds timeout) {
  const std::string endpoint = PreferredEndpoint();
  if (endpoint.empty()) return absl::InvalidArgumentError("lease stream: no endpoints");
  auto stream = std::make_unique<GrpcLeaseStream>(endpoint);
  if (absl::Status s = stream->Open(StubsFor(endpoint).lease.get(), timeout); !s.ok()) return s;
  return std::unique_ptr<LeaseStream>(std::move(stream));
}

}  // namespace steward
