#include "backup/drill.h"

#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backup/delta.h"
#include "backup/drill_scratch.h"
#include "backup/pipeline.h"
#include "common/files.h"
#include "common/mutex.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "etcd/agreement.h"
#include "etcd/bolt.h"
#include "etcd/client.h"
#include "etcd/keys.h"
#include "etcd/restore_in_place.h"
#include "etcd/version.h"
#include "etcd_rpc.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kScratchPrefix[] = "steward-drill-";
// Beyond the DB itself: etcd's WAL (64 MB preallocated) and its snap files.
constexpr uint64_t kScratchOverhead = 128ull << 20;
constexpr int64_t kPage = 500;  // keys per range read

int64_t MsSince(Clock::time_point t) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - t).count();
}

}  // namespace

void RemoveStaleScratch(const std::string& root) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kScratchPrefix, 0) != 0) continue;
    const pid_t pid = static_cast<pid_t>(std::atoll(name.c_str() + sizeof(kScratchPrefix) - 1));
    if (pid > 0 && (::kill(pid, 0) == 0 || errno != ESRCH)) continue;  // still running
    fs::remove_all(e.path(), ec);
  }
}

void ReplayedRevisions::Add(int64_t scratch, int64_t live) {
  const int64_t offset = live - scratch;
  if (scratch <= last_) return;  // not a revision of its own
  last_ = scratch;
  if (!runs_.empty() && runs_.back().second == offset) return;
  runs_.emplace_back(scratch, offset);
}

int64_t ReplayedRevisions::Live(int64_t scratch) const {
  auto after = std::upper_bound(runs_.begin(), runs_.end(),
                                std::make_pair(scratch, std::numeric_limits<int64_t>::max()));
  return after == runs_.begin() ? scratch : scratch + std::prev(after)->second;
}

namespace {

// One page of keys from `from` on (all keys: range_end "\0"), at `revision` (0: the head).
using TxnFn =
    std::function<absl::StatusOr<etcdserverpb::TxnResponse>(const etcdserverpb::TxnRequest&)>;

absl::StatusOr<etcdserverpb::RangeResponse> RangePage(const TxnFn& etcd, const std::string& from,
                                                      int64_t revision, int64_t limit,
                                                      bool count_only = false,
                                                      const std::string& end = std::string(1, '\0'),
                                                      bool keys_only = false) {
  etcdserverpb::TxnRequest txn;
  auto* r = txn.add_success()->mutable_request_range();
  r->set_key(from);
  r->set_range_end(end);
  r->set_keys_only(keys_only);
  r->set_limit(limit);
  r->set_revision(revision);
  r->set_count_only(count_only);
  auto resp = etcd(txn);
  if (!resp.ok()) return resp.status();
  if (resp->responses_size() != 1) return absl::InternalError("a range answered no range");
  return resp->responses(0).response_range();
}

std::string Printable(const std::string& key) {
  std::string out;
  for (char c : key.substr(0, 80)) out += (c >= 32 && c < 127) ? c : '?';
  return out;
}

// What the drill compares: the scratch etcd at `drill_revision` (its head once the deltas are
// in: a lease of the backup's expiring later changes nothing read) against the live cluster
// at `revision`, the scratch's revisions translated by `map`.
struct Sides {
  const TxnFn& drill;
  int64_t drill_revision;
  const TxnFn& live;
  int64_t revision;
  const ReplayedRevisions& map;
  // The key ranges [first, second) compared ("\0" as the end: every key after the first).
  std::vector<std::pair<std::string, std::string>> ranges;
  // Whether a key is compared at all (the sample's filter; the ranges say the same).
  std::function<bool(const std::string&)> compared;
  // -1: every value is compared. Else etcd's hash has proven both sides equal up to this
  // revision: keys and revisions are compared, and values only of keys changed after it.
  int64_t values_after = -1;
};

// The ranges a drill compares: every key without deltas; with them, what deltas keep (not the
// agents' own status under the reserved prefix, which they do not store).
std::vector<std::pair<std::string, std::string>> ComparedRanges(const std::string& cluster,
                                                                bool deltas) {
  const std::string all(1, '\0');
  if (!deltas) return {{all, all}};
  std::string reserved = ReservedPrefix(cluster);
  std::string past = reserved;
  past.back() = static_cast<char>(past.back() + 1);  // '/' + 1: just past the prefix
  std::vector<std::pair<std::string, std::string>> out = {{all, reserved}, {past, all}};
  for (const std::string& key : {SpecKey(cluster), MaintenanceKey(cluster)}) {
    out.emplace_back(key, key + all);
  }
  return out;
}

// Every key of both sides, page by page. A mismatch is put in `*failure`; an error is the live
// cluster's or the drill's answer (compacted: OutOfRange or a message saying so).
absl::Status CompareRange(const Sides& at, const std::string& begin, const std::string& end,
                          int64_t* keys, std::string* failure);

// The number of keys on both sides (from etcd's index: no value is read).
absl::Status CompareCounts(const Sides& at, int64_t drill_count, int64_t* keys,
                           std::string* failure) {
  auto want = RangePage(at.live, std::string(1, '\0'), at.revision, 0, /*count_only=*/true);
  if (!want.ok()) return want.status();
  *keys = drill_count;
  if (want->count() != drill_count) {
    *failure = absl::StrCat("the backup holds ", drill_count, " keys, the live cluster ",
                            want->count(), " at revision ", at.revision);
  }
  return absl::OkStatus();
}

// The values of `keys` on both sides, a hundred keys a transaction.
absl::Status CompareValues(const Sides& at, const std::vector<std::string>& keys,
                           std::string* failure) {
  constexpr size_t kBatch = 100;
  for (size_t first = 0; first < keys.size(); first += kBatch) {
    etcdserverpb::TxnRequest live_txn, drill_txn;
    const size_t last = std::min(keys.size(), first + kBatch);
    for (size_t i = first; i < last; ++i) {
      auto* l = live_txn.add_success()->mutable_request_range();
      l->set_key(keys[i]);
      l->set_revision(at.revision);
      auto* d = drill_txn.add_success()->mutable_request_range();
      d->set_key(keys[i]);
      d->set_revision(at.drill_revision);
    }
    auto want = at.live(live_txn);
    if (!want.ok()) return want.status();
    auto got = at.drill(drill_txn);
    if (!got.ok()) return Annotate(got.status(), "reading the scratch etcd");
    if (want->responses_size() != got->responses_size()) {
      return absl::InternalError("a transaction of ranges answered short");
    }
    for (int i = 0; i < want->responses_size(); ++i) {
      const auto& w = want->responses(i).response_range();
      const auto& g = got->responses(i).response_range();
      if (w.kvs_size() != 1 || g.kvs_size() != 1 || w.kvs(0).value() != g.kvs(0).value()) {
        *failure = absl::StrCat("key ", Printable(keys[first + i]), " has another value in the ",
                                "backup than in the live cluster at revision ", at.revision);
        return absl::OkStatus();
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CompareAll(const Sides& at, int64_t* keys, std::string* failure) {
  for (const auto& [begin, end] : at.ranges) {
    if (absl::Status s = CompareRange(at, begin, end, keys, failure);
        !s.ok() || !failure->empty()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status CompareRange(const Sides& at, const std::string& begin, const std::string& end,
                          int64_t* keys, std::string* failure) {
  const int64_t revision = at.revision;
  const bool keys_only = at.values_after >= 0;
  std::string from = begin;
  while (true) {
    auto want = RangePage(at.live, from, revision, kPage, false, end, keys_only);
    if (!want.ok()) return want.status();
    auto got = RangePage(at.drill, from, at.drill_revision, kPage, false, end, keys_only);
    if (!got.ok()) return Annotate(got.status(), "reading the scratch etcd");
    const int n = std::min(want->kvs_size(), got->kvs_size());
    std::vector<std::string> changed;  // since values_after: their values are read next
    for (int i = 0; i < n; ++i) {
      const auto& w = want->kvs(i);
      const auto& g = got->kvs(i);
      if (w.key() != g.key()) {
        *failure = absl::StrCat("key ", Printable(std::min(w.key(), g.key())), " is ",
                                w.key() < g.key() ? "in the live cluster but not in the backup"
                                                  : "in the backup but not in the live cluster",
                                " at revision ", revision);
        return absl::OkStatus();
      }
      if (w.mod_revision() != at.map.Live(g.mod_revision())) {
        *failure = absl::StrCat("key ", Printable(w.key()), " differs at revision ", revision,
                                ": the backup has it from revision ", at.map.Live(g.mod_revision()),
                                ", the live cluster from revision ", w.mod_revision());
        return absl::OkStatus();
      }
      if (w.value() != g.value()) {
        *failure = absl::StrCat("key ", Printable(w.key()), " has another value in the backup ",
                                "than in the live cluster at revision ", revision);
        return absl::OkStatus();
      }
      if (keys_only && w.mod_revision() > at.values_after) changed.push_back(w.key());
    }
    if (absl::Status s = CompareValues(at, changed, failure); !s.ok() || !failure->empty()) {
      return s;
    }
    *keys += n;
    if (want->kvs_size() != got->kvs_size() || want->more() != got->more()) {
      *failure = absl::StrCat(
          "the backup holds ", got->kvs_size() > want->kvs_size() ? "more" : "fewer",
          " keys than the live cluster at revision ", revision, " (after ", *keys, " that match)");
      return absl::OkStatus();
    }
    if (!want->more() || n == 0) return absl::OkStatus();
    from = want->kvs(n - 1).key() + std::string(1, '\0');
  }
}

// The live cluster no longer holds `revision`: keys it has not changed since must be as the
// backup has them (a sample spread over the keyspace).
absl::Status CompareSample(const Sides& at, size_t sample, int64_t total, int64_t* compared,
                           std::string* failure) {
  const int64_t per = static_cast<int64_t>(std::max<size_t>(1, sample));
  const int64_t step = std::max<int64_t>(1, total / per);
  std::string from(1, '\0');
  int64_t index = 0;
  while (true) {
    auto got = RangePage(at.drill, from, at.drill_revision, kPage);
    if (!got.ok()) return Annotate(got.status(), "reading the scratch etcd");
    for (const auto& g : got->kvs()) {
      if (!at.compared(g.key()) || index++ % step != 0) continue;
      etcdserverpb::TxnRequest txn;
      txn.add_success()->mutable_request_range()->set_key(g.key());
      auto now = at.live(txn);
      if (!now.ok()) return now.status();
      const auto& r = now->responses(0).response_range();
      const int64_t changed = at.map.Live(g.mod_revision());
      if (r.kvs_size() == 0 || r.kvs(0).mod_revision() != changed) continue;  // changed since
      if (r.kvs(0).value() != g.value()) {
        *failure = absl::StrCat("key ", Printable(g.key()), " (last changed at revision ", changed,
                                ") has another value in the live cluster");
        return absl::OkStatus();
      }
      ++*compared;
    }
    if (!got->more() || got->kvs_size() == 0) return absl::OkStatus();
    from = got->kvs(got->kvs_size() - 1).key() + std::string(1, '\0');
  }
}

bool Compacted(const absl::Status& s) {
  return absl::IsOutOfRange(s) || absl::StrContains(s.message(), "compacted");
}

// The scratch etcd takes a delta's revision in one transaction, so its revisions keep
// counting as the live cluster's did.
constexpr int kScratchMaxOps = 10000;
constexpr size_t kScratchMaxBytes = size_t{32} << 20;
constexpr char kScratchRequestBytes[] = "41943040";  // the above, with room for the request

// What etcd's own hash says of the base: HashKV of the scratch etcd and of the live cluster at
// the backup's revision. HashKV hashes what compaction keeps, so the scratch etcd is first
// compacted as far as the live cluster is. `equal` only when both hashes were had, over the
// same compaction, and match; `note` says why not otherwise.
struct BaseHash {
  bool equal = false;
  std::string note;
  std::optional<EtcdApi::KvHash> ours;  // the scratch etcd's, once compacted like the live one
};
BaseHash HashBase(const std::shared_ptr<grpc::Channel>& channel,
                  const absl::StatusOr<EtcdApi::KvHash>& theirs, int64_t revision) {
  BaseHash out;
  if (!theirs.ok()) {
    out.note = absl::StrCat("the live cluster gave no KV hash at revision ", revision, " (",
                            theirs.status().message(), ")");
    return out;
  }
  auto maintenance = etcdserverpb::Maintenance::NewStub(channel);
  auto hash = [&]() -> absl::StatusOr<etcdserverpb::HashKVResponse> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    etcdserverpb::HashKVRequest req;
    req.set_revision(revision);
    etcdserverpb::HashKVResponse resp;
    grpc::Status gs = maintenance->HashKV(&ctx, req, &resp);
    if (!gs.ok()) return absl::UnavailableError(absl::StrCat("HashKV: ", gs.error_message()));
    return resp;
  };
  auto ours = hash();
  if (ours.ok() && ours->compact_revision() < theirs->compact_revision) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    etcdserverpb::CompactionRequest req;
    req.set_revision(theirs->compact_revision);
    req.set_physical(true);
    etcdserverpb::CompactionResponse resp;
    if (grpc::Status gs = etcdserverpb::KV::NewStub(channel)->Compact(&ctx, req, &resp); !gs.ok()) {
      out.note = absl::StrCat("the scratch etcd could not be compacted to the live cluster's ",
                              theirs->compact_revision, " (", gs.error_message(), ")");
      return out;
    }
    ours = hash();
  }
  if (ours.ok()) out.ours = EtcdApi::KvHash{ours->hash(), ours->compact_revision()};
  if (!ours.ok()) {
    out.note = absl::StrCat("the scratch etcd gave no KV hash (", ours.status().message(), ")");
  } else if (ours->compact_revision() != theirs->compact_revision) {
    out.note = absl::StrCat("the backup is compacted at revision ", ours->compact_revision(),
                            ", the live cluster at ", theirs->compact_revision);
  } else if (ours->hash() != theirs->hash) {
    out.note = absl::StrCat("etcd's KV hash at revision ", revision, " differs (the backup's ",
                            ours->hash(), ", the live cluster's ", theirs->hash, ")");
  } else {
    out.equal = true;
  }
  return out;
}

// When a drill fails: which side is the odd one out. The backup's hash at `revision` against
// every live member's (etcd/agreement.h): a live member that differs from a majority the
// backup agrees with is named, and so is a backup that differs from an agreeing majority.
std::string OddOneOut(EtcdApi& live, int64_t revision, const BaseHash& base) {
  if (!base.ours) return "";
  auto members = live.MemberList();
  if (!members.ok()) return "";
  int voters = 0;
  std::vector<HashSample> samples;
  for (const auto& m : *members) {
    voters += m.is_learner ? 0 : 1;
    HashSample s;
    s.member = m.name;
    s.voter = !m.is_learner;
    if (!m.client_urls.empty()) {
      if (auto h = live.HashKVOf(m.client_urls.front(), revision, std::chrono::seconds(120));
          h.ok()) {
        s.hash = *h;
      }
    }
    samples.push_back(std::move(s));
  }
  const HashVerdict v = JudgeHashes(revision, samples, voters);
  if (!v.majority || v.compact_revision != base.ours->compact_revision) {
    return absl::StrCat("whose side is wrong is not known: the live members' hash check ", v.text);
  }
  if (base.ours->hash == v.majority_hash) {
    return v.differing.empty()
               ? absl::StrCat("the backup's KV hash at revision ", revision,
                              " is the one a majority of the live members holds")
               : absl::StrCat("the backup agrees with the majority of the live members (",
                              absl::StrJoin(v.agreeing, ", "), "); the odd one out is live member ",
                              absl::StrJoin(v.differing, ", "), ", not the backup");
  }
  return absl::StrCat("the backup is the odd one out: its KV hash at revision ", revision,
                      " differs from the one the live members ", absl::StrJoin(v.agreeing, ", "),
                      " agree on");
}

// Replays the deltas of `meta` up to `to_revision` into the scratch etcd, keys put under a
// lease kept (without it), and records in `map` which live revision each of its revisions
// holds; `*head` is its revision. A delta that does not check out is the drill's `*failure`.
absl::Status ReplayInto(BackupStore& store, const BackupMeta& meta, int64_t to_revision,
                        const TxnFn& drill, ReplayedRevisions* map, int64_t* head,
                        std::string* failure) {
  ReplayShape shape;
  shape.keep_leased_puts = true;
  shape.max_ops = kScratchMaxOps;
  shape.max_bytes = kScratchMaxBytes;
  bool broken = false;
  absl::Status s = ForEachDeltaRevision(
      store, meta, to_revision,
      [&](const backup::DeltaRevision& r) -> absl::Status {
        for (const etcdserverpb::TxnRequest& txn : RevisionTxns(r, shape)) {
          auto done = drill(txn);
          if (!done.ok()) {
            return Annotate(done.status(), absl::StrCat("replaying revision ", r.revision(),
                                                        " into the scratch etcd"));
          }
          if (const int64_t h = done->header().revision(); h > *head) {
            map->Add(h, r.revision());
            *head = h;
          }
        }
        return absl::OkStatus();
      },
      &broken);
  if (!s.ok() && broken) {
    *failure = absl::StrCat("the backup's deltas do not check out: ", s.message());
    return absl::OkStatus();
  }
  return s;
}

}  // namespace

namespace {

// The scratch directory under options.scratch_root, or "" with `r` skipped when the disk has
// too little room for the backup's DB.
absl::StatusOr<std::string> MakeScratchDir(const DrillOptions& options, const BackupMeta& meta,
                                           DrillResult* r) {
  std::error_code ec;
  fs::create_directories(options.scratch_root, ec);
  RemoveStaleScratch(options.scratch_root);
  struct statvfs vfs {};
  if (::statvfs(options.scratch_root.c_str(), &vfs) != 0) {
    return ErrnoStatus(errno, absl::StrCat("checking the free space of ", options.scratch_root));
  }
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  const uint64_t need = meta.db_size + kScratchOverhead;
  if (free_bytes < need) {
    r->skipped = true;
    r->failure = absl::StrCat("skipped: ", options.scratch_root, " has ", free_bytes >> 20,
                              " MiB free and the drill needs ", need >> 20, " MiB");
    return std::string();
  }
  return absl::StrCat(options.scratch_root, "/", kScratchPrefix, ::getpid(), "-",
                      std::random_device{}() % 100000);
}

// Fetches and checks the backup into `data` as a restore fetches it, then walks it and
// restores it in place as the member `drill` on `peer`. A verdict on the backup goes to
// r->failure; an error is no verdict (the store did not answer).
absl::Status FetchAndRestore(BackupStore& store, const std::string& cluster, const BackupMeta& meta,
                             const std::string& data, const std::string& peer, DrillResult* r) {
  std::error_code ec;
  fs::create_directories(data + "/member/snap", ec);
  if (ec) return absl::InternalError(absl::StrCat("making ", data, ": ", ec.message()));
  const auto t = Clock::now();
  VerifyOptions fetch;
  fetch.out_path = data + "/member/snap/db";
  if (absl::Status s = VerifyBackup(store, cluster, meta, fetch); !s.ok()) {
    if (!absl::IsDataLoss(s)) return s;
    r->failure = absl::StrCat("the backup does not check out: ", s.message());
    return absl::OkStatus();
  }
  InPlaceRestore restore;
  restore.data_dir = data;
  restore.name = "drill";
  restore.peer_url = peer;
  restore.token = "steward-drill";
  restore.initial_cluster = {{"drill", peer}};
  if (absl::Status s = RestoreInPlace(restore); !s.ok()) {
    r->failure = IsDamagedDb(s) ? std::string(s.message())
                                : absl::StrCat("the backup cannot be restored: ", s.message());
    return absl::OkStatus();
  }
  r->restore_ms = MsSince(t);
  return absl::OkStatus();
}

std::vector<std::string> ScratchFlags(const std::string& data, const std::string& client,
                                      const std::string& peer) {
  return {"--name",
          "drill",
          "--data-dir",
          data,
          "--listen-client-urls",
          client,
          "--advertise-client-urls",
          client,
          "--listen-peer-urls",
          peer,
          "--initial-advertise-peer-urls",
          peer,
          "--initial-cluster",
          "drill=" + peer,
          "--initial-cluster-token",
          "steward-drill",
          "--max-txn-ops",
          std::to_string(kScratchMaxOps),
          "--max-request-bytes",
          kScratchRequestBytes};
}

// A channel of its own rather than an EtcdClient: those give a connection 100 ms to bring the
// server's first HTTP/2 frame, and etcd 3.4 on plain http (cmux) took longer here, every time
// (their members are reached over TLS).
std::shared_ptr<grpc::Channel> ScratchChannel(int client_port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 5000);
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", client_port),
                                   grpc::InsecureChannelCredentials(), args);
}

TxnFn ChannelTxn(const std::shared_ptr<grpc::Channel>& channel) {
  std::shared_ptr<etcdserverpb::KV::Stub> kv = etcdserverpb::KV::NewStub(channel);
  return [kv](const etcdserverpb::TxnRequest& req) -> absl::StatusOr<etcdserverpb::TxnResponse> {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    etcdserverpb::TxnResponse resp;
    grpc::Status gs = kv->Txn(&ctx, req, &resp);
    if (!gs.ok()) return absl::UnavailableError(absl::StrCat("Txn: ", gs.error_message()));
    return resp;
  };
}

// Until the scratch etcd serves (bounded by options.start_bound): its key count at its own
// revision. A verdict (it exited, or never served) goes to r->failure.
absl::StatusOr<etcdserverpb::RangeResponse> WaitServing(ScratchEtcd& etcd, int client_port,
                                                        const TxnFn& drill,
                                                        const DrillOptions& options,
                                                        const std::string& log, DrillResult* r) {
  // The client only once etcd listens: a gRPC channel whose first connects were refused kept
  // failing its later ones here (connect timeouts) although etcd was serving.
  const auto deadline = Clock::now() + options.start_bound;
  while (Clock::now() < deadline && !etcd.Exited() && !Listening(client_port)) {
    std::this_thread::sleep_for(milliseconds(100));
  }
  absl::StatusOr<etcdserverpb::RangeResponse> count = absl::UnavailableError("not asked yet");
  while (Clock::now() < deadline) {
    count = RangePage(drill, std::string(1, '\0'), 0, 0, /*count_only=*/true);
    if (count.ok() || etcd.Exited()) break;
    std::this_thread::sleep_for(milliseconds(200));
  }
  if (!count.ok()) {
    r->failure =
        absl::StrCat(etcd.Exited() ? "etcd exited on the restored backup"
                                   : "etcd does not serve the restored "
                                     "backup within the bound",
                     " (", count.status().message(), "); its last words: ", LastLines(log, 3));
  }
  return count;
}

// What the scratch etcd serves (after the deltas, to r->to_revision) against the live
// cluster; the verdict goes to r->failure, what was compared to r->compared.
absl::Status CompareWithLive(const std::string& cluster, const TxnFn& drill, int64_t head,
                             EtcdApi& live, const ReplayedRevisions& map, const BaseHash& base,
                             int64_t base_revision, int64_t total, const DrillOptions& options,
                             DrillResult* r) {
  const auto t = Clock::now();
  const std::string reached = r->deltas == 0
                                  ? absl::StrCat("revision ", r->to_revision)
                                  : absl::StrCat("revision ", r->to_revision, " (the backup's ",
                                                 base_revision, " + ", r->deltas, " delta(s))");
  TxnFn live_txn = [&](const etcdserverpb::TxnRequest& req) { return live.Txn(req); };
  int64_t keys = 0;
  const bool with_deltas = r->deltas > 0;
  const Sides sides{
      drill,
      head,
      live_txn,
      r->to_revision,
      map,
      ComparedRanges(cluster, with_deltas),
      [&](const std::string& key) { return !with_deltas || KeptInDeltas(cluster, key); },
      base.equal ? base_revision : -1};
  // Without deltas an equal hash proves every revision up to the one compared, keys and
  // deletions included: the pages would read the whole DB again on both sides (etcd reads a
  // value even for a keys-only range) to prove nothing more. The counts are still compared.
  absl::Status cmp = base.equal && !with_deltas ? CompareCounts(sides, total, &keys, &r->failure)
                                                : CompareAll(sides, &keys, &r->failure);
  if (cmp.ok() && r->failure.empty()) {
    r->compared = absl::StrCat(
        "every key (", keys, ") with its value and revision matches the live cluster at ", reached,
        base.equal
            ? absl::StrCat(": etcd's KV hash at revision ", base_revision, " is the live cluster's",
                           with_deltas ? ", then every key and revision and the values "
                                         "changed since"
                                       : " and so is the count")
            : absl::StrCat(" (", base.note, ")"),
        with_deltas ? "; the agents' own status keys, which deltas do not keep, left out" : "");
  } else if (!cmp.ok() && Compacted(cmp)) {
    int64_t compared = 0;
    r->failure.clear();
    cmp = CompareSample(sides, options.sample, total, &compared, &r->failure);
    if (cmp.ok() && r->failure.empty()) {
      r->compared = absl::StrCat("the live cluster is compacted past ", reached, ": ", compared,
                                 " sampled key(s) it has not changed since match");
    }
  }
  if (!cmp.ok()) return Annotate(cmp, "comparing with the live cluster");
  r->compare_ms = MsSince(t);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DrillResult> RunDrill(BackupStore& store, const std::string& cluster,
                                     const BackupMeta& meta, EtcdApi& live,
                                     const DrillOptions& options) {
  DrillResult r;
  r.backup = meta.name;
  r.revision = meta.revision;
  auto dir = MakeScratchDir(options, meta, &r);
  if (!dir.ok()) return dir.status();
  if (r.skipped) return r;
  struct Remove {
    std::string dir;
    ~Remove() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } remove{*dir};
  const std::string data = *dir + "/data";

  // The live cluster's hash at the backup's revision, asked for now: a member scans its DB
  // for it (as etcd's own corruption check does) while this one restores the backup.
  std::future<absl::StatusOr<EtcdApi::KvHash>> live_hash =
      std::async(std::launch::async, [&live, revision = meta.revision] {
        return live.HashKV(revision, std::chrono::seconds(120));
      });
  auto peer_port = FreePort();
  auto client_port = FreePort();
  if (!peer_port.ok()) return peer_port.status();
  if (!client_port.ok()) return client_port.status();
  const std::string peer = absl::StrCat("http://127.0.0.1:", *peer_port);
  const std::string client = absl::StrCat("http://127.0.0.1:", *client_port);
  if (absl::Status s = FetchAndRestore(store, cluster, meta, data, peer, &r); !s.ok()) return s;
  if (!r.failure.empty()) return r;

  // The scratch etcd, until it serves.
  auto t = Clock::now();
  const std::string log = *dir + "/etcd.log";
  ScratchEtcd etcd;
  if (absl::Status s = etcd.Start(options.etcd_binary, ScratchFlags(data, client, peer), log);
      !s.ok()) {
    return s;
  }
  auto channel = ScratchChannel(*client_port);
  const TxnFn drill = ChannelTxn(channel);
  auto count = WaitServing(etcd, *client_port, drill, options, log, &r);
  if (!count.ok()) return r;
  r.start_ms = MsSince(t);

  // The snapshot's own revision. meta.revision is the source's revision just before the stream
  // started, so the snapshot holds at least that one and also what was written in between
  // (meta.revision_max bounds it): compare at the revision it holds, or every write in that gap
  // would count as a difference.
  int64_t head = count->header().revision();
  const int64_t base_revision = std::max(head, meta.revision);

  // The base, by etcd's own hash where both sides give one.
  t = Clock::now();
  absl::StatusOr<EtcdApi::KvHash> live_base = live_hash.get();
  if (base_revision != meta.revision) {
    live_base = live.HashKV(base_revision, std::chrono::seconds(120));
  }
  const BaseHash base = HashBase(channel, live_base, base_revision);
  r.hash_ms = MsSince(t);

  // The deltas, as far as they reach now.
  t = Clock::now();
  ReplayedRevisions map;
  r.to_revision = base_revision;
  auto chain = ListDeltaChain(store, meta);
  if (!chain.ok()) return Annotate(chain.status(), "listing the backup's deltas");
  if (!chain->deltas.empty()) {
    LeaseKeeper keeper(channel);
    if (absl::Status s =
            ReplayInto(store, meta, chain->end_revision, drill, &map, &head, &r.failure);
        !s.ok()) {
      return s;
    }
    if (!r.failure.empty()) return r;
    r.deltas = static_cast<int64_t>(chain->deltas.size());
    r.to_revision = chain->end_revision;
  }
  r.replay_ms = MsSince(t);
  auto total = RangePage(drill, std::string(1, '\0'), head, 0, /*count_only=*/true);
  if (!total.ok()) return Annotate(total.status(), "counting the scratch etcd's keys");

  // What it serves against the live cluster.
  if (absl::Status s = CompareWithLive(cluster, drill, head, live, map, base, base_revision,
                                       total->count(), options, &r);
      !s.ok()) {
    return s;
  }
  r.keys = total->count();
  if (r.failure.empty() && !chain->stopped.empty()) {
    // What is there matches, but a restore now would stop where the chain does.
    r.failure = absl::StrCat(r.compared, "; but the backup's deltas stop at revision ",
                             chain->end_revision, ": ", chain->stopped);
  }
  if (!r.failure.empty() && !base.equal) {
    if (std::string odd = OddOneOut(live, base_revision, base); !odd.empty()) {
      absl::StrAppend(&r.failure, "; ", odd);
    }
  }
  r.passed = r.failure.empty();
  return r;
}

std::string DrillEtcdFor(const Config& config, const std::string& version) {
  std::string best;
  for (const auto& [v, path] : config.etcd.versions) {
    if (SameMinor(v, version) && (best.empty() || ParseVersion(v) > ParseVersion(best))) best = v;
  }
  return best.empty() ? config.etcd.binary : config.etcd.versions.at(best);
}

absl::Status RecordDrill(BackupStore& store, const std::string& cluster, const DrillResult& r,
                         int64_t now_unix) {
  nlohmann::json j = {{"at", now_unix},           {"passed", r.passed},
                      {"skipped", r.skipped},     {"revision", r.revision},
                      {"deltas", r.deltas},       {"to_revision", r.to_revision},
                      {"keys", r.keys},           {"compared", r.compared},
                      {"failure", r.failure},     {"restore_ms", r.restore_ms},
                      {"start_ms", r.start_ms},   {"hash_ms", r.hash_ms},
                      {"replay_ms", r.replay_ms}, {"compare_ms", r.compare_ms}};
  return store.Put(absl::StrCat(BackupsPrefix(cluster), r.backup, "/verified.json"), j.dump());
}

std::string DrillRefutes(const std::string& verified_json) {
  auto j = nlohmann::json::parse(verified_json, nullptr, false);
  if (!j.is_object() || j.value("passed", true) || j.value("skipped", false)) return "";
  const std::string failure = j.value("failure", std::string());
  if (failure.find(", not the backup") != std::string::npos) return "";
  return absl::StrCat("its restore drill failed: ", failure);
}

std::string DescribeDrill(const std::string& verified_json) {
  auto j = nlohmann::json::parse(verified_json, nullptr, false);
  if (!j.is_object()) return "";
  const int64_t at = j.value("at", int64_t{0});
  char when[32] = "?";
  time_t tt = static_cast<time_t>(at);
  struct tm tm {};
  if (gmtime_r(&tt, &tm) != nullptr) strftime(when, sizeof when, "%Y-%m-%d %H:%MZ", &tm);
  if (j.value("skipped", false)) return absl::StrCat("skipped ", when);
  if (!j.value("passed", false)) return absl::StrCat("FAILED ", when, ": ", j.value("failure", ""));
  const int64_t deltas = j.value("deltas", int64_t{0});
  return absl::StrCat("ok ", when, " (", j.value("keys", int64_t{0}), " keys",
                      deltas > 0 ? absl::StrCat(", +", deltas, " deltas to rev ",
                                                j.value("to_revision", int64_t{0}))
                                 : "",
                      ")");
}

}  // namespace steward
