#include "backup/open.h"

#include "absl/strings/str_cat.h"
#include "backup/encryption.h"

namespace steward {

namespace {

absl::StatusOr<std::unique_ptr<BackupStore>> OpenPlain(const BackupConfig& c);

}  // namespace

absl::StatusOr<std::unique_ptr<BackupStore>> OpenStore(const BackupConfig& c,
                                                       bool tolerate_unreadable_keys) {
  auto store = OpenPlain(c);
  if (!store.ok() || *store == nullptr || !c.encryption.enabled()) return store;
  auto unreadable = [&](const absl::Status& s,
                        const std::string& key) -> absl::StatusOr<std::unique_ptr<BackupStore>> {
    absl::Status named(s.code(), absl::StrCat(key, ": ", s.message()));
    if (!tolerate_unreadable_keys) return named;
    return NewLockedEncryptedStore(*std::move(store), std::string(named.message()));
  };
  auto current = LoadEncryptionKey(c.encryption.key_file);
  if (!current.ok()) return unreadable(current.status(), "backup.encryption.key_file");
  std::vector<EncryptionKey> old;
  for (size_t i = 0; i < c.encryption.old_key_files.size(); ++i) {
    auto k = LoadEncryptionKey(c.encryption.old_key_files[i]);
    if (!k.ok()) {
      return unreadable(k.status(), absl::StrCat("backup.encryption.old_key_files[", i, "]"));
    }
    old.push_back(*std::move(k));
  }
  return NewEncryptedStore(*std::move(store), *std::move(current), std::move(old));
}

namespace {

absl::StatusOr<std::unique_ptr<BackupStore>> OpenPlain(const BackupConfig& c) {
  if (c.store.empty()) return std::unique_ptr<BackupStore>();
  if (c.store.rfind("file://", 0) == 0) return NewFileStore(c.store.substr(7));
  if (c.store.rfind("s3://", 0) == 0) {
    std::string rest = c.store.substr(5);
    S3Options o;
    auto slash = rest.find('/');
    o.bucket = rest.substr(0, slash);
    if (slash != std::string::npos) o.prefix = rest.substr(slash + 1);
    while (!o.prefix.empty() && o.prefix.back() == '/') o.prefix.pop_back();
    o.endpoint = c.s3.endpoint;
    o.region = c.s3.region;
    o.path_style = c.s3.path_style;
    o.access_key_id = c.s3.access_key_id;
    o.secret_access_key = c.s3.secret_access_key;
    o.session_token = c.s3.session_token;
    o.ca_file = c.s3.ca_file;
    return NewS3Store(o);
  }
  return absl::InvalidArgumentError(absl::StrCat("backup.store: unsupported URL ", c.store));
}

}  // namespace

}  // namespace steward
