// The members bucket check (etcd/members_bucket.h) on a real etcd 3.5 DB (testdata), edited by
// hand into the state etcd #19557 leaves: a promoted member still a learner in the bucket.
#include "etcd/members_bucket.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "etcd/bolt.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string CopyOfSnapshot(const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  fs::copy_file(std::string(TESTDATA_DIR) + "/etcd35-snapshot.db", path,
                fs::copy_options::overwrite_existing);
  return path;
}

MemberInfo Live(uint64_t id, const std::string& name, bool learner) {
  MemberInfo m;
  m.id = id;
  m.name = name;
  m.is_learner = learner;
  return m;
}

TEST(MembersBucketTest, ARealDbAgreesWithItsOwnMemberList) {
  auto members = ReadMembersBucket(CopyOfSnapshot("agrees.db"));
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_FALSE((*members)[0].is_learner);
  EXPECT_NE((*members)[0].id, 0u);
  EXPECT_THAT(MembershipDisagreements(*members, {Live((*members)[0].id, "default", false)}),
              IsEmpty());
}

TEST(MembersBucketTest, APromotionTheBucketMissedIsFoundAndNamed) {
  const std::string path = CopyOfSnapshot("learner.db");
  uint64_t id = 0;
  {
    // As etcd 3.5.1-3.5.19 leave it: promoted in raft, still "isLearner" in the bucket.
    auto db = BoltFile::Open(path);
    ASSERT_TRUE(db.ok()) << db.status();
    auto bucket = (*db)->ReadBucket("members");
    ASSERT_TRUE(bucket.ok() && bucket->size() == 1) << bucket.status();
    auto j = nlohmann::json::parse(bucket->begin()->second);
    j["isLearner"] = true;
    id = j["id"].get<uint64_t>();
    ASSERT_TRUE((*db)->Put("members", bucket->begin()->first, j.dump()).ok());
    ASSERT_TRUE((*db)->Commit().ok());
  }
  auto members = ReadMembersBucket(path);
  ASSERT_TRUE(members.ok()) << members.status();
  ASSERT_EQ(members->size(), 1u);
  EXPECT_TRUE((*members)[0].is_learner);
  auto said = MembershipDisagreements(*members, {Live(id, "n2", false)});
  ASSERT_EQ(said.size(), 1u);
  EXPECT_THAT(said[0], HasSubstr("n2 ("));
  EXPECT_THAT(said[0], HasSubstr("a voter in the member list but a learner in the DB's members "
                                 "bucket (etcd #19557)"));
}

TEST(MembersBucketTest, MembersOnOnlyOneSideAreNamed) {
  std::vector<BoltMember> db = {{1, "n1", false}, {2, "gone", false}};
  auto said = MembershipDisagreements(db, {Live(1, "n1", false), Live(3, "n3", true)});
  EXPECT_THAT(said, ElementsAre(HasSubstr("n3 (3) is in the member list but not in the DB"),
                                HasSubstr("gone (2) is in the DB's members bucket but no longer")));
}

TEST(MembersBucketTest, AFileThatIsNoDbIsAnError) {
  const std::string path = ::testing::TempDir() + "/not-a-db";
  std::ofstream(path) << "hello";
  EXPECT_FALSE(ReadMembersBucket(path).ok());
}

}  // namespace
}  // namespace steward
