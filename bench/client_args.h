// The command line the bench clients share (bench/snapshot_probe, bench/put_load): etcdctl's
// --cacert/--cert/--key anywhere, the rest positional; with a CA, https with that client
// certificate, as stewardctl and etcdctl dial in the benchmarks.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "etcd/client.h"
#include "pki/node_certs.h"

namespace bench {

struct ClientArgs {
  std::string cacert, cert, key;
  std::vector<std::string> positional;
};

inline ClientArgs ParseClientArgs(int argc, char** argv) {
  ClientArgs out;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--cacert" || a == "--cert" || a == "--key") && i + 1 < argc) {
      (a == "--cacert" ? out.cacert : a == "--cert" ? out.cert : out.key) = argv[++i];
    } else {
      out.positional.push_back(a);
    }
  }
  return out;
}

// Sets options->credentials from the certificate flags (none: plain http). False, after
// saying why on stderr as `tool`, if the files do not make credentials.
inline bool ApplyTls(const ClientArgs& args, const char* tool,
                     steward::EtcdClient::Options* options) {
  if (args.cacert.empty()) return true;
  auto creds = steward::TlsChannelCredentials(args.cacert, args.cert, args.key);
  if (!creds.ok()) {
    std::fprintf(stderr, "%s: %s\n", tool, std::string(creds.status().message()).c_str());
    return false;
  }
  options->credentials = *creds;
  return true;
}

}  // namespace bench
