// The static pod manifest (runner/static_pod.h): parsed back as YAML and checked field by
// field, with and without a base Pod spec to merge into.
#include "runner/static_pod.h"

#include <gtest/gtest.h>

#include "yaml-cpp/yaml.h"

namespace steward {
namespace {

StaticPodInput Input() {
  StaticPodInput in;
  in.node = "n1";
  in.image = "registry.example/etcd:3.4.23";
  in.flags = {"--name=n1", "--data-dir=/var/lib/steward/n1/etcd",
              "--listen-client-urls=https://10.0.0.11:2379"};
  in.node_dir = "/var/lib/steward/n1";
  in.read_only_dirs = {"/etc/etcd/pki"};
  in.probe_host = "10.0.0.11";
  in.probe_port = 2379;
  in.termination_grace_seconds = 11;
  return in;
}

YAML::Node Render(const StaticPodInput& in) {
  auto text = RenderStaticPod(in);
  EXPECT_TRUE(text.ok()) << text.status();
  return YAML::Load(text.ok() ? *text : "");
}

TEST(StaticPodTest, TheManifestRunsEtcdOnTheHostNetworkWithItsFlagsAndDirs) {
  YAML::Node pod = Render(Input());
  EXPECT_EQ(pod["apiVersion"].as<std::string>(), "v1");
  EXPECT_EQ(pod["kind"].as<std::string>(), "Pod");
  EXPECT_EQ(pod["metadata"]["name"].as<std::string>(), "etcd-steward-n1");
  EXPECT_EQ(pod["metadata"]["namespace"].as<std::string>(), "kube-system");
  EXPECT_EQ(pod["metadata"]["labels"]["app.kubernetes.io/managed-by"].as<std::string>(),
            "etcd-steward");
  const YAML::Node spec = pod["spec"];
  EXPECT_TRUE(spec["hostNetwork"].as<bool>());
  EXPECT_EQ(spec["terminationGracePeriodSeconds"].as<int>(), 11);
  EXPECT_EQ(spec["priorityClassName"].as<std::string>(), "system-node-critical");
  ASSERT_EQ(spec["containers"].size(), 1u);
  const YAML::Node c = spec["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "etcd");
  EXPECT_EQ(c["image"].as<std::string>(), "registry.example/etcd:3.4.23");
  ASSERT_EQ(c["command"].size(), 4u);
  EXPECT_EQ(c["command"][0].as<std::string>(), "etcd");
  EXPECT_EQ(c["command"][2].as<std::string>(), "--data-dir=/var/lib/steward/n1/etcd");
  EXPECT_EQ(c["livenessProbe"]["tcpSocket"]["host"].as<std::string>(), "10.0.0.11");
  EXPECT_EQ(c["livenessProbe"]["tcpSocket"]["port"].as<int>(), 2379);
  ASSERT_EQ(c["volumeMounts"].size(), 2u);
  EXPECT_EQ(c["volumeMounts"][0]["mountPath"].as<std::string>(), "/var/lib/steward/n1");
  EXPECT_FALSE(c["volumeMounts"][0]["readOnly"]);
  EXPECT_EQ(c["volumeMounts"][1]["mountPath"].as<std::string>(), "/etc/etcd/pki");
  EXPECT_TRUE(c["volumeMounts"][1]["readOnly"].as<bool>());
  ASSERT_EQ(spec["volumes"].size(), 2u);
  EXPECT_EQ(spec["volumes"][0]["hostPath"]["path"].as<std::string>(), "/var/lib/steward/n1");
  EXPECT_EQ(spec["volumes"][0]["hostPath"]["type"].as<std::string>(), "DirectoryOrCreate");
  EXPECT_EQ(spec["volumes"][1]["hostPath"]["type"].as<std::string>(), "Directory");
}

// Found in review: a kubelet restarts a static pod by itself, without asking the agent's D1
// check; a launch on member data needs the WAL dir to exist, or the pod stays pending.
TEST(StaticPodTest, ALaunchOnMemberDataCannotStartWithoutItsWal) {
  StaticPodInput in = Input();
  in.guard_dir = "/var/lib/steward/n1/etcd/member/wal";
  YAML::Node pod = Render(in);
  bool guarded = false;
  for (const auto& v : pod["spec"]["volumes"]) {
    guarded |= v["hostPath"]["path"].as<std::string>() == in.guard_dir &&
               v["hostPath"]["type"].as<std::string>() == "Directory";
  }
  EXPECT_TRUE(guarded);
}

TEST(StaticPodTest, TheSameInputGivesTheSameBytes) {
  // The kubelet restarts a pod whose manifest changed: an unchanged launch must not.
  EXPECT_EQ(*RenderStaticPod(Input()), *RenderStaticPod(Input()));
}

TEST(StaticPodTest, ABaseSpecIsMergedUnderWhatTheAgentOwns) {
  StaticPodInput in = Input();
  in.base_spec = R"(
apiVersion: v1
kind: Pod
metadata:
  name: something-else
  labels: {team: storage}
  annotations: {note: kept}
spec:
  hostNetwork: false
  priorityClassName: my-class
  tolerations: [{operator: Exists}]
  containers:
  - name: etcd
    image: old
    args: [--ignored]
    resources: {requests: {cpu: 100m, memory: 256Mi}}
    volumeMounts: [{name: scratch, mountPath: /scratch}]
  volumes: [{name: scratch, emptyDir: {}}]
)";
  YAML::Node pod = Render(in);
  EXPECT_EQ(pod["metadata"]["name"].as<std::string>(), "etcd-steward-n1");
  EXPECT_EQ(pod["metadata"]["labels"]["team"].as<std::string>(), "storage");
  EXPECT_EQ(pod["metadata"]["annotations"]["note"].as<std::string>(), "kept");
  const YAML::Node spec = pod["spec"];
  EXPECT_TRUE(spec["hostNetwork"].as<bool>()) << "the agent's";
  EXPECT_EQ(spec["priorityClassName"].as<std::string>(), "my-class") << "the base's";
  EXPECT_EQ(spec["tolerations"].size(), 1u);
  ASSERT_EQ(spec["containers"].size(), 1u);
  const YAML::Node c = spec["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>(), "registry.example/etcd:3.4.23");
  EXPECT_FALSE(c["args"]) << "etcd's flags are the agent's alone";
  EXPECT_EQ(c["resources"]["requests"]["memory"].as<std::string>(), "256Mi");
  ASSERT_EQ(c["volumeMounts"].size(), 3u);
  EXPECT_EQ(c["volumeMounts"][0]["name"].as<std::string>(), "scratch");
  ASSERT_EQ(spec["volumes"].size(), 3u);
  EXPECT_EQ(spec["volumes"][0]["name"].as<std::string>(), "scratch");
}

TEST(StaticPodTest, ABaseSpecThatIsNotAMappingIsRefused) {
  StaticPodInput in = Input();
  in.base_spec = "- just\n- a list\n";
  EXPECT_TRUE(absl::IsInvalidArgument(RenderStaticPod(in).status()));
}

}  // namespace
}  // namespace steward
