#include "sim/runner_model.h"

#include "absl/strings/str_cat.h"
#include "sim/world.h"
#include "spdlog/spdlog.h"

namespace steward::sim {

Node& SimRunner::n() { return *w_->nodes()[node_]; }

std::optional<pid_t> SimRunner::Adopt() {
  return n().etcd_up ? std::optional<pid_t>(1000 + node_) : std::nullopt;
}

void SimRunner::Run(std::vector<std::string> flags) {
  // While destroyed, the only start allowed is the documented gap: a node that never learned
  // of the destroy (no marker) restarting its member's own data while the store cannot be
  // read (a store outage must not keep a member down). Everything else breaks SD1 (it
  // recorded the destroy), SD2 (it could read the mark) or creates something (a bootstrap,
  // a join, a restore on an empty dir).
  if (w_->destroyed() && !n().etcd_up) {
    const bool gap =
        n().disk.destroyed.empty() && !w_->StoreUp() && n().disk.state == DataDirState::kMember;
    if (!gap) {
      w_->Violation(absl::StrCat("node ", n().spec.name,
                                 " is asked to run etcd while the cluster is destroyed"));
    }
  }
  n().runner_wanted = true;
  n().etcd_flags = std::move(flags);
  n().restarts = 0;
  if (!n().etcd_up) w_->StartEtcd(node_);
}

absl::Status SimRunner::Stop() {
  n().runner_wanted = false;
  if (n().etcd_up) {
    n().etcd_up = false;
    w_->Refresh();
  }
  return absl::OkStatus();
}

bool SimRunner::wanted() const { return w_->nodes()[node_]->runner_wanted; }

std::optional<pid_t> SimRunner::pid() const {
  return w_->nodes()[node_]->etcd_up ? std::optional<pid_t>(1000 + node_) : std::nullopt;
}

int SimRunner::restarts() const { return w_->nodes()[node_]->restarts; }

void SimRunner::SetBinary(const std::string& binary) { n().binary = binary; }

std::string SimRunner::binary() const { return w_->nodes()[node_]->binary; }

std::optional<std::vector<std::string>> SimRunner::running_flags() const {
  const auto& n = *w_->nodes()[node_];
  if (!n.etcd_up) return std::nullopt;
  return n.running_flags;
}

void SimRunner::Supervise() {
  if (!n().runner_wanted || n().etcd_up || w_->Paused(node_)) return;
  std::string why;
  if (!n().local->MayRestart(&why)) {
    n().runner_wanted = false;
    spdlog::error("not restarting etcd: {}", why);
    return;
  }
  ++n().restarts;
  w_->StartEtcd(node_);
}

}  // namespace steward::sim
