// `stewardctl access grant|revoke|list`: an application's own etcd user, confined to its key
// prefixes (docs/clients.md). The user and its role share the application's name; etcd takes
// a gRPC client's certificate common name as its user (stewardctl pki issue --client NAME), and
// an HTTP gateway client's (Patroni's) name and password.
//
// grant NAME --prefix P [--prefix Q] [--read-only] [--password-file F]: adds the role NAME
// (if missing) with read-write (or read) permission on each prefix, the user NAME (if missing;
// without a password unless --password-file), and grants the role. Refuses names etcd-steward
// needs (root, every agent's user, auth.admin_users when --config is given, any user holding
// the root role), an empty prefix, and prefixes over the agents' own keys (/steward/).
// revoke NAME: deletes that user and role (the same refusals). list: auth on or off, every
// user with its roles and each role's permissions.
#pragma once

#include <string>

#include "CLI/CLI.hpp"
#include "ctl/common.h"

namespace steward {

void AddAccessCommands(CLI::App& app, Common* common, Commands* commands);

// The end of the key range of every key starting with `prefix` (etcd's --prefix): the prefix
// with its last byte below 0xff incremented, trailing 0xff bytes dropped; "\0" for a prefix of
// only 0xff bytes (every key from it on). REQUIRES: !prefix.empty().
std::string PrefixRangeEnd(const std::string& prefix);

}  // namespace steward
