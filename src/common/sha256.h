// Incremental SHA-256 over OpenSSL's EVP interface, for the streams the backup code hashes as
// they pass (snapshots, stored objects, files).
#pragma once

#include <openssl/evp.h>

#include <string>
#include <string_view>

namespace steward {

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new()) { EVP_DigestInit_ex(ctx_, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx_); }
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void Update(std::string_view d) { EVP_DigestUpdate(ctx_, d.data(), d.size()); }
  // The digest of what was hashed so far followed by `more`; this context is left as it was.
  std::string CopyWith(std::string_view more) {
    Sha256 copy;
    EVP_MD_CTX_copy_ex(copy.ctx_, ctx_);
    copy.Update(more);
    return copy.Raw();
  }
  // The 32-byte digest; ends the context.
  std::string Raw() {
    unsigned char out[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_, out, &n);
    return std::string(reinterpret_cast<char*>(out), n);
  }

 private:
  EVP_MD_CTX* ctx_;
};

}  // namespace steward
