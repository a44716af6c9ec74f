// EtcdClient's calls to etcd's Auth service: whether auth is on, users, roles and their
// permissions (reconcile/auth.cc keeps them as auth.mode says). The rest is in client.cc.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "etcd/client.h"

namespace steward {

absl::StatusOr<bool> EtcdClient::AuthEnabled() {
  etcdserverpb::AuthenticateRequest req;
  // Not a valid user name for etcd-steward's users or the operator's (no such CN can be issued).
  req.set_name("steward probe/auth status");
  req.set_password("x");
  etcdserverpb::AuthenticateResponse resp;
  absl::Status s = CallAny("Authenticate", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->Authenticate(&ctx, req, &resp);
  });
  if (s.ok()) return absl::InternalError("Authenticate: a probe user was accepted");
  if (absl::StrContains(s.message(), "authentication is not enabled")) return false;
  if (absl::StrContains(s.message(), "authentication failed")) return true;
  return s;
}

absl::StatusOr<std::string> EtcdClient::Authenticate(const std::string& name,
                                                     const std::string& password) {
  etcdserverpb::AuthenticateRequest req;
  req.set_name(name);
  req.set_password(password);
  etcdserverpb::AuthenticateResponse resp;
  absl::Status s = CallAny("Authenticate", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->Authenticate(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return resp.token();
}

absl::Status EtcdClient::AuthEnable() {
  etcdserverpb::AuthEnableResponse resp;
  return CallAny("AuthEnable", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->AuthEnable(&ctx, etcdserverpb::AuthEnableRequest(), &resp);
  });
}

absl::Status EtcdClient::AuthDisable() {
  etcdserverpb::AuthDisableResponse resp;
  return CallAny("AuthDisable", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->AuthDisable(&ctx, etcdserverpb::AuthDisableRequest(), &resp);
  });
}

absl::StatusOr<std::vector<std::string>> EtcdClient::UserList() {
  etcdserverpb::AuthUserListResponse resp;
  absl::Status s = CallAny("UserList", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->UserList(&ctx, etcdserverpb::AuthUserListRequest(), &resp);
  });
  if (!s.ok()) return s;
  return std::vector<std::string>(resp.users().begin(), resp.users().end());
}

absl::StatusOr<std::vector<std::string>> EtcdClient::UserGet(const std::string& name) {
  etcdserverpb::AuthUserGetRequest req;
  req.set_name(name);
  etcdserverpb::AuthUserGetResponse resp;
  absl::Status s = CallAny("UserGet", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->UserGet(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  return std::vector<std::string>(resp.roles().begin(), resp.roles().end());
}

absl::Status EtcdClient::UserAdd(const std::string& name, const std::string& password) {
  etcdserverpb::AuthUserAddRequest req;
  req.set_name(name);
  req.set_password(password);
  req.mutable_options()->set_no_password(password.empty());
  etcdserverpb::AuthUserAddResponse resp;
  return CallAny("UserAdd", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->UserAdd(&ctx, req, &resp);
  });
}

absl::Status EtcdClient::UserDelete(const std::string& name) {
  etcdserverpb::AuthUserDeleteRequest req;
  req.set_name(name);
  etcdserverpb::AuthUserDeleteResponse resp;
  return CallAny("UserDelete", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->UserDelete(&ctx, req, &resp);
  });
}

absl::Status EtcdClient::UserGrantRole(const std::string& user, const std::string& role) {
  etcdserverpb::AuthUserGrantRoleRequest req;
  req.set_user(user);
  req.set_role(role);
  etcdserverpb::AuthUserGrantRoleResponse resp;
  return CallAny("UserGrantRole", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->UserGrantRole(&ctx, req, &resp);
  });
}

absl::StatusOr<std::vector<std::string>> EtcdClient::RoleList() {
  etcdserverpb::AuthRoleListResponse resp;
  absl::Status s = CallAny("RoleList", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->RoleList(&ctx, etcdserverpb::AuthRoleListRequest(), &resp);
  });
  if (!s.ok()) return s;
  return std::vector<std::string>(resp.roles().begin(), resp.roles().end());
}

absl::StatusOr<std::vector<RolePermission>> EtcdClient::RoleGet(const std::string& role) {
  etcdserverpb::AuthRoleGetRequest req;
  req.set_role(role);
  etcdserverpb::AuthRoleGetResponse resp;
  absl::Status s = CallAny("RoleGet", true, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->RoleGet(&ctx, req, &resp);
  });
  if (!s.ok()) return s;
  std::vector<RolePermission> out;
  for (const auto& p : resp.perm()) {
    RolePermission r;
    r.type = static_cast<RolePermission::Type>(p.permtype());
    r.key = p.key();
    r.range_end = p.range_end();
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status EtcdClient::RoleAdd(const std::string& role) {
  etcdserverpb::AuthRoleAddRequest req;
  req.set_name(role);
  etcdserverpb::AuthRoleAddResponse resp;
  return CallAny("RoleAdd", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->RoleAdd(&ctx, req, &resp);
  });
}

absl::Status EtcdClient::RoleDelete(const std::string& role) {
  etcdserverpb::AuthRoleDeleteRequest req;
  req.set_role(role);
  etcdserverpb::AuthRoleDeleteResponse resp;
  return CallAny("RoleDelete", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->RoleDelete(&ctx, req, &resp);
  });
}

absl::Status EtcdClient::RoleGrantPermission(const std::string& role, const RolePermission& perm) {
  etcdserverpb::AuthRoleGrantPermissionRequest req;
  req.set_name(role);
  req.mutable_perm()->set_permtype(static_cast<etcdserverpb::Permission::Type>(perm.type));
  req.mutable_perm()->set_key(perm.key);
  req.mutable_perm()->set_range_end(perm.range_end);
  etcdserverpb::AuthRoleGrantPermissionResponse resp;
  return CallAny("RoleGrantPermission", false, [&](Stubs& st, grpc::ClientContext& ctx) {
    return st.auth->RoleGrantPermission(&ctx, req, &resp);
  });
}

}  // namespace steward
