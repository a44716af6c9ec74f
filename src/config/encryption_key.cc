#include "config/encryption_key.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string_view>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/sha256.h"

namespace steward {

EncryptionKey MakeEncryptionKey(const std::string& raw32) {
  Sha256 h;
  h.Update(std::string_view("etcd-steward backup key\0", 24));
  h.Update(raw32);
  return EncryptionKey{absl::BytesToHexString(h.Raw().substr(0, kEncryptionKeyIdSize)), raw32};
}

absl::StatusOr<EncryptionKey> LoadEncryptionKey(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s is readable by group or others (mode %04o): chmod 600 it", path, st.st_mode & 07777));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot be read"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text(absl::StripAsciiWhitespace(ss.str()));
  std::string raw;
  if (!absl::Base64Unescape(text, &raw) || raw.size() != kEncryptionKeySize) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " does not hold a 32-byte key in base64 (make one with: openssl rand -base64 32)"));
  }
  return MakeEncryptionKey(raw);
}

}  // namespace steward
