#include "etcd/member_id.h"

#include <openssl/sha.h>

#include <algorithm>

namespace steward {

uint64_t InitialMemberId(std::vector<std::string> peer_urls, const std::string& token) {
  std::sort(peer_urls.begin(), peer_urls.end());
  std::string b;
  for (const auto& u : peer_urls) b += u;
  b += token;
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(b.data()), b.size(), digest);
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id = (id << 8) | digest[i];
  return id;
}

}  // namespace steward
