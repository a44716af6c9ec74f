// The live status page: GET / on every agent's admin port (and on `stewardctl dashboard`, a
// local proxy for browsers without a client certificate, ctl/dashboard.h) serves one
// self-contained HTML document (inline CSS and JS, no external assets) that polls
// GET /status.json every 2 s and redraws itself without a reload.
//
// /status.json is the cluster's view as the answering agent gathers it on request: every
// member's status (CollectStatus, reconcile/cluster_status.h), the steward's state (leader,
// reconciler step, backup results, spec), the newest backups in the store, warnings, and, when the
// agent has them, recent events. Any agent serves the whole cluster's view, so a page works against
// any agent's address. docs/monitoring.md describes the document and the page.
//
// BuildStatusDocument is pure; StatusSource does the gathering and is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "backup/store.h"
#include "common/clock.h"
#include "common/mutex.h"
#include "config/config.h"
#include "etcd/client.h"
#include "nlohmann/json.hpp"
#include "pki/node_certs.h"
#include "reconcile/cluster_status.h"

namespace steward {

// The page: the same bytes for every request. It fetches "status.json" relative to its own
// URL, so it works behind any prefix.
const std::string& StatusPageHtml();
// The Content-Security-Policy sent with the page: nothing may load from anywhere else; the
// page's scripts may fetch only its own origin.
inline constexpr char kStatusPageCsp[] =
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

// A certificate of the answering node and when it expires.

// One backup in the store, from its listing alone (no meta.json is read).
struct BackupEntry {
  std::string name;
  int64_t unix_time = 0;  // from the name
  int64_t revision = 0;   // from the name
  uint64_t size = 0;      // snapshot.db.zst's bytes (compressed)
  bool complete = false;  // meta.json and the snapshot are both there
};

struct BackupListing {
  std::vector<BackupEntry> newest;  // newest first by name (time), at most the limit asked
  int total = 0;                    // backups in the store, complete or not
};

// The backups of `cluster` from one listing of the store, newest first by the time in their
// names (the page shows a timeline; restores pick by generation and revision instead).
absl::StatusOr<BackupListing> RecentBackups(BackupStore& store, const std::string& cluster,
                                            size_t limit);

// A certificate expiring within this long is a warning (the StewardCertificateExpiring alert's
// threshold; issued certificates are renewed at two-thirds of their life).
inline constexpr int64_t kCertWarnSeconds = 30 * 24 * 3600;

// What was gathered, for BuildStatusDocument.
struct StatusInputs {
  std::string cluster;       // cluster.name
  std::string served_by;     // the answering agent's node name
  bool tls = true;           // tls.mode is not off
  int configured_size = 0;   // cluster.size (the spec's size wins when set)
  std::string backup_store;  // the store's Describe(); empty: no backup.store
  ClusterView view;
  nlohmann::json steward = nlohmann::json::object();  // ReadStewardState
  std::optional<BackupListing> backups;  // empty: not listed (no store, or the listing failed)
  std::string backups_error;             // why the listing failed
  std::vector<CertExpiry> certs;         // the answering node's certificates
  std::optional<nlohmann::json> events;  // an array of {at, node, action, reason, term}
  int64_t now = 0;                       // Unix seconds
};

// The /status.json document: StatusToJson's fields (as `stewardctl status -o json`), each
// non-member with a "why", and "steward", "cluster", "served_by", "at", "tls",
// "desired_size", "backup_store", "backup_list", "backup_total", "backup_list_error",
// "warnings" ([{kind, text}]) and "events" when given. Pure.
nlohmann::json BuildStatusDocument(const StatusInputs& in);

// Gathers the document for the agent's admin port. One gathering runs at a time; a document
// younger than `reuse` is served again, and the store is listed at most every `list_every`,
// so many open pages cost the cluster no more than one. A listing that takes longer than
// `status_timeout` (a slow object store) goes on in the background while the last one is shown;
// the destructor waits for it (bounded by the store's own timeouts).
class StatusSource {
 public:
  struct Options {
    std::chrono::milliseconds status_timeout{1500};  // each member's Status call
    std::chrono::milliseconds reuse{1000};
    std::chrono::milliseconds list_every{15000};
    size_t backups_shown = 10;
    Clock* clock = Clock::Real();
  };
  // `client` reaches the cluster's members; `store` may be null (no backup.store); both must
  // outlive this object. `events`, if set, returns the recent events as a JSON array.
  StatusSource(const Config& config, EtcdClient* client, BackupStore* store, Options options,
               std::function<nlohmann::json()> events = nullptr);
  StatusSource(const Config& config, EtcdClient* client, BackupStore* store)
      : StatusSource(config, client, store, Options()) {}

  // The document, serialized. Takes at most about two of the client's deadlines.
  std::string Json();

 private:
  std::vector<CertExpiry> ReadCerts() const;

  const Config config_;
  EtcdClient* client_;
  BackupStore* store_;
  const Options options_;
  std::function<nlohmann::json()> events_;
  Mutex mu_;  // held while gathering: one at a time
  std::string last_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_at_ ABSL_GUARDED_BY(mu_);
  std::optional<BackupListing> listing_ ABSL_GUARDED_BY(mu_);
  std::string listing_error_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point listed_at_ ABSL_GUARDED_BY(mu_);
  std::future<absl::StatusOr<BackupListing>> pending_listing_ ABSL_GUARDED_BY(mu_);
};

}  // namespace steward
