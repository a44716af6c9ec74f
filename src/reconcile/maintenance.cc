#include "reconcile/maintenance.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/duration.h"

namespace steward {

const Pause* Maintenance::PauseFor(const std::string& node) const {
  for (const auto& p : pauses) {
    if (p.node == node) return &p;
  }
  return nullptr;
}

const RemovedNode* Maintenance::Removed(const std::string& node) const {
  for (const auto& r : removed) {
    if (r.node == node) return &r;
  }
  return nullptr;
}

void Maintenance::DropPause(const std::string& node) {
  pauses.erase(
      std::remove_if(pauses.begin(), pauses.end(), [&](const Pause& p) { return p.node == node; }),
      pauses.end());
}

void Maintenance::DropRemoved(const std::string& node) {
  removed.erase(std::remove_if(removed.begin(), removed.end(),
                               [&](const RemovedNode& r) { return r.node == node; }),
                removed.end());
}

void Maintenance::DropExpired(int64_t now) {
  pauses.erase(std::remove_if(pauses.begin(), pauses.end(),
                              [now](const Pause& p) { return !p.ActiveAt(now); }),
               pauses.end());
}

nlohmann::json MaintenanceToJson(const Maintenance& m) {
  nlohmann::json j = {{"pauses", nlohmann::json::array()}, {"removed", nlohmann::json::array()}};
  for (const auto& p : m.pauses) {
    j["pauses"].push_back({{"node", p.node},
                           {"by", p.by},
                           {"reason", p.reason},
                           {"since", p.since},
                           {"until", p.until}});
  }
  for (const auto& r : m.removed) {
    // The member ID as hex text: uint64 does not survive JSON tools that use doubles.
    j["removed"].push_back({{"node", r.node},
                            {"by", r.by},
                            {"reason", r.reason},
                            {"since", r.since},
                            {"member_id", absl::StrCat(absl::Hex(r.member_id))}});
  }
  return j;
}

absl::StatusOr<Maintenance> MaintenanceFromJson(const std::string& text) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError("the maintenance document is not a JSON object");
  }
  Maintenance m;
  try {
    for (const auto& p : j.value("pauses", nlohmann::json::array())) {
      Pause x;
      x.node = p.at("node").get<std::string>();
      x.by = p.value("by", std::string());
      x.reason = p.value("reason", std::string());
      x.since = p.value("since", int64_t{0});
      x.until = p.at("until").get<int64_t>();
      m.pauses.push_back(std::move(x));
    }
    for (const auto& r : j.value("removed", nlohmann::json::array())) {
      RemovedNode x;
      x.node = r.at("node").get<std::string>();
      x.by = r.value("by", std::string());
      x.reason = r.value("reason", std::string());
      x.since = r.value("since", int64_t{0});
      const std::string id = r.value("member_id", std::string("0"));
      if (!absl::SimpleHexAtoi(id, &x.member_id)) {
        return absl::InvalidArgumentError(
            absl::StrCat("removed node ", x.node, ": member_id \"", id, "\" is not hex"));
      }
      m.removed.push_back(std::move(x));
    }
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("the maintenance document: ", e.what()));
  }
  return m;
}

std::string UtcSeconds(int64_t unix_time) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%SZ", absl::FromUnixSeconds(unix_time),
                          absl::UTCTimeZone());
}

std::string DescribePause(const Pause& p) {
  return absl::StrCat("until ", UtcSeconds(p.until), " by ", p.by.empty() ? "?" : p.by, ": ",
                      p.reason);
}

absl::StatusOr<std::chrono::seconds> ParsePauseDuration(const std::string& text) {
  std::chrono::seconds d{0};
  if (!text.empty() && text.back() == 'd') {
    int64_t days = 0;
    if (!absl::SimpleAtoi(text.substr(0, text.size() - 1), &days) || days < 0 || days > 365) {
      return absl::InvalidArgumentError(absl::StrCat("\"", text, "\" is not a duration"));
    }
    d = std::chrono::hours(24 * days);
  } else {
    auto parsed = ParseDuration(text);
    if (!parsed.ok()) return parsed.status();
    d = std::chrono::duration_cast<std::chrono::seconds>(*parsed);
  }
  if (d <= std::chrono::seconds(0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\": a pause must last at least 1s"));
  }
  if (d > kMaxPause) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text,
                     "\" is longer than the maximum pause of 7d (resume, then pause "
                     "again if the work really takes longer)"));
  }
  return d;
}

void ApplyMaintenance(const Maintenance& m, int64_t now, ClusterObservation* obs) {
  if (const Pause* p = m.PauseFor(""); p != nullptr && p->ActiveAt(now)) {
    obs->cluster_paused = DescribePause(*p);
  }
  for (auto& n : obs->nodes) {
    if (const Pause* p = m.PauseFor(n.name); p != nullptr && p->ActiveAt(now)) {
      n.paused = DescribePause(*p);
    }
    n.removed = m.Removed(n.name) != nullptr;
  }
}

}  // namespace steward
