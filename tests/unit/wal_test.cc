// ReadWalIdentity and ReadWalCommit on synthetic WAL segments, written in etcd's framing
// (8-byte little-endian length, then a walpb.Record) with a zero-filled preallocated tail.
#include "etcd/wal.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string VarintField(int field, uint64_t v) {
  return Varint(static_cast<uint64_t>(field) << 3) + Varint(v);
}
std::string BytesField(int field, const std::string& b) {
  return Varint((static_cast<uint64_t>(field) << 3) | 2) + Varint(b.size()) + b;
}

std::string Frame(int64_t type, const std::string& data) {
  std::string rec =
      VarintField(1, static_cast<uint64_t>(type)) + VarintField(2, 12345) + BytesField(3, data);
  uint64_t len = rec.size();
  std::string out(reinterpret_cast<const char*>(&len), 8);
  return out + rec;
}

std::string Metadata(uint64_t member, uint64_t cluster) {
  return Frame(1, VarintField(1, member) + VarintField(2, cluster));
}
std::string HardState(uint64_t term, uint64_t commit) {
  return Frame(3, VarintField(1, term) + VarintField(2, 1) + VarintField(3, commit));
}
// A raftpb.Entry record (type 2): term = 2, index = 3. Its index is not a commit.
std::string Entry(uint64_t term, uint64_t index) {
  return Frame(2, VarintField(2, term) + VarintField(3, index));
}

class WalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("wal_test_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "member" / "wal");
  }
  void TearDown() override { fs::remove_all(dir_); }
  void Segment(const std::string& name, const std::string& content) {
    std::ofstream out(dir_ / "member" / "wal" / name, std::ios::binary);
    out << content << std::string(4096, '\0');  // the preallocated tail
  }
  fs::path dir_;
};

TEST_F(WalTest, NoWalIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(ReadWalCommit(dir_.string()).status()));
  EXPECT_TRUE(absl::IsNotFound(ReadWalIdentity(dir_.string()).status()));
}

TEST_F(WalTest, AFreshBootstrapCommitsOnlyTheInitialMembers) {
  // A leader's first entry (index 4) appended but not committed: still only the bootstrap.
  Segment("0000000000000000-0000000000000000.wal", Metadata(0xaa, 0xcc) + Entry(1, 1) +
                                                       Entry(1, 2) + Entry(1, 3) + HardState(1, 3) +
                                                       Entry(2, 4));
  auto id = ReadWalIdentity(dir_.string());
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->member_id, 0xaau);
  EXPECT_EQ(id->cluster_id, 0xccu);
  auto commit = ReadWalCommit(dir_.string());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(*commit, 3u);
}

TEST_F(WalTest, TheHighestCommitOfEverySegmentCounts) {
  Segment("0000000000000000-0000000000000000.wal",
          Metadata(0xaa, 0xcc) + HardState(1, 3) + HardState(2, 4) + HardState(2, 9));
  Segment("0000000000000001-000000000000000a.wal", Metadata(0xaa, 0xcc) + HardState(2, 7));
  auto commit = ReadWalCommit(dir_.string());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(*commit, 9u);
}

TEST_F(WalTest, ATornLastRecordIsIgnoredLikeEtcdRepairsIt) {
  std::string torn = HardState(3, 20);
  torn.resize(torn.size() - 3);
  std::ofstream out(dir_ / "member" / "wal" / "0000000000000000-0000000000000000.wal",
                    std::ios::binary);
  out << Metadata(0xaa, 0xcc) << HardState(2, 5) << torn;
  out.close();
  auto commit = ReadWalCommit(dir_.string());
  ASSERT_TRUE(commit.ok()) << commit.status();
  EXPECT_EQ(*commit, 5u);
}

TEST_F(WalTest, GarbageIsDataLoss) {
  Segment("0000000000000000-0000000000000000.wal",
          Metadata(0xaa, 0xcc) + std::string("\x05\0\0\0\0\0\0\0\xff\xff\xff\xff\xff", 13));
  EXPECT_TRUE(absl::IsDataLoss(ReadWalCommit(dir_.string()).status()));
}

}  // namespace
}  // namespace steward
