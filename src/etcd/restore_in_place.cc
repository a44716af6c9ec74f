#include "etcd/restore_in_place.h"

#include <fcntl.h>
#include <openssl/sha.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/files.h"
#include "etcd/bolt.h"
#include "etcd/member_id.h"
#include "nlohmann/json.hpp"

namespace steward {
namespace {

// --- protobuf wire encoding, for the few etcd messages written here ---
void Varint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}
void UintField(std::string* out, uint32_t field, uint64_t v) {
  Varint(out, uint64_t{field} << 3);
  Varint(out, v);
}
void BytesField(std::string* out, uint32_t field, const std::string& b) {
  Varint(out, (uint64_t{field} << 3) | 2);
  Varint(out, b.size());
  out->append(b);
}

std::string BigEndian64(uint64_t v) {
  std::string b(8, '\0');
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (56 - 8 * i));
  return b;
}

struct Member {
  uint64_t id = 0;
  std::string name, peer_url;
};

// The member as etcd's membership.Member marshals to JSON (ID as a number; the name is known
// from the initial cluster; client URLs are published by the member itself once it runs).
std::string MemberJson(const Member& m) {
  nlohmann::ordered_json j;
  j["id"] = m.id;
  j["peerURLs"] = nlohmann::json::array({m.peer_url});
  j["name"] = m.name;
  return j.dump();
}

// raftpb.ConfState{voters = 1}.
std::string ConfState(const std::vector<Member>& members) {
  std::string s;
  for (const auto& m : members) UintField(&s, 1, m.id);
  return s;
}

// The v2 store etcd keeps membership in (store.Save()'s JSON, as store.Recovery reads it): the
// "/0" (cluster) and "/1" (keys) directories, and per member "/0/members/<hex id>/raftAttributes"
// holding {"peerURLs":[...]}, created one after another at indexes 1..n. What is left out
// (the watcher hub, the stats) keeps the values a new store starts with.
std::string V2Store(const std::vector<Member>& members) {
  const std::string zero_time = "0001-01-01T00:00:00Z";
  auto node = [&](const std::string& path, uint64_t index) {
    nlohmann::ordered_json n;
    n["Path"] = path;
    n["CreatedIndex"] = index;
    n["ModifiedIndex"] = index;
    n["ExpireTime"] = zero_time;
    n["Value"] = "";
    n["Children"] = nlohmann::json::object();
    return n;
  };
  nlohmann::ordered_json dir_members = node("/0/members", 1);
  uint64_t index = 0;
  for (const auto& m : members) {
    ++index;
    const std::string hex = absl::StrFormat("%x", m.id);
    nlohmann::ordered_json md = node("/0/members/" + hex, index);
    nlohmann::ordered_json attrs = node("/0/members/" + hex + "/raftAttributes", index);
    nlohmann::ordered_json raft;
    raft["peerURLs"] = nlohmann::json::array({m.peer_url});
    attrs["Value"] = raft.dump();
    attrs["Children"] = nullptr;  // a file, not a directory
    md["Children"]["raftAttributes"] = attrs;
    dir_members["Children"][hex] = md;
  }
  nlohmann::ordered_json cluster = node("/0", 0);
  cluster["Children"]["members"] = dir_members;
  nlohmann::ordered_json root = node("/", 0);
  root["Children"]["0"] = cluster;
  root["Children"]["1"] = node("/1", 0);
  nlohmann::ordered_json store;
  store["Root"] = root;
  store["CurrentIndex"] = index;
  store["CurrentVersion"] = 2;
  return store.dump();
}

// One WAL record: walpb.Record{type = 1, crc = 2, data = 3}, framed by etcd's 8-byte
// little-endian length (the top byte: 0x80 | padding when the record is padded to 8 bytes).
class WalEncoder {
 public:
  void Add(int64_t type, const std::string& data, bool is_crc_record = false) {
    if (!is_crc_record) crc_ = Crc32c(crc_, data.data(), data.size());
    std::string rec;
    UintField(&rec, 1, static_cast<uint64_t>(type));
    UintField(&rec, 2, crc_);
    if (!is_crc_record) BytesField(&rec, 3, data);
    const uint64_t pad = (8 - rec.size() % 8) % 8;
    uint64_t len = rec.size();
    if (pad != 0) len |= (0x80 | pad) << 56;
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<char>(len >> (8 * i)));
    out_ += rec;
    out_.append(pad, '\0');
  }
  const std::string& bytes() const { return out_; }

 private:
  uint32_t crc_ = 0;
  std::string out_;
};

// True for scheme://host:port with nothing after it, as etcd's URL parsing gives it back.
bool PlainPeerUrl(const std::string& url) {
  std::string rest;
  if (url.rfind("http://", 0) == 0) {
    rest = url.substr(7);
  } else if (url.rfind("https://", 0) == 0) {
    rest = url.substr(8);
  } else {
    return false;
  }
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return false;
  for (char c : rest) {
    if (c == '/' || c == '?' || c == '#' || c == '@' || static_cast<unsigned char>(c) <= ' ' ||
        static_cast<unsigned char>(c) >= 0x7f) {
      return false;
    }
  }
  for (size_t i = colon + 1; i < rest.size(); ++i) {
    if (rest[i] < '0' || rest[i] > '9') return false;
  }
  return true;
}

// walpb.Record types.
constexpr int64_t kMetadataType = 1, kEntryType = 2, kStateType = 3, kCrcType = 4,
                  kSnapshotType = 5;

// The buckets and "meta" keys of etcd 3.4 and 3.5's backend, which the edit knows how to
// restore. Anything else is a schema from another etcd (3.6's meta "storageVersion", say):
// its own tool knows what a restore must change there, so the edit leaves the DB to it.
absl::Status CheckSchema(BoltFile& db) {
  static const std::set<std::string> kBuckets = {
      "alarm", "auth",  "authRoles", "authUsers",       "cluster",
      "key",   "lease", "members",   "members_removed", "meta"};
  static const std::set<std::string> kMetaKeys = {
      "confState", "consistent_index", "finishedCompactRev", "scheduledCompactRev", "term"};
  auto buckets = db.Buckets();
  if (!buckets.ok()) return buckets.status();
  for (const std::string& b : *buckets) {
    if (!kBuckets.contains(b)) {
      return absl::UnimplementedError(absl::StrCat(
          "the DB has a bucket the in-place restore does not know (", absl::CHexEscape(b),
          "): another etcd version's schema, for its own restore tool"));
    }
  }
  auto meta = db.ReadBucket("meta");
  if (!meta.ok()) return meta.status();
  for (const auto& [key, value] : *meta) {
    if (!kMetaKeys.contains(key)) {
      return absl::UnimplementedError(absl::StrCat(
          "the DB's meta bucket has a key the in-place restore does not know (",
          absl::CHexEscape(key), "): another etcd version's schema, for its own restore tool"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const char* data, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i)
    crc = table[(crc ^ static_cast<uint8_t>(data[i])) & 0xff] ^ (crc >> 8);
  return ~crc;
}

uint64_t InitialClusterId(std::vector<uint64_t> member_ids) {
  std::sort(member_ids.begin(), member_ids.end());
  std::string b;
  for (uint64_t id : member_ids) b += BigEndian64(id);
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(b.data()), b.size(), digest);
  uint64_t id = 0;
  for (int i = 0; i < 8; ++i) id = (id << 8) | digest[i];
  return id;
}

namespace {

// The initial cluster's members, checked and in member-ID order, with `r.name` among them.
absl::StatusOr<std::vector<Member>> InitialMembers(const InPlaceRestore& r) {
  // What the restore tool would refuse or read differently (a name given twice is one member
  // with two URLs to etcd; etcd normalises URLs) is refused here before anything is written,
  // so that the tool runs and says what is wrong.
  std::vector<Member> members;
  for (const auto& [name, url] : r.initial_cluster) {
    if (!PlainPeerUrl(url)) {
      return absl::InvalidArgumentError(
          absl::StrCat("peer URL ", url, " of ", name, " is not scheme://host:port"));
    }
    for (const auto& m : members) {
      if (m.name == name) {
        return absl::InvalidArgumentError(absl::StrCat(name, " is named twice"));
      }
    }
    members.push_back({InitialMemberId({url}, r.token), name, url});
  }
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.id < b.id; });
  for (size_t i = 1; i < members.size(); ++i) {
    if (members[i].id == members[i - 1].id) {
      return absl::InvalidArgumentError("two initial members share a peer URL");
    }
  }
  const auto self = std::find_if(members.begin(), members.end(),
                                 [&](const Member& m) { return m.name == r.name; });
  if (self == members.end()) {
    return absl::InvalidArgumentError(absl::StrCat(r.name, " is not in the initial cluster"));
  }
  if (!r.peer_url.empty() && r.peer_url != self->peer_url) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the advertised peer URL ", r.peer_url, " is not ", r.name, "'s in the initial cluster"));
  }
  return members;
}

// 1. The DB, edited in one bbolt transaction: the members, the consistent index and term,
// and the raised revision.
absl::Status EditDb(const InPlaceRestore& r, const std::string& db_path,
                    const std::map<std::string, std::string>& in_members, uint64_t term,
                    uint64_t commit, bool* db_changed) {
  auto db = BoltFile::Open(db_path, /*writable=*/!r.check_only);
  if (!db.ok()) return db.status();
  // Every page, before anything is written: the edit reads only what it changes, and damage
  // elsewhere would otherwise pass, for etcd to panic on when it starts (ETCD-NOTES).
  if (absl::Status s = (*db)->CheckAll(); !s.ok()) return s;
  if (absl::Status s = CheckSchema(**db); !s.ok()) return s;
  if (absl::Status s = (*db)->ReplaceBucket("members", in_members); !s.ok()) return s;
  if (absl::Status s = (*db)->ReplaceBucket("members_removed", {}); !s.ok()) return s;
  if (absl::Status s = (*db)->Put("meta", "consistent_index", BigEndian64(commit)); !s.ok()) {
    return s;
  }
  if (absl::Status s = (*db)->Put("meta", "term", BigEndian64(term)); !s.ok()) return s;
  if (r.bump_revision > 0) {
    auto last = (*db)->LastKey("key");
    if (!last.ok()) return last.status();
    int64_t latest = 0;  // (as etcdutl counts an empty keyspace)
    if (!last->empty()) {
      auto rev = MainRevision(*last);
      if (!rev) return absl::DataLossError("the DB's newest key is not a revision");
      latest = *rev;
    }
    const std::string bumped = RevisionKey(latest + static_cast<int64_t>(r.bump_revision), 0);
    // An empty value at the raised revision makes it the DB's newest. A compaction scheduled
    // at it (and not yet finished: etcd finishes it when it starts) makes a watch or read
    // from an older revision fail rather than silently miss events.
    if (absl::Status s = (*db)->Put("key", bumped, ""); !s.ok()) return s;
    if (absl::Status s = (*db)->Put("meta", "scheduledCompactRev", bumped); !s.ok()) return s;
  }
  if (r.check_only) return absl::OkStatus();
  // A failed commit may have written the meta page: count it as changed.
  if (db_changed) *db_changed = true;
  if (absl::Status s = (*db)->Commit(); !s.ok()) return s;
  return absl::OkStatus();
}

// 2. The .snap file: snappb.Snapshot{crc = 1, data = 2} around raftpb.Snapshot{data = 1,
// metadata = 2 {conf_state = 1, index = 2, term = 3}}.
std::string SnapFile(const std::vector<Member>& members, const std::string& v2_store, uint64_t term,
                     uint64_t commit) {
  std::string metadata;
  BytesField(&metadata, 1, ConfState(members));
  UintField(&metadata, 2, commit);
  UintField(&metadata, 3, term);
  std::string raft_snap;
  BytesField(&raft_snap, 1, v2_store);
  BytesField(&raft_snap, 2, metadata);
  std::string snap_file;
  UintField(&snap_file, 1, Crc32c(0, raft_snap.data(), raft_snap.size()));
  BytesField(&snap_file, 2, raft_snap);
  return snap_file;
}

// 3. The WAL's records: crc, metadata (etcdserverpb.Metadata{node_id = 1, cluster_id = 2}),
// an empty snapshot record (as every new WAL starts), the entries, the hard state, and the
// snapshot.
std::string WalBytes(const std::vector<Member>& members, uint64_t self_id, uint64_t cluster_id,
                     const std::map<std::string, std::string>& in_members, uint64_t term,
                     uint64_t commit) {
  WalEncoder wal;
  wal.Add(kCrcType, "", /*is_crc_record=*/true);
  std::string md;
  UintField(&md, 1, self_id);
  UintField(&md, 2, cluster_id);
  wal.Add(kMetadataType, md);
  wal.Add(kSnapshotType, "");
  for (size_t i = 0; i < members.size(); ++i) {
    // raftpb.ConfChange{type = 2 (AddNode = 0), node_id = 3, context = 4}.
    std::string cc;
    UintField(&cc, 2, 0);
    UintField(&cc, 3, members[i].id);
    BytesField(&cc, 4, in_members.at(absl::StrFormat("%x", members[i].id)));
    // raftpb.Entry{type = 1 (ConfChange = 1), term = 2, index = 3, data = 4}.
    std::string e;
    UintField(&e, 1, 1);
    UintField(&e, 2, term);
    UintField(&e, 3, i + 1);
    BytesField(&e, 4, cc);
    wal.Add(kEntryType, e);
  }
  std::string hs;  // raftpb.HardState{term = 1, vote = 2, commit = 3}
  UintField(&hs, 1, term);
  UintField(&hs, 2, members.front().id);
  UintField(&hs, 3, commit);
  wal.Add(kStateType, hs);
  std::string ws;  // walpb.Snapshot{index = 1, term = 2, conf_state = 3}
  UintField(&ws, 1, commit);
  UintField(&ws, 2, term);
  BytesField(&ws, 3, ConfState(members));
  wal.Add(kSnapshotType, ws);
  return wal.bytes();
}

// The WAL's one segment, preallocated to etcd's segment size, as etcd's own WAL and etcdutl's
// restore make it: a disk too small for it fails the restore here, before etcd starts.
absl::Status WriteWal(const std::filesystem::path& member_dir, const std::string& bytes) {
  const std::filesystem::path wal_dir = member_dir / "wal";
  if (absl::Status s = MakeDirs(wal_dir.string(), 0700); !s.ok()) return s;
  auto segment =
      AtomicFile::Create((wal_dir / "0000000000000000-0000000000000000.wal").string(), 0600);
  if (!segment.ok()) return segment.status();
  if (absl::Status s = segment->Write(bytes); !s.ok()) return s;
  if (absl::Status s = segment->Preallocate(kWalSegmentBytes); !s.ok()) return s;
  if (absl::Status s = segment->Commit(); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace

absl::Status RestoreInPlace(const InPlaceRestore& r, bool* db_changed) {
  if (db_changed) *db_changed = false;
  namespace fs = std::filesystem;
  auto members = InitialMembers(r);
  if (!members.ok()) return members.status();
  const uint64_t self_id = std::find_if(members->begin(), members->end(), [&](const Member& m) {
                             return m.name == r.name;
                           })->id;
  // Everything that is encoded as JSON, before the DB is touched (a name or URL that is not
  // UTF-8 cannot be).
  std::map<std::string, std::string> in_members;
  std::string v2_store;
  try {
    for (const auto& m : *members) in_members[absl::StrFormat("%x", m.id)] = MemberJson(m);
    v2_store = V2Store(*members);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the initial cluster: ", e.what()));
  }
  std::vector<uint64_t> ids;
  for (const auto& m : *members) ids.push_back(m.id);
  const uint64_t cluster_id = InitialClusterId(ids);
  // The new log: one configuration entry per member, all committed at term 1; its snapshot
  // (and the DB's consistent index) at the last of them.
  const uint64_t term = 1, commit = members->size();

  const fs::path member_dir = fs::path(r.data_dir) / "member";
  if (absl::Status s =
          EditDb(r, (member_dir / "snap" / "db").string(), in_members, term, commit, db_changed);
      !s.ok() || r.check_only) {
    return s;
  }
  const fs::path snap_path =
      member_dir / "snap" / absl::StrFormat("%016x-%016x.snap", term, commit);
  if (absl::Status s =
          WriteFileAtomic(snap_path.string(), SnapFile(*members, v2_store, term, commit), 0644);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          WriteWal(member_dir, WalBytes(*members, self_id, cluster_id, in_members, term, commit));
      !s.ok()) {
    return s;
  }
  // The new directories' entries, down from the data dir (the files' own were synced).
  for (const fs::path& d : {member_dir, fs::path(r.data_dir)}) {
    if (absl::Status s = SyncDir(d.string()); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace steward
