// Delta backups (backup/delta.h): the chain, the object checks, the restore point, and the
// replay's transactions — on a file store, without etcd.
#include "backup/delta.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backup/delta_writer.h"
#include "backup/encryption.h"
#include "backup/store.h"
#include "ctl/snapshot_cmd.h"
#include "etcd/api.h"
#include "restore/settle.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

BackupMeta Base(int64_t revision) {
  BackupMeta b;
  b.name = "20261127T080000Z-" + std::string(20 - std::to_string(revision).size(), '0') +
           std::to_string(revision);
  b.cluster = "demo";
  b.cluster_id = 0xabcdef0123456789ULL;
  b.revision = revision;
  return b;
}

// A full backup at `revision` whose snapshot ends at `revision_max`, taken ten minutes after
// Base's (`later`) or at the same time.
BackupMeta Full(int64_t revision, int64_t revision_max, bool later = false) {
  BackupMeta b = Base(revision);
  if (later) b.name.replace(0, 16, "20261127T081000Z");
  b.revision_max = revision_max;
  return b;
}

// An empty delta chunk of base `b` covering (from, to].
backup::DeltaChunk Chunk(const BackupMeta& b, int64_t from, int64_t to) {
  backup::DeltaChunk c;
  c.set_cluster(b.cluster);
  c.set_cluster_id(b.cluster_id);
  c.set_base(b.name);
  c.set_from_revision(from);
  c.set_to_revision(to);
  return c;
}

DeltaMeta Meta(const BackupMeta& b, int64_t from, int64_t to) {
  DeltaMeta m;
  m.name = DeltaName(from, to, "n1");
  m.cluster = b.cluster;
  m.cluster_id = b.cluster_id;
  m.base = b.name;
  m.from_revision = from;
  m.to_revision = to;
  return m;
}

TEST(DeltaChainTest, FollowsContiguousDeltasAndTakesTheFurthestOfOverlaps) {
  const BackupMeta b = Base(100);
  // Two writers for a moment stored (110, 120] and (110, 125]: both are the same history.
  auto chain = BuildDeltaChain(
      b, {Meta(b, 125, 130), Meta(b, 100, 110), Meta(b, 110, 120), Meta(b, 110, 125)});
  ASSERT_EQ(chain.deltas.size(), 3u);
  EXPECT_EQ(chain.deltas[0].name, DeltaName(100, 110, "n1"));
  EXPECT_EQ(chain.deltas[1].name, DeltaName(110, 125, "n1"));
  EXPECT_EQ(chain.deltas[2].name, DeltaName(125, 130, "n1"));
  EXPECT_EQ(chain.end_revision, 130);
  EXPECT_EQ(chain.stopped, "");
}

// A leader's last flush (100, 150] and the next leader's (100, 130], (130, 160]: the chain
// goes on through the overlap instead of stopping at 150 (review finding).
TEST(DeltaChainTest, GoesOnThroughDeltasThatOverlapWithoutSharingAnEnd) {
  const BackupMeta b = Base(100);
  auto chain = BuildDeltaChain(
      b, {Meta(b, 100, 150), Meta(b, 100, 130), Meta(b, 130, 160), Meta(b, 160, 170)});
  ASSERT_EQ(chain.deltas.size(), 3u) << chain.stopped;
  EXPECT_EQ(chain.deltas[0].to_revision, 150);
  EXPECT_EQ(chain.deltas[1].from_revision, 130);
  EXPECT_EQ(chain.end_revision, 170);
  EXPECT_EQ(chain.stopped, "");
}

TEST(DeltaChainTest, StopsAtAGapAndIgnoresOtherClustersDeltas) {
  const BackupMeta b = Base(100);
  DeltaMeta foreign = Meta(b, 110, 140);
  foreign.cluster_id = 1;  // a restored cluster's history is another history
  auto chain = BuildDeltaChain(b, {Meta(b, 100, 110), foreign, Meta(b, 115, 120)});
  ASSERT_EQ(chain.deltas.size(), 1u);
  EXPECT_EQ(chain.end_revision, 110);
  EXPECT_NE(chain.stopped.find("no delta covers revision 111, the next one starts at 115"),
            std::string::npos)
      << chain.stopped;
  EXPECT_NE(chain.stopped.find("another cluster"), std::string::npos) << chain.stopped;

  auto none = BuildDeltaChain(b, {});
  EXPECT_TRUE(none.deltas.empty());
  EXPECT_EQ(none.end_revision, 100);
  EXPECT_EQ(none.stopped, "");
}

// A catch-up's backlog stays within the 1000 revisions etcd sends per sync, so etcd does not
// read a long backlog from its database again at every sync; quiet keyspaces keep the longest
// pause.
TEST(DeltaWriterTest, TheCatchUpPauseKeepsTheBacklogWithinOneOfEtcdsBatches) {
  using std::chrono::milliseconds;
  const milliseconds longest(1000);
  EXPECT_EQ(DeltaWriter::CatchUpPause(0, longest), longest) << "nothing measured yet";
  EXPECT_EQ(DeltaWriter::CatchUpPause(100, longest), longest);
  EXPECT_EQ(DeltaWriter::CatchUpPause(500, longest), longest);
  for (double rate : {1000.0, 2500.0, 4000.0}) {
    const milliseconds pause = DeltaWriter::CatchUpPause(rate, longest);
    EXPECT_LT(pause, longest) << rate;
    // The backlog etcd finds at its next sync (up to 100 ms after the reopening).
    EXPECT_LT(rate * (static_cast<double>(pause.count()) + 100) / 1000, 1000) << rate;
  }
  EXPECT_LT(DeltaWriter::CatchUpPause(4000, longest), DeltaWriter::CatchUpPause(2500, longest));
  EXPECT_EQ(DeltaWriter::CatchUpPause(1e6, longest), milliseconds(50)) << "the floor";
  EXPECT_EQ(DeltaWriter::CatchUpPause(1e6, milliseconds(20)), milliseconds(20))
      << "never longer than asked";
}

// An etcd whose keyspace is written faster than anything can store it: its watch always has
// more (`kBatch` revisions of one or two 100 KiB puts each per Wait) and etcd is always far
// ahead.
// Each Wait checks that the writer holds no more than its bound of what it read and did not
// store yet.
class EndlessEtcd : public EtcdApi {
 public:
  static constexpr int kBatch = 8;
  static constexpr size_t kValue = 100 * 1024;

  EndlessEtcd(BackupStore* store, BackupMeta base) : store_(store), base_(std::move(base)) {}

  class Watch : public KeyWatch {
   public:
    Watch(EndlessEtcd* etcd, int64_t after) : etcd_(etcd), next_(after + 1) {}
    absl::StatusOr<std::vector<etcdserverpb::Event>> Wait(std::chrono::milliseconds) override {
      if (cancelled_.load()) return absl::CancelledError("watch cancelled");
      etcd_->CheckHeld();
      std::vector<etcdserverpb::Event> out;
      for (int i = 0; i < kBatch; ++i, ++next_) {
        // Every third revision is a transaction of two puts.
        for (int p = 0; p < (next_ % 3 == 0 ? 2 : 1); ++p) {
          etcdserverpb::Event e;
          e.mutable_kv()->set_key("/k" + std::to_string(next_ % 100) + "/" + std::to_string(p));
          e.mutable_kv()->set_value(std::string(kValue, static_cast<char>('a' + next_ % 26)));
          e.mutable_kv()->set_mod_revision(next_);
          out.push_back(std::move(e));
        }
      }
      etcd_->read_events_ += static_cast<int64_t>(out.size());
      return out;
    }
    void Cancel() override { cancelled_ = true; }
    int64_t header_revision() const override { return next_ + 100000; }

   private:
    EndlessEtcd* etcd_;
    int64_t next_;
    std::atomic<bool> cancelled_{false};
  };

  // What was read and is not in the stored chain must fit the writer's pending bound and
  // the message that pushed it over.
  void CheckHeld() {
    auto chain = ListDeltaChain(*store_, base_);
    ASSERT_TRUE(chain.ok()) << chain.status();
    int64_t stored = 0;
    for (const DeltaMeta& m : chain->deltas) stored += m.events;
    const int64_t held = read_events_.load() - stored;
    EXPECT_LE(static_cast<size_t>(held) * kValue,
              DeltaWriter::kMaxPendingBytes + 2 * kBatch * kValue)
        << "read " << read_events_.load() << " events, stored " << stored;
  }

  std::atomic<int64_t> read_events_{0};

  const std::vector<std::string>& endpoints() const override { return urls_; }
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t* cluster_id) override {
    if (cluster_id != nullptr) *cluster_id = base_.cluster_id;
    return std::vector<MemberInfo>{};
  }
  absl::StatusOr<std::unique_ptr<KeyWatch>> WatchRange(const std::string&, const std::string&,
                                                       int64_t after,
                                                       std::chrono::milliseconds) override {
    return std::unique_ptr<KeyWatch>(std::make_unique<Watch>(this, after));
  }
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t*) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>&, bool) override {
    return absl::UnimplementedError("");
  }
  absl::Status MemberRemove(uint64_t) override { return absl::UnimplementedError(""); }
  absl::Status MemberPromote(uint64_t) override { return absl::UnimplementedError(""); }
  absl::Status Put(const std::string&, const std::string&, int64_t) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<std::optional<std::string>> Get(const std::string&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds) override {
    return absl::UnimplementedError("");
  }
  absl::Status LeaseRevoke(int64_t) override { return absl::UnimplementedError(""); }
  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override {
    return absl::UnimplementedError("");
  }
  absl::Status LeaseKeepAliveOnce(int64_t) override { return absl::UnimplementedError(""); }
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest&) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<MemberStatus> Status(const std::string&, std::chrono::milliseconds) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    std::chrono::milliseconds) override {
    return absl::UnimplementedError("");
  }

 private:
  BackupStore* store_;
  BackupMeta base_;
  std::vector<std::string> urls_;
};

// A DeltaWriter following a full backup at revision 100 in a file store, as leader, with
// deltas stored only once they pass the size bound.
class DeltaWriterRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("steward-delta-w-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    store_ = NewFileStore(root_.string());
    base_ = Full(100, 100);
    base_.sha256 = std::string(64, '0');
    ASSERT_TRUE(store_->Put(SnapshotKey(base_.cluster, base_.name), "snapshot").ok());
    ASSERT_TRUE(store_->Put(MetaKey(base_.cluster, base_.name), MetaToJson(base_).dump()).ok());
    config_.cluster.name = base_.cluster;
    config_.node.name = "n1";
    config_.backup.delta_interval = std::chrono::seconds(30);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Runs a writer on `etcd` until it has read `events` events (at most 30 s), then stops it
  // (it stores what it holds). Returns its status() from just before the stop.
  std::string RunUntilRead(EndlessEtcd& etcd, int64_t events) {
    DeltaWriter writer(config_, store_.get(), &etcd, [] { return true; });
    std::thread run([&] { writer.Run(); });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (etcd.read_events_.load() < events && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    const std::string status = writer.status();
    writer.Stop();
    run.join();
    EXPECT_GE(etcd.read_events_.load(), events);
    return status;
  }

  // The stored chain (a test failure if it stops short).
  DeltaChain Chain() {
    auto chain = ListDeltaChain(*store_, base_);
    EXPECT_TRUE(chain.ok()) << chain.status();
    if (!chain.ok()) return DeltaChain{};
    EXPECT_EQ(chain->stopped, "");
    return *chain;
  }
  static int64_t Events(const DeltaChain& chain) {
    int64_t n = 0;
    for (const DeltaMeta& m : chain.deltas) n += m.events;
    return n;
  }

  fs::path root_;
  std::unique_ptr<BackupStore> store_;
  BackupMeta base_;
  Config config_;
};

// A transaction's puts share one revision: every one of them is stored, not only the first
// (the others were skipped as if read before).
TEST_F(DeltaWriterRunTest, EveryEventOfARevisionIsStored) {
  EndlessEtcd etcd(store_.get(), base_);
  RunUntilRead(etcd, 200);
  EXPECT_EQ(Events(Chain()), etcd.read_events_.load())
      << "every event read is stored, both puts of a transaction too";
}

// Issue 35: writes faster than deltas are stored. The writer reads no faster than it stores
// (what it holds stays within kMaxPendingBytes and one message: EndlessEtcd checks), stores
// full deltas as it goes, and says that it is behind: in the log and in status().
TEST_F(DeltaWriterRunTest, AWriterThatFallsBehindHoldsABoundedAmountAndSaysSo) {
  EndlessEtcd etcd(store_.get(), base_);
  const std::string status = RunUntilRead(
      etcd, static_cast<int64_t>(5 * DeltaWriter::kMaxPendingBytes / EndlessEtcd::kValue));
  EXPECT_NE(status.find("behind etcd"), std::string::npos) << status;
  const DeltaChain chain = Chain();
  EXPECT_GE(chain.deltas.size(), 4u);
  EXPECT_EQ(Events(chain), etcd.read_events_.load()) << "what it held is stored when it stops";
}

// An etcd with no writes: each Wait gives nothing after its whole timeout (or a cancel).
class IdleEtcd : public EndlessEtcd {
 public:
  using EndlessEtcd::EndlessEtcd;
  class Watch : public KeyWatch {
   public:
    absl::StatusOr<std::vector<etcdserverpb::Event>> Wait(std::chrono::milliseconds t) override {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::min<std::chrono::milliseconds>(t, std::chrono::seconds(60)),
                   [this] { return cancelled_; });
      if (cancelled_) return absl::CancelledError("watch cancelled");
      return std::vector<etcdserverpb::Event>{};
    }
    void Cancel() override {
      std::lock_guard<std::mutex> lock(mu_);
      cancelled_ = true;
      cv_.notify_all();
    }

   private:
    std::mutex mu_;
    std::condition_variable cv_;
    bool cancelled_ = false;
  };
  absl::StatusOr<std::unique_ptr<KeyWatch>> WatchRange(const std::string&, const std::string&,
                                                       int64_t,
                                                       std::chrono::milliseconds) override {
    return std::unique_ptr<KeyWatch>(std::make_unique<Watch>());
  }
};

// A full backup taken while no writes come (an operator's `stewardctl backup` on a quiet
// cluster) is followed all the same: before, the writer looked for a newer one only when it
// had changes to store, so the deltas written after it went on in the older backup's chain and
// the newest backup's chain stayed empty (DeltaTest's point-in-time restores waited in vain).
TEST_F(DeltaWriterRunTest, ANewerFullBackupIsFollowedWithoutWrites) {
  config_.backup.delta_interval = std::chrono::seconds(60);
  IdleEtcd etcd(store_.get(), base_);
  DeltaWriter writer(config_, store_.get(), &etcd, [] { return true; });
  std::thread run([&] { writer.Run(); });
  auto following = [&](const std::string& name) {
    const auto deadline =
        std::chrono::steady_clock::now() + DeltaWriter::kBaseCheckEvery + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      if (writer.status().find("backup " + name) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  EXPECT_TRUE(following(base_.name)) << writer.status();
  BackupMeta newer = Full(200, 200, /*later=*/true);
  newer.sha256 = std::string(64, '0');
  ASSERT_TRUE(store_->Put(SnapshotKey(newer.cluster, newer.name), "snapshot").ok());
  ASSERT_TRUE(store_->Put(MetaKey(newer.cluster, newer.name), MetaToJson(newer).dump()).ok());
  EXPECT_TRUE(following(newer.name)) << writer.status();
  writer.Stop();
  run.join();
}

TEST(DeltaMetaTest, RoundTripsAndRefusesANameThatDisagreesWithItsRevisions) {
  const BackupMeta b = Base(7);
  DeltaMeta m = Meta(b, 7, 9);
  m.sha256 = std::string(64, 'a');
  m.events = 3;
  m.first_unix_ms = 1764230400123;
  auto back = DeltaMetaFromJson(DeltaMetaToJson(m).dump());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cluster_id, m.cluster_id);
  EXPECT_EQ(back->first_unix_ms, m.first_unix_ms);
  EXPECT_EQ(back->events, 3);
  auto j = DeltaMetaToJson(m);
  j["to_revision"] = 10;
  EXPECT_FALSE(DeltaMetaFromJson(j.dump()).ok());
  EXPECT_FALSE(DeltaMetaFromJson("not json").ok());
}

class DeltaStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("steward-delta-" + std::to_string(getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
    store_ = NewFileStore(root_.string());
  }
  void TearDown() override { fs::remove_all(root_); }

  // A delta of (from, to] with one put of key k<rev> = v<rev> per revision in `revs`.
  DeltaMeta Write(const BackupMeta& b, int64_t from, int64_t to, std::vector<int64_t> revs,
                  const std::string& node = "n1", int64_t t0_ms = 1764230400000) {
    backup::DeltaChunk c = Chunk(b, from, to);
    for (int64_t r : revs) {
      auto* rev = c.add_revisions();
      rev->set_revision(r);
      rev->set_unix_ms(t0_ms + r * 1000);
      auto* e = rev->add_events();
      e->mutable_kv()->set_key("k" + std::to_string(r));
      e->mutable_kv()->set_value("v" + std::to_string(r));
      e->mutable_kv()->set_mod_revision(r);
    }
    auto m = WriteDelta(*store_, c, node);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : DeltaMeta{};
  }

  // `bad` (of `base`'s chain 100-102, 102-105, 105-107) cannot be read: the restore point
  // stops before it, at 102, and says why (`why` is part of the reason).
  void ExpectStopsBefore(const BackupMeta& base, const DeltaMeta& bad, const std::string& why) {
    auto read = ReadDelta(*store_, bad);
    EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
    auto p = FindRestorePoint(*store_, base);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->revision, 102) << "the restore stops at the last good point";
    EXPECT_EQ(p->deltas, 1);
    EXPECT_NE(p->stopped.find(why), std::string::npos) << p->stopped;
  }

  fs::path root_;
  std::unique_ptr<BackupStore> store_;
};

TEST_F(DeltaStoreTest, WrittenDeltasReadBackAndFormTheRestorePoint) {
  const BackupMeta b = Base(100);
  Write(b, 100, 103, {101, 103});
  Write(b, 103, 110, {104, 108});
  auto chain = ListDeltaChain(*store_, b);
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->deltas.size(), 2u);
  EXPECT_EQ(chain->end_revision, 110);

  auto chunk = ReadDelta(*store_, chain->deltas[1]);
  ASSERT_TRUE(chunk.ok()) << chunk.status();
  ASSERT_EQ(chunk->revisions_size(), 2);
  EXPECT_EQ(chunk->revisions(1).events(0).kv().value(), "v108");

  auto all = FindRestorePoint(*store_, b);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->revision, 108);  // the last revision that holds a change
  EXPECT_EQ(all->deltas, 2);
  EXPECT_EQ(all->stopped, "");
  auto mid = FindRestorePoint(*store_, b, /*to_revision=*/104);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->revision, 104);
  auto by_time = FindRestorePoint(*store_, b, 0, /*to_unix_ms=*/1764230400000 + 103 * 1000);
  ASSERT_TRUE(by_time.ok());
  EXPECT_EQ(by_time->revision, 103);

  std::vector<int64_t> seen;
  ASSERT_TRUE(ForEachDeltaRevision(*store_, b, 104, [&](const backup::DeltaRevision& r) {
                seen.push_back(r.revision());
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen, (std::vector<int64_t>{101, 103, 104}));
  EXPECT_FALSE(ForEachDeltaRevision(*store_, b, 111,
                                    [](const backup::DeltaRevision&) { return absl::OkStatus(); })
                   .ok())
      << "a point past the chain's end must be refused";

  // Another writer of a moment stored an overlapping delta: its repeats are skipped.
  Write(b, 101, 112, {103, 104, 108, 112}, "n2");
  std::vector<int64_t> replayed;
  ASSERT_TRUE(ForEachDeltaRevision(*store_, b, 112, [&](const backup::DeltaRevision& r) {
                replayed.push_back(r.revision());
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(replayed, (std::vector<int64_t>{101, 103, 104, 108, 112}));
  auto further = FindRestorePoint(*store_, b);
  ASSERT_TRUE(further.ok());
  EXPECT_EQ(further->revision, 112);

  ASSERT_TRUE(DeleteDeltas(*store_, "demo", b.name).ok());
  auto gone = ListDeltaChain(*store_, b);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->deltas.empty());
}

TEST_F(DeltaStoreTest, ATamperedDeltaStopsTheRestorePointBeforeIt) {
  const BackupMeta b = Base(100);
  Write(b, 100, 102, {101, 102});
  DeltaMeta second = Write(b, 102, 105, {104});
  Write(b, 105, 107, {106});
  // Flip a byte of the middle object.
  const fs::path object = root_ / DeltaObjectKey("demo", b.name, second.name);
  std::string bytes;
  {
    std::ifstream in(object, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x40;
  std::ofstream(object, std::ios::binary | std::ios::trunc) << bytes;

  ExpectStopsBefore(b, second, "sha256");
  EXPECT_FALSE(ForEachDeltaRevision(*store_, b, 106, [](const backup::DeltaRevision&) {
                 return absl::OkStatus();
               }).ok());

  // A missing delta in the middle: the chain itself ends there.
  fs::remove(root_ / DeltaMetaKey("demo", b.name, second.name));
  auto chain = ListDeltaChain(*store_, b);
  ASSERT_TRUE(chain.ok());
  EXPECT_EQ(chain->end_revision, 102);
  EXPECT_NE(chain->stopped.find("starts at 105"), std::string::npos) << chain->stopped;
}

// Found by the simulation (steward_sim --deltas 5000, seed 4): a delta object lost while its
// meta stayed made every automatic restore wait ("cannot read the deltas"), for good, after
// total loss. The meta is written after the object and deleted before it, so a meta without
// its object is a lost object: the restore stops before it, as for a damaged one.
TEST_F(DeltaStoreTest, ALostDeltaObjectStopsTheRestorePointBeforeIt) {
  const BackupMeta b = Base(100);
  Write(b, 100, 102, {101, 102});
  DeltaMeta second = Write(b, 102, 105, {104});
  Write(b, 105, 107, {106});
  fs::remove(root_ / DeltaObjectKey("demo", b.name, second.name));
  ExpectStopsBefore(b, second, "missing");

  // Deleted as retention deletes (the meta first): gone, not lost; the chain ends before it.
  fs::remove(root_ / DeltaMetaKey("demo", b.name, second.name));
  EXPECT_TRUE(absl::IsNotFound(ReadDelta(*store_, second).status()));
  auto p = FindRestorePoint(*store_, b);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->revision, 102);
}

// A replacing intent names the restore it replaced, carries its orders on, and its point.
TEST_F(DeltaStoreTest, ARestoreIntentKeepsWhatItSupersedes) {
  RestoreIntent r;
  r.id = "1790000120-3021";
  r.backup = "20261127T080000Z-00000000000000000100";
  r.token = "steward-demo-r1790000120-3021";
  r.requested_by = "auto";
  r.delta_to = 112;
  r.ordered = true;
  r.supersedes = "1790000097-f2b6";
  r.initial_cluster = {{"n1", "https://127.0.0.1:2380"}};
  ASSERT_TRUE(WriteRestoreIntent(*store_, "demo", r).ok());
  auto back = ReadRestoreIntent(*store_, "demo");
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->supersedes, "1790000097-f2b6");
  EXPECT_TRUE((*back)->ordered);
  EXPECT_EQ((*back)->delta_to, 112);
  r.supersedes.clear();
  ASSERT_TRUE(WriteRestoreIntent(*store_, "demo", r).ok());
  back = ReadRestoreIntent(*store_, "demo");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->supersedes, "");
}

// Right after a full backup the leader's deltas are still in the older backup's chain: a
// restore takes the older one when it reaches further; a point before a backup's snapshot
// ended is never restored from that backup (review findings).
TEST_F(DeltaStoreTest, TheBaseIsTheOneWhoseChainReachesThePoint) {
  BackupMeta older = Full(100, 100);
  BackupMeta newer = Full(120, 121, /*later=*/true);
  Write(older, 100, 125, {110, 125});
  Write(older, 125, 130, {130});
  const std::vector<BackupMeta> both = {newer, older};
  auto all = ChooseRestoreBase(*store_, both);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->first, 1u) << "the older backup's chain reaches 130, the newer has none";
  EXPECT_EQ(all->second.revision, 130);

  Write(newer, 120, 140, {135, 140});
  all = ChooseRestoreBase(*store_, both);
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->first, 0u);
  EXPECT_EQ(all->second.revision, 140);

  // Revision 120 lies before the newer snapshot's end (121): only the older one can stop there.
  auto mid = ChooseRestoreBase(*store_, both, /*to_revision=*/120);
  ASSERT_TRUE(mid.ok());
  EXPECT_EQ(mid->first, 1u);
  EXPECT_EQ(mid->second.revision, 110);
  BackupMeta unknown = Base(90);  // from before delta backups: what it holds is unknown
  EXPECT_TRUE(absl::IsNotFound(ChooseRestoreBase(*store_, {unknown}, 95).status()));
}

// The older backup's chain is read only when it may reach past the newer one's point: after a
// bulk load and a full backup, that chain holds the whole load, and reading it made every
// restore wait for it. The load's object cannot be read here (a directory in its place: an I/O
// error, which says nothing about the chain): reading it would fail the choice.
TEST_F(DeltaStoreTest, AnOlderChainThatCannotReachFurtherIsNotRead) {
  BackupMeta older = Full(100, 100);
  BackupMeta newer = Full(130, 130, /*later=*/true);
  DeltaMeta load = Write(older, 100, 125, {110, 125});
  const fs::path load_object = root_ / DeltaObjectKey("demo", older.name, load.name);
  fs::remove(load_object);
  fs::create_directory(load_object);
  ASSERT_FALSE(ReadDelta(*store_, load).ok());
  ASSERT_FALSE(absl::IsDataLoss(ReadDelta(*store_, load).status()));
  auto choice = ChooseRestoreBase(*store_, {newer, older});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->first, 0u);
  EXPECT_EQ(choice->second.revision, 130);
  EXPECT_EQ(choice->second.deltas, 0);

  // Its last delta ends past the point (the agents' own writes count in a delta's end but are
  // not stored) and holds nothing after it: still not read further.
  Write(older, 125, 133, {128});
  choice = ChooseRestoreBase(*store_, {newer, older});
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->first, 0u);

  // A change after the point: now the whole chain is read (and the unreadable object makes the
  // choice wait rather than restore less).
  Write(older, 133, 135, {135});
  EXPECT_FALSE(ChooseRestoreBase(*store_, {newer, older}).ok());
  // Unless the point asked for lies before that change.
  choice = ChooseRestoreBase(*store_, {newer, older}, /*to_revision=*/134);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->first, 0u);
}

// Review finding: an overlapping delta from a leader whose clock ran ahead repeats revisions
// with later times. The shortcut must not stop at such a repeat: the full read skips repeats
// without looking at their time, and here reaches 135 through the chain.
TEST_F(DeltaStoreTest, ARepeatFromASkewedClockDoesNotCutTheOlderChainShort) {
  constexpr int64_t t0 = 1764230400000;
  BackupMeta older = Full(100, 100);
  older.finished_unix_ms = t0 + 100 * 1000;
  BackupMeta newer = Full(118, 118, /*later=*/true);
  newer.finished_unix_ms = t0 + 118 * 1000;
  Write(older, 100, 120, {105, 112, 115}, "n1", t0);
  Write(older, 110, 130, {112, 115}, "n2", t0 + 30 * 1000);  // its clock 30 s ahead
  Write(older, 130, 140, {135}, "n1", t0);
  auto choice = ChooseRestoreBase(*store_, {newer, older}, 0, /*to_unix_ms=*/t0 + 143 * 1000);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->first, 1u);
  EXPECT_EQ(choice->second.revision, 135);
}

TEST_F(DeltaStoreTest, DeltasAreEncryptedLikeSnapshots) {
  auto encrypted =
      NewEncryptedStore(NewFileStore(root_.string()), MakeEncryptionKey(std::string(32, 'k')), {});
  const BackupMeta b = Base(10);
  backup::DeltaChunk c = Chunk(b, 10, 11);
  auto* r = c.add_revisions();
  r->set_revision(11);
  r->add_events()->mutable_kv()->set_value("secret-canary-value");
  auto m = WriteDelta(*encrypted, c, "n1");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->encryption_key_id.empty());
  std::ifstream in(root_ / DeltaObjectKey("demo", b.name, m->name), std::ios::binary);
  const std::string raw((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(raw.substr(0, 8), "STWDENC1");
  EXPECT_EQ(raw.find("secret-canary-value"), std::string::npos);
  auto back = ReadDelta(*encrypted, *m);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->revisions(0).events(0).kv().value(), "secret-canary-value");
  // Without the key: a clear error, not a bad chain.
  EXPECT_TRUE(absl::IsFailedPrecondition(ReadDelta(*store_, *m).status()));
}

TEST(PointTimeTest, TakesUtcOrUnixSecondsAndRefusesMillisecondsAndTheFuture) {
  auto t = ParsePointTime("2026-11-27T08:40:00Z");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, 1795768800000);
  EXPECT_EQ(*ParsePointTime("1795768800"), 1795768800000);
  EXPECT_FALSE(ParsePointTime("1795768800000").ok()) << "milliseconds";
  EXPECT_FALSE(ParsePointTime("2026-11-27 08:40").ok());
  EXPECT_FALSE(ParsePointTime("2999-01-01T00:00:00Z").ok()) << "the future";
}

// A revision's events become transactions: in order, split at etcd's limits; a put under a
// lease is a delete for a restore (which revokes every lease) and a plain put for a drill.
TEST(RevisionTxnsTest, SplitsAtTheLimitsAndTreatsLeasedPutsAsAsked) {
  backup::DeltaRevision r;
  r.set_revision(7);
  for (int i = 0; i < 5; ++i) {
    auto* e = r.add_events();
    e->set_type(etcdserverpb::Event::PUT);
    e->mutable_kv()->set_key("k" + std::to_string(i));
    e->mutable_kv()->set_value(std::string(10, 'v'));
    if (i == 1) e->mutable_kv()->set_lease(42);
  }
  auto* del = r.add_events();
  del->set_type(etcdserverpb::Event::DELETE);
  del->mutable_kv()->set_key("gone");

  auto restore = RevisionTxns(r, ReplayShape{});
  ASSERT_EQ(restore.size(), 1u);
  ASSERT_EQ(restore[0].success_size(), 6);
  EXPECT_TRUE(restore[0].success(1).has_request_delete_range()) << "the leased key goes";
  EXPECT_EQ(restore[0].success(1).request_delete_range().key(), "k1");
  EXPECT_TRUE(restore[0].success(5).has_request_delete_range());

  ReplayShape drill;
  drill.keep_leased_puts = true;
  drill.max_ops = 4;
  auto kept = RevisionTxns(r, drill);
  ASSERT_EQ(kept.size(), 2u) << "6 operations at 4 a transaction";
  EXPECT_EQ(kept[0].success_size(), 4);
  EXPECT_EQ(kept[1].success_size(), 2);
  ASSERT_TRUE(kept[0].success(1).has_request_put()) << "the leased key stays, without its lease";
  EXPECT_EQ(kept[0].success(1).request_put().lease(), 0);
  EXPECT_EQ(kept[1].success(1).request_delete_range().key(), "gone") << "order kept";

  ReplayShape small;
  small.max_bytes = 25;  // two of the 12-byte puts a transaction
  auto by_size = RevisionTxns(r, small);
  ASSERT_EQ(by_size.size(), 3u);
  EXPECT_EQ(by_size[0].success_size(), 2);
  EXPECT_EQ(by_size[2].success_size(), 2);
  EXPECT_TRUE(RevisionTxns(backup::DeltaRevision{}, ReplayShape{}).empty());
}

// A restore packs revisions into few transactions: operations in order, a repeated key (which
// etcd refuses twice in one transaction) or a limit starts the next one.
TEST(TxnPackerTest, PacksDistinctKeysAndStartsAnewAtARepeatedKeyOrALimit) {
  auto put = [](const std::string& k, size_t bytes = 8) {
    etcdserverpb::TxnRequest t;
    auto* p = t.add_success()->mutable_request_put();
    p->set_key(k);
    p->set_value(std::string(bytes, 'v'));
    return t;
  };
  auto del = [](const std::string& k) {
    etcdserverpb::TxnRequest t;
    t.add_success()->mutable_request_delete_range()->set_key(k);
    return t;
  };
  auto keys = [](const etcdserverpb::TxnRequest& t) {
    std::vector<std::string> out;
    for (const auto& op : t.success()) {
      out.push_back((op.has_request_put() ? "put " + op.request_put().key()
                                          : "del " + op.request_delete_range().key()));
    }
    return out;
  };
  TxnPacker packer{ReplayShape{}};
  EXPECT_TRUE(packer.Add(put("a")).empty());
  EXPECT_TRUE(packer.Add(put("b")).empty());
  EXPECT_TRUE(packer.Add(del("c")).empty());
  auto done = packer.Add(put("a"));  // a again: the first three go out
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(keys(done[0]), (std::vector<std::string>{"put a", "put b", "del c"}));
  EXPECT_TRUE(packer.Add(del("b")).empty());
  done = packer.Add(put("b"));  // deleted, then put again: not in one transaction
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(keys(done[0]), (std::vector<std::string>{"put a", "del b"}));
  done = packer.Flush();
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(keys(done[0]), (std::vector<std::string>{"put b"}));
  EXPECT_TRUE(packer.Flush().empty()) << "nothing open";

  ReplayShape small;
  small.max_ops = 3;
  small.max_bytes = 40;  // keys of 1 byte + values of 8: four ops fit by size
  TxnPacker limited{small};
  std::vector<etcdserverpb::TxnRequest> all;
  for (const std::string k : {"1", "2", "3", "4", "5", "6", "7"}) {
    for (auto& t : limited.Add(put(k))) all.push_back(std::move(t));
  }
  for (auto& t : limited.Flush()) all.push_back(std::move(t));
  ASSERT_EQ(all.size(), 3u) << "7 puts at 3 a transaction";
  EXPECT_EQ(keys(all[2]), (std::vector<std::string>{"put 7"}));
  TxnPacker by_size{small};
  EXPECT_TRUE(by_size.Add(put("x", 30)).empty());
  done = by_size.Add(put("y", 30));  // 31 + 31 bytes > 40
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(keys(done[0]), (std::vector<std::string>{"put x"}));
}

// An etcd for ReplayDeltas: applies each transaction's puts and deletes in order (every guard
// compare holds), and refuses, as etcd does past --max-txn-ops, one of more than `max_ops`.
class ReplayEtcd : public EndlessEtcd {
 public:
  ReplayEtcd(BackupStore* store, BackupMeta base, int max_ops)
      : EndlessEtcd(store, std::move(base)), max_ops_(max_ops) {}
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest& req) override {
    if (req.success_size() > max_ops_) {
      ++refused;
      return absl::InvalidArgumentError("etcdserver: too many operations in txn request");
    }
    std::set<std::string> seen;
    for (const auto& op : req.success()) {
      const std::string& key =
          op.has_request_put() ? op.request_put().key() : op.request_delete_range().key();
      EXPECT_TRUE(seen.insert(key).second) << "etcd refuses a key twice in a transaction: " << key;
      if (op.has_request_put()) {
        kv[key] = op.request_put().value();
      } else {
        kv.erase(key);
      }
    }
    ++txns;
    etcdserverpb::TxnResponse r;
    r.set_succeeded(true);
    return r;
  }
  std::map<std::string, std::string> kv;
  int txns = 0, refused = 0;

 private:
  int max_ops_;
};

// A restore packs the deltas' revisions into few transactions and ends with the same keys as
// one transaction per revision; a transaction etcd refuses as too large goes again in halves.
TEST_F(DeltaStoreTest, ReplayPacksRevisionsAndEndsWhereOneTransactionPerRevisionEnds) {
  BackupMeta b = Full(100, 100);
  b.sha256 = std::string(64, '0');
  ASSERT_TRUE(store_->Put(MetaKey(b.cluster, b.name), MetaToJson(b).dump()).ok());
  // Revisions 101..160: a put of k<r % 7> (keys repeat), every fifth also deleting d<r % 3>
  // after putting it in an earlier revision.
  backup::DeltaChunk c = Chunk(b, 100, 160);
  std::map<std::string, std::string> want;
  for (int64_t r = 101; r <= 160; ++r) {
    auto* rev = c.add_revisions();
    rev->set_revision(r);
    rev->set_unix_ms(1764230400000 + r * 1000);
    auto* e = rev->add_events();
    e->mutable_kv()->set_key("k" + std::to_string(r % 7));
    e->mutable_kv()->set_value("v" + std::to_string(r));
    want[e->kv().key()] = e->kv().value();
    const std::string d = "d" + std::to_string(r % 3);
    auto* e2 = rev->add_events();
    e2->mutable_kv()->set_key(d);
    if (r % 5 == 0) {
      e2->set_type(etcdserverpb::Event::DELETE);
      want.erase(d);
    } else {
      e2->mutable_kv()->set_value("w" + std::to_string(r));
      want[d] = e2->kv().value();
    }
  }
  ASSERT_TRUE(WriteDelta(*store_, c, "n1").ok());

  struct Case {
    bool pack;
    int max_ops;  // etcd's limit
    int txns;     // the transactions etcd took
  };
  // Packed: the d keys repeat every 3 revisions, so 3 revisions (6 writes) a transaction; under
  // a limit of 4 each is refused once and goes again as 3 + 3.
  for (const Case& t : {Case{false, 128, 60}, Case{true, 128, 20}, Case{true, 4, 40}}) {
    ReplayEtcd etcd(store_.get(), b, t.max_ops);
    int64_t replayed = 0;
    absl::Status s =
        ReplayDeltas(*store_, b.cluster, b.name, 160, etcd, "guard", &replayed, nullptr, t.pack);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(replayed, 60) << t.pack;
    EXPECT_EQ(etcd.kv, want) << "pack " << t.pack << ", limit " << t.max_ops;
    EXPECT_EQ(etcd.txns, t.txns) << "pack " << t.pack << ", limit " << t.max_ops;
    EXPECT_EQ(etcd.refused, t.max_ops == 4 ? 20 : 0) << "pack " << t.pack;
  }
}

TEST(RevisionTxnsTest, DeltasKeepEverythingButTheAgentsOwnStatus) {
  EXPECT_TRUE(KeptInDeltas("demo", "/registry/pods/a"));
  EXPECT_TRUE(KeptInDeltas("demo", "/steward/other/status")) << "another cluster's prefix";
  EXPECT_TRUE(KeptInDeltas("demo", "/steward/demo/spec"));
  EXPECT_TRUE(KeptInDeltas("demo", "/steward/demo/maintenance"));
  EXPECT_FALSE(KeptInDeltas("demo", "/steward/demo/status"));
  EXPECT_FALSE(KeptInDeltas("demo", "/steward/demo/events/00000001"));
}

}  // namespace
}  // namespace steward
