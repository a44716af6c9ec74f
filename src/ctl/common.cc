// What stewardctl's commands share: the common flags, clients, configs and the store.
#include "ctl/common.h"

#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backup/open.h"
#include "common/fan_out.h"
#include "control/destroy.h"
#include "control/env.h"
#include "control/records.h"
#include "peer/client.h"
#include "pki/node_certs.h"

namespace steward {

// Client options: the deadline and, for TLS, --cacert/--cert/--key, or else the node's own client
// certificate named by the config (issued: <data_dir>/tls, files: tls.client_cert_file).
EtcdClient::Options ClientOptions(const Common& c) {
  EtcdClient::Options o;
  o.timeout = std::chrono::milliseconds(c.timeout_ms);
  std::string ca = c.cacert, cert = c.cert, key = c.key;
  std::optional<Config> config;
  if (!c.config_path.empty()) {
    if (auto loaded = LoadClientConfig(c.config_path); loaded.ok()) config = std::move(*loaded);
  }
  if (ca.empty() && config && config->tls.enabled()) {
    TlsPaths t = config->Tls();
    ca = t.ca;
    cert = t.client_cert;
    key = t.client_key;
  }
  if (!ca.empty()) {
    auto creds = TlsChannelCredentials(ca, cert, key);
    if (creds.ok()) {
      o.credentials = *creds;
    } else {
      std::cerr << "stewardctl: TLS: " << creds.status().message()
                << " (give --cacert/--cert/--key)\n";
    }
  }
  if (config) o.low_memory_snapshots = config->backup.low_memory_stream;
  // An adopted cluster's members are dialled as cluster.adopt says.
  if (config && config->cluster.adopt.enabled()) {
    if (auto f = ClusterCredentials(*config, o.credentials); f.ok()) {
      o.credentials_for = *f;
    } else {
      std::cerr << "stewardctl: " << f.status().message() << "\n";
    }
  }
  return o;
}

// Endpoints and configured nodes from --endpoints or --config. Returns 0 or an exit status.
int ResolveEndpoints(const Common& c, std::vector<std::string>* endpoints,
                     std::vector<NodeRow>* nodes) {
  if (!c.endpoints.empty()) {
    for (auto part : absl::StrSplit(c.endpoints, ',', absl::SkipEmpty())) {
      endpoints->emplace_back(part);
    }
    return 0;
  }
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: give --config FILE (any node's) or --endpoints URLS\n";
    return 2;
  }
  auto config = LoadClientConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return 2;
  }
  *endpoints = config->ClusterClientUrls();
  for (const auto& n : config->cluster.nodes) nodes->push_back({n.name, config->PeerUrl(n)});
  return 0;
}

// The config a command needs (`what` names the command), or nullopt with the message printed
// and *rc set to 2 (bad usage or a bad config).
std::optional<Config> ConfigFor(const Common& c, const char* what, int* rc) {
  *rc = 2;
  if (c.config_path.empty()) {
    std::cerr << "stewardctl: " << what << " needs --config FILE (any node's)\n";
    return std::nullopt;
  }
  auto config = LoadClientConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    return std::nullopt;
  }
  *rc = 0;
  return std::move(*config);
}

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

WithStore OpenFromConfig(const Common& c, const char* what, bool store_only) {
  WithStore w;
  if (c.config_path.empty() && !(store_only && !c.backup_store.empty())) {
    std::cerr << "stewardctl: " << what << " needs --config FILE (any node's)"
              << (store_only ? ", or --backup-store URL and --cluster NAME" : "") << "\n";
    w.rc = 2;
    return w;
  }
  absl::StatusOr<Config> config = Config{};
  if (!c.config_path.empty()) config = LoadClientConfig(c.config_path);
  if (!config.ok()) {
    std::cerr << "stewardctl: config error: " << config.status().message() << "\n";
    w.rc = 2;
    return w;
  }
  if (store_only && !c.backup_store.empty()) {
    auto bc = BackupStoreFromUrl(c.backup_store);
    if (!bc.ok()) {
      std::cerr << "stewardctl: " << bc.status().message() << "\n";
      w.rc = 2;
      return w;
    }
    // The config's keys stay unless others are given (they belong to the store, not the URL).
    EncryptionConfig keys = config->backup.encryption;
    config->backup = *bc;
    config->backup.encryption = keys;
    if (!c.encryption_key_files.empty()) {
      config->backup.encryption.key_file = c.encryption_key_files.front();
      config->backup.encryption.old_key_files.assign(c.encryption_key_files.begin() + 1,
                                                     c.encryption_key_files.end());
    }
    if (!c.cluster.empty()) config->cluster.name = c.cluster;
    if (config->cluster.name.empty()) {
      std::cerr << "stewardctl: " << what << " --backup-store needs --cluster NAME (the "
                << "cluster.name whose backups these are)\n";
      w.rc = 2;
      return w;
    }
  }
  if (config->backup.store.empty()) {
    std::cerr << "stewardctl: " << what << ": backup.store is not set in " << c.config_path << "\n";
    w.rc = 2;
    return w;
  }
  auto store = OpenStore(config->backup, /*tolerate_unreadable_keys=*/true);
  if (!store.ok()) {
    std::cerr << "stewardctl: backup store: " << store.status().message() << "\n";
    w.rc = 1;
    return w;
  }
  w.config = std::move(*config);
  w.store = std::move(*store);
  return w;
}

std::string WhoAmI() {
  const char* user = std::getenv("SUDO_USER");
  if (user == nullptr || *user == '\0') user = std::getenv("USER");
  if (user == nullptr || *user == '\0') user = std::getenv("LOGNAME");
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return absl::StrCat(user != nullptr && *user != '\0' ? user : "unknown", "@",
                      host[0] != '\0' ? host : "unknown");
}

std::string UtcTime(int64_t unix_time) {
  std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%SZ", &tm);
  return buf;
}

bool RestoreMayBeUnderWay(BackupStore& store, const std::string& cluster) {
  auto pending = ReadRestoreIntent(store, cluster);
  if (!pending.ok()) {
    std::cerr << "stewardctl: cannot read the store's restore intent, so cannot tell whether a "
                 "restore is under way: "
              << pending.status().message() << ". Nothing was changed.\n";
    return true;
  }
  if (pending->has_value() && !(*pending)->done && !(*pending)->cancelled) {
    std::cerr << "stewardctl: restore " << (*pending)->id << " of " << (*pending)->backup
              << " is still under way; wait for it to finish\n";
    return true;
  }
  return false;
}

bool DestroyedRefuses(BackupStore& store, const std::string& cluster) {
  auto mark = ReadDestroyMark(store, cluster);
  if (!mark.ok()) {
    std::cerr << "stewardctl: cannot read the store's destroy mark: " << mark.status().message()
              << ". Nothing was changed.\n";
    return true;
  }
  if (mark->has_value()) {
    std::cerr << "stewardctl: refusing: " << DescribeDestroyMark(cluster, **mark)
              << " first. Nothing was changed.\n";
    return true;
  }
  return false;
}

std::map<std::string, peer::NodeState> AgentStates(
    const Config& config, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    std::chrono::milliseconds timeout) {
  std::vector<std::string> names;
  std::vector<std::function<absl::StatusOr<peer::NodeState>()>> calls;
  for (const auto& n : config.cluster.nodes) {
    names.push_back(n.name);
    const std::string address = config.AgentAddress(n);
    calls.push_back([address, creds, timeout] {
      PeerClient agent(address, creds);
      return agent.GetState(timeout);
    });
  }
  auto results = FanOut(true, calls);
  std::map<std::string, peer::NodeState> states;
  for (size_t i = 0; i < names.size(); ++i) {
    if (results[i].ok()) states[names[i]] = *results[i];
  }
  return states;
}

int WithJsonResult(const Common& c, const std::string& command, const std::function<int()>& run,
                   const std::function<void(nlohmann::json*)>& extra) {
  if (c.output != "json") return run();
  // The command's own lines are kept for the document and shown on stderr as they come (a
  // question such as "Continue? [y/N]" must still reach a person).
  struct Tee : std::streambuf {
    std::string text;
    int overflow(int ch) override {
      if (ch == EOF) return 0;
      text.push_back(static_cast<char>(ch));
      std::cerr.put(static_cast<char>(ch));
      if (ch == '\n') std::cerr.flush();
      return ch;
    }
  } tee;
  std::streambuf* saved = std::cout.rdbuf(&tee);
  int rc = 2;
  try {
    rc = run();
  } catch (...) {
    std::cout.rdbuf(saved);
    throw;
  }
  std::cout.rdbuf(saved);
  nlohmann::json j = {{"command", command},
                      {"exit_code", rc},
                      {"ok", rc == 0},
                      {"messages", nlohmann::json::array()}};
  for (auto line : absl::StrSplit(tee.text, '\n', absl::SkipEmpty())) {
    j["messages"].push_back(std::string(line));
  }
  if (extra) extra(&j);
  std::cout << j.dump(2) << "\n";
  return rc;
}

bool Confirmed() {
  std::cout << "Continue? [y/N] " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "yes";
}

void AddCommonFlags(CLI::App* sub, Common* common, bool output) {
  sub->fallthrough();
  sub->add_option("--config", common->config_path, "any node's steward config file");
  sub->add_option("--endpoints", common->endpoints, "comma-separated etcd client URLs");
  sub->add_option("--timeout-ms", common->timeout_ms, "deadline for each call")
      ->check(CLI::Range(100, 600000));
  sub->add_option("--cacert", common->cacert, "CA certificate that signed the servers' (TLS)");
  sub->add_option("--cert", common->cert, "client certificate (TLS)");
  sub->add_option("--key", common->key, "client key (TLS)");
  sub->add_option("--backup-store", common->backup_store,
                  "a backup store's URL (file:///dir or s3://bucket/prefix; AWS_* credentials) "
                  "for the store-only commands, instead of --config");
  sub->add_option("--cluster", common->cluster, "the cluster's name, with --backup-store");
  sub->add_option("--encryption-key-file", common->encryption_key_files,
                  "with --backup-store: a backup.encryption key file (repeat for old keys)");
  if (output) {
    sub->add_option("-o,-w,--output,--write-out", common->output, "table, json or simple")
        ->check(CLI::IsMember({"table", "json", "simple"}));
  }
}

// The stored spec's size (configure-cluster), else `fallback`; a malformed spec counts as none.
int StoredDesiredSize(const nlohmann::json& steward, int fallback) {
  if (!steward.contains("spec") || !steward["spec"].is_object()) return fallback;
  const auto& spec = steward["spec"];
  if (!spec.contains("size") || !spec["size"].is_number_integer()) return fallback;
  return spec["size"].get<int>();
}

}  // namespace steward
