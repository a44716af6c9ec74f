#include "etcd/wal.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"

namespace steward {
namespace {

// Protobuf wire decoding of the two tiny messages we need (walpb.Record, etcdserverpb.Metadata).
bool ReadVarint(const std::string& b, size_t* pos, uint64_t* out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64 && *pos < b.size(); shift += 7) {
    uint8_t c = static_cast<uint8_t>(b[(*pos)++]);
    v |= static_cast<uint64_t>(c & 0x7f) << shift;
    if ((c & 0x80) == 0) {
      *out = v;
      return true;
    }
  }
  return false;
}

// Calls fn(field, varint, bytes) for each field; false on malformed input.
template <typename Fn>
bool ForEachField(const std::string& b, Fn fn) {
  size_t pos = 0;
  while (pos < b.size()) {
    uint64_t key;
    if (!ReadVarint(b, &pos, &key)) return false;
    uint32_t field = static_cast<uint32_t>(key >> 3);
    switch (key & 7) {
      case 0: {
        uint64_t v;
        if (!ReadVarint(b, &pos, &v)) return false;
        fn(field, v, std::string());
        break;
      }
      case 2: {
        uint64_t len;
        if (!ReadVarint(b, &pos, &len) || len > b.size() - pos) return false;
        fn(field, 0, b.substr(pos, len));
        pos += len;
        break;
      }
      case 5:
        pos += 4;
        break;
      case 1:
        pos += 8;
        break;
      default:
        return false;
    }
  }
  return pos == b.size();
}

constexpr int64_t kMetadataType = 1;

}  // namespace

namespace {

std::vector<std::filesystem::path> Segments(const std::string& etcd_data_dir) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(etcd_data_dir) / "member" / "wal";
  std::error_code ec;
  std::vector<fs::path> segments;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".wal") segments.push_back(e.path());
  }
  std::sort(segments.begin(), segments.end());
  return segments;
}

// Calls fn(type, data) for each record of one segment until its end (or its zero-filled tail);
// fn returns false to stop. False if a record cannot be decoded.
template <typename Fn>
bool ForEachRecord(const std::filesystem::path& segment, size_t max_records, Fn fn) {
  std::ifstream in(segment, std::ios::binary);
  for (size_t record = 0; record < max_records && in; ++record) {
    int64_t len_field = 0;
    in.read(reinterpret_cast<char*>(&len_field), 8);  // little-endian, as on x86/arm
    if (!in) return true;
    uint64_t rec_bytes = static_cast<uint64_t>(len_field) & ~(uint64_t{0xff} << 56);
    uint64_t pad = len_field < 0 ? (static_cast<uint64_t>(len_field) >> 56) & 0x7 : 0;
    if (rec_bytes == 0) return true;  // the preallocated tail
    if (rec_bytes > (1u << 26)) return false;
    std::string rec(rec_bytes + pad, '\0');
    in.read(rec.data(), static_cast<std::streamsize>(rec.size()));
    if (!in) return true;  // a torn last record: etcd repairs it on start
    rec.resize(rec_bytes);
    int64_t type = 0;
    std::string data;
    bool ok = ForEachField(rec, [&](uint32_t f, uint64_t v, const std::string& bytes) {
      if (f == 1) type = static_cast<int64_t>(v);
      if (f == 3) data = bytes;
    });
    if (!ok) return false;
    if (!fn(type, data)) return true;
  }
  return true;
}

// walpb.Record types: metadata 1, entry 2, state 3 (a raftpb.HardState), crc 4, snapshot 5.
constexpr int64_t kStateType = 3;

}  // namespace

absl::StatusOr<WalIdentity> ReadWalIdentity(const std::string& etcd_data_dir) {
  auto segments = Segments(etcd_data_dir);
  if (segments.empty()) {
    return absl::NotFoundError(absl::StrCat("no WAL in ", etcd_data_dir, "/member/wal"));
  }
  // Every segment starts with the metadata record; the newest is the one etcd writes to now.
  std::optional<WalIdentity> found;
  ForEachRecord(segments.back(), 4, [&](int64_t type, const std::string& data) {
    if (type != kMetadataType) return true;
    WalIdentity id;
    bool ok = ForEachField(data, [&](uint32_t f, uint64_t v, const std::string&) {
      if (f == 1) id.member_id = v;
      if (f == 2) id.cluster_id = v;
    });
    if (ok && id.member_id != 0) found = id;
    return false;
  });
  if (found) return *found;
  return absl::DataLossError(
      absl::StrCat("cannot read the member ID from ", segments.back().string()));
}

absl::StatusOr<uint64_t> ReadWalCommit(const std::string& etcd_data_dir) {
  auto segments = Segments(etcd_data_dir);
  if (segments.empty()) {
    return absl::NotFoundError(absl::StrCat("no WAL in ", etcd_data_dir, "/member/wal"));
  }
  uint64_t commit = 0;
  for (const auto& segment : segments) {
    bool ok = ForEachRecord(segment, size_t{1} << 24, [&](int64_t type, const std::string& data) {
      if (type != kStateType) return true;
      // raftpb.HardState: term = 1, vote = 2, commit = 3.
      ForEachField(data, [&](uint32_t f, uint64_t v, const std::string&) {
        if (f == 3) commit = std::max(commit, v);
      });
      return true;
    });
    if (!ok) return absl::DataLossError(absl::StrCat("cannot decode ", segment.string()));
  }
  return commit;
}

}  // namespace steward
