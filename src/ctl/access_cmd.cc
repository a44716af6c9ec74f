#include "ctl/access_cmd.h"

#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "etcd/client.h"
#include "etcd/keys.h"
#include "nlohmann/json.hpp"
#include "pki/node_certs.h"
#include "reconcile/auth.h"

namespace steward {

std::string PrefixRangeEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    unsigned char last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

namespace {

struct GrantOptions {
  std::string name;
  std::vector<std::string> prefixes;
  bool read_only = false;
  std::string password_file;
};

bool ValidName(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

std::string Printable(const std::string& key) {
  std::string out;
  for (unsigned char c : key) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrFormat("\\x%02x", c);
    }
  }
  return out;
}

std::string DescribePermission(const RolePermission& p) {
  const char* type = p.type == RolePermission::kRead    ? "read"
                     : p.type == RolePermission::kWrite ? "write"
                                                        : "readwrite";
  std::string what;
  if (p.range_end.empty()) {
    what = absl::StrCat("key ", Printable(p.key));
  } else if (p.key == std::string(1, '\0') && p.range_end == std::string(1, '\0')) {
    what = "every key";
  } else if (p.range_end == PrefixRangeEnd(p.key)) {
    what = absl::StrCat("prefix ", Printable(p.key));
  } else if (p.range_end == std::string(1, '\0')) {
    what = absl::StrCat("keys from ", Printable(p.key));
  } else {
    what = absl::StrCat("keys [", Printable(p.key), ", ", Printable(p.range_end), ")");
  }
  return absl::StrCat(type, " ", what);
}

// The names etcd-steward itself needs as etcd users: refused to `access`, which would take
// their root role away (revoke) or confuse them with an application (grant).
std::set<std::string> ReservedNames(const std::optional<Config>& config) {
  std::set<std::string> out = {kEtcdRootUser};
  if (config) {
    for (const std::string& u : config->auth.admin_users) out.insert(u);
    if (config->tls.mode == "issued") {
      for (const NodeSpec& n : config->cluster.nodes) out.insert(ClientCommonName(n.name));
    }
  }
  return out;
}

// Refusal for a name that is reserved or holds the root role ("" when it may be managed).
std::string Refusal(EtcdClient& client, const std::set<std::string>& reserved,
                    const std::string& name, bool* failed) {
  if (reserved.count(name) != 0) {
    return absl::StrCat("\"", name,
                        "\" is a user etcd-steward needs (root, an agent's or one of "
                        "auth.admin_users)");
  }
  auto users = client.UserList();
  if (!users.ok()) {
    *failed = true;
    return absl::StrCat("cannot list etcd's users: ", users.status().message());
  }
  if (std::find(users->begin(), users->end(), name) == users->end()) return "";
  auto roles = client.UserGet(name);
  if (!roles.ok()) {
    *failed = true;
    return absl::StrCat("cannot read the user ", name, ": ", roles.status().message());
  }
  if (std::find(roles->begin(), roles->end(), kEtcdRootRole) != roles->end()) {
    return absl::StrCat("\"", name,
                        "\" holds etcd's root role: it is an administrator, not an "
                        "application (etcdctl user manages it)");
  }
  return "";
}

absl::StatusOr<std::string> ReadPassword(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string p = ss.str();
  while (!p.empty() && (p.back() == '\n' || p.back() == '\r')) p.pop_back();
  if (p.empty()) return absl::InvalidArgumentError(absl::StrCat(path, " is empty"));
  return p;
}

struct Connected {
  int rc = 0;
  std::optional<Config> config;
  std::unique_ptr<EtcdClient> client;
};

Connected Connect(const Common& c) {
  Connected out;
  std::vector<std::string> endpoints;
  std::vector<NodeRow> nodes;
  if (int rc = ResolveEndpoints(c, &endpoints, &nodes); rc != 0) {
    out.rc = rc;
    return out;
  }
  if (!c.config_path.empty()) {
    int rc = 0;
    out.config = ConfigFor(c, "access", &rc);
    if (!out.config) {
      out.rc = rc;
      return out;
    }
  }
  out.client = std::make_unique<EtcdClient>(endpoints, ClientOptions(c));
  return out;
}

int RunGrant(const Common& c, const GrantOptions& g) {
  if (!ValidName(g.name)) {
    std::cerr << "stewardctl access grant: NAME \"" << g.name
              << "\" must be 1-64 letters, digits, '-', '_' or '.'\n";
    return 2;
  }
  if (g.prefixes.empty()) {
    std::cerr << "stewardctl access grant: give at least one --prefix\n";
    return 2;
  }
  for (const std::string& p : g.prefixes) {
    if (p.empty()) {
      std::cerr << "stewardctl access grant: an empty --prefix is the whole keyspace, not least "
                   "privilege; an administrator's certificate is the way to that\n";
      return 2;
    }
    // Either way round: a prefix over /steward/ or under it reaches the agents' own state
    // (the cluster's spec, maintenance, leadership), which an application must not change.
    if (absl::StartsWith(kStewardKeyRoot, p) || absl::StartsWith(p, kStewardKeyRoot)) {
      std::cerr << "stewardctl access grant: --prefix \"" << p
                << "\" reaches etcd-steward's own "
                   "keys under "
                << kStewardKeyRoot << "\n";
      return 2;
    }
  }
  std::string password;
  if (!g.password_file.empty()) {
    auto p = ReadPassword(g.password_file);
    if (!p.ok()) {
      std::cerr << "stewardctl access grant: --password-file: " << p.status().message() << "\n";
      return 2;
    }
    password = *p;
  }
  Connected conn = Connect(c);
  if (conn.rc != 0) return conn.rc;
  EtcdClient& client = *conn.client;
  bool failed = false;
  if (std::string why = Refusal(client, ReservedNames(conn.config), g.name, &failed);
      !why.empty()) {
    std::cerr << "stewardctl access grant: " << why << "\n";
    return failed ? 1 : 2;
  }
  std::vector<std::string> did;
  auto fail = [&](const std::string& what, const absl::Status& s) {
    std::cerr << "stewardctl access grant: " << what << ": " << s.message() << "\n";
    if (!did.empty()) std::cerr << "done before that: " << absl::StrJoin(did, "; ") << "\n";
    return 1;
  };
  auto roles = client.RoleList();
  if (!roles.ok()) return fail("listing roles", roles.status());
  if (std::find(roles->begin(), roles->end(), g.name) == roles->end()) {
    if (auto s = client.RoleAdd(g.name); !s.ok()) return fail("adding the role", s);
    did.push_back(absl::StrCat("added the role ", g.name));
  }
  std::vector<RolePermission> granted;
  for (const std::string& p : g.prefixes) {
    RolePermission perm;
    perm.type = g.read_only ? RolePermission::kRead : RolePermission::kReadWrite;
    perm.key = p;
    perm.range_end = PrefixRangeEnd(p);
    if (auto s = client.RoleGrantPermission(g.name, perm); !s.ok()) {
      return fail(absl::StrCat("granting ", DescribePermission(perm)), s);
    }
    did.push_back(absl::StrCat("granted ", DescribePermission(perm)));
    granted.push_back(perm);
  }
  auto users = client.UserList();
  if (!users.ok()) return fail("listing users", users.status());
  const bool exists = std::find(users->begin(), users->end(), g.name) != users->end();
  if (!exists) {
    if (auto s = client.UserAdd(g.name, password); !s.ok()) return fail("adding the user", s);
    did.push_back(absl::StrCat("added the user ", g.name,
                               password.empty() ? " (certificate only)" : " (with a password)"));
  } else if (!password.empty()) {
    // etcd 3.4 keeps a certificate-only user's "no password" option through a password change,
    // so its logins would still fail: the user is made again, with the password and the same
    // roles (its connections are refused for that moment).
    auto had = client.UserGet(g.name);
    if (!had.ok()) return fail("reading the user", had.status());
    if (auto s = client.UserDelete(g.name); !s.ok()) return fail("re-creating the user", s);
    if (auto s = client.UserAdd(g.name, password); !s.ok()) {
      return fail(absl::StrCat("re-creating the user (it had the roles ", absl::StrJoin(*had, ", "),
                               "; run the command again)"),
                  s);
    }
    for (const std::string& role : *had) {
      if (role == g.name) continue;  // granted below
      if (auto s = client.UserGrantRole(g.name, role); !s.ok()) {
        return fail(absl::StrCat("granting ", g.name, " its role ", role, " again"), s);
      }
    }
    did.push_back(
        absl::StrCat("made the user ", g.name, " again with a password, keeping its roles"));
  }
  if (auto s = client.UserGrantRole(g.name, g.name); !s.ok()) return fail("granting the role", s);
  did.push_back(absl::StrCat("granted the role ", g.name, " to the user ", g.name));
  auto enabled = client.AuthEnabled();
  if (c.output == "json") {
    nlohmann::json j = {
        {"user", g.name}, {"role", g.name}, {"done", did}, {"password", !password.empty()}};
    j["auth_enabled"] = enabled.ok() ? nlohmann::json(*enabled) : nlohmann::json();
    std::cout << j.dump(2) << "\n";
  } else {
    for (const std::string& d : did) std::cout << d << "\n";
  }
  if (enabled.ok() && !*enabled) {
    std::cerr << "note: etcd's authentication is off, so " << g.name
              << " is not confined yet: set auth.mode: on in every node's config\n";
  }
  return 0;
}

int RunRevoke(const Common& c, const std::string& name) {
  if (!ValidName(name)) {
    std::cerr << "stewardctl access revoke: NAME \"" << name << "\" is not a valid name\n";
    return 2;
  }
  Connected conn = Connect(c);
  if (conn.rc != 0) return conn.rc;
  EtcdClient& client = *conn.client;
  bool failed = false;
  if (std::string why = Refusal(client, ReservedNames(conn.config), name, &failed); !why.empty()) {
    std::cerr << "stewardctl access revoke: " << why << "\n";
    return failed ? 1 : 2;
  }
  std::vector<std::string> did;
  auto users = client.UserList();
  if (!users.ok()) {
    std::cerr << "stewardctl access revoke: " << users.status().message() << "\n";
    return 1;
  }
  if (std::find(users->begin(), users->end(), name) != users->end()) {
    if (auto s = client.UserDelete(name); !s.ok()) {
      std::cerr << "stewardctl access revoke: deleting the user: " << s.message() << "\n";
      return 1;
    }
    did.push_back(absl::StrCat("deleted the user ", name));
  }
  auto roles = client.RoleList();
  if (roles.ok() && std::find(roles->begin(), roles->end(), name) != roles->end()) {
    if (auto s = client.RoleDelete(name); !s.ok()) {
      std::cerr << "stewardctl access revoke: deleting the role: " << s.message() << "\n";
      return 1;
    }
    did.push_back(absl::StrCat("deleted the role ", name));
  }
  if (did.empty()) {
    std::cerr << "stewardctl access revoke: no user or role named " << name << "\n";
    return 1;
  }
  if (c.output == "json") {
    std::cout << nlohmann::json({{"user", name}, {"done", did}}).dump(2) << "\n";
  } else {
    for (const std::string& d : did) std::cout << d << "\n";
  }
  return 0;
}

int RunList(const Common& c) {
  Connected conn = Connect(c);
  if (conn.rc != 0) return conn.rc;
  EtcdClient& client = *conn.client;
  auto enabled = client.AuthEnabled();
  if (!enabled.ok()) {
    std::cerr << "stewardctl access list: " << enabled.status().message() << "\n";
    return 1;
  }
  auto users = client.UserList();
  auto roles = client.RoleList();
  if (!users.ok() || !roles.ok()) {
    std::cerr << "stewardctl access list: "
              << (users.ok() ? roles.status() : users.status()).message() << "\n";
    return 1;
  }
  std::map<std::string, std::vector<std::string>> perms;  // role -> described permissions
  for (const std::string& r : *roles) {
    if (r == kEtcdRootRole) {
      perms[r] = {"everything (etcd's root role)"};
      continue;
    }
    auto p = client.RoleGet(r);
    if (!p.ok()) {
      std::cerr << "stewardctl access list: role " << r << ": " << p.status().message() << "\n";
      return 1;
    }
    for (const RolePermission& rp : *p) perms[r].push_back(DescribePermission(rp));
  }
  nlohmann::json j = {{"auth_enabled", *enabled}, {"users", nlohmann::json::array()}};
  if (c.output != "json") {
    std::cout << "authentication: " << (*enabled ? "on" : "off") << "\n";
    std::cout << absl::StrFormat("%-24s %-16s %s\n", "USER", "ROLES", "PERMISSIONS");
  }
  for (const std::string& u : *users) {
    auto r = client.UserGet(u);
    if (!r.ok()) {
      std::cerr << "stewardctl access list: user " << u << ": " << r.status().message() << "\n";
      return 1;
    }
    std::vector<std::string> all;
    for (const std::string& role : *r) {
      for (const std::string& p : perms[role]) all.push_back(p);
    }
    if (c.output == "json") {
      j["users"].push_back({{"name", u}, {"roles", *r}, {"permissions", all}});
    } else {
      std::cout << absl::StrFormat("%-24s %-16s %s\n", u, r->empty() ? "-" : absl::StrJoin(*r, ","),
                                   all.empty() ? "-" : absl::StrJoin(all, "; "));
    }
  }
  if (c.output == "json") std::cout << j.dump(2) << "\n";
  return 0;
}

}  // namespace

void AddAccessCommands(CLI::App& app, Common* common, Commands* commands) {
  CLI::App* access =
      app.add_subcommand("access", "applications' own etcd users, confined to their key prefixes");
  access->require_subcommand(1);

  auto g = std::make_shared<GrantOptions>();
  CLI::App* grant = access->add_subcommand(
      "grant", "give the user NAME (a client certificate's CN) access to key prefixes");
  AddCommonFlags(grant, common, true);
  grant->add_option("name", g->name, "the user and role (the certificate's common name)")
      ->required();
  grant->add_option("--prefix", g->prefixes, "a key prefix it may use (repeat for more)");
  grant->add_flag("--read-only", g->read_only, "read, not write, under the prefixes");
  grant->add_option("--password-file", g->password_file,
                    "a file holding its password, for HTTP gateway clients such as Patroni");
  commands->push_back({grant, [common, g] { return RunGrant(*common, *g); }});

  auto revoke_name = std::make_shared<std::string>();
  CLI::App* revoke = access->add_subcommand("revoke", "delete the user NAME and its role");
  AddCommonFlags(revoke, common, true);
  revoke->add_option("name", *revoke_name, "the user and role")->required();
  commands->push_back({revoke, [common, revoke_name] { return RunRevoke(*common, *revoke_name); }});

  CLI::App* list = access->add_subcommand("list", "authentication on/off, users, roles");
  AddCommonFlags(list, common, true);
  commands->push_back({list, [common] { return RunList(*common); }});
}

}  // namespace steward
