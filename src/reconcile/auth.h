// etcd's authentication, kept as auth.mode says (docs/clients.md).
//
// With auth on, etcd takes a TLS client's certificate common name as its user, and refuses
// everything to a name that is not a user. Turning auth on before every agent has a user
// with etcd's root role would lock the agents out of the cluster they manage, and nobody
// could turn it off again without a password. So the leader decides from a plain observation
// (DecideAuth, rules AU1-AU6), one step list per pass:
//
//   AU1  mode off: auth on -> disable it. Nothing else.
//   AU2  mode on: the root role, the password-less "root" user (etcd refuses to enable auth
//        without it) and every needed user (each agent's client certificate CN, each of
//        auth.admin_users) are added and given the root role when missing. Never removed:
//        other users and roles are the operator's (stewardctl access).
//   AU3  A node whose certificate name is not known (its agent has not answered with files
//        TLS, or its certificate has no CN) blocks enabling: wait, and say which node.
//   AU4  Enabling is the last step of a pass, after every user above exists with root.
//   AU5  Auth already on: users still missing are added (a node added to the config later,
//        a restore of a backup taken before they existed) - with the leader's own root.
//   AU6  Only with an answer: if the users or roles cannot be read, nothing is done.
//
// Thread-safety: DecideAuth is pure. An AuthKeeper is owned by one thread (the agent's
// reconcile loop).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "control/history.h"
#include "etcd/client.h"

namespace steward {

inline constexpr char kEtcdRootUser[] = "root";
inline constexpr char kEtcdRootRole[] = "root";

struct AuthView {
  std::string mode;        // on, off (unmanaged never gets here)
  bool enabled = false;    // etcd's auth is on
  bool root_role = false;  // the root role exists
  // Every existing user, with its roles (the Observe of AuthKeeper reads the roles only of the
  // users DecideAuth needs: root, the agents', the admin users).
  std::map<std::string, std::vector<std::string>> users;
  // Per configured node: the user its agent connects as; "" when not known (AU3).
  std::map<std::string, std::string> node_users;
  std::vector<std::string> admin_users;  // auth.admin_users
};

struct AuthStep {
  enum Kind { kAddRootRole, kAddUser, kGrantRoot, kEnable, kDisable } kind;
  std::string user;  // kAddUser, kGrantRoot
  bool operator==(const AuthStep&) const = default;
};

struct AuthPlan {
  std::vector<AuthStep> steps;  // in order; empty: nothing to do now
  std::string wait;             // why auth is not enabled yet ("" if it is or will be)
};

AuthPlan DecideAuth(const AuthView& view);

// One line per step, for logs and the history.
std::string DescribeAuthStep(const AuthStep& step);

class AuthKeeper {
 public:
  struct Options {
    // While something is to be done or awaited; once nothing is (each look costs etcd a few
    // raft proposals and a failed-login log line), every `settled_every`.
    std::chrono::milliseconds check_every{10000};
    std::chrono::milliseconds settled_every{60000};
    Clock* clock = Clock::Real();  // when the last look was
  };
  // `client` and `history` (may be null) must outlive this object. `node_users` gives, per
  // configured node, the user its agent connects as ("" unknown; called on the keeper's
  // thread). `confirm_leader` is asked right before acting.
  AuthKeeper(EtcdClient* client, History* history, std::string mode,
             std::vector<std::string> admin_users,
             std::function<std::map<std::string, std::string>()> node_users,
             std::function<bool()> confirm_leader, Options options);

  // One look (at most every check_every): observe, decide, act. Returns true if it changed
  // something.
  bool Pass(uint64_t term);
  const std::string& last_wait() const { return last_wait_; }

 private:
  absl::StatusOr<AuthView> Observe();

  EtcdClient* client_;
  History* history_;
  std::string mode_;
  std::vector<std::string> admin_users_;
  std::function<std::map<std::string, std::string>()> node_users_;
  std::function<bool()> confirm_leader_;
  Options options_;
  std::optional<std::chrono::steady_clock::time_point> last_check_;
  std::string last_wait_;
  std::string last_error_;
  bool settled_ = false;  // the last look found nothing to do or wait for
};

}  // namespace steward
