// Test harness: a real S3 server (npm s3rver 3.7, installed into tests/s3rver/node_modules by
// `npm ci --prefix tests/s3rver`) on 127.0.0.1, on a port the harness picked, with its data in a
// private temp dir. Stopped by PID in the destructor; never by name.
//
// s3rver accepts the access key "S3RVER" (secret "S3RVER"), checks that the key is known and that
// x-amz-content-sha256 is present, but does not verify SigV4 signatures.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace steward::testing {

class S3rver {
 public:
  static constexpr char kAccessKey[] = "S3RVER";
  static constexpr char kSecretKey[] = "S3RVER";

  // The s3rver launcher, or "" if it is not installed. $S3RVER_BIN overrides the location.
  static std::string Binary();

  // Starts s3rver with `buckets` created, waits (bounded) until it accepts connections.
  // Virtual-hosted requests work through VhostEndpoint(): s3rver is told that its service domain
  // is "localhost", and libcurl resolves every *.localhost name to the loopback address.
  // `host` is the IPv4 address it listens on (the fault suite's bridge address for nodes in
  // network namespaces).
  // With `tls_cert`/`tls_key` (PEM files), it serves HTTPS with that certificate.
  static absl::StatusOr<std::unique_ptr<S3rver>> Start(const std::vector<std::string>& buckets,
                                                       const std::string& host = "127.0.0.1",
                                                       const std::string& tls_cert = "",
                                                       const std::string& tls_key = "");

  ~S3rver();
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  int port() const { return port_; }
  // The server's process (the fault suite pauses it: a store that hangs or crawls).
  pid_t pid() const { return pid_; }
  // Where its buckets live: a bucket is the directory <data_dir>/<bucket>.
  std::string data_dir() const { return dir_ + "/data"; }
  // For path-style addressing: "http://<host>:<port>" ("https://" with TLS).
  std::string Endpoint() const;
  // For virtual-hosted addressing: "http://s3.localhost:<port>" (bucket.s3.localhost).
  std::string VhostEndpoint() const;
  // The tail of s3rver's log, for failure messages.
  std::string LogTail() const;
  // Stops the server (by PID, bounded wait), keeping its data; Restart() brings it back on the
  // same port with the same data, to simulate an outage of the store.
  void Stop();
  absl::Status Restart();

 private:
  S3rver() = default;

  pid_t pid_ = 0;
  int port_ = 0;
  std::string host_ = "127.0.0.1";
  bool tls_ = false;
  std::vector<std::string> argv_;  // how it was started, for Restart()
  std::string dir_;                // temp dir: data/ and s3rver.log
};

}  // namespace steward::testing
