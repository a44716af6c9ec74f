// Turns "what etcd should run as" into etcd's command-line flags. Shared by every runner
// (child process, kubelet static pod) so they cannot disagree. Pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/config.h"

namespace steward {

struct EtcdLaunch {
  std::string name;
  std::string data_dir;
  std::string client_url;  // listened on and advertised
  std::string peer_url;    // listened on and advertised
  // name -> peer URL, in order. Ignored by etcd once the data dir holds a member.
  std::vector<std::pair<std::string, std::string>> initial_cluster;
  bool new_cluster = true;  // --initial-cluster-state new|existing
  std::string token;        // --initial-cluster-token
  std::vector<std::string> extra_args;
  std::string metrics_url;  // --listen-metrics-urls; empty: not set
  // --auto-compaction-mode / --auto-compaction-retention (etcd.auto_compaction_*); an empty
  // mode renders neither (etcd.extra_args sets them, or etcd's default: no compaction).
  std::string auto_compaction_mode, auto_compaction_retention;
  // TLS with certificate authentication on both URLs; empty paths: plain text.
  std::string ca_file, cert_file, key_file, peer_cert_file, peer_key_file;
  // The version the binary that runs these flags reported ("" unknown). etcd 3.4 gets
  // --logger=zap: its default logger (capnslog) leaves a nil zap logger that 3.4.20-3.4.29
  // dereference when a read index times out (etcd #14402, #17265), so a member whose disk
  // stalled for a while panicked the moment it caught up.
  std::string version;
};

// The flags, without argv[0], in a fixed order (golden-tested).
std::vector<std::string> RenderEtcdFlags(const EtcdLaunch& launch);

// The launch for this node as one of the first cluster.size nodes bootstrapping a new cluster
// (TLS files included when tls is enabled). Other launches start from it and change the cluster.
EtcdLaunch BootstrapLaunch(const Config& config);

// The flags that differ between a running etcd's command line (`running`, argv without argv[0])
// and the flags it would be started with now (`wanted`): each flag's name ("--quota-backend-
// bytes"), sorted, once, whether its value changed or it is in only one of the two. "-x" and
// "--x", "--x=v" and "--x v" are the same flag (etcd parses them alike). The --initial-* flags
// are left out: etcd reads them only to create a member, never on its own data.
std::vector<std::string> PendingFlags(const std::vector<std::string>& running,
                                      const std::vector<std::string>& wanted);

}  // namespace steward
