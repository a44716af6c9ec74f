// The config schema (config/schema.h): the reference rendered from it is a config the parser
// accepts, and every value it shows as a default is the parser's own default.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "config/config.h"
#include "config/schema.h"
#include "gtest/gtest.h"

namespace steward {
namespace {

absl::StatusOr<Config> LoadText(const std::string& text) {
  char path[] = "/tmp/steward-schema-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return absl::InternalError("mkstemp");
  ::close(fd);
  std::ofstream(path) << text;
  // Host checks off: the reference names /etc/steward/pki/ca.key and /usr/bin/etcd, which a
  // test machine need not have.
  auto c = LoadClientConfig(path);
  std::remove(path);
  return c;
}

TEST(ConfigSchemaTest, TheRenderedReferenceIsAConfigTheParserAccepts) {
  auto c = LoadText(RenderConfigReference());
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << RenderConfigReference();
  EXPECT_EQ(c->cluster.name, "demo");
  EXPECT_EQ(c->cluster.nodes.size(), 3u);
  EXPECT_EQ(c->node.name, "n1");
}

// The values the reference shows are the parser's defaults: a config that sets only what is
// required parses to the same values.
TEST(ConfigSchemaTest, TheReferencesValuesAreTheDefaults) {
  auto shown = LoadText(RenderConfigReference());
  ASSERT_TRUE(shown.ok()) << shown.status();
  auto bare = LoadText(R"(cluster:
  name: demo
  nodes: [{name: n1, host: 127.0.0.11}, {name: n2, host: 127.0.0.12}, {name: n3, host: 127.0.0.13}]
node: {name: n1}
tls: {mode: issued, ca_cert: /etc/steward/pki/ca.crt, ca_key: /etc/steward/pki/ca.key}
)");
  ASSERT_TRUE(bare.ok()) << bare.status();
  const Config& a = *shown;
  const Config& b = *bare;
  EXPECT_EQ(a.cluster.size, b.cluster.size);
  EXPECT_EQ(a.cluster.ports.client, b.cluster.ports.client);
  EXPECT_EQ(a.cluster.ports.peer, b.cluster.ports.peer);
  EXPECT_EQ(a.cluster.ports.agent, b.cluster.ports.agent);
  EXPECT_EQ(a.cluster.ports.admin, b.cluster.ports.admin);
  EXPECT_EQ(a.cluster.ports.fence, b.cluster.ports.fence);
  EXPECT_EQ(a.cluster.ports.metrics, b.cluster.ports.metrics);
  EXPECT_EQ(a.cluster.replace_after, b.cluster.replace_after);
  EXPECT_EQ(a.cluster.learner_timeout, b.cluster.learner_timeout);
  EXPECT_EQ(a.cluster.leader_lease_ttl, b.cluster.leader_lease_ttl);
  EXPECT_EQ(a.cluster.reconcile_interval, b.cluster.reconcile_interval);
  EXPECT_EQ(a.cluster.idle_interval, b.cluster.idle_interval);
  EXPECT_EQ(a.cluster.recover_nospace, b.cluster.recover_nospace);
  EXPECT_EQ(a.node.data_dir, b.node.data_dir);
  EXPECT_EQ(a.node.log_level, b.node.log_level);
  EXPECT_EQ(a.etcd.binary, b.etcd.binary);
  EXPECT_EQ(a.etcd.extra_args, b.etcd.extra_args);
  EXPECT_EQ(a.etcd.stop_timeout, b.etcd.stop_timeout);
  EXPECT_EQ(a.etcd.restart_backoff_min, b.etcd.restart_backoff_min);
  EXPECT_EQ(a.etcd.restart_backoff_max, b.etcd.restart_backoff_max);
  EXPECT_EQ(a.etcd.versions, b.etcd.versions);
  EXPECT_EQ(a.etcd.etcdctl, b.etcd.etcdctl);
  EXPECT_EQ(a.etcd.etcdutl, b.etcd.etcdutl);
  EXPECT_EQ(a.etcd.restore_in_place, b.etcd.restore_in_place);
  EXPECT_EQ(a.etcd.log_max_size, b.etcd.log_max_size);
  EXPECT_EQ(a.etcd.log_keep, b.etcd.log_keep);
  EXPECT_EQ(a.etcd.auto_compaction_mode, b.etcd.auto_compaction_mode);
  EXPECT_EQ(a.etcd.auto_compaction_retention, b.etcd.auto_compaction_retention);
  EXPECT_EQ(a.runner.kind, b.runner.kind);
  EXPECT_EQ(a.runner.manifest_dir, b.runner.manifest_dir);
  EXPECT_EQ(a.runner.image, b.runner.image);
  EXPECT_EQ(a.runner.pod_spec_file, b.runner.pod_spec_file);
  EXPECT_EQ(a.backup.store, b.backup.store);
  EXPECT_EQ(a.backup.interval, b.backup.interval);
  EXPECT_EQ(a.backup.before_change_min_interval, b.backup.before_change_min_interval);
  EXPECT_EQ(a.backup.auto_restore, b.backup.auto_restore);
  EXPECT_EQ(a.backup.delta_interval, b.backup.delta_interval);
  EXPECT_EQ(a.backup.drill_interval, b.backup.drill_interval);
  EXPECT_EQ(a.backup.drill_scratch, b.backup.drill_scratch);
  EXPECT_EQ(a.backup.low_memory_stream, b.backup.low_memory_stream);
  EXPECT_EQ(a.backup.retention.keep_all_for, b.backup.retention.keep_all_for);
  EXPECT_EQ(a.backup.retention.hourly_for, b.backup.retention.hourly_for);
  EXPECT_EQ(a.backup.retention.daily_for, b.backup.retention.daily_for);
  EXPECT_EQ(a.backup.s3.endpoint, b.backup.s3.endpoint);
  EXPECT_EQ(a.backup.s3.region, b.backup.s3.region);
  EXPECT_EQ(a.backup.s3.path_style, b.backup.s3.path_style);
  EXPECT_EQ(a.backup.s3.profile, b.backup.s3.profile);
  EXPECT_EQ(a.backup.s3.ca_file, b.backup.s3.ca_file);
  EXPECT_EQ(a.backup.encryption.key_file, b.backup.encryption.key_file);
  EXPECT_EQ(a.auth.mode, b.auth.mode);
  EXPECT_EQ(a.auth.admin_users, b.auth.admin_users);
  EXPECT_EQ(a.tls.mode, b.tls.mode);
  EXPECT_EQ(a.tls.cert_lifetime, b.tls.cert_lifetime);
  EXPECT_EQ(a.tls.extra_sans, b.tls.extra_sans);
}

// The parser takes its allowed keys from the schema: an unknown key names the schema's list.
TEST(ConfigSchemaTest, AnUnknownKeyIsRefusedWithTheSchemasKeys) {
  std::string text = RenderConfigReference();
  text.replace(text.find("  replace_after:"), 16, "  replace_afterr:");
  auto c = LoadText(text);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(std::string(c.status().message()).find("cluster.replace_afterr: unknown key"),
            std::string::npos)
      << c.status();
  EXPECT_EQ(ConfigKeysUnder("cluster.nodes[]"), (std::set<std::string>{"name", "host"}));
  EXPECT_EQ(ConfigKeysUnder(""),
            (std::set<std::string>{"cluster", "node", "etcd", "runner", "backup", "tls", "auth"}));
}

}  // namespace
}  // namespace steward
