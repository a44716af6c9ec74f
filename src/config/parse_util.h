// The config parser's own helpers, shared by config.cc (the top level, cluster, node, etcd and
// runner) and sections.cc (backup, tls, auth, cluster.adopt). Not for use outside src/config/.
// They know YAML and keys, not the Config struct (that is sections.h), so nothing here
// includes config.h.
// A problem is thrown as ConfigError (Fail) and turned into a Status by ParseConfig, naming the
// key and the problem.
#pragma once

#include <chrono>
#include <set>
#include <string>

#include "yaml-cpp/yaml.h"

namespace steward::config_internal {

struct ConfigError {
  std::string key;
  std::string problem;
};
[[noreturn]] void Fail(const std::string& key, const std::string& problem);
// "prefix.key" ("key" without a prefix).
std::string Join(const std::string& prefix, const std::string& key);
// Rejects keys of `map` that are not in `allowed`, naming the first unknown one.
void CheckKeys(const YAML::Node& map, const std::string& prefix,
               const std::set<std::string>& allowed);
// Typed values of `map[key]`, `def` when absent; a value of another type fails naming the key.
std::string GetString(const YAML::Node& map, const std::string& prefix, const std::string& key,
                      bool required, const std::string& def = "");
int GetInt(const YAML::Node& map, const std::string& prefix, const std::string& key, int def);
std::chrono::milliseconds GetDuration(const YAML::Node& map, const std::string& prefix,
                                      const std::string& key, std::chrono::milliseconds def);
bool GetBool(const YAML::Node& map, const std::string& prefix, const std::string& key, bool def);
bool ValidName(const std::string& s);
bool ValidHost(const std::string& s);
std::string EnvOr(const char* name, const std::string& def);

// Off while LoadClientConfig parses: the checks below are of the machine the agent runs on
// (its binaries, data dir, CA key), which an operator's machine need not have or be allowed
// to read. One parse runs on one thread, so a thread-local flag keeps them out of every
// signature.
extern thread_local bool t_host_checks;
// Host checks off for one parse, back to what they were however the parse ends.
class WithoutHostChecks {
 public:
  WithoutHostChecks() : saved_(t_host_checks) { t_host_checks = false; }
  ~WithoutHostChecks() { t_host_checks = saved_; }
  WithoutHostChecks(const WithoutHostChecks&) = delete;
  WithoutHostChecks& operator=(const WithoutHostChecks&) = delete;

 private:
  bool saved_;
};
// Can `dir` be created (or does it exist as a writable directory)? Changes nothing.
void CheckDataDir(const std::string& key, const std::string& dir);
void CheckBinary(const std::string& key, const std::string& path);
void CheckReadable(const std::string& key, const std::string& path);

}  // namespace steward::config_internal
