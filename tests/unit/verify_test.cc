// VerifyBackup against synthetic backups in a real file store: a "snapshot" laid out as etcd
// streams it (body, then sha256 of the body), compressed with a checksummed zstd frame, and a
// meta.json that describes it. Each case breaks one thing and expects the check that names it.
#include <gtest/gtest.h>
#include <openssl/sha.h>
#include <zstd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "absl/strings/escaping.h"
#include "backup/layout.h"
#include "backup/pipeline.h"
#include "backup/store.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

std::string Sha(std::string_view d) {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(d.data()), d.size(), out);
  return std::string(reinterpret_cast<char*>(out), sizeof out);
}
std::string Hex(const std::string& raw) { return absl::BytesToHexString(raw); }

std::string Zstd(const std::string& in, bool checksum = true) {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
  std::string out(ZSTD_compressBound(in.size()), '\0');
  size_t n = ZSTD_compress2(c, out.data(), out.size(), in.data(), in.size());
  ZSTD_freeCCtx(c);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("verify-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    store_ = NewFileStore(root_.string());
    // ~3 MiB of mildly compressible bytes, so the stream spans many read and zstd chunks.
    std::mt19937 rng(7);
    std::string body(3 << 20, '\0');
    for (auto& ch : body) ch = static_cast<char>('a' + rng() % 16);
    stream_ = body + Sha(body);
    Write(stream_, Zstd(stream_));
  }
  void TearDown() override { fs::remove_all(root_); }

  // Stores `compressed` as the backup and describes `stream` in meta_.
  void Write(const std::string& stream, const std::string& compressed) {
    meta_.name = "20261126T010000Z-00000000000000000042";
    meta_.cluster = "c";
    meta_.revision = 42;
    meta_.db_size = stream.size();
    meta_.compressed_size = compressed.size();
    meta_.sha256 = Hex(Sha(compressed));
    meta_.db_sha256 = Hex(Sha(stream));
    PutRaw(compressed);
  }
  void PutRaw(const std::string& compressed) {
    ASSERT_TRUE(store_->Put(SnapshotKey("c", meta_.name), compressed).ok());
  }
  absl::Status Verify(bool content, const std::string& out = "", bool stored = true) {
    VerifyOptions o;
    o.hash_stored = stored;
    o.hash_content = content;
    o.out_path = out;
    return VerifyBackup(*store_, "c", meta_, o);
  }

  fs::path root_;
  std::unique_ptr<BackupStore> store_;
  std::string stream_;
  BackupMeta meta_;
};

TEST_F(VerifyTest, AGoodBackupPassesEveryLevelAndIsWrittenOutExactly) {
  EXPECT_TRUE(Verify(true).ok());
  EXPECT_TRUE(Verify(false).ok());
  const std::string out = (root_ / "snapshot.db").string();
  ASSERT_TRUE(Verify(false, out).ok());
  std::ifstream f(out, std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, stream_) << "the snapshot as etcd streamed it, trailing hash included";
  EXPECT_FALSE(fs::exists(out + ".part"));
}

// The staging copy is written in 4 MiB buffers by a second thread: a stream that ends exactly
// at a buffer's end, one byte past it, or several buffers long comes out byte for byte.
TEST_F(VerifyTest, StreamsOfEveryLengthAroundTheWriteBufferAreWrittenOutExactly) {
  std::mt19937 rng(11);
  for (size_t size :
       {size_t{8} << 20, (size_t{8} << 20) + 1, (size_t{4} << 20) - 1, size_t{13} << 20}) {
    std::string body(size - 32, '\0');
    for (auto& ch : body) ch = static_cast<char>('a' + rng() % 16);
    const std::string stream = body + Sha(body);
    Write(stream, Zstd(stream));
    const std::string out = (root_ / "snapshot.db").string();
    absl::Status st = Verify(false, out, /*stored=*/false);
    ASSERT_TRUE(st.ok()) << size << ": " << st;
    std::ifstream f(out, std::ios::binary);
    std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_EQ(got.size(), stream.size());
    EXPECT_TRUE(got == stream) << "size " << size;
  }
}

TEST_F(VerifyTest, AFlippedStoredByteIsRefusedAtEveryLevelAndNothingIsLeftBehind) {
  std::string z = Zstd(stream_);
  z[z.size() / 2] ^= 0x01;
  PutRaw(z);
  const std::string out = (root_ / "snapshot.db").string();
  for (bool content : {true, false}) {
    absl::Status s = Verify(content, out);
    EXPECT_TRUE(absl::IsDataLoss(s)) << s;
    EXPECT_FALSE(fs::exists(out));
    EXPECT_FALSE(fs::exists(out + ".part"));
  }
}

// A node that fetches a backup its coordinator already checked skips the stored sha256; zstd's
// frame checksum must then catch the damage.
TEST_F(VerifyTest, WithoutTheStoredHashTheFrameChecksumStillRefusesAFlippedByte) {
  std::string z = Zstd(stream_);
  z[z.size() / 2] ^= 0x01;
  PutRaw(z);
  const std::string out = (root_ / "snapshot.db").string();
  absl::Status s = Verify(false, out, /*stored=*/false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(VerifyTest, AFrameWithoutAChecksumIsHashedAnyway) {
  // Flip a byte of the raw literals (the data is stored mostly as Huffman-coded literals, so
  // the damage decodes to wrong content rather than failing): only the sha256 can tell.
  std::string z = Zstd(stream_, /*checksum=*/false);
  Write(stream_, z);
  z[z.size() / 2] ^= 0x01;
  PutRaw(z);
  absl::Status s = Verify(false, (root_ / "snapshot.db").string(), /*stored=*/false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("sha256 of snapshot.db.zst"), std::string::npos) << s;
}

TEST_F(VerifyTest, ATruncatedObjectNamesTheSize) {
  std::string z = Zstd(stream_);
  PutRaw(z.substr(0, z.size() - 100));
  absl::Status s = Verify(false);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("stored size"), std::string::npos) << s;
}

TEST_F(VerifyTest, ContentChecksCatchAStreamWhoseTrailingEtcdHashIsWrong) {
  // Consistent meta.json and stored hash, but the stream's own trailer does not match its body,
  // as if the snapshot had been damaged before it was compressed.
  std::string bad = stream_;
  bad[bad.size() - 1] ^= 0x01;
  Write(bad, Zstd(bad));
  EXPECT_TRUE(Verify(false).ok()) << "the stored bytes are as written";
  absl::Status s = Verify(true);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("trailing"), std::string::npos) << s;
}

TEST_F(VerifyTest, ContentChecksCatchADbHashThatDisagreesWithMeta) {
  meta_.db_sha256 = Hex(Sha("something else"));
  absl::Status s = Verify(true);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("does not match meta.json"), std::string::npos) << s;
}

TEST_F(VerifyTest, WritingOutChecksTheDecompressedSize) {
  meta_.db_size += 1;
  absl::Status s = Verify(false, (root_ / "snapshot.db").string());
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find("decompressed size"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(root_ / "snapshot.db"));
}

TEST_F(VerifyTest, AMissingObjectIsAnErrorNotAPass) {
  meta_.name = "20261126T020000Z-00000000000000000043";
  EXPECT_FALSE(Verify(false).ok());
  EXPECT_FALSE(Verify(true).ok());
}

}  // namespace
}  // namespace steward
