// Backups encrypted at rest (backup/encryption.h), over a real FileStore in a temp dir: round
// trips across chunk boundaries, no plaintext in the store, and every kind of tampering (a
// flipped byte, chunks swapped, dropped or cut at a boundary, another key) refused.
#include "backup/encryption.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "backup/store.h"
#include "common/sha256.h"

namespace steward {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr uint32_t kChunk = 16;  // small, so a few bytes span many chunks
const char kObject[] = "c/backups/20260101T000000Z-00000000000000000001/snapshot.db.zst";

class EncryptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("steward-enc-test-" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::unique_ptr<BackupStore> Store(const EncryptionKey& current,
                                     std::vector<EncryptionKey> old = {}) {
    return NewEncryptedStore(NewFileStore(dir_.string()), current, std::move(old), kChunk);
  }
  std::string Raw() {  // the object's bytes as stored
    std::ifstream in(dir_ / kObject, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  void SetRaw(const std::string& bytes) {
    std::ofstream(dir_ / kObject, std::ios::binary | std::ios::trunc) << bytes;
  }
  static absl::Status Write(BackupStore& s, const std::string& content) {
    auto w = s.Create(kObject);
    if (!w.ok()) return w.status();
    // In uneven pieces, as a stream delivers them.
    for (size_t at = 0; at < content.size(); at += 7) {
      if (absl::Status st = (*w)->Write(std::string_view(content).substr(at, 7)); !st.ok())
        return st;
    }
    return (*w)->Commit();
  }
  static absl::StatusOr<std::string> ReadAll(BackupStore& s) { return s.Get(kObject); }

  fs::path dir_;
  EncryptionKey key_ = MakeEncryptionKey(std::string(32, 'k'));
  EncryptionKey other_ = MakeEncryptionKey(std::string(32, 'o'));
};

TEST_F(EncryptionTest, RoundTripsAtEveryLengthAroundAChunkAndStoresNoPlaintext) {
  auto store = Store(key_);
  for (size_t n : {size_t{0}, size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{32}, size_t{33},
                   size_t{100}}) {
    std::string content;
    for (size_t i = 0; i < n; ++i) content.push_back(static_cast<char>('a' + i % 26));
    ASSERT_TRUE(Write(*store, content).ok()) << n;
    auto back = ReadAll(*store);
    ASSERT_TRUE(back.ok()) << n << ": " << back.status();
    EXPECT_EQ(*back, content) << n;
    if (n >= 8) {
      EXPECT_EQ(Raw().find(content.substr(0, 8)), std::string::npos) << "plaintext stored, n=" << n;
    }
  }
  EXPECT_EQ(store->EncryptionKeyId(), key_.id);
  EXPECT_EQ(key_.id.size(), 16u);
  EXPECT_NE(key_.id, other_.id);
}

TEST_F(EncryptionTest, EveryTamperingIsRefused) {
  auto store = Store(key_);
  const std::string content(70, 'x');  // 5 chunks: 4 full, the last 6 bytes
  ASSERT_TRUE(Write(*store, content).ok());
  const std::string good = Raw();
  constexpr size_t kHeader = 27, kSealed = kChunk + 16;
  ASSERT_EQ(good.size(), kHeader + 4 * kSealed + 6 + 16);

  std::string flipped = good;
  flipped[kHeader + kSealed + 3] ^= 0x01;
  SetRaw(flipped);
  auto r = ReadAll(*store);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("chunk 1"));

  std::string swapped = good;
  swapped.replace(kHeader, kSealed, good.substr(kHeader + kSealed, kSealed));
  swapped.replace(kHeader + kSealed, kSealed, good.substr(kHeader, kSealed));
  SetRaw(swapped);
  EXPECT_EQ(ReadAll(*store).status().code(), absl::StatusCode::kDataLoss);

  std::string dropped = good;
  dropped.erase(kHeader + kSealed, kSealed);
  SetRaw(dropped);
  EXPECT_EQ(ReadAll(*store).status().code(), absl::StatusCode::kDataLoss);

  // Cut at a chunk boundary: what is left is whole chunks, but none says it is the last.
  SetRaw(good.substr(0, kHeader + 2 * kSealed));
  EXPECT_EQ(ReadAll(*store).status().code(), absl::StatusCode::kDataLoss);

  std::string header = good;
  header[kHeader - 1] ^= 0x01;  // the nonce prefix
  SetRaw(header);
  EXPECT_EQ(ReadAll(*store).status().code(), absl::StatusCode::kDataLoss);

  SetRaw(good);
  auto ok = ReadAll(*store);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, content);
}

TEST_F(EncryptionTest, AnotherKeyIsNamedAndOldKeysStillRead) {
  ASSERT_TRUE(Write(*Store(key_), "written under the first key").ok());
  auto rotated_without_old = Store(other_);
  auto r = ReadAll(*rotated_without_old);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr(key_.id));
  EXPECT_THAT(r.status().message(), HasSubstr("old_key_files"));
  auto rotated = Store(other_, {key_});
  auto back = ReadAll(*rotated);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "written under the first key");
}

TEST_F(EncryptionTest, ObjectsFromBeforeEncryptionReadAsTheyAreAndMetaPassesThrough) {
  auto plain = NewFileStore(dir_.string());
  ASSERT_TRUE(Write(*plain, "an old backup in clear").ok());
  ASSERT_TRUE(plain->Put("c/backups/x/meta.json", "{\"a\": 1}").ok());
  auto store = Store(key_);
  auto back = ReadAll(*store);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "an old backup in clear");
  ASSERT_TRUE(store->Put("c/backups/y/meta.json", "{\"b\": 2}").ok());
  auto meta = plain->Get("c/backups/y/meta.json");
  ASSERT_TRUE(meta.ok());
  EXPECT_EQ(*meta, "{\"b\": 2}") << "meta.json stays readable without the key";
}

TEST_F(EncryptionTest, TheBackupPipelineRecordsTheKeyAndVerifiesThroughIt) {
  auto store = Store(key_);
  BackupMeta meta;
  meta.cluster = "c";
  meta.name = "20260101T000000Z-00000000000000000001";
  // A "snapshot": content plus etcd's trailing sha256 of it.
  std::string db(1000, 'd');
  for (size_t i = 0; i < db.size(); ++i) db[i] = static_cast<char>(i * 7);
  Sha256 h;
  h.Update(db);
  const std::string stream = db + h.Raw();
  auto stored =
      StoreSnapshotStream(*store, meta, [&](const auto& sink) -> absl::StatusOr<uint64_t> {
        if (absl::Status s = sink(stream); !s.ok()) return s;
        return stream.size();
      });
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->encryption_key_id, key_.id);
  auto again = MetaFromJson(MetaToJson(*stored).dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->encryption_key_id, key_.id);
  VerifyOptions v;
  v.out_path = (dir_ / "out.db").string();
  ASSERT_TRUE(VerifyBackup(*store, "c", *stored, v).ok());
  std::ifstream in(v.out_path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  EXPECT_EQ(ss.str(), stream);
  // Without the key, verification fails before anything could use the bytes.
  auto keyless = Store(other_);
  absl::Status s = VerifyBackup(*keyless, "c", *stored, v);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST_F(EncryptionTest, KeyFilesAreBase64Of32BytesAndPrivate) {
  const fs::path f = dir_ / "backup.key";
  std::ofstream(f) << absl::Base64Escape(std::string(32, 'k')) << "\n";
  ::chmod(f.c_str(), 0600);
  auto k = LoadEncryptionKey(f.string());
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->id, key_.id);
  ::chmod(f.c_str(), 0644);
  EXPECT_EQ(LoadEncryptionKey(f.string()).status().code(), absl::StatusCode::kPermissionDenied);
  std::ofstream(f, std::ios::trunc) << absl::Base64Escape(std::string(16, 'k'));
  ::chmod(f.c_str(), 0600);
  auto short_key = LoadEncryptionKey(f.string());
  EXPECT_EQ(short_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_key.status().message(), HasSubstr("openssl rand -base64 32"));
  EXPECT_EQ(LoadEncryptionKey((dir_ / "missing").string()).status().code(),
            absl::StatusCode::kNotFound);
}

// Hands every read on in 5-byte pieces, so headers and chunks arrive split across calls.
class Trickle : public BackupStore {
 public:
  explicit Trickle(std::unique_ptr<BackupStore> inner) : inner_(std::move(inner)) {}
  std::string Describe() const override { return inner_->Describe(); }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    return inner_->Create(key);
  }
  absl::Status Put(const std::string& key, const std::string& content) override {
    return inner_->Put(key, content);
  }
  absl::StatusOr<std::string> Get(const std::string& key) override { return inner_->Get(key); }
  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    return inner_->Read(key, [&](std::string_view c) {
      for (size_t at = 0; at < c.size(); at += 5) {
        if (absl::Status s = sink(c.substr(at, 5)); !s.ok()) return s;
      }
      return absl::OkStatus();
    });
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return inner_->Delete(key); }

 private:
  std::unique_ptr<BackupStore> inner_;
};

TEST_F(EncryptionTest, ReadsInPiecesAndAReplacedObjectIsRefusedWhenMetaSaysEncrypted) {
  auto store =
      NewEncryptedStore(std::make_unique<Trickle>(NewFileStore(dir_.string())), key_, {}, kChunk);
  std::string content;
  for (int i = 0; i < 90; ++i) content.push_back(static_cast<char>('A' + i % 50));
  ASSERT_TRUE(Write(*store, content).ok());
  auto collect = [&](bool expect_encrypted, const std::string& id) -> absl::StatusOr<std::string> {
    std::string out;
    auto sink = [&](std::string_view d) {
      out.append(d.data(), d.size());
      return absl::OkStatus();
    };
    absl::Status s =
        expect_encrypted ? store->ReadEncrypted(kObject, id, sink) : store->Read(kObject, sink);
    if (!s.ok()) return s;
    return out;
  };
  auto back = collect(true, key_.id);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, content);
  // meta.json names another key: refused.
  EXPECT_EQ(collect(true, other_.id).status().code(), absl::StatusCode::kDataLoss);
  // A plaintext object in place of the encrypted one (a changed magic): a plain read takes it
  // as a backup from before encryption, but not when meta.json says it is encrypted.
  std::string swapped = Raw();
  swapped[0] = 'X';
  SetRaw(swapped);
  auto refused = collect(true, key_.id);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kDataLoss) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("not encrypted"));
  SetRaw("tiny");  // shorter than the magic
  EXPECT_EQ(collect(true, key_.id).status().code(), absl::StatusCode::kDataLoss);
  auto tiny = collect(false, "");
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(*tiny, "tiny");
}

TEST_F(EncryptionTest, AStoreWithUnreadableKeysNeitherWritesNorReadsSnapshots) {
  ASSERT_TRUE(Write(*Store(key_), "secret").ok());
  auto locked = NewLockedEncryptedStore(NewFileStore(dir_.string()),
                                        "backup.encryption.key_file: /k: Permission denied");
  auto w = locked->Create(kObject);
  EXPECT_EQ(w.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(w.status().message(), HasSubstr("Permission denied"));
  auto r = locked->Get(kObject);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(r.status().message(), HasSubstr("key_file"));
  ASSERT_TRUE(locked->Put("c/control/created.json", "{}").ok());
  EXPECT_TRUE(locked->Get("c/control/created.json").ok());
}

TEST_F(EncryptionTest, VerifyingAnEncryptedBackupWithoutKeysSaysSoBeforeReading) {
  BackupMeta meta;
  meta.cluster = "c";
  meta.name = "20260101T000000Z-00000000000000000001";
  meta.encryption_key_id = key_.id;
  auto plain = NewFileStore(dir_.string());
  absl::Status s = VerifyBackup(*plain, "c", meta, VerifyOptions());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("backup.encryption.key_file"));
}

}  // namespace
}  // namespace steward
