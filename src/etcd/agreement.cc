#include "etcd/agreement.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/rules.h"

namespace steward {
namespace {

std::string HashText(uint32_t h) { return absl::StrFormat("%08x", h); }

}  // namespace

HashVerdict JudgeHashes(int64_t revision, const std::vector<HashSample>& samples, int voters) {
  HashVerdict v;
  v.revision = revision;
  // DV1: the compaction most members answered for; the others cannot be compared this time.
  std::map<int64_t, int> by_compact;
  for (const auto& s : samples) {
    if (s.hash) ++by_compact[s.hash->compact_revision];
  }
  int most = 0;
  for (const auto& [compact, n] : by_compact) {
    if (n > most) {
      most = n;
      v.compact_revision = compact;
    }
  }
  std::map<uint32_t, std::vector<std::string>> holders;  // hash -> members
  std::map<uint32_t, int> voters_holding;
  for (const auto& s : samples) {
    if (!s.hash || (s.hash->compact_revision != v.compact_revision && !RuleOff("DV1"))) {
      v.unknown.push_back(s.member);
      continue;
    }
    holders[s.hash->hash].push_back(s.member);
    if (s.voter) ++voters_holding[s.hash->hash];
  }
  const int quorum = voters / 2 + 1;
  for (const auto& [hash, n] : voters_holding) {
    // DV2 (switched off, for mutation tests: any group rules, even a minority).
    const bool rules = RuleOff("DV2") ? n >= 1 : n >= quorum;
    if (rules && !v.majority) {
      v.majority = true;
      v.majority_hash = hash;
    }
  }
  auto list = [&](uint32_t h) {
    return absl::StrCat(absl::StrJoin(holders[h], ", "), " hold ", HashText(h));
  };
  if (v.majority) {
    v.agreeing = holders[v.majority_hash];
    for (const auto& [hash, members] : holders) {
      if (hash != v.majority_hash) {
        v.differing.insert(v.differing.end(), members.begin(), members.end());
      }
    }
    v.text = absl::StrCat("at revision ", revision, ": ", absl::StrJoin(v.agreeing, ", "),
                          " agree (hash ", HashText(v.majority_hash), ")");
    for (const auto& [hash, members] : holders) {
      if (hash != v.majority_hash) absl::StrAppend(&v.text, "; ", list(hash), ", which differs");
    }
  } else if (holders.size() >= 2) {
    v.split = true;  // DV3
    std::vector<std::string> parts;
    for (const auto& [hash, members] : holders) parts.push_back(list(hash));
    v.text = absl::StrCat("at revision ", revision, " no majority of the ", voters,
                          " voting members agrees: ", absl::StrJoin(parts, "; "),
                          "; nothing is repaired");
  } else if (holders.size() == 1) {
    v.agreeing = holders.begin()->second;
    v.text = absl::StrCat("at revision ", revision, ": ", absl::StrJoin(v.agreeing, ", "),
                          " agree (hash ", HashText(holders.begin()->first),
                          "), too few to be a majority of ", voters);
  } else {
    v.text = absl::StrCat("at revision ", revision, ": no member answered HashKV");
  }
  if (!v.unknown.empty()) {
    absl::StrAppend(&v.text, "; not compared: ", absl::StrJoin(v.unknown, ", "));
  }
  return v;
}

absl::StatusOr<HashVerdict> CompareMembers(EtcdApi& etcd, std::chrono::milliseconds timeout) {
  auto members = etcd.MemberList();
  if (!members.ok()) return members.status();
  int voters = 0;
  for (const auto& m : *members) voters += m.is_learner ? 0 : 1;
  absl::StatusOr<HashVerdict> out = absl::UnavailableError("no member answered Status");
  // A member that does not answer Status at once (down, frozen, cut off) is not asked for a
  // hash: its HashKV would hold the caller for the whole `timeout`.
  const auto status_timeout = std::min(timeout, std::chrono::milliseconds(2000));
  for (int attempt = 0; attempt < 2; ++attempt) {
    // The lowest revision every answering member has applied: each can hash it.
    int64_t revision = 0;
    std::set<uint64_t> answered;
    for (const auto& m : *members) {
      if (m.client_urls.empty()) continue;
      auto st = etcd.Status(m.client_urls.front(), status_timeout);
      if (!st.ok()) continue;
      answered.insert(m.id);
      if (revision == 0 || st->revision < revision) revision = st->revision;
    }
    if (revision == 0) return out;
    std::vector<HashSample> samples;
    bool compaction_moved = false;
    for (const auto& m : *members) {
      HashSample s;
      s.member = m.name.empty() ? absl::StrFormat("%016x", m.id) : m.name;
      s.id = m.id;
      s.voter = !m.is_learner;
      if (m.client_urls.empty()) {
        s.error = "not started";
      } else if (answered.count(m.id) == 0) {
        s.error = "did not answer Status";
      } else if (auto h = etcd.HashKVOf(m.client_urls.front(), revision, timeout); h.ok()) {
        s.hash = *h;
      } else {
        s.error = std::string(h.status().message());
        // Compacted past the revision chosen: choose again.
        compaction_moved = compaction_moved || absl::IsOutOfRange(h.status());
      }
      samples.push_back(std::move(s));
    }
    out = JudgeHashes(revision, samples, voters);
    const bool mixed = !out->unknown.empty() && out->unknown.size() < samples.size();
    if (!compaction_moved && !(mixed && !out->majority)) break;
  }
  return out;
}

}  // namespace steward
