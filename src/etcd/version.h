// etcd versions and binaries, without I/O: parsing "3.5.16", choosing the binary a node runs
// for the version its cluster runs, and reading why etcd exited from its log.
//
// The rules (docs/upgrades.md, "Versions and binaries"):
//   EV1 a node joins, restores or starts empty in an existing cluster with a binary of the
//      cluster's version: exactly that version if it has one, else the newest patch of the
//      same minor; never a lower minor (etcd refuses: "incompatible with current running
//      cluster") and never a higher one (that would be an upgrade nobody asked for).
//   EV2 a node with no such binary does not launch etcd: it waits and says which version it
//      needs and which key to set (etcd.versions).
// Thread-safe: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steward {

// "3.4.23" -> {3, 4, 23}; nullopt if it is not a version.
std::optional<std::vector<int>> ParseVersion(const std::string& v);
// Both are versions with the same major and minor.
bool SameMinor(const std::string& a, const std::string& b);
// a's minor is below b's (false when either is not a version).
bool MinorBelow(const std::string& a, const std::string& b);
// A release this project has never run (3.6 and later: Debian ships none, docs/etcd-3.6.md says
// what changes). Rolling to one needs the operator to say so (configure-cluster --untested).
bool UntestedEtcd(const std::string& version);

// One binary (or static-pod image) a node may run, as its --version answered.
struct EtcdBinary {
  std::string key;       // the etcd.versions key; "" for etcd.binary
  std::string path;      // executable or image
  std::string reported;  // the version it reported; "" if none
  std::string error;     // why none
};

// EV1: the binary to run for `version`, or nullptr.
const EtcdBinary* PickBinary(const std::vector<EtcdBinary>& binaries, const std::string& version);

// EV2's message for a node that has no binary for `version`: which version, what it has, and
// the key to set.
std::string NoBinaryFor(const std::string& node, const std::string& version,
                        const std::vector<EtcdBinary>& binaries);

// "3.5.16" from `etcd --version`'s output ("etcd Version: 3.5.16\n..."); "" if absent.
std::string VersionFromOutput(std::string_view output);
// "3.5.16" from a static pod's image ("registry.k8s.io/etcd:3.5.16-0"); "" if the tag names
// no version.
std::string VersionFromImage(std::string_view image);

// Why etcd exited, from what it wrote to its log since it was started: the last critical or
// fatal line (etcd 3.4's capnslog " C | " and a Go panic, 3.5's JSON "fatal"/"panic" with its
// "error"), else the last error line, else the last line (a binary that is not etcd). "" if
// the log is empty.
std::string ExitReasonFromLog(std::string_view log);

}  // namespace steward
