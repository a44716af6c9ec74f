// The config sections parsed in sections.cc (backup, tls, auth, cluster.adopt), called by
// ParseConfig in config.cc. Not for use outside src/config/. Each throws ConfigError
// (parse_util.h), naming the key and the problem.
#pragma once

#include "config/config.h"
#include "yaml-cpp/yaml.h"

namespace steward::config_internal {

void ParseBackup(const YAML::Node& b, Config* c);
void ParseAuth(const YAML::Node& a, Config* c);
void ParseTls(const YAML::Node& t, Config* c);
void ParseAdopt(const YAML::Node& a, Config* c);

}  // namespace steward::config_internal
