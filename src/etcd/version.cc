#include "etcd/version.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace steward {

std::optional<std::vector<int>> ParseVersion(const std::string& v) {
  std::vector<int> parts;
  for (absl::string_view p : absl::StrSplit(v, '.')) {
    int x = 0;
    if (!absl::SimpleAtoi(p, &x) || x < 0) return std::nullopt;
    parts.push_back(x);
  }
  if (parts.size() != 3) return std::nullopt;
  return parts;
}

bool SameMinor(const std::string& a, const std::string& b) {
  auto x = ParseVersion(a), y = ParseVersion(b);
  return x && y && (*x)[0] == (*y)[0] && (*x)[1] == (*y)[1];
}

bool UntestedEtcd(const std::string& version) {
  return ParseVersion(version).has_value() && !MinorBelow(version, "3.6.0");
}

bool MinorBelow(const std::string& a, const std::string& b) {
  auto x = ParseVersion(a), y = ParseVersion(b);
  return x && y && ((*x)[0] < (*y)[0] || ((*x)[0] == (*y)[0] && (*x)[1] < (*y)[1]));
}

const EtcdBinary* PickBinary(const std::vector<EtcdBinary>& binaries, const std::string& version) {
  for (const auto& b : binaries) {
    if (!b.reported.empty() && b.reported == version) return &b;
  }
  const EtcdBinary* best = nullptr;
  for (const auto& b : binaries) {
    if (!SameMinor(b.reported, version)) continue;
    if (best == nullptr || *ParseVersion(b.reported) > *ParseVersion(best->reported)) best = &b;
  }
  return best;
}

std::string NoBinaryFor(const std::string& node, const std::string& version,
                        const std::vector<EtcdBinary>& binaries) {
  std::vector<std::string> has;
  for (const auto& b : binaries) {
    const std::string name =
        b.key.empty() ? "etcd.binary" : absl::StrCat("etcd.versions[", b.key, "]");
    has.push_back(b.reported.empty() ? absl::StrCat(name, " reports no version (", b.error, ")")
                                     : absl::StrCat(name, " is ", b.reported));
  }
  auto v = ParseVersion(version);
  const std::string minor = v ? absl::StrCat((*v)[0], ".", (*v)[1]) : version;
  return absl::StrCat("node ", node, " needs etcd ", version,
                      " (the version the cluster runs) "
                      "and has no binary for ",
                      minor, " (", has.empty() ? "it reported none" : absl::StrJoin(has, "; "),
                      "): add one to etcd.versions on ", node, ", e.g. \"", version,
                      ": /path/to/etcd-", version, "\"");
}

std::string VersionFromOutput(std::string_view output) {
  constexpr std::string_view kTag = "etcd Version: ";
  const size_t at = output.find(kTag);
  if (at == std::string_view::npos) return "";
  const size_t from = at + kTag.size();
  std::string v(output.substr(from, output.find('\n', from) - from));
  while (!v.empty() && (v.back() == '\r' || v.back() == ' ')) v.pop_back();
  return ParseVersion(v) ? v : "";
}

std::string VersionFromImage(std::string_view image) {
  const size_t colon = image.rfind(':');
  if (colon == std::string_view::npos || image.find('/', colon) != std::string_view::npos)
    return "";
  std::string tag(image.substr(colon + 1));
  if (!tag.empty() && tag[0] == 'v') tag.erase(0, 1);
  tag = tag.substr(0, tag.find('-'));  // "3.5.16-0": Kubernetes' image revision
  return ParseVersion(tag) ? tag : "";
}

namespace {
// The message of one JSON log line of etcd >= 3.5 at `levels`, "" if it is not one.
std::string JsonMessage(std::string_view line, std::initializer_list<const char*> levels) {
  if (line.empty() || line.front() != '{') return "";
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("level") || !j["level"].is_string()) {
    return "";
  }
  const std::string level = j["level"].get<std::string>();
  bool match = false;
  for (const char* l : levels) match = match || level == l;
  if (!match) return "";
  std::string msg = j.value("msg", "");
  if (j.contains("error") && j["error"].is_string()) {
    msg = msg.empty() ? j["error"].get<std::string>()
                      : absl::StrCat(msg, ": ", j["error"].get<std::string>());
  }
  return msg;
}

// The message of one capnslog line of etcd 3.4 ("2026-11-28 06:23:50.167402 C | etcdmain: x")
// at one of `levels` ("C", "E"), "" if it is not one.
std::string CapnslogMessage(std::string_view line, std::string_view levels) {
  for (char level : levels) {
    const std::string tag = absl::StrCat(" ", std::string(1, level), " | ");
    const size_t at = line.find(tag);
    if (at == std::string_view::npos) continue;
    std::string_view rest = line.substr(at + tag.size());
    // "etcdmain: message": drop the package.
    if (size_t colon = rest.find(": "); colon != std::string_view::npos &&
                                        rest.substr(0, colon).find(' ') == std::string_view::npos) {
      rest = rest.substr(colon + 2);
    }
    return std::string(rest);
  }
  return "";
}
}  // namespace

std::string ExitReasonFromLog(std::string_view log) {
  std::string fatal, error, last;
  while (!log.empty()) {
    const size_t end = log.find('\n');
    std::string_view line = log.substr(0, end);
    log = end == std::string_view::npos ? std::string_view() : log.substr(end + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) {
      line.remove_suffix(1);
    }
    if (line.empty()) continue;
    last = std::string(line.substr(0, 300));
    if (std::string m = JsonMessage(line, {"fatal", "panic", "dpanic"}); !m.empty()) {
      fatal = m;
    } else if (std::string e = JsonMessage(line, {"error"}); !e.empty()) {
      error = e;
    } else if (std::string c = CapnslogMessage(line, "C"); !c.empty()) {
      fatal = c;
    } else if (std::string e = CapnslogMessage(line, "E"); !e.empty()) {
      error = e;
    } else if (line.substr(0, 7) == "panic: ") {
      fatal = std::string(line);
    }
  }
  if (!fatal.empty()) return fatal;
  if (!error.empty()) return error;
  return last;
}

}  // namespace steward
