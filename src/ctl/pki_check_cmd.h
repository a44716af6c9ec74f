// stewardctl pki check-expiration: every certificate the cluster's TLS rests on (each node's
// server, peer, agent and client certificate and the CA, as each agent reports them, and the
// client certificates in a `pki init` directory), with its expiry, the time left and who renews
// it; exit 1 when one is under the threshold. And stewardctl pki renew: the agents reissue their
// node's certificates now.
#pragma once

#include "ctl/common.h"

namespace steward {

// And stewardctl pki check --bundle FILE: whether a planned CA bundle accepts every
// certificate this node uses now (before a trust file is replaced).
// Adds `check-expiration`, `check` and `renew` under `pki`.
void AddPkiCheckCommands(CLI::App* pki, Common* common, Commands* commands);

}  // namespace steward
