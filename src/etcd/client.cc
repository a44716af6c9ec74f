#include "etcd/client.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "etcd/stream.h"

namespace steward {

std::string GrpcTarget(const std::string& url) {
  auto pos = url.find("://");
  std::string rest = pos == std::string::npos ? url : url.substr(pos + 3);
  if (!rest.empty() && rest.back() == '/') rest.pop_back();
  return rest;
}

std::string HexId(uint64_t id) { return absl::StrFormat("%x", id); }

absl::Status FromGrpc(const grpc::Status& s, const std::string& context) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(context, ": ", s.error_message()));
}

namespace {
MemberInfo FromProto(const etcdserverpb::Member& m) {
  MemberInfo out;
  out.id = m.id();
  out.name = m.name();
  out.peer_urls.assign(m.peerurls().begin(), m.peerurls().end());
  out.client_urls.assign(m.clienturls().begin(), m.clienturls().end());
  out.is_learner = m.islearner();
  return out;
}
}  // namespace

EtcdClient::EtcdClient(std::vector<std::string> endpoints)
    : EtcdClient(std::move(endpoints), Options{}) {}

// Read-ahead of a bulk watch's connection (ChannelPool::bulk_watch).
constexpr int kBulkWatchLookahead = 1 << 20;

struct EtcdClient::ChannelPool {
  Mutex mu;
  std::map<std::string, std::unique_ptr<Stubs>> stubs ABSL_GUARDED_BY(mu);
  // WatchRange's streams, which may carry the whole keyspace's changes, use connections of
  // their own on which gRPC reads at most kBulkWatchLookahead ahead of what the caller asked
  // for (and the message it waits for). With gRPC's default, the window grows with the
  // measured bandwidth-delay product, to many MiB on a fast link, and a reader busy storing
  // what it read had tens of MiB more waiting in the transport (issue 35). Snapshots (unless
  // Options::low_memory_snapshots) and the other calls keep the shared channel and its window.
  std::map<std::string, std::unique_ptr<Stubs>> bulk_watch ABSL_GUARDED_BY(mu);
  // Snapshot streams with Options::low_memory_snapshots: connections without BDP probing, on
  // which gRPC 1.51 keeps the connection's window at HTTP/2's initial 64 KiB, so etcd sends
  // only as fast as the reader takes (flat memory, a slower stream: docs/benchmarks.md).
  std::map<std::string, std::unique_ptr<Stubs>> low_memory_snapshot ABSL_GUARDED_BY(mu);

  enum class Kind { kShared, kBulkWatch, kLowMemorySnapshot };
  // The slot of `endpoint` in `pool` (`mu` held), its channel made on first use.
  static Stubs& Slot(const EtcdClient& client, std::map<std::string, std::unique_ptr<Stubs>>& pool,
                     const std::string& endpoint, Kind kind) {
    auto& slot = pool[endpoint];
    if (slot) return *slot;
    grpc::ChannelArguments args;
    if (kind == Kind::kBulkWatch) {
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, kBulkWatchLookahead);
    }
    if (kind == Kind::kLowMemorySnapshot) args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    // Reconnect quickly after an etcd restart; the defaults back off for up to two minutes.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetMaxReceiveMessageSize(-1);
    // gRPC's own retry layer can abort the process when a server dies mid-call (grpc/grpc
    // #34683: missing status in retry_filter); we retry ourselves, so turn it off.
    args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
    // Distinct channels per client object: no subchannel sharing with other clients' state.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::ChannelCredentials> creds;
    if (client.options_.credentials_for) creds = client.options_.credentials_for(endpoint);
    if (!creds) creds = client.options_.credentials;
    if (!creds) creds = grpc::InsecureChannelCredentials();
    slot = std::make_unique<Stubs>();
    slot->channel = grpc::CreateCustomChannel(GrpcTarget(endpoint), creds, args);
    slot->kv = etcdserverpb::KV::NewStub(slot->channel);
    slot->cluster = etcdserverpb::Cluster::NewStub(slot->channel);
    slot->maintenance = etcdserverpb::Maintenance::NewStub(slot->channel);
    slot->lease = etcdserverpb::Lease::NewStub(slot->channel);
    slot->auth = etcdserverpb::Auth::NewStub(slot->channel);
    slot->watch = etcdserverpb::Watch::NewStub(slot->channel);
    return *slot;
  }
};

std::shared_ptr<EtcdClient::ChannelPool> EtcdClient::NewChannelPool() {
  return std::make_shared<ChannelPool>();
}

EtcdClient::EtcdClient(std::vector<std::string> endpoints, Options options)
    : endpoints_(std::move(endpoints)),
      options_(std::move(options)),
      channels_(options_.channels ? options_.channels : NewChannelPool()) {}

EtcdClient::Stubs& EtcdClient::StubsFor(const std::string& endpoint) {
  MutexLock lock(&channels_->mu);
  return ChannelPool::Slot(*this, channels_->stubs, endpoint, ChannelPool::Kind::kShared);
}

void EtcdClient::SetDeadline(grpc::ClientContext& ctx, std::chrono::milliseconds timeout) const {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

absl::Status EtcdClient::CallAny(
    const char* what, bool idempotent,
    const std::function<grpc::Status(Stubs&, grpc::ClientContext&)>& call) {
  if (endpoints_.empty()) return absl::InvalidArgumentError(absl::StrCat(what, ": no endpoints"));
  size_t start;
  {
    MutexLock lock(&mu_);
    start = preferred_;
  }
  std::vector<std::string> errors;
  grpc::Status last;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    size_t idx = (start + i) % endpoints_.size();
    const std::string& ep = endpoints_[idx];
    grpc::ClientContext ctx;
    SetDeadline(ctx, options_.timeout);
    last = call(StubsFor(ep), ctx);
    if (last.ok()) {
      MutexLock lock(&mu_);
      preferred_ = idx;
      return absl::OkStatus();
    }
    errors.push_back(absl::StrCat(ep, ": ", last.error_message()));
    bool move_on = last.error_code() == grpc::StatusCode::UNAVAILABLE ||
                   (idempotent && last.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
    if (!move_on) break;
  }
  return absl::Status(static_cast<absl::StatusCode>(last.error_code()),
                      absl::StrCat(what, ": ", absl::StrJoin(errors, "; ")));
}

absl::StatusOr<std::vector<MemberInfo>> EtcdClient::MemberList(uint64_t* cluster_id) {
  etcdserverpb::MemberListResponse resp;
  absl::Status s = CallAny("MemberList", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.cluster->MemberList(&ctx, etcdserverpb::MemberListRequest(), &resp);
  });
  if (!s.ok()) return s;
  if (cluster_id != nullptr) *cluster_id = resp.header().cluster_id();
  std::vector<MemberInfo> out;
  for (const auto& m : resp.members()) out.push_back(FromProto(m));
  return out;
}

absl::StatusOr<std::vector<MemberInfo>> EtcdClient::LinearizableMemberList(uint64_t* cluster_id) {
  etcdserverpb::MemberListResponse resp;
  absl::Status s = CallAny("MemberList", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    // etcd 3.4 serves member lists locally: first a linearizable read on the same member, which
    // it answers only once it has applied everything committed before it (membership changes
    // included). Any key will do; the reply's content is not used.
    etcdserverpb::RangeRequest barrier;
    barrier.set_key("/steward-read-barrier");
    barrier.set_limit(1);
    barrier.set_count_only(true);
    etcdserverpb::RangeResponse ignored;
    grpc::Status b = st.kv->Range(&ctx, barrier, &ignored);
    if (!b.ok()) return b;
    grpc::ClientContext list_ctx;
    SetDeadline(list_ctx, options_.timeout);
    etcdserverpb::MemberListRequest req;
    req.set_linearizable(true);
    return st.cluster->MemberList(&list_ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (cluster_id != nullptr) *cluster_id = resp.header().cluster_id();
  std::vector<MemberInfo> out;
  for (const auto& m : resp.members()) out.push_back(FromProto(m));
  return out;
}

absl::StatusOr<MemberInfo> EtcdClient::MemberAdd(const std::vector<std::string>& peer_urls,
                                                 bool learner) {
  etcdserverpb::MemberAddRequest req;
  for (const auto& u : peer_urls) req.add_peerurls(u);
  req.set_islearner(learner);
  etcdserverpb::MemberAddResponse resp;
  absl::Status s = CallAny("MemberAdd", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.cluster->MemberAdd(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return FromProto(resp.member());
}

absl::Status EtcdClient::MemberRemove(uint64_t id) {
  etcdserverpb::MemberRemoveRequest req;
  req.set_id(id);
  etcdserverpb::MemberRemoveResponse resp;
  return CallAny("MemberRemove", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.cluster->MemberRemove(&ctx, req, &resp);
  });
}

std::string EtcdClient::LeaderClientUrl() {
  auto members = MemberList();
  if (!members.ok()) return "";
  for (const std::string& ep : endpoints_) {
    auto st = Status(ep, options_.timeout);
    if (!st.ok() || st->leader == 0) continue;
    for (const MemberInfo& m : *members) {
      if (m.id == st->leader && !m.client_urls.empty()) return m.client_urls.front();
    }
    return "";
  }
  return "";
}

absl::Status EtcdClient::MemberPromote(uint64_t id) {
  etcdserverpb::MemberPromoteRequest req;
  req.set_id(id);
  etcdserverpb::MemberPromoteResponse resp;
  // etcd 3.4 forwards a promote that reaches a follower to the leader over the peer URL
  // without the caller's identity: with authentication on, the leader refuses it ("auth: user
  // name is empty") and the follower retries for its whole request timeout, logging each try.
  // Asked directly, the leader checks the caller's certificate itself.
  if (const std::string leader = LeaderClientUrl(); !leader.empty()) {
    grpc::ClientContext ctx;
    SetDeadline(ctx, options_.timeout);
    grpc::Status s = StubsFor(leader).cluster->MemberPromote(&ctx, req, &resp);
    if (s.ok()) return absl::OkStatus();
    // The leader's own answer stands (a learner not caught up, a refusal); a leader that did
    // not answer may have changed: then any member, as before.
    if (s.error_code() != grpc::StatusCode::UNAVAILABLE &&
        s.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      return FromGrpc(s, absl::StrCat("MemberPromote at the leader ", leader));
    }
  }
  return CallAny("MemberPromote", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.cluster->MemberPromote(&ctx, req, &resp);
  });
}

absl::Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::PutRequest req;
  req.set_key(key);
  req.set_value(value);
  req.set_lease(lease);
  etcdserverpb::PutResponse resp;
  // A put is idempotent for our purposes (same key, same value).
  return CallAny("Put", true,
                 [&](Stubs& st, grpc::ClientContext& ctx) { return st.kv->Put(&ctx, req, &resp); });
}

absl::StatusOr<std::optional<std::string>> EtcdClient::Get(const std::string& key) {
  return GetOne(key, /*serializable=*/false);
}

absl::StatusOr<std::optional<std::string>> EtcdClient::GetLocal(const std::string& key) {
  return GetOne(key, /*serializable=*/true);
}

absl::StatusOr<std::optional<std::string>> EtcdClient::GetOne(const std::string& key,
                                                              bool serializable) {
  etcdserverpb::RangeRequest req;
  req.set_key(key);
  req.set_serializable(serializable);
  etcdserverpb::RangeResponse resp;
  absl::Status s = CallAny("Range", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.kv->Range(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (resp.kvs_size() == 0) return std::optional<std::string>();
  return std::optional<std::string>(resp.kvs(0).value());
}

absl::StatusOr<std::vector<AlarmInfo>> EtcdClient::AlarmList() {
  etcdserverpb::AlarmRequest req;
  req.set_action(etcdserverpb::AlarmRequest::GET);
  etcdserverpb::AlarmResponse resp;
  absl::Status s = CallAny("AlarmList", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.maintenance->Alarm(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  std::vector<AlarmInfo> out;
  for (const auto& a : resp.alarms()) {
    out.push_back({a.memberid(), etcdserverpb::AlarmType_Name(a.alarm())});
  }
  return out;
}

absl::Status EtcdClient::AlarmDisarm(uint64_t member_id, const std::string& alarm) {
  return AlarmAction(member_id, alarm, false);
}

absl::Status EtcdClient::AlarmActivate(uint64_t member_id, const std::string& alarm) {
  return AlarmAction(member_id, alarm, true);
}

absl::Status EtcdClient::AlarmAction(uint64_t member_id, const std::string& alarm, bool on) {
  etcdserverpb::AlarmType type;
  if (!etcdserverpb::AlarmType_Parse(alarm, &type)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown alarm ", alarm));
  }
  etcdserverpb::AlarmRequest req;
  req.set_action(on ? etcdserverpb::AlarmRequest::ACTIVATE
                    : etcdserverpb::AlarmRequest::DEACTIVATE);
  req.set_memberid(member_id);
  req.set_alarm(type);
  etcdserverpb::AlarmResponse resp;
  return CallAny(
      on ? "AlarmActivate" : "AlarmDisarm", true,
      [&](Stubs& st, grpc::ClientContext& ctx) { return st.maintenance->Alarm(&ctx, req, &resp); });
}

absl::StatusOr<int64_t> EtcdClient::LeaseGrant(std::chrono::seconds ttl) {
  etcdserverpb::LeaseGrantRequest req;
  req.set_ttl(ttl.count());
  etcdserverpb::LeaseGrantResponse resp;
  absl::Status s = CallAny("LeaseGrant", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.lease->LeaseGrant(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  if (!resp.error().empty()) return absl::UnavailableError("LeaseGrant: " + resp.error());
  return resp.id();
}

absl::Status EtcdClient::LeaseRevoke(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest req;
  req.set_id(lease);
  etcdserverpb::LeaseRevokeResponse resp;
  return CallAny("LeaseRevoke", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.lease->LeaseRevoke(&ctx, req, &resp);
  });
}

namespace {
// etcd 3.4 renders an alarm as the text form of AlarmMember: "memberID:N alarm:NOSPACE ".
std::optional<std::string> AlarmName(const std::string& e) {
  auto at = e.find("alarm:");
  if (at == std::string::npos) return std::nullopt;
  std::string name = e.substr(at + 6);
  while (!name.empty() && (name.back() == ' ' || name.back() == '\n')) name.pop_back();
  return name;
}
}  // namespace

absl::StatusOr<std::vector<std::optional<std::string>>> GetKeys(
    EtcdApi& etcd, const std::vector<std::string>& keys) {
  etcdserverpb::TxnRequest txn;
  for (const std::string& key : keys) txn.add_success()->mutable_request_range()->set_key(key);
  auto resp = etcd.Txn(txn);
  if (!resp.ok()) return resp.status();
  if (resp->responses_size() != static_cast<int>(keys.size())) {
    return absl::InternalError("a read transaction answered with the wrong number of ranges");
  }
  std::vector<std::optional<std::string>> out;
  for (const auto& r : resp->responses()) {
    const auto& range = r.response_range();
    out.push_back(range.kvs_size() > 0 ? std::optional<std::string>(range.kvs(0).value())
                                       : std::nullopt);
  }
  return out;
}

std::vector<std::string> FailureErrors(const MemberStatus& st) {
  std::vector<std::string> out;
  for (const auto& e : st.errors) {
    if (!AlarmName(e)) out.push_back(e);
  }
  return out;
}

std::vector<std::string> AlarmErrors(const MemberStatus& st) {
  std::vector<std::string> out;
  for (const auto& e : st.errors) {
    if (auto a = AlarmName(e)) out.push_back(*a);
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> EtcdClient::LeaseLeases() {
  etcdserverpb::LeaseLeasesRequest req;
  etcdserverpb::LeaseLeasesResponse resp;
  absl::Status s = CallAny("LeaseLeases", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.lease->LeaseLeases(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  std::vector<int64_t> out;
  for (const auto& l : resp.leases()) out.push_back(l.id());
  return out;
}

absl::Status EtcdClient::LeaseKeepAliveOnce(int64_t lease) {
  etcdserverpb::LeaseKeepAliveResponse resp;
  absl::Status s = CallAny("LeaseKeepAlive", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    auto stream = st.lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    if (!stream->Write(req)) return stream->Finish();
    stream->WritesDone();
    if (!stream->Read(&resp)) return stream->Finish();
    ctx.TryCancel();
    stream->Finish();
    return grpc::Status::OK;
  });
  if (!s.ok()) return s;
  if (resp.ttl() <= 0) return absl::NotFoundError(absl::StrCat("lease ", lease, " has expired"));
  return absl::OkStatus();
}

etcdserverpb::Watch::Stub* EtcdClient::BulkWatchStub(const std::string& endpoint) {
  MutexLock lock(&channels_->mu);
  return ChannelPool::Slot(*this, channels_->bulk_watch, endpoint, ChannelPool::Kind::kBulkWatch)
      .watch.get();
}

std::string EtcdClient::PreferredEndpoint() {
  MutexLock lock(&mu_);
  return endpoints_.empty() ? "" : endpoints_[preferred_ % endpoints_.size()];
}

absl::StatusOr<etcdserverpb::TxnResponse> EtcdClient::Txn(const etcdserverpb::TxnRequest& req) {
  etcdserverpb::TxnResponse resp;
  // A transaction of reads only may be retried on another member after a timeout.
  bool read_only = req.compare_size() == 0 && req.failure_size() == 0;
  for (const auto& op : req.success()) read_only = read_only && op.has_request_range();
  absl::Status s = CallAny("Txn", read_only, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.kv->Txn(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp;
}

absl::StatusOr<MemberStatus> EtcdClient::Status(const std::string& endpoint) {
  return Status(endpoint, options_.timeout);
}

absl::StatusOr<MemberStatus> EtcdClient::Status(const std::string& endpoint,
                                                std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::StatusResponse resp;
  grpc::Status gs =
      StubsFor(endpoint).maintenance->Status(&ctx, etcdserverpb::StatusRequest(), &resp);
  if (!gs.ok()) return FromGrpc(gs, absl::StrCat("Status ", endpoint));
  MemberStatus out;
  out.endpoint = endpoint;
  out.member_id = resp.header().member_id();
  out.cluster_id = resp.header().cluster_id();
  out.revision = resp.header().revision();
  out.version = resp.version();
  out.db_size = resp.dbsize();
  out.db_size_in_use = resp.dbsizeinuse();
  out.leader = resp.leader();
  out.raft_index = resp.raftindex();
  out.raft_term = resp.raftterm();
  out.raft_applied_index = resp.raftappliedindex();
  out.is_learner = resp.islearner();
  out.errors.assign(resp.errors().begin(), resp.errors().end());
  return out;
}

absl::Status EtcdClient::Compact(int64_t revision, bool physical,
                                 std::chrono::milliseconds timeout) {
  etcdserverpb::CompactionRequest req;
  req.set_revision(revision);
  req.set_physical(physical);
  etcdserverpb::CompactionResponse resp;
  // Idempotent: compacting to the same revision again only says it is already compacted.
  return CallAny("Compact", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    return st.kv->Compact(&ctx, req, &resp);
  });
}

absl::StatusOr<EtcdApi::KvHash> EtcdClient::HashKV(int64_t revision,
                                                   std::chrono::milliseconds timeout) {
  etcdserverpb::HashKVRequest req;
  req.set_revision(revision);
  etcdserverpb::HashKVResponse resp;
  absl::Status s = CallAny("HashKV", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    ctx.set_deadline(std::chrono::system_clock::now() + timeout);
    return st.maintenance->HashKV(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return KvHash{resp.hash(), resp.compact_revision()};
}

absl::StatusOr<EtcdApi::KvHash> EtcdClient::HashKVOf(const std::string& endpoint, int64_t revision,
                                                     std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::HashKVRequest req;
  req.set_revision(revision);
  etcdserverpb::HashKVResponse resp;
  grpc::Status gs = StubsFor(endpoint).maintenance->HashKV(&ctx, req, &resp);
  if (!gs.ok()) return FromGrpc(gs, absl::StrCat("HashKV ", endpoint));
  return KvHash{resp.hash(), resp.compact_revision()};
}

absl::Status EtcdClient::Defragment(const std::string& endpoint,
                                    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::DefragmentResponse resp;
  return FromGrpc(
      StubsFor(endpoint).maintenance->Defragment(&ctx, etcdserverpb::DefragmentRequest(), &resp),
      absl::StrCat("Defragment ", endpoint));
}

absl::Status EtcdClient::MoveLeader(const std::string& leader_endpoint, uint64_t target,
                                    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::MoveLeaderRequest req;
  req.set_targetid(target);
  etcdserverpb::MoveLeaderResponse resp;
  return FromGrpc(StubsFor(leader_endpoint).maintenance->MoveLeader(&ctx, req, &resp),
                  absl::StrCat("MoveLeader ", leader_endpoint));
}

absl::StatusOr<uint64_t> EtcdClient::Snapshot(
    const std::string& endpoint, const std::function<absl::Status(std::string_view)>& sink,
    std::chrono::milliseconds timeout) {
  grpc::ClientContext ctx;
  SetDeadline(ctx, timeout);
  etcdserverpb::Maintenance::Stub* stub = StubsFor(endpoint).maintenance.get();
  if (options_.low_memory_snapshots) {
    MutexLock lock(&channels_->mu);
    stub = ChannelPool::Slot(*this, channels_->low_memory_snapshot, endpoint,
                             ChannelPool::Kind::kLowMemorySnapshot)
               .maintenance.get();
  }
  auto reader = stub->Snapshot(&ctx, etcdserverpb::SnapshotRequest());
  etcdserverpb::SnapshotResponse chunk;
  uint64_t total = 0;
  absl::Status sink_error;
  while (reader->Read(&chunk)) {
    total += chunk.blob().size();
    sink_error = sink(chunk.blob());
    if (!sink_error.ok()) {
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status gs = reader->Finish();
  if (!sink_error.ok()) return sink_error;
  if (!gs.ok()) return FromGrpc(gs, absl::StrCat("Snapshot ", endpoint));
  return total;
}

}  // namespace steward
