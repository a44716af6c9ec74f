// The backups as a model (backup_model.h): the leader's full backups (TakeBackup) and delta
// backups (TakeDelta), what the intact part of a chain holds (HeldByChain), and what a
// restore's snapshot restore builds from a backup (RestoreCluster), with the ground truth a
// restore must keep.
#include "sim/backup_model.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backup/delta.h"
#include "backup/layout.h"
#include "etcd/keys.h"
#include "etcd/member_id.h"
#include "openssl/sha.h"
#include "sim/world.h"

namespace steward::sim {

using std::chrono::milliseconds;

namespace {

std::string Sha256Hex(const std::string& s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  std::string out;
  for (unsigned char c : d) absl::StrAppendFormat(&out, "%02x", c);
  return out;
}

}  // namespace

absl::Status World::RestoreCluster(int i, const std::string& backup, const SnapshotRestore& r,
                                   Disk* staged) {
  Node& n = *nodes_[i];
  auto data = backups_.find(backup);
  if (data == backups_.end()) return absl::DataLossError("no such backup");
  // The restored cluster: the same on every node of the intent.
  uint64_t cid = 0x5eed;
  std::vector<Member> members;
  for (const auto& [name, url] : r.initial_cluster) {
    Member mm;
    mm.id = InitialMemberId({url}, r.token);
    mm.name = name;
    mm.peer_url = url;
    mm.started = true;
    members.push_back(mm);
    cid = Mix(cid, mm.id);
  }
  const std::string restore_id = r.token;  // the restore's token names it
  // Checked whenever the restored cluster comes into being: the first order, and any order
  // that would bring it back after it was lost.
  if (!restores_seen_.count(restore_id) || !clusters_.count(cid)) {
    if (!restores_seen_.count(restore_id)) ++result_.restores;
    restores_seen_.insert(restore_id);
    if (destroyed_) {
      Violation(absl::StrCat("restore ", restore_id, " applied while the cluster is destroyed"));
    }
    // Ground truth: a restore is justified only when no cluster can reach quorum any more.
    for (uint64_t c : ClustersAbleToReachQuorum()) {
      Violation(absl::StrCat("restore ", restore_id, " of ", backup, " started while cluster ",
                             HexId(c), " still holds a majority of its voters' data"));
    }
    // What the restore brings back: the backup, and the deltas its intent replays.
    int64_t delta_to = 0;
    {
      const auto mode = store_.mode;  // the world reads the store, whatever the agents see
      store_.mode = SimStore::Mode::kUp;
      auto intent = ReadRestoreIntent(store_, "sim");
      store_.mode = mode;
      if (intent.ok() && intent->has_value() && (*intent)->token == r.token) {
        delta_to = (*intent)->delta_to;
      }
    }
    int64_t reached = 0;
    std::set<int> in_backup =
        HeldByChain(backup, delta_to > data->second.revision ? delta_to : -1, &reached);
    // A delta the intent counted on was lost since it was chosen: this restore cannot settle,
    // and the one that replaces it (RestoreCoordinator::Supersede) is checked instead.
    const bool damaged = delta_to > data->second.revision && reached < delta_to;
    pending_replay_.clear();  // this restore decides what is owed now
    std::set<int>& owed = pending_replay_[cid];
    for (int w : in_backup) owed.insert(w);
    for (const auto& [rev, w] : data->second.writes) owed.erase(w);
    // Ground truth (deltas): the intact chain of the newest backup, and of the one before it
    // (the writer may still follow it right after a full backup), holds these writes; a restore
    // must give none of them up. (Older chains end before the newest backup's revision.)
    if (o_.delta_every > 0 && !last_backup_.empty() && !damaged) {
      const BackupData& newest = backups_[last_backup_];
      for (const std::string& b : {last_backup_, prev_backup_}) {
        if (b.empty() || backups_[b].cluster != newest.cluster ||
            backups_[b].generation != newest.generation) {
          continue;
        }
        for (int w : HeldByChain(b, 0)) {
          if (in_backup.count(w)) continue;
          Violation(absl::StrCat("restore ", restore_id, " of ", backup, " (deltas to revision ",
                                 delta_to, ") gives up acknowledged write ", w,
                                 ", which the intact chain of backup ", b, " holds"));
          break;
        }
      }
    }
    int lost = 0;
    for (int w = 1; w <= next_write_; ++w) {
      if (!in_backup.count(w) && !lost_.count(w)) {
        lost_.insert(w);
        ++lost;
      }
    }
    result_.writes_lost_to_restores += lost;
    // Ground truth: the newest backup is the one taken last (backups are taken only of the
    // live cluster), whatever the takers' clocks said.
    // (Its deltas may take an older backup past the newest's revision: then it is the better.)
    if (!last_backup_.empty() && backup != last_backup_ &&
        std::max(data->second.revision, delta_to) < backups_[last_backup_].revision) {
      Violation(absl::StrCat("restore ", restore_id, " chose backup ", backup, " (revision ",
                             data->second.revision, ") over the newest, ", last_backup_,
                             " (revision ", backups_[last_backup_].revision, ")"));
    }
    Trace(i,
          absl::StrCat("first to restore ", backup, " (", restore_id, "): ", lost,
                       " acknowledged writes newer than the backup",
                       delta_to > 0 ? absl::StrCat(" and its deltas to revision ", delta_to) : "",
                       " are given up; ", owed.size(), " to be replayed"));
  }
  if (!clusters_.count(cid)) {
    Cluster c;
    c.id = cid;
    c.members = members;
    c.writes = data->second.writes;
    c.kv = data->second.kv;
    c.rev = data->second.revision + static_cast<int64_t>(r.bump_revision);
    // No revision served twice: a client's watch or cache that knows revision N must never be
    // served another N (etcdutl's bump, or the in-place edit's). Revisions of a restored
    // cluster that never served clients (still fenced) were seen by the agents alone.
    int64_t served = lost_rev_;
    for (const auto& [id, other] : clusters_) {
      if (other.served) served = std::max(served, other.rev);
    }
    bool all_can_bump = true, all_config_can_bump = true;
    for (const auto& node : nodes_) {
      all_config_can_bump = all_config_can_bump && (!node->config.etcd.etcdutl.empty() ||
                                                    node->config.etcd.restore_in_place);
      all_can_bump =
          all_can_bump && (!node->config.etcd.etcdutl.empty() ||
                           (node->config.etcd.restore_in_place && !InPlaceRefuses(backup)));
    }
    ++(r.bump_revision == 0 ? result_.unbumped_restores : result_.bumped_restores);
    // Not raised although a majority of its members could raise it (the others are healed by
    // a join): only a node that cannot at all (config) is a reason to restore without it.
    if (r.bump_revision == 0 && all_config_can_bump) {
      size_t capable = 0;
      for (const auto& m : members) {
        const int k = NodeByPeerUrl(m.peer_url);
        if (k < 0) continue;
        const Config& mc = nodes_[static_cast<size_t>(k)]->config;
        if (!mc.etcd.etcdutl.empty() || (mc.etcd.restore_in_place && !InPlaceRefuses(backup))) {
          ++capable;
        }
      }
      if (capable * 2 > members.size()) {
        Violation(absl::StrCat("restore ", restore_id, " does not raise the revision though ",
                               capable, " of its ", members.size(), " members could"));
      }
    }
    if (all_can_bump && c.rev <= served) {
      Violation(absl::StrCat("restore ", restore_id, " starts its cluster at revision ", c.rev,
                             " though revision ", served,
                             " was served before: revisions would be served twice"));
    }
    for (const auto& [lease, ttl] : data->second.lease_ttls) c.leases[lease] = {now_ + ttl, ttl};
    c.next_lease = 0x100000 + static_cast<int64_t>(rng_() % 1000);
    c.origin = "restore " + restore_id;
    c.served = false;
    for (const auto& [lease, ttl] : data->second.lease_ttls) restored_leases_[cid].insert(lease);
    clusters_[cid] = c;
    Trace(i, absl::StrCat("restored cluster ", HexId(cid), " at revision ", c.rev));
  }
  staged->state = DataDirState::kMember;
  staged->cluster = cid;
  staged->member = InitialMemberId({n.config.PeerUrl(n.spec)}, r.token);
  staged->rev = clusters_[cid].rev;
  staged->seen = members;
  staged->wal_commit = members.size();
  dirty_ = true;
  return absl::OkStatus();
}

void World::TakeBackup() {
  // The leader's scheduler, as a model: a snapshot of a member on the quorum side.
  Refresh();
  for (const auto& n : nodes_) {
    if (n->serving_fence || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    BackupMeta m;
    m.cluster = "sim";
    m.cluster_id = c->id;
    m.revision = c->rev;
    m.etcd_version = "3.4.23";
    m.member = n->spec.name;
    m.node = n->spec.name;
    const Ms wall = Wall(n->index);
    m.unix_time = wall / 1000;
    m.name = BackupName(std::chrono::system_clock::time_point(milliseconds(wall)), c->rev);
    // The snapshot holds exactly the committed revisions (DeltaWriter and ChooseRestoreBase
    // compare chains against it).
    m.revision_max = c->rev;
    m.finished_unix_ms = wall;
    if (auto it = c->kv.find(EtcdGenerationKey("sim")); it != c->kv.end()) {
      (void)absl::SimpleAtoi(it->second.value, &m.generation);
    }
    const std::string bytes = "sim-snapshot " + m.name;
    m.db_size = m.compressed_size = bytes.size();
    m.sha256 = Sha256Hex(bytes);
    m.db_sha256 = m.sha256;
    if (!store_.Put(SnapshotKey("sim", m.name), bytes).ok()) return;
    BackupData data;
    data.revision = c->rev;
    data.writes = c->writes;
    data.kv = c->kv;
    for (const auto& [id, l] : c->leases) data.lease_ttls[id] = l.second;
    data.cluster = c->id;
    data.generation = m.generation;
    backups_[m.name] = data;
    if (!store_.Put(MetaKey("sim", m.name), MetaToJson(m).dump()).ok()) return;
    prev_backup_ = last_backup_;
    last_backup_ = m.name;
    // The delta writer notices a newer backup within DeltaWriter's kBaseCheckEvery (30 s, well
    // under backup.interval); here within 15 s, under the 20 s between backups.
    if (o_.delta_every > 0) delta_switch_at_ = now_ + static_cast<Ms>(delta_rng_() % 15000);
    // The created marker, as the leader writes it.
    if (!store_.objects.count(CreatedMarkerKey("sim"))) {
      (void)store_.Put(CreatedMarkerKey("sim"), "{\"cluster\":\"sim\"}");
    }
    Trace(n->index, absl::StrCat("backup ", m.name, " (generation ", m.generation, ", ",
                                 c->writes.size(), " writes)"));
    return;
  }
}

void World::TakeDelta() {
  Refresh();
  for (const auto& n : nodes_) {
    if (n->serving_fence || !InQuorum(n->index)) continue;
    Cluster* c = ClusterOf(n->index);
    // A chain follows a complete backup of this very cluster (NewestBase).
    if (last_backup_.empty() || backups_[last_backup_].cluster != c->id) return;
    if (delta_base_.empty() || backups_[delta_base_].cluster != c->id) delta_base_ = last_backup_;
    if (delta_base_ != last_backup_ && now_ >= delta_switch_at_) {
      // What the old chain got last stays there; the new one starts at the newer backup.
      Trace(n->index, absl::StrCat("deltas move on to backup ", last_backup_));
      delta_base_ = last_backup_;
    }
    std::vector<DeltaRecord>& chain = deltas_[delta_base_];
    DeltaRecord d;
    d.from = chain.empty() ? backups_[delta_base_].revision : chain.back().to;
    d.to = c->rev;
    backup::DeltaChunk chunk;
    chunk.set_cluster("sim");
    chunk.set_cluster_id(c->id);
    chunk.set_base(delta_base_);
    chunk.set_from_revision(d.from);
    chunk.set_to_revision(d.to);
    for (const auto& [rev, w] : c->writes) {
      if (rev <= d.from || rev > d.to) continue;
      auto* r = chunk.add_revisions();
      r->set_revision(rev);
      r->set_unix_ms(Wall(n->index));
      auto* e = r->add_events();
      e->set_type(etcdserverpb::Event::PUT);
      e->mutable_kv()->set_key(absl::StrCat(kWriteKeyPrefix, w));
      e->mutable_kv()->set_value(absl::StrCat(w));
      e->mutable_kv()->set_create_revision(rev);
      e->mutable_kv()->set_mod_revision(rev);
      e->mutable_kv()->set_version(1);
      d.writes.emplace_back(rev, w);
    }
    // As DeltaWriter: no change to keep, nothing stored (the next delta starts here too).
    if (d.writes.empty()) return;
    auto m = WriteDelta(store_, chunk, n->spec.name);
    if (!m.ok()) {
      Trace(n->index,
            absl::StrCat("delta after ", delta_base_, " not stored: ", m.status().message()));
      return;
    }
    d.object_key = DeltaObjectKey("sim", delta_base_, m->name);
    d.meta_key = DeltaMetaKey("sim", delta_base_, m->name);
    chain.push_back(d);
    ++result_.deltas;
    Trace(n->index, absl::StrCat("delta ", m->name, " after ", delta_base_, " (", d.writes.size(),
                                 " writes)"));
    return;
  }
}

std::set<int> World::HeldByChain(const std::string& backup, int64_t to, int64_t* reached) const {
  std::set<int> out;
  auto b = backups_.find(backup);
  if (b == backups_.end()) return out;
  for (const auto& [rev, w] : b->second.writes) out.insert(w);
  int64_t end = b->second.revision;
  if (reached != nullptr) *reached = end;
  if (to < 0) return out;
  auto chain = deltas_.find(backup);
  if (chain == deltas_.end()) return out;
  for (const DeltaRecord& d : chain->second) {
    if (to != 0 && d.from >= to) break;
    if (!store_.objects.count(d.object_key) || !store_.objects.count(d.meta_key)) break;
    for (const auto& [rev, w] : d.writes) {
      if (to == 0 || rev <= to) out.insert(w);
    }
    end = d.to;
  }
  if (reached != nullptr) *reached = end;
  return out;
}

}  // namespace steward::sim
