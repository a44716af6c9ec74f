#include "ctl/pki_check_cmd.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/duration.h"
#include "nlohmann/json.hpp"
#include "peer/client.h"
#include "pki/pki.h"

namespace steward {
namespace {

namespace fs = std::filesystem;

struct CheckArgs {
  std::string warn = "30d";
  std::string dir;  // a `pki init` directory: its client certificates too
};

struct Row {
  std::string node;  // "" for a certificate in --dir
  std::string cert;  // the role, or the file name in --dir
  int64_t not_after = 0;
  std::string renewed_by;
};

std::string RenewedBy(const std::string& role) {
  if (role == "ca") return "the operator (a new CA: docs/operations.md, certificates)";
  return "the agent, at two-thirds of its lifetime";
}

std::string Left(int64_t seconds) {
  if (seconds < 0) return "EXPIRED";
  if (seconds >= 2 * 86400) return absl::StrCat(seconds / 86400, "d");
  return absl::StrCat(seconds / 3600, "h");
}

int RunCheckExpiration(const Common& c, const CheckArgs& a) {
  auto warn = ParseDuration(a.warn);
  if (!warn.ok()) {
    std::cerr << "stewardctl pki check-expiration: --warn: " << warn.status().message() << "\n";
    return 2;
  }
  int rc = 0;
  auto config = ConfigFor(c, "pki check-expiration", &rc);
  if (!config) return rc;
  if (!config->tls.enabled()) {
    std::cerr << "stewardctl pki check-expiration: tls.mode is off: there are no certificates\n";
    return 2;
  }
  std::vector<Row> rows;
  std::vector<std::string> silent;
  const auto states = AgentStates(*config, ClientOptions(c).credentials, std::chrono::seconds(3));
  for (const auto& n : config->cluster.nodes) {
    auto it = states.find(n.name);
    if (it == states.end()) {
      silent.push_back(n.name);
      continue;
    }
    for (const auto& cert : it->second.certificates()) {
      rows.push_back({n.name, cert.role(), cert.not_after(), RenewedBy(cert.role())});
    }
  }
  if (!a.dir.empty()) {
    std::error_code ec;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(a.dir, ec)) {
      if (e.path().extension() == ".crt") files.push_back(e.path());
    }
    if (ec) {
      std::cerr << "stewardctl pki check-expiration: --dir " << a.dir << ": " << ec.message()
                << "\n";
      return 2;
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      auto info = ReadCert(f.string());
      if (!info.ok()) continue;  // not a certificate
      const std::string name = f.stem().string();
      rows.push_back(
          {"", f.filename().string(),
           std::chrono::duration_cast<std::chrono::seconds>(info->not_after.time_since_epoch())
               .count(),
           name == "ca" ? RenewedBy("ca")
                        : absl::StrCat("the operator: stewardctl pki issue --dir ", a.dir,
                                       " --client ", name, " --renew")});
    }
  }
  const int64_t now = UnixNow();
  const int64_t threshold = std::chrono::duration_cast<std::chrono::seconds>(*warn).count();
  size_t under = 0;
  for (const Row& r : rows) under += (r.not_after - now < threshold);
  if (c.output == "json") {
    nlohmann::json j = {{"warn_seconds", threshold}, {"silent_nodes", silent}};
    j["certificates"] = nlohmann::json::array();
    for (const Row& r : rows) {
      j["certificates"].push_back({{"node", r.node},
                                   {"certificate", r.cert},
                                   {"not_after", r.not_after},
                                   {"seconds_left", r.not_after - now},
                                   {"under_threshold", r.not_after - now < threshold},
                                   {"renewed_by", r.renewed_by}});
    }
    std::cout << j.dump(2) << "\n";
  } else {
    std::cout << absl::StrFormat("%-8s %-12s %-22s %-8s %s\n", "NODE", "CERTIFICATE", "EXPIRES",
                                 "LEFT", "RENEWED BY");
    for (const Row& r : rows) {
      std::cout << absl::StrFormat("%-8s %-12s %-22s %-8s %s%s\n", r.node.empty() ? "-" : r.node,
                                   r.cert, UtcTime(r.not_after), Left(r.not_after - now),
                                   r.renewed_by,
                                   r.not_after - now < threshold ? "  <- UNDER " + a.warn : "");
    }
    for (const std::string& n : silent) {
      std::cout << "node " << n << ": its agent does not answer; its certificates are not shown\n";
    }
  }
  if (under > 0) {
    std::cerr << under << " certificate(s) expire within " << a.warn << "\n";
    return 1;
  }
  return 0;
}

struct RenewArgs {
  std::string node;
  bool all = false;
  int wait_seconds = 60;
};

// The earliest not_after of a node's own certificates (the CA's is not the agent's to renew).
int64_t EarliestOwn(const peer::NodeState& st) {
  int64_t earliest = 0;
  for (const auto& cert : st.certificates()) {
    if (cert.role() == "ca") continue;
    if (earliest == 0 || cert.not_after() < earliest) earliest = cert.not_after();
  }
  return earliest;
}

int RunRenew(const Common& c, const RenewArgs& a) {
  if (a.all == !a.node.empty()) {
    std::cerr << "stewardctl pki renew: name one --node, or --all\n";
    return 2;
  }
  int rc = 0;
  auto config = ConfigFor(c, "pki renew", &rc);
  if (!config) return rc;
  if (config->tls.mode != "issued") {
    std::cerr << "stewardctl pki renew: tls.mode is " << config->tls.mode
              << ": the agents renew only the certificates they issue (tls.mode: issued)\n";
    return 2;
  }
  std::vector<std::string> targets;
  for (const auto& n : config->cluster.nodes) {
    if (a.all || n.name == a.node) targets.push_back(n.name);
  }
  if (targets.empty()) {
    std::cerr << "stewardctl pki renew: no node " << a.node << " in the config\n";
    return 2;
  }
  const auto creds = ClientOptions(c).credentials;
  const auto before = AgentStates(*config, creds, std::chrono::seconds(3));
  int failed = 0;
  for (const std::string& name : targets) {
    const NodeSpec* node = nullptr;
    for (const auto& n : config->cluster.nodes) {
      if (n.name == name) node = &n;
    }
    auto it = before.find(name);
    if (it == before.end()) {
      std::cerr << "node " << name << ": its agent does not answer; not renewed\n";
      ++failed;
      continue;
    }
    const int64_t old_until = EarliestOwn(it->second);
    PeerClient agent(config->AgentAddress(*node), creds);
    if (absl::Status s = agent.RenewCertificates(WhoAmI(), std::chrono::seconds(10)); !s.ok()) {
      std::cerr << "node " << name << ": " << s.message() << "\n";
      ++failed;
      continue;
    }
    // The agent renews, then restarts itself in place to load the new files: wait (bounded)
    // until it answers with later certificates.
    int64_t new_until = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.wait_seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      auto st = PeerClient(config->AgentAddress(*node), creds).GetState(std::chrono::seconds(2));
      if (st.ok() && EarliestOwn(*st) > old_until) {
        new_until = EarliestOwn(*st);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (new_until == 0) {
      std::cerr << "node " << name << ": not renewed within " << a.wait_seconds
                << "s (see its agent's log)\n";
      ++failed;
      continue;
    }
    std::cout << "node " << name << ": certificates renewed, valid until " << UtcTime(new_until)
              << " (were until " << UtcTime(old_until) << ")\n";
  }
  return failed == 0 ? 0 : 1;
}

// pki check --bundle: would the planned trust file accept what this node uses now?
int RunCheckBundle(const Common& c, const std::string& bundle) {
  int rc = 0;
  auto config = ConfigFor(c, "pki check", &rc);
  if (!config) return rc;
  if (!config->tls.enabled()) {
    std::cerr << "stewardctl pki check: tls.mode is off: there are no certificates\n";
    return 2;
  }
  const auto now = std::chrono::system_clock::now();
  auto cas = CheckCaBundle(bundle, now);
  if (!cas.ok()) {
    std::cout << "bundle " << bundle << ": REFUSED: " << cas.status().message() << "\n";
    return 1;
  }
  std::cout << "bundle " << bundle << ": " << cas->size() << " CA certificate(s)\n";
  for (const std::string& ca : *cas) std::cout << "  " << ca << "\n";
  const TlsPaths t = config->Tls();
  const std::pair<const char*, std::string> certs[] = {{"server", t.server_cert},
                                                       {"peer", t.peer_cert},
                                                       {"agent", t.agent_cert},
                                                       {"client", t.client_cert}};
  int refused = 0;
  for (const auto& [role, path] : certs) {
    auto anchor = ChainsTo(path, bundle, now);
    std::cout << absl::StrFormat("%-7s %s: ", role, path)
              << (anchor.ok() ? "accepted (chains to " + *anchor + ")"
                              : "REFUSED: " + std::string(anchor.status().message()))
              << "\n";
    if (!anchor.ok()) ++refused;
  }
  // The CAs trusted now that the bundle drops: what they issued (applications' certificates
  // too) is refused once the bundle replaces the trust file.
  if (auto trusted = CheckCaBundle(t.ca, now); trusted.ok()) {
    for (const std::string& ca : *trusted) {
      const bool kept = std::find(cas->begin(), cas->end(), ca) != cas->end();
      std::cout << "trusted now: " << ca
                << (kept ? ": in the bundle"
                         : ": NOT in the bundle: every certificate it issued, applications' "
                           "too, is refused once the bundle replaces the trust file")
                << "\n";
    }
  }
  if (refused > 0) {
    std::cout << refused << " certificate(s) this node uses now would be refused by the bundle\n";
    return 1;
  }
  std::cout << "the bundle accepts every certificate this node uses now\n";
  return 0;
}

}  // namespace

void AddPkiCheckCommands(CLI::App* pki, Common* common, Commands* commands) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* check = pki->add_subcommand(
      "check-expiration",
      "every certificate the cluster's TLS rests on (each node's, as its agent reports them, and "
      "with --dir the client certificates `pki issue` made), with its expiry and who renews it; "
      "exit 1 when one expires within --warn");
  AddCommonFlags(check, common, true);
  check->add_option("--warn", args->warn, "the threshold (e.g. 30d, 72h); default 30d");
  check->add_option("--dir", args->dir,
                    "a `pki init` directory: list its certificates too (ca.crt, admin.crt, ...)");
  commands->push_back({check, [common, args] { return RunCheckExpiration(*common, *args); }});

  auto bundle = std::make_shared<std::string>();
  CLI::App* check_bundle = pki->add_subcommand(
      "check",
      "before a trust file is replaced (a CA rotation, tls.mode files): says whether the planned "
      "CA bundle --bundle accepts every certificate this node uses now, and which CA trusted now "
      "it drops; exit 1 if one would be refused or the bundle holds a non-CA or expired "
      "certificate");
  AddCommonFlags(check_bundle, common, false);
  check_bundle->add_option("--bundle", *bundle, "the planned CA bundle (PEM, one or more CAs)")
      ->required();
  commands->push_back(
      {check_bundle, [common, bundle] { return RunCheckBundle(*common, *bundle); }});

  auto renew_args = std::make_shared<RenewArgs>();
  CLI::App* renew = pki->add_subcommand(
      "renew",
      "the agents reissue their node's certificates from the CA now (tls.mode issued) and load "
      "them; etcd keeps running and reads the new files at its next handshakes");
  AddCommonFlags(renew, common, false);
  renew->add_option("--node", renew_args->node, "the node whose certificates to renew");
  renew->add_flag("--all", renew_args->all, "every node, one after the other");
  renew
      ->add_option("--wait", renew_args->wait_seconds,
                   "seconds to wait for each node's agent to answer with its new certificates")
      ->check(CLI::Range(5, 3600));
  commands->push_back({renew, [common, renew_args] { return RunRenew(*common, *renew_args); }});
}

}  // namespace steward
