// Renders this node's etcd as a kubelet static Pod manifest (the static-pod runner writes it
// into the kubelet's manifest directory). Pure: the same input gives the same bytes, so an
// unchanged launch never makes the kubelet restart etcd.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace steward {

struct StaticPodInput {
  std::string node;                // names the pod: etcd-steward-<node>
  std::string image;               // an etcd image with `etcd` on its PATH
  std::vector<std::string> flags;  // etcd's flags (RenderEtcdFlags), without argv[0]
  // Host directories etcd needs, mounted at the same path: the node dir (etcd's data dir is
  // under it) read-write, the others (TLS files from elsewhere) read-only.
  std::string node_dir;
  std::vector<std::string> read_only_dirs;
  // The liveness probe: a TCP connect to etcd's client port (no client certificate needed).
  std::string probe_host;
  int probe_port = 2379;
  int termination_grace_seconds = 10;  // etcd.stop_timeout
  std::string base_spec;               // optional base Pod (YAML), merged under what the agent owns
  // If set, a directory the pod cannot start without (a hostPath of type Directory): etcd's
  // WAL dir, for a launch on member data. A kubelet restarting the pod after the data vanished
  // then leaves it pending instead of starting etcd on an empty dir (D1 for static pods).
  std::string guard_dir;
};

// The manifest, YAML. The base spec's metadata labels and annotations, pod-level fields
// (tolerations, priorityClassName, securityContext...) and the etcd container's other fields
// (resources, env...) are kept; the name, namespace, host network, the etcd container's image,
// command, probe and mounts, and the agent's volumes are the agent's. InvalidArgument if the
// base spec is not a Pod.
absl::StatusOr<std::string> RenderStaticPod(const StaticPodInput& in);

// The manifest's file name in the manifest directory.
std::string StaticPodFileName(const std::string& node);

}  // namespace steward
