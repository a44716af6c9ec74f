#include "backup/pipeline.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sched.h>
#include <unistd.h>
#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "common/sha256.h"
#include "common/status.h"
#include "etcd/agreement.h"
#include "etcd/keys.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace steward {
namespace {

std::string Hex(const std::string& raw) { return absl::BytesToHexString(raw); }

// etcd ends a snapshot stream with sha256 of everything before it. This consumer hashes all
// but the last 32 bytes seen so far and holds only those back, so at the end it can compare; the
// same pass also yields the sha256 of the whole stream (trailer included), so the bytes are
// hashed once, not twice.
class TrailingHashCheck {
 public:
  void Update(std::string_view d) {
    if (tail_.size() + d.size() <= kTrailer) {
      tail_.append(d.data(), d.size());
      return;
    }
    // Hash what can no longer be part of the trailer: first from the held bytes, then from d.
    const size_t n = tail_.size() + d.size() - kTrailer;
    const size_t from_tail = std::min(n, tail_.size());
    body_.Update(std::string_view(tail_.data(), from_tail));
    body_.Update(d.substr(0, n - from_tail));
    tail_.erase(0, from_tail);
    tail_.append(d.substr(n - from_tail));
  }
  // Call once, after the last Update.
  bool Matches() {
    if (tail_.size() != kTrailer) return false;
    whole_ = body_.CopyWith(tail_);
    return body_.Raw() == tail_;
  }
  // sha256 of every byte seen; valid after Matches().
  const std::string& Whole() const { return whole_; }

 private:
  static constexpr size_t kTrailer = 32;
  Sha256 body_;
  std::string tail_;
  std::string whole_;
};

// zstd worker threads for a backup: one core goes to the etcd member next to the agent (often
// the source, which spends about a core sending the snapshot) and one to the thread reading
// the stream; workers only get what is left. On 2 cores, workers only add hand-offs: measured
// here (1.3 GB, source local), compressing on the reading thread took 3.55-3.74 s against
// 3.84-4.13 s with two workers.
int CompressionWorkers() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cores = ::sched_getaffinity(0, sizeof set, &set) == 0
                        ? CPU_COUNT(&set)
                        : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores - 2, 0, 2);
}

class Compressor {
 public:
  Compressor() : cctx_(ZSTD_createCCtx()), out_(ZSTD_CStreamOutSize(), '\0') {
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, 1);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 1);
    // Compress on up to two worker threads while this one keeps reading the stream, where
    // there are cores for them; ignored (single-threaded) if the library was built without
    // multithreading.
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_nbWorkers, CompressionWorkers());
  }
  ~Compressor() { ZSTD_freeCCtx(cctx_); }

  // Feeds `in` and hands every compressed byte to `emit`.
  absl::Status Feed(std::string_view in, bool last,
                    const std::function<absl::Status(std::string_view)>& emit) {
    ZSTD_inBuffer ib{in.data(), in.size(), 0};
    while (true) {
      ZSTD_outBuffer ob{out_.data(), out_.size(), 0};
      size_t r = ZSTD_compressStream2(cctx_, &ob, &ib, last ? ZSTD_e_end : ZSTD_e_continue);
      if (ZSTD_isError(r)) return absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(r)));
      if (ob.pos > 0) {
        if (absl::Status s = emit(std::string_view(out_.data(), ob.pos)); !s.ok()) return s;
      }
      if (last ? r == 0 : ib.pos == ib.size) break;
    }
    return absl::OkStatus();
  }

 private:
  ZSTD_CCtx* cctx_;
  std::string out_;
};

// Writes full buffers to a file on its own thread, so decompressing the next buffer overlaps
// copying the last one into the page cache (a restore's staging file: ~0.4 s of 1.3 s for a
// 1.3 GB snapshot here). At most kDepth buffers exist; Take() waits for a written one.
class BackgroundWriter {
 public:
  struct Buffer {
    std::unique_ptr<char[]> data;  // capacity bytes, left uninitialised
    size_t size = 0;
  };

  BackgroundWriter(int fd, size_t capacity) : fd_(fd), capacity_(capacity) {
    for (int i = 0; i < kDepth; ++i)
      free_.push_back({std::make_unique_for_overwrite<char[]>(capacity), 0});
    thread_ = std::thread([this] { Run(); });
  }
  // Finish() is where a write error is reported; the destructor only stops the thread, on a
  // path that failed before it reached Finish() (and returns that failure instead).
  ~BackgroundWriter() { Stop(); }
  size_t capacity() const { return capacity_; }

  // An empty buffer (waits while all are queued).
  Buffer Take() {
    MutexLock lock(&mu_);
    cv_.Wait(&mu_, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !free_.empty(); });
    Buffer b = std::move(free_.front());
    free_.pop_front();
    b.size = 0;
    return b;
  }
  // Queues `b` to be written; a write error from before is returned (and stays).
  absl::Status Put(Buffer b) {
    MutexLock lock(&mu_);
    queued_.push_back(std::move(b));
    cv_.NotifyAll();
    return error_;
  }
  // Writes what is queued and stops the thread; the first write error, if any.
  absl::Status Finish() {
    Stop();
    MutexLock lock(&mu_);
    return error_;
  }

 private:
  static constexpr int kDepth = 3;
  // Writes what is queued and joins the thread (once).
  void Stop() {
    {
      MutexLock lock(&mu_);
      if (done_) return;
      done_ = true;
      cv_.NotifyAll();
    }
    thread_.join();
  }
  void Run() {
    MutexLock lock(&mu_);
    while (true) {
      cv_.Wait(&mu_,
               [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_ || !queued_.empty(); });
      if (queued_.empty()) return;  // done_ and drained
      Buffer b = std::move(queued_.front());
      queued_.pop_front();
      const bool ok = error_.ok();
      lock.Unlock();
      absl::Status s;
      for (size_t off = 0; ok && off < b.size;) {
        const ssize_t n = ::write(fd_, b.data.get() + off, b.size - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          s = absl::InternalError(std::strerror(n < 0 ? errno : ENOSPC));
          break;
        }
        off += static_cast<size_t>(n);
      }
      lock.Lock();
      if (!s.ok() && error_.ok()) error_ = s;
      free_.push_back(std::move(b));
      cv_.NotifyAll();
    }
  }

  const int fd_;
  const size_t capacity_;
  Mutex mu_;
  CondVar cv_;
  std::deque<Buffer> free_ ABSL_GUARDED_BY(mu_), queued_ ABSL_GUARDED_BY(mu_);
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

using ByteSink = std::function<absl::Status(std::string_view)>;

// Runs `read` on a thread of its own, up to kDepth buffers ahead of `sink`, so fetching the
// next bytes (from S3, a share or a disk) overlaps what the caller does with the last ones
// (decompressing, hashing) instead of alternating with it. Where the store is a network away
// that is most of a fetch's time; from a local file in the page cache it changes little. The
// sink's first error stops the read; otherwise the read's own status comes back once
// everything it delivered went through the sink.
absl::Status ReadAhead(const std::function<absl::Status(const ByteSink&)>& read,
                       const ByteSink& sink) {
  constexpr size_t kBuffer = 1 << 20;
  constexpr size_t kDepth = 8;
  // What the reader thread and this one share.
  struct Shared {
    Mutex mu;
    CondVar cv;
    std::deque<std::string> full ABSL_GUARDED_BY(mu), spare ABSL_GUARDED_BY(mu);
    bool done ABSL_GUARDED_BY(mu) = false;
    bool stop ABSL_GUARDED_BY(mu) = false;
    absl::Status read_status ABSL_GUARDED_BY(mu);
  } q;
  std::thread reader([&] {
    std::string filling;
    absl::Status s = read([&](std::string_view c) -> absl::Status {
      while (!c.empty()) {
        if (filling.capacity() < kBuffer) filling.reserve(kBuffer);
        const size_t n = std::min(c.size(), kBuffer - filling.size());
        filling.append(c.data(), n);
        c.remove_prefix(n);
        if (filling.size() < kBuffer) continue;
        MutexLock lock(&q.mu);
        q.cv.Wait(&q.mu, [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(q.mu) {
          return q.stop || q.full.size() < kDepth;
        });
        if (q.stop) return absl::CancelledError("reading stopped");
        q.full.push_back(std::move(filling));
        filling.clear();
        if (!q.spare.empty()) {
          filling = std::move(q.spare.front());
          q.spare.pop_front();
          filling.clear();
        }
        q.cv.NotifyAll();
      }
      return absl::OkStatus();
    });
    MutexLock lock(&q.mu);
    if (s.ok() && !filling.empty()) q.full.push_back(std::move(filling));
    q.read_status = s;
    q.done = true;
    q.cv.NotifyAll();
  });
  absl::Status sink_status;
  while (true) {
    std::string b;
    {
      MutexLock lock(&q.mu);
      q.cv.Wait(&q.mu,
                [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(q.mu) { return q.done || !q.full.empty(); });
      if (q.full.empty()) break;  // the read is over and everything went through
      b = std::move(q.full.front());
      q.full.pop_front();
      q.cv.NotifyAll();
    }
    sink_status = sink(b);
    MutexLock lock(&q.mu);
    q.spare.push_back(std::move(b));
    if (!sink_status.ok()) {
      q.stop = true;
      q.cv.NotifyAll();
      break;
    }
  }
  reader.join();
  if (!sink_status.ok()) return sink_status;
  MutexLock lock(&q.mu);
  return q.read_status;
}

// Whether a zstd frame starting at `d` carries a content checksum: after the 4-byte magic
// number, bit 2 of the frame header descriptor (RFC 8878, 3.1.1.1.1).
bool FrameHasChecksum(std::string_view d) {
  static constexpr unsigned char kMagic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  return d.size() >= 5 && std::memcmp(d.data(), kMagic, 4) == 0 &&
         (static_cast<unsigned char>(d[4]) & 0x04) != 0;
}

// The members whose data differs from a majority's that agrees (etcd/agreement.h): never a
// backup's source. Without such a majority, or without an answer, nobody is left out (a backup
// is still better than none), and a split is said.
std::set<std::string> Disagreeing(EtcdApi& etcd) {
  auto v = CompareMembers(etcd, std::chrono::seconds(30));
  if (!v.ok()) return {};
  if (v->split) spdlog::warn("backup: hash check {}; backing up anyway", v->text);
  if (!v->differing.empty()) {
    spdlog::warn("backup: not from {}: hash check {}", absl::StrJoin(v->differing, ", "), v->text);
  }
  return {v->differing.begin(), v->differing.end()};
}

}  // namespace

absl::StatusOr<BackupSource> PickBackupSource(EtcdApi& etcd) {
  auto members = etcd.MemberList();
  if (!members.ok()) return Annotate(members.status(), "choosing a member to back up");
  const std::set<std::string> avoid = Disagreeing(etcd);
  std::optional<BackupSource> leader;
  for (const auto& m : *members) {
    if (m.is_learner || m.client_urls.empty() || avoid.count(m.name) != 0) continue;
    // Generous: a loaded member answering slowly is still a fine source.
    auto st = etcd.Status(m.client_urls.front(), std::chrono::milliseconds(3000));
    // An alarm (NOSPACE above all) is exactly when a backup is wanted: only a member without
    // a leader or with a real failure is skipped.
    if (!st.ok() || !FailureErrors(*st).empty() || st->leader == 0) continue;
    BackupSource src{m.client_urls.front(), m.name};
    if (st->leader == st->member_id) {
      leader = src;
      continue;
    }
    return src;
  }
  if (leader) return *leader;
  return absl::UnavailableError("no healthy member to back up");
}

absl::StatusOr<BackupSource> PickUpToDateSource(EtcdApi& etcd, std::chrono::milliseconds bound) {
  auto members = etcd.MemberList();
  if (!members.ok()) return Annotate(members.status(), "choosing a member to snapshot");
  // The leader's committed index now: a member that has applied it holds every write
  // acknowledged before this call.
  uint64_t target = 0;
  for (const auto& m : *members) {
    if (m.is_learner || m.client_urls.empty()) continue;
    auto st = etcd.Status(m.client_urls.front(), std::chrono::milliseconds(3000));
    if (st.ok() && st->leader != 0 && st->leader == st->member_id) target = st->raft_index;
  }
  const std::set<std::string> avoid = Disagreeing(etcd);
  const auto deadline = std::chrono::steady_clock::now() + bound;
  while (true) {
    std::optional<BackupSource> best, leader;
    uint64_t best_applied = 0;
    for (const auto& m : *members) {
      if (m.is_learner || m.client_urls.empty() || avoid.count(m.name) != 0) continue;
      auto st = etcd.Status(m.client_urls.front(), std::chrono::milliseconds(3000));
      if (!st.ok() || !FailureErrors(*st).empty() || st->leader == 0) continue;
      BackupSource src{m.client_urls.front(), m.name};
      const uint64_t applied = st->raft_applied_index;
      if (st->leader == st->member_id) {
        if (applied >= target) leader = src;
      } else if (applied >= target) {
        return src;  // a caught-up follower: the leader is busiest
      }
      if (!best || applied > best_applied) {
        best = src;
        best_applied = applied;
      }
    }
    if (leader) return *leader;
    if (!best) return absl::UnavailableError("no healthy member to snapshot");
    if (std::chrono::steady_clock::now() >= deadline) return *best;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

absl::StatusOr<BackupMeta> StoreSnapshotStream(BackupStore& store, BackupMeta meta,
                                               const SnapshotProducer& produce,
                                               const std::function<void(BackupMeta*)>& finish) {
  auto writer = store.Create(SnapshotKey(meta.cluster, meta.name));
  if (!writer.ok()) return Annotate(writer.status(), "backup: creating the snapshot object");
  Sha256 stored_hash;
  TrailingHashCheck etcd_hash;  // also gives the whole stream's sha256
  Compressor zstd;
  uint64_t compressed = 0;
  auto emit = [&](std::string_view c) -> absl::Status {
    stored_hash.Update(c);
    compressed += c.size();
    return (*writer)->Write(c);
  };
  auto received = produce([&](std::string_view chunk) -> absl::Status {
    etcd_hash.Update(chunk);
    return zstd.Feed(chunk, false, emit);
  });
  if (!received.ok()) return Annotate(received.status(), "backup: snapshot stream");
  if (!etcd_hash.Matches()) {
    return absl::DataLossError("backup: the snapshot stream's trailing sha256 does not match");
  }
  if (absl::Status s = zstd.Feed({}, true, emit); !s.ok()) return s;
  if (absl::Status s = (*writer)->Commit(); !s.ok()) {
    return Annotate(s, "backup: storing the snapshot");
  }
  meta.db_size = *received;
  meta.compressed_size = compressed;
  meta.sha256 = Hex(stored_hash.Raw());
  meta.db_sha256 = Hex(etcd_hash.Whole());
  meta.encryption_key_id = store.EncryptionKeyId();
  if (finish) finish(&meta);
  if (absl::Status s = store.Put(MetaKey(meta.cluster, meta.name), MetaToJson(meta).dump(2));
      !s.ok()) {
    return Annotate(s, "backup: writing meta.json");
  }
  return meta;
}

absl::StatusOr<BackupMeta> TakeBackup(EtcdApi& etcd, const BackupSource& source, BackupStore& store,
                                      const std::string& cluster, const std::string& taken_by,
                                      std::chrono::milliseconds timeout,
                                      const std::function<void(uint64_t)>& progress) {
  auto st = etcd.Status(source.endpoint, std::chrono::milliseconds(2000));
  if (!st.ok()) return Annotate(st.status(), "backup");
  const auto now = std::chrono::system_clock::now();
  BackupMeta meta;
  meta.cluster = cluster;
  meta.etcd_version = st->version;
  meta.cluster_id = st->cluster_id;
  meta.raft_index = st->raft_index;
  meta.member = source.member;
  meta.node = taken_by;
  meta.unix_time = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();

  // The Status header's revision: the snapshot, taken just after, holds at least this one.
  meta.revision = st->revision;
  auto generation = etcd.Get(EtcdGenerationKey(cluster));
  if (!generation.ok()) return Annotate(generation.status(), "backup: reading the generation");
  if (generation->has_value() && !absl::SimpleAtoi(**generation, &meta.generation)) {
    return absl::DataLossError(absl::StrCat("backup: ", EtcdGenerationKey(cluster), " holds \"",
                                            **generation, "\", not a number"));
  }
  meta.name = BackupName(now, meta.revision);
  return StoreSnapshotStream(
      store, std::move(meta),
      [&](const auto& sink) {
        uint64_t seen = 0;
        return etcd.Snapshot(
            source.endpoint,
            [&](std::string_view chunk) -> absl::Status {
              seen += chunk.size();
              if (progress) progress(seen);
              return sink(chunk);
            },
            timeout);
      },
      [&](BackupMeta* m) {
        // An upper bound of what the snapshot holds, for point-in-time restores (0 if unknown).
        if (auto after = etcd.Status(source.endpoint, std::chrono::milliseconds(2000));
            after.ok()) {
          m->revision_max = after->revision;
          m->finished_unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count();
        }
      });
}

absl::Status MarkBackupDamaged(BackupStore& store, const std::string& cluster,
                               const std::string& name, const std::string& why,
                               const std::string& node, int64_t now_unix) {
  nlohmann::json j = {{"reason", why}, {"node", node}, {"marked_at", now_unix}};
  return Annotate(store.Put(DamagedMarkKey(cluster, name), j.dump()),
                  absl::StrCat("marking backup ", name, " damaged"));
}

absl::StatusOr<std::vector<ListedBackup>> ListBackups(BackupStore& store,
                                                      const std::string& cluster) {
  auto objects = store.List(BackupsPrefix(cluster));
  if (!objects.ok()) return Annotate(objects.status(), "listing backups");
  std::map<std::string, std::pair<bool, bool>> seen;  // name -> (has snapshot, has meta)
  std::set<std::string> damaged, verified;
  const std::string prefix = BackupsPrefix(cluster);
  for (const auto& o : *objects) {
    std::string rest = o.key.substr(prefix.size());
    auto slash = rest.find('/');
    if (slash == std::string::npos) continue;
    std::string name = rest.substr(0, slash), file = rest.substr(slash + 1);
    if (!ParseBackupName(name)) continue;
    if (file == "snapshot.db.zst") seen[name].first = true;
    if (file == "meta.json") seen[name].second = true;
    if (file == "damaged.json") damaged.insert(name);
    if (file == "verified.json") verified.insert(name);
  }
  std::vector<ListedBackup> out;
  for (auto it = seen.rbegin(); it != seen.rend(); ++it) {
    ListedBackup b;
    b.name = it->first;
    if (!it->second.second) {
      b.error = "incomplete: no meta.json";
    } else if (!it->second.first) {
      b.error = "snapshot.db.zst is missing";
    } else {
      auto text = store.Get(MetaKey(cluster, b.name));
      if (!text.ok()) {
        b.error = Msg(text.status());
      } else if (auto m = MetaFromJson(*text); m.ok()) {
        b.meta = *m;
      } else {
        b.error = Msg(m.status());
      }
    }
    if (damaged.count(b.name) > 0 && b.meta) {
      auto mark = store.Get(DamagedMarkKey(cluster, b.name));
      auto j = mark.ok() ? nlohmann::json::parse(*mark, nullptr, false) : nlohmann::json();
      // An unreadable mark still marks it: skipping a good backup costs less than a loop.
      b.damaged = j.is_object() ? j.value("reason", "damaged") : "damaged (mark unreadable)";
      if (b.damaged.empty()) b.damaged = "damaged";
    }
    if (verified.count(b.name) > 0 && b.meta) {
      auto text = store.Get(absl::StrCat(prefix, b.name, "/verified.json"));
      if (text.ok()) b.verified_json = *text;
    }
    out.push_back(std::move(b));
  }
  // Complete backups newest first by (generation, revision); incomplete ones after them.
  std::stable_sort(out.begin(), out.end(), [](const ListedBackup& a, const ListedBackup& b) {
    if (a.meta.has_value() != b.meta.has_value()) return a.meta.has_value();
    if (!a.meta) return false;
    return BackupNewer(*a.meta, *b.meta);
  });
  return out;
}

absl::Status VerifyBackup(BackupStore& store, const std::string& cluster, const BackupMeta& meta,
                          const VerifyOptions& opts) {
  // Said plainly, before a byte is read (a keyless read would fail as "does not decompress").
  if (!meta.encryption_key_id.empty() && store.EncryptionKeyId().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("backup ", meta.name, " is encrypted (key ", meta.encryption_key_id,
                     "); set backup.encryption.key_file (and old_key_files) to the key files"));
  }
  const bool decompress = opts.hash_content || !opts.out_path.empty();
  int fd = -1;
  std::string tmp;
  if (!opts.out_path.empty()) {
    tmp = opts.out_path + ".part";
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
      return absl::InternalError(absl::StrCat("creating ", tmp, ": ", std::strerror(errno)));
  }
  Sha256 stored_hash;
  TrailingHashCheck etcd_hash;
  ZSTD_DCtx* dctx = decompress ? ZSTD_createDCtx() : nullptr;
  // Decompressed bytes collect in `out` on their way to the file (or are dropped when only
  // checked).
  constexpr size_t kOutBuffer = 4 << 20;
  std::optional<BackgroundWriter> writer;
  if (fd >= 0) writer.emplace(fd, kOutBuffer);
  BackgroundWriter::Buffer out = writer ? writer->Take() : BackgroundWriter::Buffer{};
  if (!writer && decompress) out.data = std::make_unique_for_overwrite<char[]>(kOutBuffer);
  uint64_t stored = 0, db = 0;
  size_t last_ret = 0;
  bool hash_stored = opts.hash_stored;
  auto read = [&](const std::function<absl::Status(std::string_view)>& sink) {
    const std::string key = SnapshotKey(cluster, meta.name);
    return meta.encryption_key_id.empty() ? store.Read(key, sink)
                                          : store.ReadEncrypted(key, meta.encryption_key_id, sink);
  };
  absl::Status s = ReadAhead(read, [&](std::string_view c) {
    if (stored == 0 && !hash_stored && !FrameHasChecksum(c)) {
      hash_stored = true;  // nothing else would catch a flipped byte in the content
    }
    if (hash_stored) stored_hash.Update(c);
    stored += c.size();
    if (opts.progress) opts.progress(stored);
    if (!decompress) return absl::OkStatus();
    ZSTD_inBuffer ib{c.data(), c.size(), 0};
    // Until the input is used up and zstd holds nothing back.
    for (bool filled = true; ib.pos < ib.size || filled;) {
      // Decompress into the rest of `out`, which goes to the writer once full.
      ZSTD_outBuffer ob{out.data.get() + out.size, kOutBuffer - out.size, 0};
      // The frame carries a content checksum (set when the backup was taken), which zstd
      // checks here: a decompression that goes wrong is an error, not silently wrong bytes.
      last_ret = ZSTD_decompressStream(dctx, &ob, &ib);
      if (ZSTD_isError(last_ret)) {
        return absl::DataLossError(absl::StrCat(
            "backup ", meta.name, ": does not decompress: ", ZSTD_getErrorName(last_ret)));
      }
      // A full buffer may mean zstd holds more; 0 means the frame is done (calling again
      // would start reading a next frame and report it unfinished).
      filled = ob.pos == ob.size && last_ret != 0;
      std::string_view d(out.data.get() + out.size, ob.pos);
      if (opts.hash_content) etcd_hash.Update(d);
      db += d.size();
      out.size += d.size();
      if (out.size == kOutBuffer) {
        if (writer) {
          if (absl::Status w = writer->Put(std::move(out)); !w.ok()) {
            return Annotate(w, absl::StrCat("writing ", tmp));
          }
          out = writer->Take();
        } else {
          out.size = 0;
        }
      }
    }
    return absl::OkStatus();
  });
  if (dctx != nullptr) ZSTD_freeDCtx(dctx);
  if (writer) {
    if (s.ok() && out.size > 0) s = writer->Put(std::move(out));
    if (absl::Status w = writer->Finish(); s.ok() && !w.ok()) {
      s = Annotate(w, absl::StrCat("writing ", tmp));
    }
  }
  // No fsync here: a node's restore syncs the file as it edits it in place (BoltFile::Commit),
  // or the restore tool copies and syncs it; after a crash the whole restore starts over.
  if (fd >= 0) ::close(fd);
  auto fail = [&](absl::Status e) {
    if (!tmp.empty()) ::unlink(tmp.c_str());
    return e;
  };
  if (!s.ok()) return fail(Annotate(s, absl::StrCat("backup ", meta.name)));
  if (stored != meta.compressed_size) {
    return fail(absl::DataLossError(absl::StrCat("backup ", meta.name, ": stored size ", stored,
                                                 " != ", meta.compressed_size,
                                                 " in meta.json (truncated?)")));
  }
  if (hash_stored && Hex(stored_hash.Raw()) != meta.sha256) {
    return fail(absl::DataLossError(absl::StrCat(
        "backup ", meta.name, ": sha256 of snapshot.db.zst does not match meta.json")));
  }
  if (decompress) {
    if (last_ret != 0) {
      return fail(
          absl::DataLossError(absl::StrCat("backup ", meta.name, ": zstd stream is truncated")));
    }
    if (db != meta.db_size) {
      return fail(absl::DataLossError(absl::StrCat("backup ", meta.name, ": decompressed size ", db,
                                                   " != ", meta.db_size, " in meta.json")));
    }
  }
  if (opts.hash_content) {
    if (!etcd_hash.Matches()) {
      return fail(absl::DataLossError(
          absl::StrCat("backup ", meta.name, ": etcd's trailing snapshot hash does not match")));
    }
    if (!meta.db_sha256.empty() && Hex(etcd_hash.Whole()) != meta.db_sha256) {
      return fail(absl::DataLossError(absl::StrCat(
          "backup ", meta.name, ": the decompressed snapshot does not match meta.json")));
    }
  }
  if (!opts.out_path.empty() && ::rename(tmp.c_str(), opts.out_path.c_str()) != 0) {
    return fail(absl::InternalError(absl::StrCat("renaming ", tmp, ": ", std::strerror(errno))));
  }
  return absl::OkStatus();
}

}  // namespace steward
