// Values shaped like the Kubernetes objects an apiserver keeps in etcd, for bench/put_load
// (`--values k8s`) and so bench/scale: a JSON object with the metadata every object carries
// (name, namespace, uid, resourceVersion, timestamps, labels, annotations, managedFields) and a
// `data` body of configuration-like text, 1-10 KiB in all (uniform), keys under
// /registry/configmaps/<namespace>/<name> as the apiserver names them.
//
// Why this shape: what a backup costs depends on how well the DB compresses. Random bytes do
// not compress at all and one repeated buffer compresses far too well; real objects sit between
// (repeated field names and vocabulary, unique uids, numbers and hashes). Here every object has
// fresh random uids, hashes and numbers among words of a small vocabulary, which zstd -1
// shrinks about 3:1 (bench/scale reports the ratio it measured with each run).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace bench {

inline void AppendHex(std::mt19937_64& rng, int digits, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (int i = 0; i < digits; ++i) out->push_back(kHex[rng() & 15]);
}

inline std::string K8sKey(long thread, uint64_t n) {
  return "/registry/configmaps/team-" + std::to_string(n % 40) + "/app-" + std::to_string(thread) +
         "-" + std::to_string(n);
}

// A value of 1024..10240 bytes (uniform) for object n of writer `thread`.
inline std::string K8sValue(std::mt19937_64& rng, long thread, uint64_t n) {
  static constexpr const char* kWords[] = {
      "server",  "timeout", "replicas", "enabled", "listen",   "port",    "upstream", "cache",
      "backend", "retry",   "limit",    "memory",  "cpu",      "request", "image",    "tag",
      "log",     "level",   "info",     "debug",   "metrics",  "path",    "health",   "ready",
      "true",    "false",   "region",   "zone",    "endpoint", "secret",  "volume",   "mount"};
  const size_t target = 1024 + rng() % (10240 - 1024 + 1);
  std::string v;
  v.reserve(target + 64);
  const std::string ns = "team-" + std::to_string(n % 40);
  const std::string name = "app-" + std::to_string(thread) + "-" + std::to_string(n);
  v += R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":")" + name +
       R"(","namespace":")" + ns + R"(","uid":")";
  AppendHex(rng, 8, &v), v += '-', AppendHex(rng, 4, &v), v += '-', AppendHex(rng, 4, &v);
  v += '-', AppendHex(rng, 4, &v), v += '-', AppendHex(rng, 12, &v);
  v += R"(","resourceVersion":")" + std::to_string(100000 + n * 7 + rng() % 7) +
       R"(","creationTimestamp":"2026-11-)" + std::to_string(10 + rng() % 18) + "T" +
       std::to_string(10 + rng() % 14) + ":" + std::to_string(10 + rng() % 50) + ":" +
       std::to_string(10 + rng() % 50) + R"(Z","labels":{"app.kubernetes.io/name":")" +
       kWords[rng() % 32] + R"(","app.kubernetes.io/instance":")" + kWords[rng() % 32] + "-";
  AppendHex(rng, 5, &v);
  v += R"(","pod-template-hash":")";
  AppendHex(rng, 10, &v);
  v += R"("},"annotations":{"checksum/config":")";
  AppendHex(rng, 64, &v);
  v += R"("},"managedFields":[{"manager":"kubectl-client-side-apply","operation":"Update",)"
       R"("apiVersion":"v1","fieldsType":"FieldsV1"}]},"data":{"config.yaml":")";
  // The body: "word: value" lines, the values numbers, words or short hashes.
  while (v.size() + 3 < target) {
    v += kWords[rng() % 32];
    v += '.';
    v += kWords[rng() % 32];
    v += ": ";
    switch (rng() % 3) {
      case 0:
        v += std::to_string(rng() % 100000);
        break;
      case 1:
        v += kWords[rng() % 32];
        break;
      default:
        AppendHex(rng, 8, &v);
        break;
    }
    v += "\\n";
  }
  v.resize(target - 3);
  if (v.back() == '\\') v.back() = ' ';  // never cut an escape in half
  v += "\"}}";
  return v;
}

}  // namespace bench
