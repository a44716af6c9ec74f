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

struct PkiIssueOptions {
  // For etcd's HTTP gateway (Patroni): the name goes into the subject's O, with no CN, since
  // etcd 3.4 refuses a certificate with a CN there once authentication is on; the client logs
  // in with a user name and password instead (stewardctl access grant --password-file).
  bool gateway = false;
  bool renew = false;  // replace an existing NAME.crt / NAME.key (same kind) with a new pair
};

// Issues a client certificate `name`.crt / `name`.key in `dir`, signed by the CA there (ca.crt,
// ca.key from `pki init`): CN `name` (O with gateway), clientAuth only, one year, no steward
// role — for an application of the cluster such as a Kubernetes API server (its
// --etcd-certfile); with auth.mode on, CN `name` is its etcd user (stewardctl access grant).
// Refuses to overwrite an existing `name`.crt unless renew; refuses to renew one that is not
// there. Returns 0, or 1 (2 for a bad name) with a message on `err`.
int RunPkiIssueClient(const std::string& dir, const std::string& name,
                      const PkiIssueOptions& options, std::ostream& out, std::ostream& err);
inline int RunPkiIssueClient(const std::string& dir, const std::string& name, std::ostream& out,
                             std::ostream& err) {
  return RunPkiIssueClient(dir, name, PkiIssueOptions(), out, err);
}

}  // namespace steward
