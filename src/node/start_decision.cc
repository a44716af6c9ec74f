#include "node/start_decision.h"

#include "absl/strings/str_cat.h"
#include "common/rules.h"

namespace steward {

const char* StartActionName(StartAction a) {
  switch (a) {
    case StartAction::kSetPartialAside:
      return "set-partial-aside";
    case StartAction::kStartOnData:
      return "start-on-data";
    case StartAction::kWait:
      return "wait";
    case StartAction::kBootstrap:
      return "bootstrap";
    case StartAction::kForgetDestroyed:
      return "forget-destroyed";
    case StartAction::kRecordDestroyed:
      return "record-destroyed";
  }
  return "?";
}

StartDecision DecideStart(const StartView& v) {
  using A = StartAction;
  if (!v.local_destroyed.empty() && !RuleOff("SD1")) {  // SD1
    if (!v.destroyed.empty()) return {A::kWait, v.destroyed};
    if (!v.destroy_store_ok) {
      return {A::kWait, absl::StrCat("etcd on node ", v.node, " was stopped by destroy ",
                                     v.local_destroyed, ", and the backup store cannot be read (",
                                     v.destroy_store_error.empty() ? "no store is configured"
                                                                   : v.destroy_store_error,
                                     ") to see whether the cluster was brought back")};
    }
    return {A::kForgetDestroyed,
            absl::StrCat("the backup store no longer marks the cluster destroyed (destroy ",
                         v.local_destroyed, " was undone)")};
  }
  if (!v.destroyed.empty() && !RuleOff("SD2")) return {A::kRecordDestroyed, v.destroyed};  // SD2
  switch (v.data) {
    case DataDirState::kPartial:  // S1
      return {A::kSetPartialAside,
              "the data dir holds no WAL (a start or join that failed before etcd wrote one)"};
    case DataDirState::kMember:                                            // S2
      if (!v.member_removed.empty()) return {A::kWait, v.member_removed};  // RM3
      return {A::kStartOnData, "the data dir holds a member"};
    case DataDirState::kEmpty:
      break;
  }
  if (v.adopting && !RuleOff("AD4")) {  // AD4
    return {A::kWait, absl::StrCat("cluster.adopt is set: node ", v.node,
                                   " never bootstraps; "
                                   "it joins the adopted cluster when the leader adds it")};
  }
  if (v.ever_joined && !RuleOff("S3")) {  // S3
    return {A::kWait, absl::StrCat("node ", v.node,
                                   " was a member before and its data dir is "
                                   "empty; waiting for the leader to add it back")};
  }
  if (!v.initial) {  // S4
    return {A::kWait,
            absl::StrCat("node ", v.node, " is a spare; waiting for the leader to add it")};
  }
  switch (v.cluster) {  // S5
    case ClusterAnswer::kWithoutThisNode:
      return {A::kWait, absl::StrCat("a cluster is running without node ", v.node,
                                     "; waiting for the leader to add it")};
    case ClusterAnswer::kEntryHasRun:
      return {A::kWait, absl::StrCat("the cluster has a member for node ", v.node,
                                     " but this data dir is empty; waiting for the leader")};
    case ClusterAnswer::kSilent:
      if (!v.peers_allow && !RuleOff("S6")) {  // S6
        return {A::kWait, absl::StrCat("not bootstrapping the initial cluster yet: ", v.peers_why)};
      }
      break;
    case ClusterAnswer::kInitialEntryUnstarted:
      // The initial cluster runs and waits for this member: starting it joins that cluster,
      // it creates none (the store's "existed" is about that very cluster).
      return {A::kBootstrap, "the initial cluster is up without this node yet; joining it"};
  }
  if (v.has_store && !RuleOff("S7")) {  // S7
    if (!v.store_ok) {
      return {A::kWait, absl::StrCat("no cluster answers and the backup store cannot be read (",
                                     v.store_error, "); not bootstrapping a new cluster")};
    }
    if (v.cluster_existed) {
      return {A::kWait,
              "no cluster answers, but the backup store shows this cluster existed; "
              "waiting for a restore from backup"};
    }
  }
  return {A::kBootstrap,  // S8
          "every initial node is empty or bootstrapping, and no cluster ever existed"};
}

bool EverJoined(bool joined_marker, uint64_t wal_commit, int initial_members) {
  if (joined_marker) return true;
  if (RuleOff("J1")) return false;
  return wal_commit > static_cast<uint64_t>(initial_members);
}

bool MemberRemoved(uint64_t wal_member_id, uint64_t wal_cluster_id, bool list_ok,
                   uint64_t list_cluster_id, const std::vector<uint64_t>& member_ids) {
  if (RuleOff("RM3") || !list_ok || wal_member_id == 0 || wal_cluster_id == 0) return false;
  if (list_cluster_id != wal_cluster_id) return false;
  for (uint64_t id : member_ids) {
    if (id == wal_member_id) return false;
  }
  return true;
}

bool DataLostUnderEtcd(bool wanted, bool started_on_data, bool member_data_seen, DataDirState now) {
  if (RuleOff("D1")) return false;
  return wanted && (started_on_data || member_data_seen) && now != DataDirState::kMember;
}

}  // namespace steward
