// Rotating the CA of tls.mode issued (stewardctl pki rotate-ca): each node goes through three
// phases, one node at a time, while the cluster keeps serving:
//   1 trust the old and the new CA (etcd's client and peer trusted CA, the agents' API);
//   2 issue this node's certificates from the new CA (still trusting both);
//   3 trust only the new CA.
// etcd 3.4 and 3.5 read their certificate files on every handshake but the trusted-CA file only
// when they start (docs/tls.md), so phases 1 and 3 restart the node's etcd and phase 2 does not;
// the agent restarts itself in place after each, to load what it trusts and presents.
//
// A node keeps its phase in <data_dir>/tls/: ca-rotation.json {id, phase}, ca-old.crt (the CA
// it trusted before), ca-new.crt and ca-new.key (0600). The trusted-CA file (TlsPaths::ca) and
// the issuer follow from them (TrustFor); a node whose config names the new CA as tls.ca_cert
// once phase 3 is done has finished: the files are removed and the config rules again.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "config/config.h"

namespace steward {

struct CaRotation {
  std::string id;
  int phase = 0;  // 1..3, as above
};

// What this node trusts and issues with now.
struct NodeTrust {
  std::string trusted_pem;  // the trusted-CA file's content: one CA, or old + new
  std::string issuer_cert;  // paths of the CA this node's certificates are issued from
  std::string issuer_key;
  std::optional<CaRotation> rotation;  // none: no rotation under way
};

// The node's rotation state; none when there is none. An unreadable state is an error.
absl::StatusOr<std::optional<CaRotation>> ReadCaRotation(const Config& config);

// Checks that `cert_pem` is a CA certificate, valid now, and `key_pem` its key. Names the
// problem; nothing is written.
absl::Status CheckCaPair(const std::string& cert_pem, const std::string& key_pem);

// The SHA-256 of the first certificate in `pem` (its DER), hex; "" if none parses.
std::string CertFingerprint(const std::string& pem);

// Moves this node to `phase` of rotation `id` to the CA `cert_pem`/`key_pem` (checked first).
// Phases only go forward: a phase at or below the recorded one of the same rotation changes
// nothing (a re-run); another rotation's id is refused while one is under way.
absl::Status StageCaRotation(const Config& config, const std::string& id, int phase,
                             const std::string& cert_pem, const std::string& key_pem);

// The trust and issuer for this node: from the rotation state when one is under way, else from
// tls.ca_cert / tls.ca_key. Ends a finished rotation (phase 3 with tls.ca_cert now the new CA).
absl::StatusOr<NodeTrust> TrustFor(const Config& config);

}  // namespace steward
