#include "reconcile/auth.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace steward {

namespace {

bool HasRole(const std::vector<std::string>& roles, const std::string& role) {
  return std::find(roles.begin(), roles.end(), role) != roles.end();
}

}  // namespace

AuthPlan DecideAuth(const AuthView& v) {
  AuthPlan plan;
  if (v.mode == "off") {  // AU1
    if (v.enabled) plan.steps.push_back({AuthStep::kDisable, ""});
    return plan;
  }
  if (v.mode != "on") return plan;

  // AU2: root first (etcd's precondition), then the agents, then the operator's names.
  std::vector<std::string> needed = {kEtcdRootUser};
  std::vector<std::string> unknown;
  for (const auto& [node, user] : v.node_users) {
    if (user.empty()) {
      unknown.push_back(node);
    } else {
      needed.push_back(user);
    }
  }
  for (const std::string& u : v.admin_users) needed.push_back(u);
  // Root first, once; the others sorted, once each.
  needed.erase(std::remove(needed.begin() + 1, needed.end(), std::string(kEtcdRootUser)),
               needed.end());
  std::sort(needed.begin() + 1, needed.end());
  needed.erase(std::unique(needed.begin() + 1, needed.end()), needed.end());

  if (!v.root_role) plan.steps.push_back({AuthStep::kAddRootRole, ""});
  for (const std::string& u : needed) {
    auto it = v.users.find(u);
    if (it == v.users.end()) {
      plan.steps.push_back({AuthStep::kAddUser, u});
      plan.steps.push_back({AuthStep::kGrantRoot, u});
    } else if (!HasRole(it->second, kEtcdRootRole)) {
      plan.steps.push_back({AuthStep::kGrantRoot, u});
    }
  }
  if (v.enabled) return plan;  // AU5
  if (!unknown.empty()) {      // AU3
    plan.wait = absl::StrCat(
        "auth stays off until every agent's certificate name is known: no answer, or a "
        "certificate without a common name, from ",
        absl::StrJoin(unknown, ", "));
    return plan;
  }
  plan.steps.push_back({AuthStep::kEnable, ""});  // AU4
  return plan;
}

std::string DescribeAuthStep(const AuthStep& s) {
  switch (s.kind) {
    case AuthStep::kAddRootRole:
      return "add the root role";
    case AuthStep::kAddUser:
      return absl::StrCat("add the user ", s.user, " (no password)");
    case AuthStep::kGrantRoot:
      return absl::StrCat("grant the root role to ", s.user);
    case AuthStep::kEnable:
      return "enable authentication";
    case AuthStep::kDisable:
      return "disable authentication";
  }
  return "?";
}

AuthKeeper::AuthKeeper(EtcdClient* client, History* history, std::string mode,
                       std::vector<std::string> admin_users,
                       std::function<std::map<std::string, std::string>()> node_users,
                       std::function<bool()> confirm_leader, Options options)
    : client_(client),
      history_(history),
      mode_(std::move(mode)),
      admin_users_(std::move(admin_users)),
      node_users_(std::move(node_users)),
      confirm_leader_(std::move(confirm_leader)),
      options_(options) {}

absl::StatusOr<AuthView> AuthKeeper::Observe() {
  AuthView v;
  v.mode = mode_;
  v.admin_users = admin_users_;
  auto enabled = client_->AuthEnabled();
  if (!enabled.ok()) return enabled.status();
  v.enabled = *enabled;
  if (mode_ == "off") return v;
  auto roles = client_->RoleList();
  if (!roles.ok()) return roles.status();
  v.root_role = HasRole(*roles, kEtcdRootRole);
  auto users = client_->UserList();
  if (!users.ok()) return users.status();
  v.node_users = node_users_();
  // Roles only of the users DecideAuth looks at (each UserGet is a raft proposal in etcd 3.4;
  // applications' users are the operator's business).
  std::set<std::string> needed(admin_users_.begin(), admin_users_.end());
  needed.insert(kEtcdRootUser);
  for (const auto& [node, user] : v.node_users) needed.insert(user);
  for (const std::string& u : *users) {
    v.users[u] = {};
    if (needed.count(u) == 0) continue;
    auto r = client_->UserGet(u);
    if (!r.ok()) return r.status();
    v.users[u] = *r;
  }
  return v;
}

bool AuthKeeper::Pass(uint64_t term) {
  const auto now = options_.clock->Now();
  const auto every = settled_ ? options_.settled_every : options_.check_every;
  if (last_check_ && now - *last_check_ < every) return false;
  last_check_ = now;
  settled_ = false;
  auto view = Observe();
  if (!view.ok()) {  // AU6
    const std::string e(view.status().message());
    if (e != last_error_) spdlog::warn("auth: cannot read etcd's users and roles: {}", e);
    last_error_ = e;
    return false;
  }
  last_error_.clear();
  AuthPlan plan = DecideAuth(*view);
  if (plan.wait != last_wait_) {
    if (!plan.wait.empty()) {
      spdlog::warn("auth: {}", plan.wait);
      if (history_ != nullptr) history_->Append(term, "wait", plan.wait, "");
    }
    last_wait_ = plan.wait;
  }
  if (plan.steps.empty()) {
    settled_ = plan.wait.empty();
    return false;
  }
  if (confirm_leader_ && !confirm_leader_()) return false;
  std::vector<std::string> done;
  for (const AuthStep& step : plan.steps) {
    absl::Status s;
    switch (step.kind) {
      case AuthStep::kAddRootRole:
        s = client_->RoleAdd(kEtcdRootRole);
        break;
      case AuthStep::kAddUser:
        s = client_->UserAdd(step.user, "");
        break;
      case AuthStep::kGrantRoot:
        s = client_->UserGrantRole(step.user, kEtcdRootRole);
        break;
      case AuthStep::kEnable:
        s = client_->AuthEnable();
        break;
      case AuthStep::kDisable:
        s = client_->AuthDisable();
        break;
    }
    if (!s.ok()) {
      const std::string what = DescribeAuthStep(step);
      spdlog::error("auth: {} failed: {}", what, std::string(s.message()));
      if (history_ != nullptr) {
        history_->Append(term, "auth", absl::StrJoin(done, "; "),
                         absl::StrCat("failed at '", what, "': ", s.message()));
      }
      return !done.empty();
    }
    done.push_back(DescribeAuthStep(step));
  }
  const std::string summary = absl::StrJoin(done, "; ");
  spdlog::info("auth: {}", summary);
  if (history_ != nullptr) history_->Append(term, "auth", summary, "ok");
  return true;
}

}  // namespace steward
