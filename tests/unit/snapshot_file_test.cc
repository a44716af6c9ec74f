// Plain snapshot files (backup/snapshot_file.h) on synthetic bbolt files built here page by page:
// what Inspect reads (revision, raft index, version), what it refuses (not bbolt, not etcd's,
// truncated, a page out of bounds), the sha256 trailer check, and an import into a file store
// that round-trips through VerifyBackup, or leaves nothing behind when the file is bad. And
// which member snapshot save streams from (PickUpToDateSource), over a fake etcd.
#include "backup/snapshot_file.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "backup/pipeline.h"
#include "backup/store.h"
#include "bolt_builder.h"
#include "etcd/api.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using namespace bolt_builder;

// Pages: 0, 1 metas; 2 freelist; 3 the root bucket's leaf.
std::string EtcdLikeDb(bool with_key_bucket = true) {
  std::vector<Kv> root;
  if (with_key_bucket) {
    root.push_back({"cluster", InlineBucket({{"clusterVersion", "3.4.0"}}), 1});
    root.push_back({"key", InlineBucket({{Rev(5), "a"}, {Rev(9), "b"}, {Rev(7), "c"}}), 1});
    root.push_back({"meta", InlineBucket({{"consistent_index", Be64(1234)}}), 1});
  } else {
    root.push_back({"other", InlineBucket({{"x", "y"}}), 1});
  }
  std::string file(4 * kPage, '\0');
  Put<uint16_t>(file, 2 * kPage + 8, 0x10);
  std::string leaf = Leaf(root, kPage);
  file.replace(3 * kPage, kPage, leaf);
  Put<uint64_t>(file, 3 * kPage, 3);
  Meta(file, 0, 3, 4, 10);
  Meta(file, 1, 3, 4, 11);
  return file;
}

std::string WithTrailer(const std::string& db) {
  unsigned char h[32];
  SHA256(reinterpret_cast<const unsigned char*>(db.data()), db.size(), h);
  return db + std::string(reinterpret_cast<char*>(h), 32);
}

class SnapshotFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("snapfile-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "store");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& content) {
    std::string p = (dir_ / name).string();
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  fs::path dir_;
};

TEST_F(SnapshotFileTest, ReadsRevisionRaftIndexAndVersion) {
  auto info = InspectSnapshotFile(Write("a.db", EtcdLikeDb()));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->revision, 9);
  EXPECT_EQ(info->keys, 3u);
  EXPECT_EQ(info->consistent_index, 1234u);
  EXPECT_EQ(info->cluster_version, "3.4.0");
  EXPECT_EQ(info->page_size, kPage);
  EXPECT_EQ(info->txid, 11u) << "the valid meta with the higher txid";
  EXPECT_FALSE(info->has_trailer);
}

TEST_F(SnapshotFileTest, OneCorruptMetaIsEnoughAsBboltSays) {
  std::string db = EtcdLikeDb();
  db[kPage + 16 + 48] ^= 1;  // meta 1's txid: its checksum fails, meta 0 serves
  auto info = InspectSnapshotFile(Write("a.db", db));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->txid, 10u);
}

TEST_F(SnapshotFileTest, TrailerIsDetectedAndChecked) {
  const std::string path = Write("s.db", WithTrailer(EtcdLikeDb()));
  auto info = InspectSnapshotFile(path);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->has_trailer);
  EXPECT_EQ(info->revision, 9);
  uint64_t last = 0;
  EXPECT_TRUE(CheckSnapshotTrailer(path, [&](uint64_t b) { last = b; }).ok());
  EXPECT_EQ(last, 4 * kPage + 32);

  std::string flipped = WithTrailer(EtcdLikeDb());
  flipped[2 * kPage + 100] ^= 0x5a;  // the freelist page: the structure still reads
  const std::string bad = Write("bad.db", flipped);
  EXPECT_TRUE(InspectSnapshotFile(bad).ok());
  absl::Status s = CheckSnapshotTrailer(bad);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("does not match"), std::string_view::npos) << s;
  EXPECT_TRUE(absl::IsDataLoss(CheckSnapshotTrailer(Write("plain.db", EtcdLikeDb()))));
}

TEST_F(SnapshotFileTest, RefusesWhatIsNotAnEtcdBboltFile) {
  auto text = InspectSnapshotFile(Write("t.db", std::string(20000, 'x')));
  EXPECT_TRUE(absl::IsInvalidArgument(text.status())) << text.status();
  EXPECT_NE(text.status().message().find("not a bbolt database"), std::string_view::npos);

  auto tiny = InspectSnapshotFile(Write("e.db", ""));
  EXPECT_TRUE(absl::IsInvalidArgument(tiny.status())) << tiny.status();

  auto other = InspectSnapshotFile(Write("o.db", EtcdLikeDb(false)));
  EXPECT_TRUE(absl::IsInvalidArgument(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("not etcd's"), std::string_view::npos) << other.status();

  auto truncated = InspectSnapshotFile(Write("tr.db", EtcdLikeDb().substr(0, 3 * kPage)));
  EXPECT_TRUE(absl::IsInvalidArgument(truncated.status())) << truncated.status();
  EXPECT_NE(truncated.status().message().find("truncated"), std::string_view::npos)
      << truncated.status();

  std::string wild = EtcdLikeDb();
  Meta(wild, 0, 99, 4, 10);  // the root bucket's page beyond the end
  Meta(wild, 1, 99, 4, 11);
  auto out = InspectSnapshotFile(Write("w.db", wild));
  EXPECT_TRUE(absl::IsInvalidArgument(out.status())) << out.status();
  EXPECT_NE(out.status().message().find("corrupt"), std::string_view::npos) << out.status();

  EXPECT_TRUE(absl::IsNotFound(InspectSnapshotFile((dir_ / "missing.db").string()).status()));
}

TEST_F(SnapshotFileTest, ImportRoundTripsThroughTheStore) {
  auto store = NewFileStore((dir_ / "store").string());
  const std::string snap = WithTrailer(EtcdLikeDb());
  const std::string path = Write("s.db", snap);
  auto info = InspectSnapshotFile(path);
  ASSERT_TRUE(info.ok());
  ImportOptions opts;
  uint64_t seen = 0;
  opts.progress = [&](uint64_t b) { seen = b; };
  auto meta = ImportSnapshotFile(*store, "c1", path, *info, 3, opts);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(seen, snap.size());
  EXPECT_EQ(meta->revision, 9);
  EXPECT_EQ(meta->generation, 3);
  EXPECT_EQ(meta->imported_from, path);
  EXPECT_EQ(meta->etcd_version, "3.4.0");
  EXPECT_EQ(meta->db_size, snap.size());
  VerifyOptions v;
  v.out_path = (dir_ / "out.db").string();
  ASSERT_TRUE(VerifyBackup(*store, "c1", *meta, v).ok());
  std::ifstream in(v.out_path, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, snap);
  auto listed = ListBackups(*store, "c1");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].meta->imported_from, path) << "meta.json keeps the marker";
}

TEST_F(SnapshotFileTest, AFileWithoutTrailerNeedsSkipHashCheckAndGetsOne) {
  auto store = NewFileStore((dir_ / "store").string());
  const std::string db = EtcdLikeDb();
  const std::string path = Write("raw.db", db);
  auto info = InspectSnapshotFile(path);
  ASSERT_TRUE(info.ok());
  auto refused = ImportSnapshotFile(*store, "c1", path, *info, 0, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find("--skip-hash-check"), std::string_view::npos);
  ImportOptions opts;
  opts.skip_hash_check = true;
  auto meta = ImportSnapshotFile(*store, "c1", path, *info, 0, opts);
  ASSERT_TRUE(meta.ok()) << meta.status();
  VerifyOptions v;
  v.out_path = (dir_ / "out.db").string();
  ASSERT_TRUE(VerifyBackup(*store, "c1", *meta, v).ok());
  std::ifstream in(v.out_path, std::ios::binary);
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, WithTrailer(db)) << "stored with the trailer etcd would have appended";
}

TEST_F(SnapshotFileTest, ABadTrailerLeavesNothingInTheStore) {
  auto store = NewFileStore((dir_ / "store").string());
  std::string snap = WithTrailer(EtcdLikeDb());
  snap[2 * kPage + 7] ^= 1;
  const std::string path = Write("bad.db", snap);
  auto info = InspectSnapshotFile(path);
  ASSERT_TRUE(info.ok());
  auto meta = ImportSnapshotFile(*store, "c1", path, *info, 0, {});
  EXPECT_TRUE(absl::IsDataLoss(meta.status())) << meta.status();
  auto objects = store->List("c1/");
  ASSERT_TRUE(objects.ok());
  EXPECT_TRUE(objects->empty()) << objects->size() << " object(s) left, e.g. " << (*objects)[0].key;
}

// A fake etcd for PickUpToDateSource: members n1 (the leader), n2, n3 at u1..u3; each Status
// call of a member returns the next of its scripted applied indexes (the last one repeats).
class SourceEtcd : public EtcdApi {
 public:
  SourceEtcd() {
    for (int i = 1; i <= 3; ++i) {
      MemberInfo m;
      m.id = static_cast<uint64_t>(i);
      m.name = "n" + std::to_string(i);
      m.client_urls = {"u" + std::to_string(i)};
      members_.push_back(m);
    }
  }
  std::vector<MemberInfo> members_;
  uint64_t committed_ = 100;  // the leader's raft_index
  std::map<std::string, std::vector<uint64_t>> applied_;
  std::map<std::string, bool> down_;
  std::map<std::string, size_t> calls_;

  const std::vector<std::string>& endpoints() const override { return urls_; }
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t*) override { return members_; }
  absl::StatusOr<MemberStatus> Status(const std::string& url, std::chrono::milliseconds) override {
    if (down_[url]) return absl::UnavailableError("down");
    MemberStatus st;
    st.member_id = static_cast<uint64_t>(url[1] - '0');
    st.leader = 1;
    st.raft_index = committed_;
    const auto& script = applied_[url];
    const size_t n = calls_[url]++;
    st.raft_applied_index = script.empty() ? committed_ : script[std::min(n, script.size() - 1)];
    return st;
  }
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t*) override {
    return members_;
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
  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    std::chrono::milliseconds) override {
    return absl::UnimplementedError("");
  }

 private:
  std::vector<std::string> urls_ = {"u1", "u2", "u3"};
};

using std::chrono::milliseconds;

TEST(UpToDateSourceTest, ACaughtUpFollowerIsPreferred) {
  SourceEtcd etcd;
  etcd.applied_["u2"] = {90};  // behind the leader's committed index
  auto s = PickUpToDateSource(etcd, milliseconds(0));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->member, "n3");
}

TEST(UpToDateSourceTest, TheLeaderWhenNoFollowerHasApplied) {
  SourceEtcd etcd;
  etcd.applied_["u2"] = {90};
  etcd.applied_["u3"] = {95};
  auto s = PickUpToDateSource(etcd, milliseconds(2000));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->member, "n1");
}

TEST(UpToDateSourceTest, WaitsForAFollowerToCatchUp) {
  SourceEtcd etcd;
  etcd.applied_["u1"] = {99};           // even the leader has not applied its last entry yet
  etcd.applied_["u2"] = {90, 95, 100};  // caught up at its third answer
  etcd.applied_["u3"] = {80};
  auto s = PickUpToDateSource(etcd, milliseconds(5000));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->member, "n2");
}

TEST(UpToDateSourceTest, AfterTheBoundTheMostAppliedWins) {
  SourceEtcd etcd;
  etcd.applied_["u1"] = {91};
  etcd.applied_["u2"] = {97};
  etcd.applied_["u3"] = {80};
  auto s = PickUpToDateSource(etcd, milliseconds(0));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->member, "n2");
}

TEST(UpToDateSourceTest, SkipsLearnersAndMembersThatDoNotAnswer) {
  SourceEtcd etcd;
  etcd.members_[2].is_learner = true;  // n3: a learner is never a source
  etcd.down_["u2"] = true;
  auto s = PickUpToDateSource(etcd, milliseconds(0));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->member, "n1");
  etcd.down_["u1"] = true;
  auto none = PickUpToDateSource(etcd, milliseconds(0));
  EXPECT_TRUE(absl::IsUnavailable(none.status())) << none.status();
}

}  // namespace
}  // namespace steward
