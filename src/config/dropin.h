// Drop-in configuration: a node's config built from how users already configure etcd, so an
// existing deployment switches to steward by changing only the image or the command:
//   - etcd's own environment (ETCD_NAME, ETCD_INITIAL_CLUSTER, the URL and TLS variables,
//     ETCD_DATA_DIR) and docker-rejoinable-etcd's ETCD_OTHER_PEERS_CLIENT_URLS;
//   - etcd-wrapper's command-line flags (--name, --initial-cluster, --cert-file, ...).
// Both are read into an EtcdStyle, which becomes the YAML of a node config (ParseConfig then
// checks it as it checks any file). docs/drop-in.md maps every variable and flag.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace steward {

// What etcd's settings say. Each field remembers where it came from (a flag or a variable
// name), for messages.
struct EtcdStyle {
  struct Value {
    std::string value;
    std::string from;  // "--initial-cluster", "ETCD_INITIAL_CLUSTER"
  };
  std::map<std::string, Value> values;  // by etcd's flag name without dashes ("initial-cluster")
  std::vector<std::string> warnings;    // settings accepted with no meaning here
  // steward's own, from etcd-wrapper's flags: a backup store and its interval.
  std::string backup_store, backup_interval;

  const std::string& Get(const std::string& key) const;
  std::string From(const std::string& key) const;  // the flag or variable that set `key`
};

// etcd's variables in `env` (name -> value). Variables etcd has and steward renders itself
// (ETCD_INITIAL_CLUSTER_STATE...) are accepted with a warning; other etcd settings become
// etcd.extra_args (where the config's checks refuse those that would fight the agent).
EtcdStyle EtcdStyleFromEnvironment(const std::map<std::string, std::string>& env);

// etcd-wrapper's flags (argv without the program name, "--flag=value" or "--flag value").
// InvalidArgument naming an unknown flag.
absl::StatusOr<EtcdStyle> EtcdStyleFromWrapperFlags(const std::vector<std::string>& args);

// The node config as YAML. InvalidArgument naming the flag or variable that is missing or
// cannot be expressed (ports that differ between nodes, https without certificates...).
// Settings accepted with no meaning here are added to `warnings`.
absl::StatusOr<std::string> ConfigYamlFromEtcdStyle(const EtcdStyle& s,
                                                    std::vector<std::string>* warnings);

// Settings of `dropin` that contradict `file` (a config loaded from a file): one line each,
// naming both, e.g. "--name=n2 contradicts node.name: n1 in /etc/steward/node.yaml".
std::vector<std::string> Contradictions(const Config& dropin, const Config& file);

}  // namespace steward
