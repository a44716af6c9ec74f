// Reads and edits etcd's backend file (a bbolt database) in place, for a restore that
// decompresses a backup straight into the new member's member/snap/db: the few changes
// `snapshot restore` makes to the DB (the new membership, the consistent index, a raised and
// compacted revision) are written here without copying the 1+ GB file.
//
// An edit is one bbolt transaction done by hand: every changed node is written to new pages
// past the file's last page (copy on write, never over a page the old tree uses), then the meta
// page that does not hold the current meta gets the new roots and a higher txid. Until that last
// write the file is the snapshot it was. The new meta page records no freelist, as etcd keeps
// its bbolt on Linux (NoFreelistSync): bbolt then finds the free pages when it opens the file by
// walking the tree, so the pages only the old tree used are free again, and a page in use can
// never be handed to the allocator by a mistake here. Anything this code does not expect
// (another format version, a damaged page, a node with sub-buckets where none belong) is an
// error, and the caller falls back to etcd's own restore tool.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace steward {

class BoltFile {
 public:
  // Opens `path` for reading and editing; checks both meta pages and picks the newer valid one.
  // A trailer of `trailer_bytes` past the last page (etcd's snapshot stream ends with its
  // sha256) is allowed and removed by the first Commit.
  // `writable` false: only for reading (Commit refuses). Errors: the filesystem's (NotFound,
  // ...), or DataLoss whose message says what is wrong: "not a bbolt database (...)",
  // "truncated: ..." or "corrupt: ...".
  static absl::StatusOr<std::unique_ptr<BoltFile>> Open(const std::string& path,
                                                        bool writable = true);
  ~BoltFile();
  BoltFile(const BoltFile&) = delete;
  BoltFile& operator=(const BoltFile&) = delete;

  uint32_t page_size() const { return page_size_; }
  uint64_t txid() const { return txid_; }
  uint64_t pages() const { return high_water_; }  // the meta page's count of pages in use

  // Calls fn(key, value, flags) for every element of top-level bucket `bucket` in key order
  // (flags & 1: a nested bucket). Streams page by page: fit for the largest bucket. NotFound
  // without the bucket; DataLoss when a page is malformed or out of bounds.
  using Visitor = std::function<void(std::string_view key, std::string_view value, uint32_t flags)>;
  absl::Status ForEach(const std::string& bucket, const Visitor& fn);

  // The whole file as bbolt's consistency check walks it: the tree of every bucket, nested and
  // inline ones included, from the meta page in use. Each page must be reached once; its id,
  // flags, overflow count and elements must be in bounds, its keys in order and within the
  // range its parent's branch keys give it. Reads every page once. DataLoss whose message
  // starts with kDamaged and names the page and what is wrong; the filesystem's errors as
  // they come.
  static constexpr char kDamaged[] = "the DB is damaged";
  absl::Status CheckAll() const;

  // The names of the top-level buckets, in key order.
  absl::StatusOr<std::vector<std::string>> Buckets() const;
  // Every key and value of top-level bucket `bucket` (NotFound without it). For small buckets.
  absl::StatusOr<std::map<std::string, std::string>> ReadBucket(const std::string& bucket);
  // The greatest key in `bucket` ("" when empty).
  absl::StatusOr<std::string> LastKey(const std::string& bucket);

  // Staged edits, applied by Commit. Put replaces or inserts one key in a bucket that must
  // exist; ReplaceBucket makes an existing bucket hold exactly `contents`.
  absl::Status Put(const std::string& bucket, const std::string& key, const std::string& value);
  absl::Status ReplaceBucket(const std::string& bucket,
                             const std::map<std::string, std::string>& contents);
  // Writes the staged edits (new pages, fsync, meta page, fsync).
  absl::Status Commit();

  struct Node;  // a branch or leaf page, decoded (bolt.cc)

 private:
  BoltFile() = default;
  absl::StatusOr<Node> LoadNode(uint64_t pgid) const;
  absl::Status WalkPages(uint64_t pgid, int depth, const Visitor& fn) const;
  absl::Status WalkNode(std::string_view bytes, int depth, const std::string& at,
                        const Visitor& fn) const;
  absl::StatusOr<std::string> BucketValue(const std::string& bucket);
  absl::Status CanStage() const;  // DataLoss if no transaction can follow the one in use
  // CheckAll's steps: a page (with its overflow), and a node's bytes (a page, or an inline
  // bucket's). `lo`/`hi`: the key range the parent gives it ("" and no `hi` at a root).
  struct CheckState;
  absl::Status CheckPage(uint64_t pgid, const std::string& lo, const std::string* hi, int depth,
                         const std::string& bucket, CheckState& st) const;
  absl::Status CheckNode(std::string_view bytes, const std::string& at, const std::string& lo,
                         const std::string* hi, int depth, const std::string& bucket,
                         CheckState& st) const;
  absl::Status SetBucketValue(const std::string& bucket, const std::string& value);
  absl::StatusOr<uint64_t> PutInTree(uint64_t root, const std::string& key,
                                     const std::string& value, uint32_t flags, int depth);
  absl::Status CollectLeaves(uint64_t pgid, std::map<std::string, std::string>* out, int depth);
  absl::StatusOr<uint64_t> WriteNode(const Node& n);
  std::string EncodeNode(const Node& n, uint64_t pgid, uint32_t* pages) const;

  int fd_ = -1;
  bool writable_ = true;
  std::string path_;
  uint32_t page_size_ = 0;
  uint32_t meta_flags_ = 0;
  uint64_t root_ = 0, root_sequence_ = 0, high_water_ = 0, txid_ = 0;
  uint64_t meta_slot_ = 0;  // the page (0 or 1) holding the meta in use
  uint64_t file_size_ = 0;
  // Pages written by this transaction so far (new high water = high_water_ + written pages).
  uint64_t next_pgid_ = 0;
  std::map<uint64_t, std::string> pending_;  // pgid -> encoded node (with its overflow pages)
};

// A refusal of BoltFile::CheckAll (damage found by the full walk), as it travels up.
bool IsDamagedDb(const absl::Status& s);

// The revision key etcd's mvcc uses in its "key" bucket: 8-byte big-endian main revision, '_',
// 8-byte big-endian sub revision (17 bytes).
std::string RevisionKey(int64_t main, int64_t sub);
// The main revision of such a key (nullopt if `key` is not one; a tombstone's key has an 18th
// byte 't', which is accepted).
std::optional<int64_t> MainRevision(const std::string& key);

}  // namespace steward
