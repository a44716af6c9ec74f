#include "config/parse_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/duration.h"

namespace steward::config_internal {

[[noreturn]] void Fail(const std::string& key, const std::string& problem) {
  throw ConfigError{key, problem};
}

std::string Join(const std::string& prefix, const std::string& key) {
  return prefix.empty() ? key : absl::StrCat(prefix, ".", key);
}

void CheckKeys(const YAML::Node& map, const std::string& prefix,
               const std::set<std::string>& allowed) {
  if (!map.IsMap()) Fail(prefix, "must be a mapping");
  for (const auto& kv : map) {
    std::string k = kv.first.as<std::string>();
    if (!allowed.count(k)) {
      Fail(Join(prefix, k),
           absl::StrCat("unknown key (allowed here: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
}

std::string GetString(const YAML::Node& map, const std::string& prefix, const std::string& key,
                      bool required, const std::string& def) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) {
    if (required) Fail(Join(prefix, key), "is required");
    return def;
  }
  if (!n.IsScalar()) Fail(Join(prefix, key), "must be a string");
  std::string v = n.as<std::string>();
  if (v.empty() && required) Fail(Join(prefix, key), "must not be empty");
  return v;
}

int GetInt(const YAML::Node& map, const std::string& prefix, const std::string& key, int def) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return def;
  if (!n.IsScalar()) Fail(Join(prefix, key), "must be an integer");
  try {
    return n.as<int>();
  } catch (const YAML::Exception&) {
    Fail(Join(prefix, key), absl::StrCat("must be an integer, got \"", n.Scalar(), "\""));
  }
}

std::chrono::milliseconds GetDuration(const YAML::Node& map, const std::string& prefix,
                                      const std::string& key, std::chrono::milliseconds def) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return def;
  if (!n.IsScalar()) Fail(Join(prefix, key), "must be a duration such as 10s");
  auto d = ParseDuration(n.Scalar());
  if (!d.ok()) Fail(Join(prefix, key), std::string(d.status().message()));
  return *d;
}

bool ValidName(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return false;
    }
  }
  return true;
}

bool ValidHost(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' || c == ':' ||
          c == '[' || c == ']')) {
      return false;
    }
  }
  return true;
}

thread_local bool t_host_checks = true;

void CheckDataDir(const std::string& key, const std::string& dir) {
  if (!t_host_checks) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(dir, ec);
  if (ec) Fail(key, absl::StrCat("cannot resolve \"", dir, "\": ", ec.message()));
  fs::path probe = p;
  while (!probe.empty() && !fs::exists(probe, ec)) {
    if (probe == probe.parent_path()) break;
    probe = probe.parent_path();
  }
  if (!fs::is_directory(probe, ec)) {
    Fail(key, absl::StrCat("cannot create \"", dir, "\": ", probe.string(),
                           " exists and is not a directory"));
  }
  if (::access(probe.c_str(), W_OK | X_OK) != 0) {
    Fail(key, absl::StrCat(probe == p ? "\"" + dir + "\" is not writable"
                                      : "cannot create \"" + dir + "\": " + probe.string() +
                                            " is not writable"));
  }
}

void CheckBinary(const std::string& key, const std::string& path) {
  if (!t_host_checks) return;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) Fail(key, absl::StrCat("\"", path, "\" does not exist"));
  if (!S_ISREG(st.st_mode)) Fail(key, absl::StrCat("\"", path, "\" is not a regular file"));
  if (::access(path.c_str(), X_OK) != 0) {
    Fail(key, absl::StrCat("\"", path, "\" is not executable"));
  }
}

bool GetBool(const YAML::Node& map, const std::string& prefix, const std::string& key, bool def) {
  const YAML::Node n = map[key];
  if (!n || n.IsNull()) return def;
  if (!n.IsScalar()) Fail(Join(prefix, key), "must be true or false");
  const std::string v = n.Scalar();
  if (v == "true" || v == "yes" || v == "on") return true;
  if (v == "false" || v == "no" || v == "off") return false;
  Fail(Join(prefix, key), absl::StrCat("must be true or false, got \"", v, "\""));
}

void CheckReadable(const std::string& key, const std::string& path) {
  if (!t_host_checks) return;
  if (::access(path.c_str(), R_OK) != 0) {
    Fail(key, absl::StrCat("\"", path, "\" does not exist or is not readable"));
  }
}

std::string EnvOr(const char* name, const std::string& def) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : def;
}

}  // namespace steward::config_internal
