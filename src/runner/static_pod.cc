#include "runner/static_pod.h"

#include "absl/strings/str_cat.h"
#include "yaml-cpp/yaml.h"

namespace steward {

std::string StaticPodFileName(const std::string& node) {
  return absl::StrCat("etcd-steward-", node, ".yaml");
}

absl::StatusOr<std::string> RenderStaticPod(const StaticPodInput& in) {
  YAML::Node pod;
  if (!in.base_spec.empty()) {
    try {
      pod = YAML::Load(in.base_spec);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("base pod spec: ", e.what()));
    }
    if (!pod.IsMap()) return absl::InvalidArgumentError("base pod spec: not a mapping");
  }
  pod["apiVersion"] = "v1";
  pod["kind"] = "Pod";
  YAML::Node meta = pod["metadata"];
  meta["name"] = absl::StrCat("etcd-steward-", in.node);
  meta["namespace"] = "kube-system";
  meta["labels"]["component"] = "etcd";
  meta["labels"]["tier"] = "control-plane";
  meta["labels"]["app.kubernetes.io/managed-by"] = "etcd-steward";
  YAML::Node spec = pod["spec"];
  spec["hostNetwork"] = true;
  if (!static_cast<const YAML::Node&>(spec)["priorityClassName"]) {
    spec["priorityClassName"] = "system-node-critical";
  }
  spec["terminationGracePeriodSeconds"] = in.termination_grace_seconds;
  // The agent restarts etcd by rewriting the manifest; a container that exits is restarted by
  // the kubelet (the agent's D1 check removes the manifest if its data vanished).
  spec["restartPolicy"] = "Always";

  // The etcd container: the base's container named "etcd" (or the first), else a new one.
  // (Missing keys are looked up through a const node: a non-const lookup leaves a placeholder
  // behind. A default-constructed YAML::Node is a defined null, so "found" is tracked apart.)
  const YAML::Node& const_spec = spec;
  int found = -1;
  if (const_spec["containers"] && const_spec["containers"].IsSequence()) {
    const YAML::Node& containers = const_spec["containers"];
    for (size_t i = 0; i < containers.size(); ++i) {
      if (containers[i]["name"] && containers[i]["name"].as<std::string>("") == "etcd") {
        found = static_cast<int>(i);
      }
    }
    if (found < 0 && containers.size() > 0) found = 0;
  }
  const bool new_container = found < 0;
  YAML::Node etcd = new_container ? YAML::Node(YAML::NodeType::Map)
                                  : spec["containers"][static_cast<size_t>(found)];
  etcd["name"] = "etcd";
  etcd["image"] = in.image;
  if (!static_cast<const YAML::Node&>(etcd)["imagePullPolicy"]) {
    etcd["imagePullPolicy"] = "IfNotPresent";
  }
  YAML::Node command(YAML::NodeType::Sequence);
  command.push_back("etcd");
  for (const auto& f : in.flags) command.push_back(f);
  etcd["command"] = command;
  etcd.remove("args");
  YAML::Node probe;
  probe["tcpSocket"]["host"] = in.probe_host;
  probe["tcpSocket"]["port"] = in.probe_port;
  probe["initialDelaySeconds"] = 10;
  probe["periodSeconds"] = 10;
  probe["timeoutSeconds"] = 5;
  probe["failureThreshold"] = 8;
  etcd["livenessProbe"] = probe;

  YAML::Node mounts(YAML::NodeType::Sequence);
  YAML::Node volumes(YAML::NodeType::Sequence);
  // The base's own volumes (other than ours) stay.
  if (const_spec["volumes"] && const_spec["volumes"].IsSequence()) {
    for (const auto& v : const_spec["volumes"]) {
      const std::string name = v["name"] ? v["name"].as<std::string>("") : "";
      if (name.rfind("steward-", 0) != 0) volumes.push_back(v);
    }
  }
  const YAML::Node& const_etcd = etcd;
  if (const_etcd["volumeMounts"] && const_etcd["volumeMounts"].IsSequence()) {
    for (const auto& m : const_etcd["volumeMounts"]) {
      const std::string name = m["name"] ? m["name"].as<std::string>("") : "";
      if (name.rfind("steward-", 0) != 0) mounts.push_back(m);
    }
  }
  auto add = [&](const std::string& name, const std::string& path, bool read_only,
                 const char* type) {
    YAML::Node m;
    m["name"] = name;
    m["mountPath"] = path;
    if (read_only) m["readOnly"] = true;
    mounts.push_back(m);
    YAML::Node v;
    v["name"] = name;
    v["hostPath"]["path"] = path;
    v["hostPath"]["type"] = type;
    volumes.push_back(v);
  };
  add("steward-node-dir", in.node_dir, false, "DirectoryOrCreate");
  for (size_t i = 0; i < in.read_only_dirs.size(); ++i) {
    add(absl::StrCat("steward-tls-", i), in.read_only_dirs[i], true, "Directory");
  }
  if (!in.guard_dir.empty()) add("steward-wal-guard", in.guard_dir, true, "Directory");
  etcd["volumeMounts"] = mounts;
  spec["volumes"] = volumes;
  if (new_container) {
    YAML::Node list(YAML::NodeType::Sequence);
    list.push_back(etcd);
    spec["containers"] = list;
  }

  YAML::Emitter out;
  out << pod;
  if (!out.good())
    return absl::InternalError(absl::StrCat("rendering the pod: ", out.GetLastError()));
  return absl::StrCat("# Written by etcd-steward's agent on node ", in.node,
                      "; rewritten or removed by it. Do not edit.\n", out.c_str(), "\n");
}

}  // namespace steward
