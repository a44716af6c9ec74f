// `stewardctl pki init`: creates the cluster's CA and an admin client certificate for the
// operator. Separate from ctl.cc so tests can run it in-process.
#pragma once

#include <ostream>
#include <string>

namespace steward {

// Creates `dir` (0700) if it does not exist, a CA in it (ca.crt, ca.key) and an admin client
// certificate signed by that CA (admin.crt, admin.key; CN "steward-admin", clientAuth, one year).
// Prints to `out` the `tls:` config section and the etcdctl flags that use these files.
// Returns the exit status: 0 on success; 1 with a message on `err` if the CA already exists in
// `dir` ("refusing to overwrite the CA in DIR") or anything fails. An existing CA is never
// touched. If issuing the admin certificate fails, the new CA stays (rerunning refuses; remove
// the directory's files to start over).
int RunPkiInit(const std::string& dir, std::ostream& out, std::ostream& err);

// As above, printing to stdout and stderr.
int RunPkiInit(const std::string& dir);

// Issues a client certificate `name`.crt / `name`.key in `dir`, signed by the CA there (ca.crt,
// ca.key from `pki init`): CN `name`, clientAuth only, one year, no steward role — for an
// application of the cluster such as a Kubernetes API server (its --etcd-certfile). Refuses to
// overwrite an existing `name`.crt. Returns 0, or 1 (2 for a bad name) with a message on `err`.
int RunPkiIssueClient(const std::string& dir, const std::string& name, std::ostream& out,
                      std::ostream& err);

}  // namespace steward
