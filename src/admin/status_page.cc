#include "admin/status_page.h"

#include <algorithm>
#include <future>
#include <map>

#include "absl/strings/str_cat.h"
#include "backup/layout.h"
#include "common/status.h"
#include "pki/pki.h"

namespace steward {

namespace {

// "45s", "12m", "3h", "2d": ages in warnings.
std::string Age(int64_t seconds) {
  seconds = std::max<int64_t>(seconds, 0);
  if (seconds < 90) return absl::StrCat(seconds, "s");
  if (seconds < 90 * 60) return absl::StrCat((seconds + 30) / 60, "m");
  if (seconds < 48 * 3600) return absl::StrCat((seconds + 1800) / 3600, "h");
  return absl::StrCat((seconds + 43200) / 86400, "d");
}

int64_t IntField(const nlohmann::json& j, const char* name, int64_t fallback) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_number_integer()) return fallback;
  return j[name].get<int64_t>();
}

std::string StringField(const nlohmann::json& j, const char* name) {
  if (!j.is_object() || !j.contains(name) || !j[name].is_string()) return "";
  return j[name].get<std::string>();
}

nlohmann::json Warning(const char* kind, std::string text) {
  return {{"kind", kind}, {"text", std::move(text)}};
}

// The newest complete backup known: the leader's report (steward.backups) or the store's
// listing, whichever is newer. The report alone lags: a full backup the delta writer takes, or
// one taken before a new leader's first, is in the store before any report names it.
struct Newest {
  std::string name;
  int64_t at = 0;
  const char* source = "";
};
std::optional<Newest> NewestBackup(const StatusInputs& in) {
  std::optional<Newest> out;
  if (in.steward.contains("backups")) {
    const nlohmann::json& b = in.steward["backups"];
    if (std::string name = StringField(b, "last_success"); !name.empty()) {
      out = Newest{name, IntField(b, "last_success_at", 0), "leader"};
    }
  }
  if (in.backups) {
    for (const auto& e : in.backups->newest) {
      if (!e.complete) continue;
      if (!out || e.unix_time > out->at) out = Newest{e.name, e.unix_time, "store"};
      break;  // newest first
    }
  }
  return out;
}

nlohmann::json Warnings(const StatusInputs& in, int desired) {
  const ClusterView& v = in.view;
  nlohmann::json w = nlohmann::json::array();
  if (!v.reachable) {
    w.push_back(Warning("cluster", absl::StrCat("no member answers: ", v.error)));
  } else if (!v.quorum) {
    w.push_back(Warning("quorum", absl::StrCat("QUORUM LOST: ", v.healthy_voters, " of ", v.voters,
                                               " voting members healthy. Agents keep restarting "
                                               "members that have data; nothing is wiped.")));
  } else if (v.healthy_voters < v.voters && v.healthy_voters <= v.voters / 2 + 1) {
    // The StewardQuorumAtRisk alert's rule.
    w.push_back(
        Warning("quorum", absl::StrCat("quorum at risk: ", v.healthy_voters, " of ", v.voters,
                                       " voting members healthy; one more "
                                       "failure loses quorum")));
  }
  for (const auto& a : v.alarms) {
    w.push_back(Warning("alarm", absl::StrCat("ALARM ", a,
                                              a.rfind("NOSPACE", 0) == 0
                                                  ? ": writes are refused until the space is freed "
                                                    "(compact, defragment) and the alarm is "
                                                    "disarmed"
                                                  : "")));
  }
  for (const auto& r : v.members) {
    if (r.healthy) continue;
    const std::string name = r.member.name.empty() ? HexId(r.member.id) : r.member.name;
    w.push_back(
        Warning("member",
                absl::StrCat(name, " is ", r.role == "unreachable" ? "unreachable" : "not healthy",
                             r.error.empty() ? "" : ": ", r.error)));
  }
  if (v.reachable && v.voters < desired) {
    w.push_back(Warning("size", absl::StrCat("the cluster has ", v.voters, " of ", desired,
                                             " desired voting members")));
  }
  if (!in.tls) {
    w.push_back(Warning("tls",
                        "TLS is off (tls.mode: off): etcd and the agents accept anyone who "
                        "can reach them"));
  }
  for (const auto& c : in.certs) {
    const int64_t left = c.not_after - in.now;
    if (left >= kCertWarnSeconds) continue;
    w.push_back(Warning(
        "certificate",
        left <= 0
            ? absl::StrCat(in.served_by, "'s ", c.role, " certificate has expired")
            : absl::StrCat(in.served_by, "'s ", c.role, " certificate expires in ", Age(left))));
  }
  if (v.reachable && !in.steward.contains("leader")) {
    w.push_back(Warning("leader", "no steward leader: nothing heals or backs up the cluster"));
  }
  if (in.backup_store.empty()) {
    w.push_back(Warning("backup", "no backup.store: this cluster is not backed up"));
  }
  if (in.steward.contains("backups")) {
    const nlohmann::json& b = in.steward["backups"];
    const std::string error = StringField(b, "last_error");
    const int64_t failed_at = IntField(b, "last_error_at", 0);
    const std::optional<Newest> newest = NewestBackup(in);
    if (!error.empty() && failed_at >= (newest ? newest->at : 0)) {
      w.push_back(Warning("backup", absl::StrCat("the last backup failed ", Age(in.now - failed_at),
                                                 " ago: ", error)));
    }
  }
  if (!in.backups_error.empty()) {
    w.push_back(
        Warning("backup", absl::StrCat("cannot list the backup store: ", in.backups_error)));
  }
  return w;
}

// The page (docs/monitoring.md, "Status page"). Self-contained: inline CSS and JS, no fonts,
// images or scripts from anywhere else (kStatusPageCsp enforces it).
constexpr char kPage[] = R"page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>etcd-steward</title>
<style>
:root { color-scheme: light dark; --bg: #f5f6f8; --card: #fff; --fg: #1c2127; --muted: #5d6873;
  --line: #dce1e6; --ok: #17803a; --bad: #c62828; --warn: #946200; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #101316; --card: #1a1e23; --fg: #e5e8eb; --muted: #97a2ad; --line: #2c323a;
    --ok: #3fb950; --bad: #f85149; --warn: #d29922; }
}
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  background: var(--bg); color: var(--fg); }
header { position: sticky; top: 0; z-index: 1; background: var(--card);
  border-bottom: 1px solid var(--line); padding: .55rem 1rem; display: flex; flex-wrap: wrap;
  gap: .25rem .9rem; align-items: baseline; }
h1 { font-size: 1.1rem; margin: 0; }
main { max-width: 1100px; margin: 0 auto; padding: .75rem; display: grid; gap: .75rem; }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: .55rem .8rem; min-width: 0; }
h2 { font-size: .78rem; text-transform: uppercase; letter-spacing: .05em; color: var(--muted);
  margin: .15rem 0 .45rem; }
.badge { display: inline-block; padding: 0 .5rem; border-radius: 999px; font-size: .8rem;
  font-weight: 600; border: 1px solid currentColor; white-space: nowrap; }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.muted { color: var(--muted); } .small { font-size: .8rem; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line);
  white-space: nowrap; vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: .72rem; text-transform: uppercase; }
td.wrap { white-space: normal; min-width: 12rem; overflow-wrap: anywhere; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
#conn { display: none; background: var(--bad); color: #fff; padding: .5rem 1rem; }
body[data-last-poll="failed"] #conn { display: block; }
body[data-last-poll="failed"] main { opacity: .55; }
ul { margin: 0; padding-left: 1.1rem; } li { margin: .15rem 0; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .2rem .8rem; margin: 0 0 .4rem; }
dt { color: var(--muted); } dd { margin: 0; min-width: 0; overflow-wrap: anywhere; }
@media (max-width: 640px) {
  body { font-size: 14px; } main { padding: .4rem; gap: .5rem; }
  header { padding: .5rem .6rem; }
  /* Narrow screens: each row becomes a card of "label value" lines. */
  table.cards thead { display: none; }
  table.cards tr { display: block; border-bottom: 1px solid var(--line); padding: .3rem 0; }
  table.cards td { display: flex; gap: .6rem; border: 0; padding: .05rem .2rem;
    white-space: normal; min-width: 0; overflow-wrap: anywhere; text-align: left; }
  table.cards td::before { content: attr(data-label); color: var(--muted); flex: 0 0 6.5rem;
    font-size: .8rem; }
  table.cards td:empty { display: none; }
}
</style>
</head>
<body id="page" data-polls="0" data-failures="0" data-last-poll="none">
<header>
  <h1 id="title">etcd-steward</h1>
  <span id="overall" class="badge muted" data-state="unknown">loading</span>
  <span id="meta" class="muted small">loading status.json</span>
</header>
<div id="conn" role="alert"></div>
<main>
  <section id="warnings-panel">
    <h2>Warnings</h2>
    <ul id="warnings"><li class="muted" data-kind="none">none yet</li></ul>
  </section>
  <section id="members-panel">
    <h2>Members</h2>
    <div class="scroll"><table id="members" class="cards">
      <thead><tr><th>Name</th><th>Role</th><th>Health</th><th>Raft index</th><th>DB size</th>
        <th>Version</th><th>Notes</th></tr></thead>
      <tbody></tbody>
    </table></div>
    <div id="non-members-panel" hidden>
      <h2 style="margin-top:.8rem">Nodes that are not members</h2>
      <div class="scroll"><table id="non-members" class="cards">
        <thead><tr><th>Node</th><th>Peer URL</th><th>Why</th></tr></thead>
        <tbody></tbody>
      </table></div>
    </div>
  </section>
  <section id="steward" data-leader="" data-step="" data-silent="true">
    <h2>Steward leader</h2>
    <dl id="steward-facts"></dl>
  </section>
  <section id="backups-panel">
    <h2>Backups</h2>
    <dl id="backup-facts"></dl>
    <div class="scroll"><table id="backups" class="cards">
      <thead><tr><th>Taken</th><th>Name</th><th>Revision</th><th>Size</th><th></th></tr></thead>
      <tbody></tbody>
    </table></div>
  </section>
  <section id="events-panel" hidden>
    <h2>Recent events</h2>
    <div class="scroll"><table id="events" class="cards">
      <thead><tr><th>When</th><th>Node</th><th>Action</th><th>Reason</th><th>Term</th></tr></thead>
      <tbody></tbody>
    </table></div>
  </section>
</main>
<noscript><p>This page needs JavaScript: it loads status.json every 2 seconds.</p></noscript>
<script>
"use strict";
// Polls status.json (the same origin) and redraws. Everything from the document is set as
// text, never as HTML. Stable ids and data attributes let tests and scripts read the DOM.
const POLL_MS = 2000;      // between the end of one poll and the next
const TIMEOUT_MS = 10000;  // a poll that takes longer counts as failed
const HISTORY = 10;        // health changes remembered per member
const $ = (id) => document.getElementById(id);
let polls = 0, failures = 0, lastOk = null;
const seen = new Map();    // member name -> [{state, since}], oldest first

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = String(v); else e.setAttribute(k, String(v));
  }
  for (const k of kids) if (k !== undefined && k !== null) e.append(k);
  return e;
}
function bytes(n) {
  if (typeof n !== "number") return "-";
  const units = ["B", "kB", "MB", "GB", "TB"];
  let v = n, u = 0;
  while (v >= 1000 && u < 4) { v /= 1000; u++; }
  return u === 0 ? n + " B" : v.toFixed(1) + " " + units[u];
}
function age(s) {
  if (typeof s !== "number" || isNaN(s)) return "?";
  s = Math.max(0, Math.round(s));
  if (s < 90) return s + "s";
  if (s < 5400) return Math.round(s / 60) + "m";
  if (s < 172800) return Math.round(s / 3600) + "h";
  return Math.round(s / 86400) + "d";
}
function when(unix) { return typeof unix === "number" && unix > 0 ? new Date(unix * 1000).toLocaleString() : "-"; }
// Each cell gets its column's name, shown before it where rows turn into cards (phones).
function label(table) {
  const names = [...table.tHead.rows[0].cells].map((c) => c.textContent);
  for (const tr of table.tBodies[0].rows) {
    if (tr.cells.length !== names.length) continue;
    [...tr.cells].forEach((td, i) => { if (names[i]) td.dataset.label = names[i]; });
  }
}
function fact(dl, name, value, attrs) {
  dl.append(el("dt", {text: name}), el("dd", attrs || {}, value));
}

function renderHeader(d) {
  const name = d.cluster || "etcd-steward";
  $("title").textContent = "etcd-steward: " + name;
  let state = "healthy", label = "healthy", cls = "ok";
  if (!d.reachable) { state = "unreachable"; label = "cluster unreachable"; cls = "bad"; }
  else if (!d.quorum) { state = "quorum-lost"; label = "QUORUM LOST"; cls = "bad"; }
  else if (!d.healthy) { state = "degraded"; label = "degraded"; cls = "warn"; }
  const o = $("overall");
  o.textContent = label; o.className = "badge " + cls; o.dataset.state = state;
  document.title = name + ": " + label;
  $("meta").textContent = (d.voters !== undefined ? d.healthy_voters + "/" + d.voters + " voters healthy · " : "") +
      "via " + (d.served_by || "?") + " · " + new Date().toLocaleTimeString() + " · poll " + polls;
}

function renderWarnings(d) {
  const items = (Array.isArray(d.warnings) ? d.warnings : []).map((w) =>
      el("li", {"data-kind": w.kind, class: w.kind === "size" || w.kind === "certificate" ? "warn" : "bad",
                text: w.text}));
  if (items.length === 0) items.push(el("li", {"data-kind": "none", class: "ok", text: "none"}));
  $("warnings").replaceChildren(...items);
}

function renderMembers(d) {
  const rows = [];
  const names = new Set();
  for (const m of Array.isArray(d.members) ? d.members : []) {
    const name = m.name || "(unstarted " + m.id + ")";
    names.add(name);
    const state = m.healthy ? "healthy" : "unhealthy";
    const h = seen.get(name) || [];
    if (h.length === 0 || h[h.length - 1].state !== state) h.push({state, since: d.at});
    while (h.length > HISTORY) h.shift();
    seen.set(name, h);
    const since = h.length > 1 ? " for " + age(d.at - h[h.length - 1].since) : "";
    const notes = [];
    for (const a of m.alarms || []) notes.push("ALARM " + a);
    if (m.error) notes.push(m.error);
    rows.push(el("tr", {"data-member": name, "data-role": m.role, "data-health": state,
                        "data-history": h.map((x) => x.state).join(" ")},
        el("td", {}, el("strong", {text: name}), " ", el("span", {class: "muted small", text: m.id})),
        el("td", {class: m.role === "leader" ? "" : "muted", text: m.role}),
        el("td", {}, el("span", {class: "badge " + (m.healthy ? "ok" : "bad"), text: state}),
           el("span", {class: "muted small", text: since})),
        el("td", {class: "num", text: m.raft_index !== undefined ? m.raft_index : "-"}),
        el("td", {class: "num", text: bytes(m.db_size)}),
        el("td", {text: m.version || "-"}),
        el("td", {class: "wrap" + (notes.length ? " bad" : ""), text: notes.join("; ")})));
  }
  for (const name of [...seen.keys()]) if (!names.has(name)) seen.delete(name);
  if (rows.length === 0) {
    rows.push(el("tr", {"data-member": ""}, el("td", {colspan: 7, class: "bad",
        text: d.reachable ? "no members" : "no member answers" + (d.error ? ": " + d.error : "")})));
  }
  $("members").tBodies[0].replaceChildren(...rows);
  label($("members"));
  const others = Array.isArray(d.non_members) ? d.non_members : [];
  $("non-members-panel").hidden = others.length === 0;
  $("non-members").tBodies[0].replaceChildren(...others.map((n) =>
      el("tr", {"data-node": n.name},
         el("td", {}, el("strong", {text: n.name})), el("td", {class: "muted", text: n.peer_url}),
         el("td", {class: "wrap", text: n.why || ""}))));
  label($("non-members"));
}

function renderSteward(d) {
  const s = d.steward || {}, r = s.reconciler;
  const box = $("steward"), dl = $("steward-facts");
  dl.replaceChildren();
  // The leader rewrites an unchanged report every `refresh` seconds: three missed rewrites
  // mean it is stuck or gone, not idle.
  const stale = r && r.refresh > 0 && d.at - r.at > 3 * r.refresh;
  const silent = !s.leader ? "no agent holds the leader lease: nothing heals or backs up the cluster"
                : !r ? "the leader has not reported a step yet"
                : stale ? "no report for " + age(d.at - r.at) + " (rewritten every " + r.refresh + " s)" : "";
  box.dataset.leader = s.leader || "";
  box.dataset.step = r && r.step ? r.step : "";
  box.dataset.silent = silent ? "true" : "false";
  fact(dl, "Leader", s.leader ? el("strong", {text: s.leader}) : el("span", {class: "bad", text: "none"}));
  if (r) {
    fact(dl, "Doing", el("span", {}, el("span", {class: "badge muted", text: r.step || "?"}), " ", r.detail || ""),
         {id: "steward-detail"});
    // Published when the decision changes, and rewritten every `refresh` seconds.
    fact(dl, "Reported", age(d.at - r.at) + " (reported by " + (r.leader || "?") +
         (r.term !== undefined ? ", term " + r.term : "") + ")");
  }
  if (silent) fact(dl, "Reconciler", el("span", {class: "bad", text: "silent: " + silent}));
  fact(dl, "Voters", (d.voters !== undefined ? d.voters : "?") + " of " + d.desired_size + " desired");
}

function renderBackups(d) {
  const b = (d.steward || {}).backups || {};
  const dl = $("backup-facts");
  dl.replaceChildren();
  fact(dl, "Store", d.backup_store ? d.backup_store : el("span", {class: "bad", text: "none configured"}));
  // The leader's report or the store's listing, whichever is newer (backup_newest).
  const n = d.backup_newest;
  fact(dl, "Newest", n
      ? n.name + " (" + age(d.at - n.at) + " ago" + (n.source === "store" ? ", in the store" : "") + ")"
      : el("span", {class: "muted", text: "none reported"}), {id: "backup-last"});
  if (b.last_error) {
    const failing = (b.last_error_at || 0) >= (n ? n.at : 0);
    fact(dl, "Last failure", el("span", {class: failing ? "bad" : "muted",
        text: age(d.at - b.last_error_at) + " ago: " + b.last_error}), {id: "backup-failure"});
  }
  if (d.backup_list_error) fact(dl, "Listing", el("span", {class: "bad", text: d.backup_list_error}));
  if (typeof d.backup_total === "number") fact(dl, "In the store", d.backup_total + " backup(s)");
  const list = Array.isArray(d.backup_list) ? d.backup_list : [];
  $("backups").tBodies[0].replaceChildren(...list.map((x) =>
      el("tr", {"data-backup": x.name, "data-complete": x.complete ? "true" : "false"},
         el("td", {text: when(x.at)}), el("td", {class: "muted small", text: x.name}),
         el("td", {class: "num", text: x.revision}), el("td", {class: "num", text: bytes(x.size)}),
         el("td", {class: x.complete ? "muted" : "bad", text: x.complete ? "" : "incomplete"}))));
  label($("backups"));
}

function renderEvents(d) {
  const panel = $("events-panel");
  if (!Array.isArray(d.events)) { panel.hidden = true; return; }
  panel.hidden = false;
  const list = d.events.slice().sort((a, b) => (b.at || 0) - (a.at || 0)).slice(0, 50);
  const rows = list.map((e, i) => el("tr", {"data-event": i, "data-action": e.action},
      el("td", {}, when(e.at), " ", el("span", {class: "muted small", text: age(d.at - e.at) + " ago"})),
      el("td", {text: e.node || ""}), el("td", {}, el("strong", {text: e.action || ""})),
      el("td", {class: "wrap", text: e.reason || ""}), el("td", {class: "num", text: e.term !== undefined ? e.term : ""})));
  if (rows.length === 0) rows.push(el("tr", {}, el("td", {colspan: 5, class: "muted", text: "no events"})));
  $("events").tBodies[0].replaceChildren(...rows);
  label($("events"));
}

function render(d) {
  renderHeader(d); renderWarnings(d); renderMembers(d); renderSteward(d); renderBackups(d); renderEvents(d);
}

async function poll() {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), TIMEOUT_MS);
  try {
    const r = await fetch("status.json", {cache: "no-store", signal: abort.signal,
                                          headers: {"Accept": "application/json"}});
    const text = await r.text();
    let d = null;
    try { d = JSON.parse(text); } catch (e) { /* reported below */ }
    if (!r.ok || !d || typeof d !== "object") {
      throw new Error("HTTP " + r.status + ": " + (d && d.error ? d.error : text.trim().slice(0, 300)));
    }
    polls++;
    lastOk = new Date();
    document.body.dataset.lastPoll = "ok";
    render(d);
  } catch (e) {
    failures++;
    document.body.dataset.lastPoll = "failed";
    const o = $("overall");
    o.textContent = "no answer"; o.className = "badge bad"; o.dataset.state = "no-answer";
    $("conn").textContent = "Cannot load status.json: " +
        (e.name === "AbortError" ? "no answer within " + TIMEOUT_MS / 1000 + "s" : e.message) + ". " +
        (lastOk ? "The page shows the state as of " + lastOk.toLocaleTimeString() + "." : "Nothing loaded yet.") +
        " Retrying every " + POLL_MS / 1000 + "s.";
  } finally {
    clearTimeout(timer);
    document.body.dataset.polls = polls;
    document.body.dataset.failures = failures;
    setTimeout(poll, POLL_MS);
  }
}
poll();
</script>
</body>
</html>
)page";

}  // namespace

const std::string& StatusPageHtml() {
  static const std::string* page = new std::string(kPage);
  return *page;
}

absl::StatusOr<BackupListing> RecentBackups(BackupStore& store, const std::string& cluster,
                                            size_t limit) {
  auto objects = store.List(BackupsPrefix(cluster));
  if (!objects.ok()) return Annotate(objects.status(), "listing backups");
  struct Seen {
    uint64_t size = 0;
    bool snapshot = false, meta = false;
  };
  std::map<std::string, Seen> seen;  // by name: oldest first
  const std::string prefix = BackupsPrefix(cluster);
  for (const auto& o : *objects) {
    if (o.key.size() <= prefix.size()) continue;
    const std::string rest = o.key.substr(prefix.size());
    const size_t slash = rest.find('/');
    if (slash == std::string::npos) continue;
    const std::string name = rest.substr(0, slash), file = rest.substr(slash + 1);
    if (!ParseBackupName(name)) continue;
    if (file == "snapshot.db.zst") {
      seen[name].snapshot = true;
      seen[name].size = o.size;
    } else if (file == "meta.json") {
      seen[name].meta = true;
    }
  }
  BackupListing out;
  out.total = static_cast<int>(seen.size());
  for (auto it = seen.rbegin(); it != seen.rend() && out.newest.size() < limit; ++it) {
    const auto parsed = ParseBackupName(it->first);
    BackupEntry e;
    e.name = it->first;
    e.unix_time = parsed->first;
    e.revision = parsed->second;
    e.size = it->second.size;
    e.complete = it->second.snapshot && it->second.meta;
    out.newest.push_back(std::move(e));
  }
  return out;
}

nlohmann::json BuildStatusDocument(const StatusInputs& in) {
  nlohmann::json j = StatusToJson(in.view);
  j["steward"] = in.steward;
  j["cluster"] = in.cluster;
  j["served_by"] = in.served_by;
  j["at"] = in.now;
  j["tls"] = in.tls;
  int desired = in.configured_size;
  if (in.steward.contains("spec")) {
    desired = static_cast<int>(IntField(in.steward["spec"], "size", desired));
  }
  j["desired_size"] = desired;
  for (auto& n : j["non_members"]) {
    n["why"] =
        in.view.voters < desired
            ? absl::StrCat("not a member yet: the cluster has ", in.view.voters, " of ", desired,
                           " voting members, and the leader adds one node at a "
                           "time")
            : absl::StrCat("spare: the cluster has its ", desired,
                           " voting members; a spare replaces a member that is lost");
  }
  j["backup_store"] = in.backup_store;
  j["backup_list"] = nlohmann::json::array();
  if (in.backups) {
    for (const auto& b : in.backups->newest) {
      j["backup_list"].push_back({{"name", b.name},
                                  {"at", b.unix_time},
                                  {"revision", b.revision},
                                  {"size", b.size},
                                  {"complete", b.complete}});
    }
    j["backup_total"] = in.backups->total;
  }
  if (!in.backups_error.empty()) j["backup_list_error"] = in.backups_error;
  if (std::optional<Newest> n = NewestBackup(in)) {
    j["backup_newest"] = {{"name", n->name}, {"at", n->at}, {"source", n->source}};
  }
  j["warnings"] = Warnings(in, desired);
  if (in.events) j["events"] = *in.events;
  return j;
}

StatusSource::StatusSource(const Config& config, EtcdClient* client, BackupStore* store,
                           Options options, std::function<nlohmann::json()> events)
    : config_(config),
      client_(client),
      store_(store),
      options_(options),
      events_(std::move(events)) {}

std::vector<CertExpiry> StatusSource::ReadCerts() const { return NodeCertExpiries(config_); }

std::string StatusSource::Json() {
  MutexLock lock(&mu_);
  const auto now = options_.clock->Now();
  if (!last_.empty() && now - last_at_ < options_.reuse) return last_;
  StatusInputs in;
  in.cluster = config_.cluster.name;
  in.served_by = config_.node.name;
  in.tls = config_.tls.enabled();
  in.configured_size = config_.cluster.size;
  // Side by side: the steward's keys, the store's listing (when due) and the members.
  auto steward =
      std::async(std::launch::async, [this] { return ReadStewardState(*client_, config_); });
  // A store that fails is asked no more often than one that answers.
  if (store_ != nullptr && !pending_listing_.valid() &&
      (listed_at_ == std::chrono::steady_clock::time_point() ||
       now - listed_at_ >= options_.list_every)) {
    listed_at_ = now;
    pending_listing_ = std::async(std::launch::async, [this] {
      return RecentBackups(*store_, config_.cluster.name, options_.backups_shown);
    });
  }
  std::vector<NodeRow> nodes;
  for (const auto& n : config_.cluster.nodes) nodes.push_back({n.name, config_.PeerUrl(n)});
  in.view = CollectStatus(*client_, options_.status_timeout, nodes);
  in.steward = steward.get();
  if (pending_listing_.valid() &&
      pending_listing_.wait_for(options_.status_timeout) == std::future_status::ready) {
    auto got = pending_listing_.get();
    if (got.ok()) {
      listing_ = std::move(*got);
      listing_error_.clear();
    } else {
      // The last good listing stays on the page, with the error beside it.
      listing_error_ = Msg(got.status());
    }
  }
  if (store_ != nullptr) in.backup_store = store_->Describe();
  in.backups = listing_;
  in.backups_error = listing_error_;
  in.certs = ReadCerts();
  if (events_) in.events = events_();
  in.now = options_.clock->UnixSeconds();
  last_ = BuildStatusDocument(in).dump();
  last_at_ = options_.clock->Now();
  return last_;
}

}  // namespace steward
