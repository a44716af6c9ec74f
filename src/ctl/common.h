// What stewardctl's commands share: the common flags (taken before or after the subcommand),
// the etcd client options they imply, the config and the backup store. A command in a file of
// its own registers itself with an Add…Commands function that appends to `Commands`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "backup/store.h"
#include "config/config.h"
#include "ctl/status.h"
#include "etcd/client.h"
#include "nlohmann/json.hpp"
#include "steward_peer.pb.h"

namespace steward {

struct Common {
  std::string config_path;
  std::string endpoints;
  std::string cacert, cert, key;  // etcdctl's names
  std::string output = "table";
  int timeout_ms = 3000;
  // The store-only commands (list-backups, backup export) without a node's config: the
  // store's URL and the cluster's name (credentials from AWS_* variables).
  std::string backup_store;
  std::string cluster;
  // With --backup-store: the encryption key files (the first for new backups, the rest old).
  std::vector<std::string> encryption_key_files;
};

// A parsed subcommand runs `run`; it returns the exit status (0 ok, 1 failed, 2 usage).
struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};
using Commands = std::vector<Command>;

// Adds the common flags to a subcommand (they are global too); `output` adds -o/-w.
void AddCommonFlags(CLI::App* sub, Common* common, bool output);

// Client options: the deadline and, for TLS, --cacert/--cert/--key, or else the node's own client
// certificate named by the config (issued: <data_dir>/tls, files: tls.client_cert_file).
EtcdClient::Options ClientOptions(const Common& c);

// Endpoints and configured nodes from --endpoints or --config. Returns 0 or an exit status.
int ResolveEndpoints(const Common& c, std::vector<std::string>* endpoints,
                     std::vector<NodeRow>* nodes);

// The config a command needs (`what` names the command), or nullopt with the message printed
// and *rc set to 2 (bad usage or a bad config).
std::optional<Config> ConfigFor(const Common& c, const char* what, int* rc);

// True, with the reason printed, when the store shows a restore under way or cannot be read
// (then nobody can tell): a new restore must not start.
bool RestoreMayBeUnderWay(BackupStore& store, const std::string& cluster);

// True, with the reason printed, when the store marks the cluster destroyed (or the mark cannot
// be read): the agents refuse restores until `stewardctl undestroy`.
bool DestroyedRefuses(BackupStore& store, const std::string& cluster);

// Every configured node's agent, asked at once (GetState); silent ones are missing from the map.
std::map<std::string, peer::NodeState> AgentStates(
    const Config& config, const std::shared_ptr<grpc::ChannelCredentials>& creds,
    std::chrono::milliseconds timeout);

// For a command whose result is an action rather than a table (pause, resume, drain,
// remove-node, readd-node, recover-quorum): with -o json, what it says for people goes to
// stderr, and stdout carries one JSON document: {"command", "exit_code", "ok", "messages": the
// lines it said, plus what `extra` adds (e.g. the maintenance state afterwards)}. Otherwise it
// just runs `run`.
int WithJsonResult(const Common& c, const std::string& command, const std::function<int()>& run,
                   const std::function<void(nlohmann::json*)>& extra = nullptr);

// "Continue? [y/N]" on stdout; true only for "y" or "yes" on stdin.
bool Confirmed();

int64_t UnixNow();
// "alice@host": who asked, for the record (SUDO_USER before USER).
std::string WhoAmI();
// "2026-11-26 17:00:00Z"
std::string UtcTime(int64_t unix_time);

struct WithStore {
  std::optional<Config> config;
  std::unique_ptr<BackupStore> store;
  int rc = 0;
};

// The config and its backup store, or rc != 0 with the message printed. With `store_only`
// (commands that talk to the store alone), --backup-store URL and --cluster NAME do without a
// config: *config then holds only the cluster's name and the store.
WithStore OpenFromConfig(const Common& c, const char* what, bool store_only = false);

// The stored spec's size (configure-cluster) in ReadStewardState's document, else `fallback`.
int StoredDesiredSize(const nlohmann::json& steward, int fallback);

}  // namespace steward
