#include "backup/encryption.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace steward {
namespace {

constexpr char kMagic[] = "STWDENC1";  // 8 bytes, no terminator stored
constexpr size_t kMagicSize = 8;
constexpr size_t kIdSize = kEncryptionKeyIdSize;
constexpr size_t kPrefixSize = 7;
constexpr size_t kHeaderSize = kMagicSize + kIdSize + 4 + kPrefixSize;  // 27
constexpr size_t kTagSize = 16;

struct CipherCtx {
  CipherCtx() : ctx(EVP_CIPHER_CTX_new()) {}
  ~CipherCtx() { EVP_CIPHER_CTX_free(ctx); }
  CipherCtx(const CipherCtx&) = delete;
  CipherCtx& operator=(const CipherCtx&) = delete;
  EVP_CIPHER_CTX* ctx;
};

std::string Nonce(const std::string& prefix, uint32_t counter, bool last) {
  std::string n = prefix;
  for (int shift = 24; shift >= 0; shift -= 8)
    n.push_back(static_cast<char>((counter >> shift) & 0xff));
  n.push_back(last ? 1 : 0);
  return n;  // 12 bytes
}

// One chunk: AES-256-GCM of `plain` under `nonce` with `aad`; ciphertext then tag.
absl::StatusOr<std::string> Seal(const std::string& key, const std::string& nonce,
                                 const std::string& aad, std::string_view plain) {
  CipherCtx c;
  int len = 0;
  std::string out(plain.size() + kTagSize, '\0');
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (c.ctx == nullptr ||
      EVP_EncryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce.size()), nullptr) !=
          1 ||
      EVP_EncryptInit_ex(c.ctx, nullptr, nullptr,
                         reinterpret_cast<const unsigned char*>(key.data()),
                         reinterpret_cast<const unsigned char*>(nonce.data())) != 1 ||
      EVP_EncryptUpdate(c.ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())) != 1 ||
      (!plain.empty() &&
       EVP_EncryptUpdate(c.ctx, o, &len, reinterpret_cast<const unsigned char*>(plain.data()),
                         static_cast<int>(plain.size())) != 1) ||
      EVP_EncryptFinal_ex(c.ctx, o + plain.size(), &len) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_GET_TAG, kTagSize, o + plain.size()) != 1) {
    return absl::InternalError("encrypting a backup chunk (OpenSSL AES-256-GCM)");
  }
  return out;
}

// The reverse; false if the chunk does not authenticate.
bool Open(const std::string& key, const std::string& nonce, const std::string& aad,
          std::string_view sealed, std::string* plain) {
  if (sealed.size() < kTagSize) return false;
  const size_t n = sealed.size() - kTagSize;
  plain->assign(n, '\0');
  CipherCtx c;
  int len = 0;
  std::string tag(sealed.substr(n));
  auto* p = reinterpret_cast<unsigned char*>(plain->data());
  return c.ctx != nullptr &&
         EVP_DecryptInit_ex(c.ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
         EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_IVLEN, static_cast<int>(nonce.size()),
                             nullptr) == 1 &&
         EVP_DecryptInit_ex(c.ctx, nullptr, nullptr,
                            reinterpret_cast<const unsigned char*>(key.data()),
                            reinterpret_cast<const unsigned char*>(nonce.data())) == 1 &&
         EVP_DecryptUpdate(c.ctx, nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                           static_cast<int>(aad.size())) == 1 &&
         (n == 0 ||
          EVP_DecryptUpdate(c.ctx, p, &len, reinterpret_cast<const unsigned char*>(sealed.data()),
                            static_cast<int>(n)) == 1) &&
         EVP_CIPHER_CTX_ctrl(c.ctx, EVP_CTRL_GCM_SET_TAG, kTagSize, tag.data()) == 1 &&
         EVP_DecryptFinal_ex(c.ctx, p + n, &len) == 1;
}

class EncryptingWriter : public ObjectWriter {
 public:
  EncryptingWriter(std::unique_ptr<ObjectWriter> inner, const EncryptionKey& key, uint32_t chunk)
      : inner_(std::move(inner)), key_(key.key), chunk_(chunk) {
    prefix_.assign(kPrefixSize, '\0');
    prefix_ok_ = RAND_bytes(reinterpret_cast<unsigned char*>(prefix_.data()), kPrefixSize) == 1;
    header_.append(kMagic, kMagicSize);
    header_ += absl::HexStringToBytes(key.id);
    for (int shift = 24; shift >= 0; shift -= 8)
      header_.push_back(static_cast<char>((chunk >> shift) & 0xff));
    header_ += prefix_;
  }

  absl::Status Write(std::string_view data) override {
    if (!prefix_ok_) return absl::InternalError("no random bytes for a backup's nonce (OpenSSL)");
    if (!header_written_) {
      if (absl::Status s = inner_->Write(header_); !s.ok()) return s;
      header_written_ = true;
    }
    buffer_.append(data.data(), data.size());
    // Strictly more than a chunk: the last chunk is only known at Commit.
    size_t at = 0;
    while (buffer_.size() - at > chunk_) {
      if (absl::Status s = Emit(std::string_view(buffer_).substr(at, chunk_), false); !s.ok())
        return s;
      at += chunk_;
    }
    buffer_.erase(0, at);
    return absl::OkStatus();
  }

  absl::Status Commit() override {
    if (absl::Status s = Write({}); !s.ok()) return s;
    if (absl::Status s = Emit(buffer_, true); !s.ok()) return s;
    buffer_.clear();
    return inner_->Commit();
  }

 private:
  absl::Status Emit(std::string_view plain, bool last) {
    if (counter_ == UINT32_MAX)
      return absl::OutOfRangeError("backup too large for its nonce space");
    auto sealed = Seal(key_, Nonce(prefix_, counter_++, last), header_, plain);
    if (!sealed.ok()) return sealed.status();
    return inner_->Write(*sealed);
  }

  std::unique_ptr<ObjectWriter> inner_;
  std::string key_;
  uint32_t chunk_;
  std::string prefix_, header_, buffer_;
  bool prefix_ok_ = false;
  bool header_written_ = false;
  uint32_t counter_ = 0;
};

class EncryptedStore : public BackupStore {
 public:
  EncryptedStore(std::unique_ptr<BackupStore> inner, EncryptionKey current,
                 std::vector<EncryptionKey> old, uint32_t chunk)
      : inner_(std::move(inner)), current_(std::move(current)), chunk_(chunk) {
    keys_[current_.id] = current_.key;
    for (EncryptionKey& k : old) keys_.emplace(k.id, std::move(k.key));
  }
  // Locked: no key could be read (`why`).
  EncryptedStore(std::unique_ptr<BackupStore> inner, std::string why)
      : inner_(std::move(inner)), chunk_(kDefaultEncryptionChunk), locked_(std::move(why)) {}

  std::string Describe() const override {
    if (!locked_.empty()) return absl::StrCat(inner_->Describe(), " (encrypted, key unreadable)");
    return absl::StrCat(inner_->Describe(), " (encrypted, key ", current_.id, ")");
  }
  std::string EncryptionKeyId() const override {
    return locked_.empty() ? current_.id : "unreadable";
  }

  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string& key) override {
    if (!locked_.empty() && IsEncryptedObjectKey(key)) {
      return absl::FailedPreconditionError(absl::StrCat("cannot encrypt ", key, ": ", locked_));
    }
    auto w = inner_->Create(key);
    if (!w.ok() || !IsEncryptedObjectKey(key)) return w;
    return std::unique_ptr<ObjectWriter>(
        std::make_unique<EncryptingWriter>(std::move(*w), current_, chunk_));
  }
  absl::Status Put(const std::string& key, const std::string& content) override {
    if (!IsEncryptedObjectKey(key)) return inner_->Put(key, content);
    auto w = Create(key);
    if (!w.ok()) return w.status();
    if (absl::Status s = (*w)->Write(content); !s.ok()) return s;
    return (*w)->Commit();
  }
  absl::StatusOr<std::string> Get(const std::string& key) override {
    if (!IsEncryptedObjectKey(key)) return inner_->Get(key);
    std::string out;
    absl::Status s = Read(key, [&](std::string_view d) {
      out.append(d.data(), d.size());
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    return out;
  }
  absl::Status Read(const std::string& key,
                    const std::function<absl::Status(std::string_view)>& sink) override {
    if (!IsEncryptedObjectKey(key)) return inner_->Read(key, sink);
    return Decrypt(key, "", sink);
  }
  absl::Status ReadEncrypted(const std::string& key, const std::string& key_id,
                             const std::function<absl::Status(std::string_view)>& sink) override {
    return Decrypt(key, key_id, sink);
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return inner_->Delete(key); }

 private:
  absl::Status Decrypt(const std::string& key, const std::string& expected_id,
                       const std::function<absl::Status(std::string_view)>& sink) {
    Decryptor d(this, key, expected_id, sink);
    absl::Status s = inner_->Read(key, [&](std::string_view c) { return d.Feed(c); });
    if (!s.ok()) return s;
    return d.Finish();
  }

  // Undoes EncryptingWriter as the bytes arrive, holding back at most one chunk.
  class Decryptor {
   public:
    // `expected_id` non-empty: meta.json says the object is encrypted with that key.
    Decryptor(EncryptedStore* store, const std::string& key, const std::string& expected_id,
              const std::function<absl::Status(std::string_view)>& sink)
        : store_(store), object_(key), expected_id_(expected_id), sink_(sink) {}

    absl::Status Feed(std::string_view c) {
      if (plain_) return sink_(c);
      buffer_.append(c.data(), c.size());
      if (header_.empty()) {
        if (buffer_.size() < kMagicSize) return absl::OkStatus();
        if (buffer_.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
          if (!expected_id_.empty()) return NotEncrypted();
          // Written before encryption was turned on: read as it is.
          plain_ = true;
          std::string held = std::move(buffer_);
          buffer_.clear();
          return sink_(held);
        }
        if (buffer_.size() < kHeaderSize) return absl::OkStatus();
        if (absl::Status s = ParseHeader(); !s.ok()) return s;
      }
      const size_t sealed = chunk_ + kTagSize;
      size_t at = 0;
      while (buffer_.size() - at > sealed) {
        if (absl::Status s = OpenChunk(std::string_view(buffer_).substr(at, sealed), false);
            !s.ok()) {
          return s;
        }
        at += sealed;
      }
      buffer_.erase(0, at);
      return absl::OkStatus();
    }

    absl::Status Finish() {
      if (plain_) return absl::OkStatus();
      if (header_.empty()) {
        if (buffer_.size() < kMagicSize ||
            buffer_.compare(0, kMagicSize, kMagic, kMagicSize) != 0) {
          if (!expected_id_.empty()) return NotEncrypted();
          return buffer_.empty() ? absl::OkStatus() : sink_(buffer_);  // a tiny plain object
        }
        return absl::DataLossError(absl::StrCat(object_, ": the encryption header is cut off"));
      }
      return OpenChunk(buffer_, true);
    }

   private:
    absl::Status NotEncrypted() {
      return absl::DataLossError(absl::StrCat(object_,
                                              " is not encrypted, but meta.json says it "
                                              "is (key ",
                                              expected_id_, "): it was replaced"));
    }

    absl::Status ParseHeader() {
      if (!store_->locked_.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot decrypt ", object_, ": ", store_->locked_));
      }
      header_ = buffer_.substr(0, kHeaderSize);
      const std::string id = absl::BytesToHexString(header_.substr(kMagicSize, kIdSize));
      if (!expected_id_.empty() && id != expected_id_) {
        return absl::DataLossError(absl::StrCat(object_, " is encrypted with key ", id,
                                                ", but meta.json says key ", expected_id_));
      }
      const auto* c = reinterpret_cast<const unsigned char*>(header_.data() + kMagicSize + kIdSize);
      chunk_ = (uint32_t{c[0]} << 24) | (uint32_t{c[1]} << 16) | (uint32_t{c[2]} << 8) | c[3];
      prefix_ = header_.substr(kMagicSize + kIdSize + 4, kPrefixSize);
      if (chunk_ == 0 || chunk_ > kMaxEncryptionChunk) {
        return absl::DataLossError(
            absl::StrCat(object_, ": bad chunk size ", chunk_, " in its header"));
      }
      auto it = store_->keys_.find(id);
      if (it == store_->keys_.end()) {
        std::vector<std::string> have;
        for (const auto& [k, v] : store_->keys_) have.push_back(k);
        return absl::FailedPreconditionError(absl::StrCat(
            object_, " is encrypted with key ", id, ", which is not among the keys given (",
            absl::StrJoin(have, ", "), "): add its file to backup.encryption.old_key_files"));
      }
      key_ = it->second;
      buffer_.erase(0, kHeaderSize);
      return absl::OkStatus();
    }

    absl::Status OpenChunk(std::string_view sealed, bool last) {
      std::string plain;
      if (!Open(key_, Nonce(prefix_, counter_, last), header_, sealed, &plain)) {
        return absl::DataLossError(
            absl::StrCat(object_, ": encrypted chunk ", counter_, last ? " (the last)" : "",
                         " does not authenticate: the object was changed, reordered or cut short"));
      }
      ++counter_;
      return sink_(plain);
    }

    EncryptedStore* store_;
    std::string object_;
    std::string expected_id_;
    const std::function<absl::Status(std::string_view)>& sink_;
    std::string buffer_, header_, key_, prefix_;
    uint32_t chunk_ = 0;
    uint32_t counter_ = 0;
    bool plain_ = false;
  };

  std::unique_ptr<BackupStore> inner_;
  EncryptionKey current_;
  std::map<std::string, std::string> keys_;  // id -> key
  uint32_t chunk_;
  std::string locked_;  // why no key could be read ("": keys at hand)
};

}  // namespace

bool IsEncryptedObjectKey(const std::string& key) {
  // Snapshots and delta backups (backup/delta.h): what holds the cluster's keys and values.
  return absl::EndsWith(key, "/snapshot.db.zst") || absl::EndsWith(key, ".delta.zst");
}

std::unique_ptr<BackupStore> NewEncryptedStore(std::unique_ptr<BackupStore> inner,
                                               EncryptionKey current,
                                               std::vector<EncryptionKey> old,
                                               uint32_t chunk_size) {
  chunk_size = std::clamp<uint32_t>(chunk_size, 1, kMaxEncryptionChunk);
  return std::make_unique<EncryptedStore>(std::move(inner), std::move(current), std::move(old),
                                          chunk_size);
}

std::unique_ptr<BackupStore> NewLockedEncryptedStore(std::unique_ptr<BackupStore> inner,
                                                     std::string why) {
  return std::make_unique<EncryptedStore>(std::move(inner), std::move(why));
}

}  // namespace steward
