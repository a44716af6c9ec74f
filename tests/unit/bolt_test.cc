// The bbolt editor (etcd/bolt.h) and the in-place restore (etcd/restore_in_place.h) on small
// bbolt files built byte by byte (bolt_builder.h). Real etcd DBs are edited in
// tests/integration/restore_in_place_test.cc; here the corner cases: which meta page is
// written, an inline (empty) keyspace, etcd's sha256 trailer, damage and bad input refused with
// the file left as it was.
#include "etcd/bolt.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "bolt_builder.h"
#include "common/files.h"
#include "etcd/restore_in_place.h"
#include "etcd/wal.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using namespace bolt_builder;

// An etcd-like DB: the buckets a restore edits, all inline, with one old member and (unless
// `empty`) two revisions in "key" (the newer a tombstone); meta 0 at txid 51 (in use), meta 1
// at 50. Pages: 0, 1 metas; 2 the root bucket's leaf.
std::string SmallDb(bool empty = false) {
  std::vector<Kv> keys;
  if (!empty) {
    keys.push_back({RevisionKey(2, 0), "v2"});
    keys.push_back({RevisionKey(7, 0) + "t", "v7"});
  }
  std::string file(3 * kPage, '\0');
  file.replace(2 * kPage, kPage,
               Leaf({{"key", InlineBucket(keys), 1},
                     {"members", InlineBucket({{"abc", "{\"id\":2748}"}}), 1},
                     {"members_removed", InlineBucket({{"def", "removed"}}), 1},
                     {"meta", InlineBucket({{"consistent_index", std::string(8, '\x09')}}), 1}},
                    kPage));
  Put<uint64_t>(file, 2 * kPage, 2);
  Meta(file, 0, 2, 3, 51, ~uint64_t{0});
  Meta(file, 1, 2, 3, 50, ~uint64_t{0});
  return file;
}

class BoltTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("steward-bolt-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "member/snap");
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Db() const { return (dir_ / "member/snap/db").string(); }
  void WriteDb(const std::string& bytes) { std::ofstream(Db(), std::ios::binary) << bytes; }
  std::string ReadDb() const { return *ReadFile(Db()); }
  InPlaceRestore Request() const {
    InPlaceRestore r;
    r.data_dir = dir_.string();
    r.name = "n1";
    r.peer_url = "https://127.0.0.1:2380";
    r.token = "tok";
    r.initial_cluster = {{"n1", "https://127.0.0.1:2380"}, {"n2", "https://127.0.0.2:2380"}};
    return r;
  }
  fs::path dir_;
};

TEST_F(BoltTest, TheNewMetaNeverOverwritesTheOneInUse) {
  WriteDb(SmallDb());
  const std::string before = ReadDb();
  {
    auto f = BoltFile::Open(Db());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->txid(), 51u);
    ASSERT_TRUE((*f)->Put("meta", "k", "v").ok());
    ASSERT_TRUE((*f)->Commit().ok());
  }
  const std::string after = ReadDb();
  // Meta page 0 holds txid 51, the one in use: txid 52 would belong there, so 53 goes to page 1.
  EXPECT_EQ(after.substr(0, kPage), before.substr(0, kPage));
  EXPECT_NE(after.substr(kPage, kPage), before.substr(kPage, kPage));
  auto f = BoltFile::Open(Db());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->txid(), 53u);
  auto meta = (*f)->ReadBucket("meta");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->at("k"), "v");
  EXPECT_EQ(meta->at("consistent_index"), std::string(8, '\x09'));
}

TEST_F(BoltTest, ADamagedMetaZeroIsPassedOverAsBboltDoes) {
  std::string db = SmallDb();
  db[16 + 20] ^= 1;  // meta 0 (txid 51) fails its checksum: meta 1 (txid 50) is the one in use
  WriteDb(db);
  {
    auto f = BoltFile::Open(Db());
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ((*f)->txid(), 50u);
    ASSERT_TRUE((*f)->Put("meta", "k", "v").ok());
    ASSERT_TRUE((*f)->Commit().ok());
  }
  EXPECT_EQ(ReadDb().substr(kPage, kPage), db.substr(kPage, kPage));
  auto f = BoltFile::Open(Db());
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->txid(), 52u);
  EXPECT_EQ((*f)->ReadBucket("meta")->at("k"), "v");
}

TEST_F(BoltTest, ARestoreInPlaceMakesTheEditsAndWritesTheLog) {
  WriteDb(SmallDb() + std::string(32, 'h'));  // etcd's sha256 trailer
  InPlaceRestore r = Request();
  r.bump_revision = 1000;
  bool changed = false;
  ASSERT_TRUE(RestoreInPlace(r, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_EQ(fs::file_size(Db()) % kPage, 0u);
  auto f = BoltFile::Open(Db());
  ASSERT_TRUE(f.ok()) << f.status();
  auto members = (*f)->ReadBucket("members");
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(members->size(), 2u);
  EXPECT_EQ(members->count("abc"), 0u);
  EXPECT_TRUE((*f)->ReadBucket("members_removed")->empty());
  auto meta = *(*f)->ReadBucket("meta");
  EXPECT_EQ(meta.at("consistent_index"), std::string("\0\0\0\0\0\0\0\x02", 8));
  EXPECT_EQ(meta.at("term"), std::string("\0\0\0\0\0\0\0\x01", 8));
  // The newest revision was 7 (a tombstone): the bump lands at 1007, compaction scheduled there.
  EXPECT_EQ(*(*f)->LastKey("key"), RevisionKey(1007, 0));
  EXPECT_EQ(meta.at("scheduledCompactRev"), RevisionKey(1007, 0));
  EXPECT_EQ(meta.count("finishedCompactRev"), 0u);
  auto id = ReadWalIdentity(dir_.string());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*ReadWalCommit(dir_.string()), 2u);
  EXPECT_TRUE(fs::exists(dir_ / "member/snap/0000000000000001-0000000000000002.snap"));
  // Preallocated as etcd's own segments are (and read up to its zero-filled tail).
  EXPECT_EQ(fs::file_size(dir_ / "member/wal/0000000000000000-0000000000000000.wal"),
            kWalSegmentBytes);
}

// Issue 34: the WAL's segment is preallocated as etcd does, so a disk without room for it fails
// the restore (with the file named), not etcd's first writes after the node's data was set
// aside. A file size limit (RLIMIT_FSIZE) stands in for a full disk.
TEST_F(BoltTest, AWalSegmentThatDoesNotFitFailsTheRestore) {
  WriteDb(SmallDb());
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = old;
  small.rlim_cur = 16 * 1024 * 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s = RestoreInPlace(Request());
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("preallocating"), std::string::npos) << s;
  EXPECT_NE(s.message().find(".wal"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(dir_ / "member/wal/0000000000000000-0000000000000000.wal"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "member/wal"), fs::directory_iterator()), 0)
      << "and no temp file is left";
}

TEST_F(BoltTest, AnEmptyKeyspaceIsBumpedFromZero) {
  WriteDb(SmallDb(/*empty=*/true));
  InPlaceRestore r = Request();
  r.bump_revision = 500;
  ASSERT_TRUE(RestoreInPlace(r).ok());
  auto f = BoltFile::Open(Db());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*(*f)->LastKey("key"), RevisionKey(500, 0));
}

TEST_F(BoltTest, DamageIsRefusedAndTheFileIsLeftAsItWas) {
  std::string db = SmallDb();
  // The root page's header names another page.
  Put<uint64_t>(db, 2 * kPage, 9);
  WriteDb(db);
  bool changed = true;
  absl::Status s = RestoreInPlace(Request(), &changed);
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
  // Both meta pages failing their checksums.
  db = SmallDb();
  db[16 + 20] ^= 1;
  db[kPage + 16 + 20] ^= 1;
  WriteDb(db);
  EXPECT_FALSE(RestoreInPlace(Request(), &changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
  // A file cut short of the pages its meta counts.
  db = SmallDb().substr(0, 2 * kPage + 100);
  WriteDb(db);
  EXPECT_FALSE(RestoreInPlace(Request(), &changed).ok());
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
}

// A branch page `pgid` whose elements point at (first key, child page).
std::string Branch(uint64_t pgid, const std::vector<std::pair<std::string, uint64_t>>& kids,
                   uint32_t page = kPage) {
  std::string p(page, '\0');
  Put<uint64_t>(p, 0, pgid);
  Put<uint16_t>(p, 8, 0x01);
  Put<uint16_t>(p, 10, static_cast<uint16_t>(kids.size()));
  size_t data = 16 + 16 * kids.size();
  for (size_t i = 0; i < kids.size(); ++i) {
    const size_t e = 16 + 16 * i;
    Put<uint32_t>(p, e, static_cast<uint32_t>(data - e));
    Put<uint32_t>(p, e + 4, static_cast<uint32_t>(kids[i].first.size()));
    Put<uint64_t>(p, e + 8, kids[i].second);
    std::memcpy(p.data() + data, kids[i].first.data(), kids[i].first.size());
    data += kids[i].first.size();
  }
  return p;
}

// An etcd-like DB whose "key" bucket is a tree: page 3 a branch over leaves 4 (revisions 2, 3)
// and 5 (revisions 5, 7); the edit reads only the rightmost path (3, 5) of it.
std::string TreeDb(uint32_t page = kPage) {
  std::string file(6 * page, '\0');
  std::string key_bucket(16, '\0');
  Put<uint64_t>(key_bucket, 0, 3);
  file.replace(2 * page, page,
               Leaf({{"key", key_bucket, 1},
                     {"members", InlineBucket({{"abc", "{\"id\":2748}"}}), 1},
                     {"members_removed", InlineBucket({}), 1},
                     {"meta", InlineBucket({{"consistent_index", std::string(8, '\x09')}}), 1}},
                    page));
  Put<uint64_t>(file, 2 * page, 2);
  file.replace(3 * page, page, Branch(3, {{RevisionKey(2, 0), 4}, {RevisionKey(5, 0), 5}}, page));
  file.replace(4 * page, page, Leaf({{RevisionKey(2, 0), "v2"}, {RevisionKey(3, 0), "v3"}}, page));
  Put<uint64_t>(file, 4 * page, 4);
  file.replace(5 * page, page, Leaf({{RevisionKey(5, 0), "v5"}, {RevisionKey(7, 0), "v7"}}, page));
  Put<uint64_t>(file, 5 * page, 5);
  Meta(file, 0, 2, 6, 51, ~uint64_t{0}, page);
  Meta(file, 1, 2, 6, 50, ~uint64_t{0}, page);
  return file;
}

TEST_F(BoltTest, TheFullWalkPassesAGoodTreeAndRestoresIt) {
  WriteDb(TreeDb());
  auto f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  WriteDb(SmallDb());
  f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  WriteDb(TreeDb());
  InPlaceRestore r = Request();
  r.bump_revision = 10;
  ASSERT_TRUE(RestoreInPlace(r).ok());
  f = BoltFile::Open(Db(), false);
  EXPECT_TRUE((*f)->CheckAll().ok()) << "and the edited file walks clean too: " << (*f)->CheckAll();
}

// Issue 34: a leaf off the rightmost path with zeroed flags (a member's DB that rotted, streamed
// with a valid checksum) passed the edit, and etcd then panicked on every start. The full walk
// refuses it before anything is written, naming the page.
TEST_F(BoltTest, DamageOffTheEditsPathIsRefusedByTheFullWalk) {
  std::string db = TreeDb();
  Put<uint16_t>(db, 4 * kPage + 8, 0);  // the leftmost leaf of "key": flags zeroed
  WriteDb(db);
  bool changed = true;
  absl::Status s = RestoreInPlace(Request(), &changed);
  EXPECT_TRUE(IsDamagedDb(s)) << s;
  EXPECT_NE(s.message().find("page 4"), std::string::npos) << s;
  EXPECT_NE(s.message().find("bucket key"), std::string::npos) << s;
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
  InPlaceRestore check = Request();
  check.check_only = true;
  EXPECT_TRUE(IsDamagedDb(RestoreInPlace(check))) << "and the check before etcd stops says so";
  // A page two branch elements reach.
  db = TreeDb();
  db.replace(3 * kPage, kPage, Branch(3, {{RevisionKey(2, 0), 5}, {RevisionKey(5, 0), 5}}));
  WriteDb(db);
  s = RestoreInPlace(Request());
  EXPECT_TRUE(IsDamagedDb(s)) << s;
  // A child whose keys lie outside the range its branch keys give it.
  db = TreeDb();
  db.replace(3 * kPage, kPage, Branch(3, {{RevisionKey(2, 0), 5}, {RevisionKey(5, 0), 4}}));
  WriteDb(db);
  s = RestoreInPlace(Request());
  EXPECT_TRUE(IsDamagedDb(s)) << s;
  EXPECT_NE(s.message().find("outside the range"), std::string::npos) << s;
}

// bbolt's page size is the host's: 64 KiB on arm64 and ppc64le hosts (a snapshot taken there
// keeps it). The walk, the edit and damage off the edit's path at that size.
TEST_F(BoltTest, SixtyFourKibPagesAreWalkedEditedAndTheirDamageRefused) {
  constexpr uint32_t k64 = 65536;
  WriteDb(TreeDb(k64));
  auto f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ((*f)->page_size(), k64);
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  InPlaceRestore r = Request();
  r.bump_revision = 10;
  ASSERT_TRUE(RestoreInPlace(r).ok());
  f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  std::vector<std::string> keys;
  ASSERT_TRUE((*f)->ForEach("key", [&](std::string_view k, std::string_view,
                                       uint32_t) { keys.emplace_back(k); })
                  .ok());
  EXPECT_EQ(keys.size(), 5u) << "four revisions and the bumped one";
  EXPECT_EQ(keys.back(), RevisionKey(17, 0));
  EXPECT_EQ(fs::file_size(Db()) % k64, 0u) << "new pages are whole 64 KiB pages";
  auto members = (*f)->ReadBucket("members");
  ASSERT_TRUE(members.ok());
  EXPECT_EQ(members->size(), 2u);

  std::string db = TreeDb(k64);
  Put<uint16_t>(db, 4 * k64 + 8, 0);  // the leftmost leaf of "key", off the edit's path
  WriteDb(db);
  bool changed = true;
  absl::Status s = RestoreInPlace(Request(), &changed);
  EXPECT_TRUE(IsDamagedDb(s)) << s;
  EXPECT_NE(s.message().find("page 4"), std::string::npos) << s;
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
}

// A source whose meta records a freelist page (bbolt without NoFreelistSync: etcd on other
// systems, older tools): the walk accepts the freelist and the free pages it lists, the edit
// goes through, and the new meta records none (bbolt rebuilds it by walking, as etcd does).
TEST_F(BoltTest, ASourceWithAFreelistPageIsWalkedAndEdited) {
  std::string db = TreeDb();
  db.resize(8 * kPage, '\0');
  Put<uint64_t>(db, 6 * kPage, 6);
  Put<uint16_t>(db, 6 * kPage + 8, 0x10);  // a freelist page listing one free page, 7
  Put<uint16_t>(db, 6 * kPage + 10, 1);
  Put<uint64_t>(db, 6 * kPage + 16, 7);
  std::memset(db.data() + 7 * kPage, 0x5a, kPage);  // a free page holds anything
  Meta(db, 0, 2, 8, 51, 6);
  Meta(db, 1, 2, 8, 50, 6);
  WriteDb(db);
  auto f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  InPlaceRestore r = Request();
  r.bump_revision = 10;
  absl::Status s = RestoreInPlace(r);
  ASSERT_TRUE(s.ok()) << s;
  f = BoltFile::Open(Db(), false);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE((*f)->CheckAll().ok()) << (*f)->CheckAll();
  int keys = 0;
  ASSERT_TRUE(
      (*f)->ForEach("key", [&](std::string_view, std::string_view, uint32_t) { ++keys; }).ok());
  EXPECT_EQ(keys, 5);
  const std::string edited = ReadDb();
  uint64_t freelist = 0;
  const size_t meta = (*f)->txid() % 2 * kPage + 16;
  std::memcpy(&freelist, edited.data() + meta + 32, 8);
  EXPECT_EQ(freelist, ~uint64_t{0}) << "the new meta records no freelist";
}

// What a node without etcdutl asks before it stops etcd: would the edit go through? It reads
// what the edit reads and says so, and writes nothing, for a DB it takes or refuses.
TEST_F(BoltTest, ACheckOnlyReadsAsTheEditDoesAndWritesNothing) {
  const std::string good = SmallDb() + std::string(32, 'h');
  WriteDb(good);
  InPlaceRestore r = Request();
  r.bump_revision = 1000;
  r.check_only = true;
  bool changed = true;
  absl::Status s = RestoreInPlace(r, &changed);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), good);
  EXPECT_FALSE(fs::exists(dir_ / "member/wal"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_ / "member/snap"), fs::directory_iterator()),
            1);
  // A "key" bucket whose newest key is no revision: only the bump reads it, and refuses it.
  std::string bad(3 * kPage, '\0');
  bad.replace(2 * kPage, kPage,
              Leaf({{"key", InlineBucket({{"not-a-revision", "v"}}), 1},
                    {"members", InlineBucket({}), 1},
                    {"members_removed", InlineBucket({}), 1},
                    {"meta", InlineBucket({}), 1}},
                   kPage));
  Put<uint64_t>(bad, 2 * kPage, 2);
  Meta(bad, 0, 2, 3, 51, ~uint64_t{0});
  Meta(bad, 1, 2, 3, 50, ~uint64_t{0});
  WriteDb(bad);
  s = RestoreInPlace(r, &changed);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), bad);
  // Without the bump the same DB is taken, and the real edit then goes through.
  r.bump_revision = 0;
  EXPECT_TRUE(RestoreInPlace(r).ok());
  r.check_only = false;
  EXPECT_TRUE(RestoreInPlace(r, &changed).ok());
  EXPECT_TRUE(changed);
  EXPECT_NE(ReadDb(), bad);
}

// Found by bolt_fuzz: a meta page in use whose txid is at its limit (rewritten with a valid
// checksum) made the edit's new meta wrap to a lower txid, so bbolt kept reading the old meta and
// the edit was lost while the restore reported success. It is refused, by the check as well.
TEST_F(BoltTest, AMetaTxidAtItsLimitIsRefusedNotWrapped) {
  std::string db = SmallDb();
  Meta(db, 0, 2, 3, ~uint64_t{0}, ~uint64_t{0});
  WriteDb(db);
  InPlaceRestore r = Request();
  r.check_only = true;
  EXPECT_TRUE(absl::IsDataLoss(RestoreInPlace(r))) << "the check says so before etcd stops";
  r.check_only = false;
  bool changed = true;
  absl::Status s = RestoreInPlace(r, &changed);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("txid"), std::string::npos) << s;
  EXPECT_FALSE(changed);
  EXPECT_EQ(ReadDb(), db);
}

// Issue 34: a DB with a schema the edit does not know (a bucket, or a meta key such as etcd
// 3.6's storageVersion) is left as it was for etcd's own tool, and the refusal names what it
// found; the node logs it when it runs the tool instead (node_disk_test).
TEST_F(BoltTest, AnUnknownSchemaIsLeftToEtcdsOwnTool) {
  auto db_with = [](const std::vector<Kv>& root, const std::vector<Kv>& meta) {
    std::vector<Kv> kvs = {{"key", InlineBucket({{RevisionKey(2, 0), "v2"}}), 1},
                           {"members", InlineBucket({}), 1},
                           {"members_removed", InlineBucket({}), 1},
                           {"meta", InlineBucket(meta), 1}};
    kvs.insert(kvs.end(), root.begin(), root.end());
    std::sort(kvs.begin(), kvs.end(), [](const Kv& a, const Kv& b) { return a.key < b.key; });
    std::string file(3 * kPage, '\0');
    file.replace(2 * kPage, kPage, Leaf(kvs, kPage));
    Put<uint64_t>(file, 2 * kPage, 2);
    Meta(file, 0, 2, 3, 51, ~uint64_t{0});
    Meta(file, 1, 2, 3, 50, ~uint64_t{0});
    return file;
  };
  const std::vector<Kv> meta35 = {{"confState", "{}"},
                                  {"consistent_index", std::string(8, '\x09')},
                                  {"term", std::string(8, '\x02')}};
  struct Case {
    std::string db, names;
  };
  const Case cases[] = {
      {db_with({{"leases_v9", InlineBucket({}), 1}}, meta35), "leases_v9"},
      {db_with({}, {{"consistent_index", std::string(8, '\x09')}, {"storageVersion", "3.6.0"}}),
       "storageVersion"},
  };
  for (const Case& c : cases) {
    WriteDb(c.db);
    InPlaceRestore r = Request();
    r.check_only = true;
    EXPECT_TRUE(absl::IsUnimplemented(RestoreInPlace(r))) << c.names;
    r.check_only = false;
    bool changed = true;
    absl::Status s = RestoreInPlace(r, &changed);
    EXPECT_TRUE(absl::IsUnimplemented(s)) << s;
    EXPECT_FALSE(IsDamagedDb(s)) << "not damage: the tool may restore it";
    EXPECT_NE(s.message().find(c.names), std::string::npos) << s;
    EXPECT_FALSE(changed);
    EXPECT_EQ(ReadDb(), c.db);
  }
  // etcd 3.5's own meta keys and every 3.4/3.5 bucket are known.
  WriteDb(db_with({{"alarm", InlineBucket({}), 1},
                   {"auth", InlineBucket({}), 1},
                   {"authRoles", InlineBucket({}), 1},
                   {"authUsers", InlineBucket({}), 1},
                   {"cluster", InlineBucket({}), 1},
                   {"lease", InlineBucket({}), 1}},
                  meta35));
  absl::Status s = RestoreInPlace(Request());
  EXPECT_TRUE(s.ok()) << s;
}

TEST_F(BoltTest, InputTheToolWouldRefuseIsRefusedBeforeTheDbIsTouched) {
  const std::string db = SmallDb();
  WriteDb(db);
  auto refused = [&](const InPlaceRestore& r) {
    bool changed = true;
    absl::Status s = RestoreInPlace(r, &changed);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_FALSE(changed);
    EXPECT_EQ(ReadDb(), db);
  };
  InPlaceRestore r = Request();
  r.peer_url = "https://127.0.0.9:2380";  // not n1's in the initial cluster
  refused(r);
  r = Request();
  r.initial_cluster.push_back({"n1", "https://127.0.0.3:2380"});  // one name, two entries
  refused(r);
  r = Request();
  r.initial_cluster[1].second = "https://127.0.0.2:2380/path";
  refused(r);
  r = Request();
  r.name = "n9";
  refused(r);
  r = Request();
  r.initial_cluster[1].first = "n\xff";  // not UTF-8: cannot be written as JSON
  refused(r);
  EXPECT_FALSE(fs::exists(dir_ / "member/wal"));
}

TEST(RevisionKeyTest, RoundTripsAndOnlyATombstoneHasAnEighteenthByte) {
  EXPECT_EQ(MainRevision(RevisionKey(123456789, 3)), 123456789);
  EXPECT_EQ(MainRevision(RevisionKey(5, 0) + "t"), 5);
  EXPECT_FALSE(MainRevision(RevisionKey(5, 0) + "x").has_value());
  EXPECT_FALSE(MainRevision("short").has_value());
}

}  // namespace
}  // namespace steward
