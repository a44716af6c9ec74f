// The live status page (issue 14): GET / and /status.json on every agent's admin port of a real
// 3-node TLS cluster (127.0.57.x) need a client certificate, and the document names every
// member; `stewardctl dashboard` serves the page to a browser without one. Headless Chromium
// loads the page and the test reads the rendered DOM (--dump-dom): all three members healthy.
// Then, within one page load, node n1's agent and etcd are killed (so nothing restarts etcd)
// and the page shows n1 unhealthy without a reload, and the dashboard asks another agent.
//
// Chromium runs on virtual time (--virtual-time-budget), which stands still while a fetch is
// pending. The page's requests go through a gate in this test that holds one status.json
// request while n1 is killed: the page has polled before the kill and polls after it, in the
// same document, whatever the machine's speed.
//
// The cluster-free tests check the document's warnings and the page's self-containment.
#include "admin/status_page.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ctl/dashboard.h"
#include "harness.h"
#include "httplib.h"
#include "nlohmann/json.hpp"

namespace steward::testing {
namespace {

using namespace std::chrono_literals;

enum Subnet { kStatusPage = 57 };

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Debian's chromium package, or nothing.
std::string ChromiumBinary() {
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (::access(p, X_OK) == 0) return p;
  }
  return "";
}

// The value of `attr` in the start tag that holds `key`="`value`" ("" when there is none).
std::string AttrOf(const std::string& dom, const std::string& key, const std::string& value,
                   const std::string& attr) {
  const size_t at = dom.find(absl::StrCat(key, "=\"", value, "\""));
  if (at == std::string::npos) return "";
  const size_t open = dom.rfind('<', at), close = dom.find('>', at);
  const std::string tag = dom.substr(open, close - open);
  const std::string want = absl::StrCat(" ", attr, "=\"");
  const size_t a = tag.find(want);
  if (a == std::string::npos) return "";
  const size_t from = a + want.size();
  return tag.substr(from, tag.find('"', from) - from);
}

// Waits (bounded) for a child this test started; its exit status, or -1 if it is still running.
int WaitExit(pid_t pid, std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(100ms);
  }
  return -1;
}

void Stop(pid_t pid) {
  if (pid <= 0) return;
  kill(pid, SIGTERM);
  if (WaitExit(pid, 10s) == -1) {
    kill(pid, SIGKILL);
    WaitExit(pid, 5s);
  }
}

// Headless Chromium's arguments for one page load that dumps the DOM after `budget_ms` of
// virtual time. Its profile lives in the test's dir; stderr (D-Bus noise) goes to `err`.
std::vector<std::string> ChromiumArgs(const std::string& chromium, const std::string& profile,
                                      const std::string& err, int budget_ms,
                                      const std::string& url) {
  return {"/bin/sh",
          "-c",
          absl::StrCat("exec \"$0\" \"$@\" 2>>", err),
          chromium,
          "--headless",
          "--no-sandbox",
          "--disable-gpu",
          "--disable-dev-shm-usage",
          "--no-first-run",
          "--user-data-dir=" + profile,
          absl::StrCat("--virtual-time-budget=", budget_ms),
          "--dump-dom",
          url};
}

// Between Chromium and the dashboard: passes every request on, counts them, and holds the
// `hold_at`-th status.json request until Release().
class Gate {
 public:
  Gate(std::string host, std::string upstream_host, int upstream_port, int hold_at)
      : upstream_host_(std::move(upstream_host)), upstream_port_(upstream_port), hold_at_(hold_at) {
    server_.Get("/", [this](const httplib::Request&, httplib::Response& res) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++pages_;
      }
      Forward("/", res);
    });
    server_.Get("/status.json", [this](const httplib::Request&, httplib::Response& res) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        if (++polls_ >= hold_at_ && !released_) {
          holding_ = true;
          cv_.notify_all();
          cv_.wait_for(lock, 120s, [this] { return released_; });
        }
      }
      Forward("/status.json", res);
    });
    port_ = server_.bind_to_any_port(host);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    for (int i = 0; i < 500 && !server_.is_running(); ++i) std::this_thread::sleep_for(10ms);
  }
  ~Gate() {
    Release();
    server_.stop();
    thread_.join();
  }
  int port() const { return port_; }
  bool WaitHolding(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return holding_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  int pages() {
    std::lock_guard<std::mutex> lock(mu_);
    return pages_;
  }

 private:
  void Forward(const std::string& path, httplib::Response& res) {
    httplib::Client up(upstream_host_, upstream_port_);
    up.set_read_timeout(15, 0);
    if (auto r = up.Get(path.c_str())) {
      res.status = r->status;
      res.set_content(r->body, r->get_header_value("Content-Type").c_str());
    } else {
      res.status = 504;
    }
  }

  const std::string upstream_host_;
  const int upstream_port_;
  const int hold_at_;
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int pages_ = 0, polls_ = 0;
  bool holding_ = false, released_ = false;
};

TEST(StatusPageTest, PageShowsEveryMemberAndAKilledOneWithoutAReload) {
  TestCluster c(kStatusPage, 3, 3, kFastLeader, kFileBackup);
  for (int i = 0; i < 3; ++i) c.StartAgent(i);
  ASSERT_TRUE(c.WaitHealthy(3, 60s)) << c.Logs();

  // The admin port: the page and its document need a client certificate, like /metrics.
  for (int i = 0; i < 3; ++i) {
    RunResult anonymous = c.AdminGet(i, "/status.json", false);
    EXPECT_EQ(anonymous.exit_code, 403) << anonymous.output;
    EXPECT_EQ(c.AdminGet(i, "/", false).exit_code, 403);
  }
  RunResult page = c.AdminGet(2, "/");
  EXPECT_EQ(page.exit_code, 200);
  EXPECT_EQ(page.output, StatusPageHtml());
  // Any agent serves the whole cluster's view: every member healthy, a steward leader, the
  // first backup (taken as soon as a leader is elected) in the list. The list also shows a
  // backup still being written (its data stored, its meta.json not yet: "complete": false), so
  // wait for the first one to be complete.
  nlohmann::json doc;
  ASSERT_TRUE(WaitFor(
      [&] {
        RunResult r = c.AdminGet(1, "/status.json");
        doc = nlohmann::json::parse(r.output, nullptr, false);
        return r.exit_code == 200 && !doc.is_discarded() && doc.value("healthy", false) &&
               doc["steward"].contains("leader") && !doc["backup_list"].empty() &&
               doc["backup_list"][0].value("complete", false);
      },
      60s))
      << doc.dump(2);
  EXPECT_EQ(doc["served_by"], "n2");
  EXPECT_EQ(doc["cluster"], "it57");
  ASSERT_EQ(doc["members"].size(), 3u) << doc.dump(2);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(doc["members"][i]["name"], absl::StrCat("n", i + 1));
    EXPECT_TRUE(doc["members"][i]["healthy"].get<bool>());
  }
  EXPECT_TRUE(doc["backup_list"][0]["complete"].get<bool>()) << doc["backup_list"].dump();
  EXPECT_TRUE(doc["warnings"].empty()) << doc["warnings"].dump();

  const std::string chromium = ChromiumBinary();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (scripts/install-deps.sh --test installs Debian's "
                    "package): the page was not loaded in a browser";
  }

  // The dashboard, as an operator runs it: the agents from a node's config, the admin
  // certificate, a loopback address (port 0: any free one; it prints its URL).
  const std::string host = "127.0.57.200";
  const std::string dash_log = c.Root() + "/dashboard.log";
  pid_t dashboard =
      SpawnTo({STEWARDCTL_BIN, "dashboard", "--listen", host + ":0", "--config", c.ConfigPath(0),
               "--cacert", c.CaCert(), "--cert", c.AdminCert(), "--key", c.AdminKey()},
              dash_log);
  ASSERT_GT(dashboard, 0);
  struct StopAtEnd {
    pid_t pid;
    ~StopAtEnd() { Stop(pid); }
  } stop_dashboard{dashboard};
  int port = 0;
  ASSERT_TRUE(WaitFor(
      [&] {
        const std::string log = ReadText(dash_log);
        const std::string prefix = absl::StrCat("http://", host, ":");
        const size_t at = log.find(prefix);
        if (at == std::string::npos) return false;
        port = std::atoi(log.c_str() + at + prefix.size());
        return port > 0;
      },
      10s))
      << ReadText(dash_log);
  const std::string url = absl::StrCat("http://", host, ":", port, "/");

  // One load: all three members appear, healthy, with the leader and the backups.
  const std::string err = c.Root() + "/chromium.err";
  RunResult first =
      RunCommand(ChromiumArgs(chromium, c.Root() + "/chromium-1", err, 5000, url), 90s);
  ASSERT_EQ(first.exit_code, 0) << first.output << ReadText(err);
  const std::string& dom = first.output;
  EXPECT_NE(dom.find("id=\"members\""), std::string::npos) << dom;
  for (const char* n : {"n1", "n2", "n3"}) {
    EXPECT_EQ(AttrOf(dom, "data-member", n, "data-health"), "healthy") << n << "\n" << dom;
  }
  EXPECT_GE(std::atoi(AttrOf(dom, "id", "page", "data-polls").c_str()), 1) << dom;
  EXPECT_EQ(AttrOf(dom, "id", "page", "data-last-poll"), "ok") << dom;
  EXPECT_NE(AttrOf(dom, "id", "steward", "data-leader"), "") << dom;
  EXPECT_EQ(AttrOf(dom, "id", "steward", "data-silent"), "false") << dom;
  EXPECT_NE(dom.find("data-backup=\""), std::string::npos) << dom;
  EXPECT_NE(ReadText(dash_log).find("status from https://127.0.57.11:2391"), std::string::npos)
      << ReadText(dash_log);

  // One more load, through the gate: two polls pass, the third waits while n1's agent and then
  // its etcd are killed (nothing restarts it), and goes on once another agent's view shows n1
  // unhealthy. 30 s of virtual time leave many polls after that.
  Gate gate(host, host, port, /*hold_at=*/3);
  const std::string dump = c.Root() + "/dom-2.html";
  pid_t browser = SpawnTo(ChromiumArgs(chromium, c.Root() + "/chromium-2", err, 30000,
                                       absl::StrCat("http://", host, ":", gate.port(), "/")),
                          dump);
  ASSERT_GT(browser, 0);
  bool browser_exited = false;
  struct StopUnlessExited {
    pid_t pid;
    const bool* exited;
    ~StopUnlessExited() {
      if (!*exited) Stop(pid);
    }
  } stop_browser{browser, &browser_exited};
  ASSERT_TRUE(gate.WaitHolding(60s)) << "the page did not poll three times\n" << ReadText(err);
  c.SignalAgent(0, SIGKILL);
  c.KillEtcd(0);
  ASSERT_FALSE(c.EtcdPid(0).has_value());
  EXPECT_TRUE(WaitFor(
      [&] {
        RunResult r = c.AdminGet(1, "/status.json");
        auto j = nlohmann::json::parse(r.output, nullptr, false);
        return !j.is_discarded() && j.contains("members") && j["members"].size() == 3 &&
               !j["members"][0]["healthy"].get<bool>();
      },
      30s))
      << c.AdminGet(1, "/status.json").output;
  gate.Release();
  const int browser_status = WaitExit(browser, 90s);
  browser_exited = browser_status != -1;
  ASSERT_EQ(browser_status, 0) << ReadText(err);
  const std::string live = ReadText(dump);
  // Still the first document: a reload would have reset the poll counter and the history,
  // and asked for / again.
  EXPECT_EQ(gate.pages(), 1);
  EXPECT_GE(std::atoi(AttrOf(live, "id", "page", "data-polls").c_str()), 3) << live;
  EXPECT_EQ(AttrOf(live, "data-member", "n1", "data-health"), "unhealthy") << live;
  EXPECT_EQ(AttrOf(live, "data-member", "n1", "data-role"), "unreachable") << live;
  EXPECT_EQ(AttrOf(live, "data-member", "n1", "data-history"), "healthy unhealthy") << live;
  EXPECT_EQ(AttrOf(live, "data-member", "n2", "data-health"), "healthy") << live;
  EXPECT_EQ(AttrOf(live, "data-member", "n3", "data-health"), "healthy") << live;
  EXPECT_EQ(AttrOf(live, "id", "overall", "data-state"), "degraded") << live;
  EXPECT_NE(live.find("data-kind=\"member\""), std::string::npos) << live;
  // n1's agent is gone: the dashboard asked the next one.
  EXPECT_NE(ReadText(dash_log).find("status from https://127.0.57.12:2391"), std::string::npos)
      << ReadText(dash_log);
}

// --- without a cluster ---

MemberRow Member(const std::string& name, uint64_t id, bool healthy) {
  MemberRow r;
  r.member.name = name;
  r.member.id = id;
  r.member.peer_urls = {absl::StrCat("https://", name, ":2380")};
  r.role = healthy ? "follower" : "unreachable";
  r.healthy = healthy;
  if (!healthy) r.error = "connection refused";
  return r;
}

std::vector<std::string> Kinds(const nlohmann::json& doc) {
  std::vector<std::string> out;
  for (const auto& w : doc["warnings"]) out.push_back(w["kind"]);
  return out;
}

TEST(StatusPageDocumentTest, WarnsOfQuorumAtRiskExpiringCertificatesAndFailingBackups) {
  StatusInputs in;
  in.cluster = "c";
  in.served_by = "n2";
  in.configured_size = 3;
  in.backup_store = "file:///b";
  in.now = 1'000'000;
  in.view.reachable = true;
  in.view.members = {Member("n1", 1, false), Member("n2", 2, true), Member("n3", 3, true)};
  in.view.voters = 3;
  in.view.healthy_voters = 2;
  in.view.quorum = true;
  in.view.non_members = {{"n4", "https://n4:2380"}};
  in.steward = {{"leader", "n2"},
                {"backups",
                 {{"store", "file:///b"},
                  {"last_success", "x"},
                  {"last_success_at", in.now - 3600},
                  {"last_error", "store unreachable"},
                  {"last_error_at", in.now - 60}}}};
  in.certs = {{"agent", in.now + 5 * 86400}, {"ca", in.now + 3650 * 86400}};
  in.backups =
      BackupListing{{{"20260101T000000Z-00000000000000000042", in.now - 3600, 42, 1234, true}}, 7};
  nlohmann::json doc = BuildStatusDocument(in);
  EXPECT_EQ(Kinds(doc), (std::vector<std::string>{"quorum", "member", "certificate", "backup"}))
      << doc["warnings"].dump(2);
  EXPECT_EQ(doc["warnings"][0]["text"],
            "quorum at risk: 2 of 3 voting members healthy; one more failure loses quorum");
  EXPECT_EQ(doc["warnings"][1]["text"], "n1 is unreachable: connection refused");
  EXPECT_EQ(doc["warnings"][2]["text"], "n2's agent certificate expires in 5d");
  EXPECT_EQ(doc["warnings"][3]["text"], "the last backup failed 60s ago: store unreachable");
  EXPECT_EQ(doc["non_members"][0]["why"],
            "spare: the cluster has its 3 voting members; a spare replaces a member that is lost");
  EXPECT_EQ(doc["backup_total"], 7);
  EXPECT_EQ(doc["backup_list"][0]["revision"], 42);
  EXPECT_EQ(doc["desired_size"], 3);
  EXPECT_FALSE(doc.contains("events")) << "no source of events given";

  // A larger stored size: the node waits to be added; a backup that succeeded after the last
  // failure is no warning; events pass through.
  in.steward["spec"] = {{"size", 5}};
  in.steward["backups"]["last_success_at"] = in.now - 10;
  in.events = nlohmann::json::array({{{"at", in.now}, {"node", "n2"}, {"action", "x"}}});
  doc = BuildStatusDocument(in);
  EXPECT_EQ(doc["non_members"][0]["why"],
            "not a member yet: the cluster has 3 of 5 voting members, and the leader adds one node "
            "at a time");
  EXPECT_EQ(Kinds(doc), (std::vector<std::string>{"quorum", "member", "size", "certificate"}));
  EXPECT_EQ(doc["events"].size(), 1u);
}

// Issue 38: the page showed the leader's last backup, 2 minutes old, beside a newer one in the
// store (a full backup the delta writer took, or one a new leader had not reported yet).
TEST(StatusPageDocumentTest, TheNewestBackupIsTheStoresWhenTheLeadersReportLags) {
  StatusInputs in;
  in.cluster = "c";
  in.served_by = "n1";
  in.configured_size = 1;
  in.backup_store = "file:///b";
  in.now = 2'000'000;
  in.steward = {{"leader", "n1"},
                {"backups",
                 {{"last_success", "old"},
                  {"last_success_at", in.now - 120},
                  {"last_error", "store unreachable"},
                  {"last_error_at", in.now - 60}}}};
  in.backups = BackupListing{{{"incomplete", in.now - 5, 9, 1, false},
                              {"new", in.now - 10, 8, 1, true},
                              {"old", in.now - 120, 7, 1, true}},
                             3};
  nlohmann::json doc = BuildStatusDocument(in);
  ASSERT_TRUE(doc.contains("backup_newest")) << doc.dump(2);
  EXPECT_EQ(doc["backup_newest"]["name"], "new") << "an incomplete backup is not one";
  EXPECT_EQ(doc["backup_newest"]["at"], in.now - 10);
  EXPECT_EQ(doc["backup_newest"]["source"], "store");
  const std::vector<std::string> kinds = Kinds(doc);
  EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "backup"), 0)
      << "a backup newer than the failure: " << doc["warnings"].dump();

  // The leader's report is newer than the listing (listed a while ago): it wins.
  in.steward["backups"]["last_success"] = "newer";
  in.steward["backups"]["last_success_at"] = in.now - 1;
  doc = BuildStatusDocument(in);
  EXPECT_EQ(doc["backup_newest"]["name"], "newer");
  EXPECT_EQ(doc["backup_newest"]["source"], "leader");
  // Neither: no field, and the page says none.
  in.steward.erase("backups");
  in.backups.reset();
  doc = BuildStatusDocument(in);
  EXPECT_FALSE(doc.contains("backup_newest"));
}

TEST(StatusPageDocumentTest, WarnsOfQuorumLossNoLeaderNoStoreAndTlsOff) {
  StatusInputs in;
  in.served_by = "n1";
  in.configured_size = 3;
  in.tls = false;
  in.view.reachable = true;
  in.view.members = {Member("n1", 1, true), Member("n2", 2, false), Member("n3", 3, false)};
  in.view.voters = 3;
  in.view.healthy_voters = 1;
  in.view.alarms = {"NOSPACE on n1"};
  nlohmann::json doc = BuildStatusDocument(in);
  EXPECT_EQ(Kinds(doc), (std::vector<std::string>{"quorum", "alarm", "member", "member", "tls",
                                                  "leader", "backup"}))
      << doc["warnings"].dump(2);
  EXPECT_EQ(doc["warnings"][0]["text"],
            "QUORUM LOST: 1 of 3 voting members healthy. Agents keep restarting members that "
            "have data; nothing is wiped.");
}

TEST(StatusPageDocumentTest, PageIsSelfContained) {
  const std::string& html = StatusPageHtml();
  for (const char* outside : {"http://", "https://", "src=", "href=", "@import", "url("}) {
    EXPECT_EQ(html.find(outside), std::string::npos) << outside;
  }
  EXPECT_NE(html.find("fetch(\"status.json\""), std::string::npos);
  EXPECT_NE(html.find("name=\"viewport\""), std::string::npos) << "readable on a phone";
}

// A clock the test moves.
class ManualClock : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() override { return steady_; }
  std::chrono::system_clock::time_point WallNow() override { return wall_; }
  void SleepFor(std::chrono::milliseconds d) override { Advance(d); }
  void Advance(std::chrono::milliseconds d) {
    steady_ += d;
    wall_ += d;
  }

 private:
  std::chrono::steady_clock::time_point steady_ = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall_ = std::chrono::system_clock::now();
};

// A store whose listing fails (an object store that is down), counting the attempts.
class DownStore : public BackupStore {
 public:
  std::string Describe() const override { return "s3://down"; }
  absl::StatusOr<std::unique_ptr<ObjectWriter>> Create(const std::string&) override {
    return absl::UnavailableError("down");
  }
  absl::Status Put(const std::string&, const std::string&) override {
    return absl::UnavailableError("down");
  }
  absl::StatusOr<std::string> Get(const std::string&) override {
    return absl::UnavailableError("down");
  }
  absl::Status Read(const std::string&,
                    const std::function<absl::Status(std::string_view)>&) override {
    return absl::UnavailableError("down");
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string&) override {
    ++lists;
    return absl::UnavailableError("connection refused");
  }
  absl::Status Delete(const std::string&) override { return absl::UnavailableError("down"); }
  std::atomic<int> lists{0};
};

TEST(StatusPageDocumentTest, AFailingStoreIsListedNoMoreOftenThanAWorkingOne) {
  Config config;
  config.cluster.name = "c";
  config.node.name = "n1";
  config.tls.mode = "off";
  // Nothing listens there: etcd's answers fail at once.
  EtcdClient::Options co;
  co.timeout = 500ms;
  EtcdClient etcd({"http://127.0.0.1:1"}, co);
  DownStore store;
  ManualClock clock;
  StatusSource::Options o;
  o.clock = &clock;
  StatusSource source(config, &etcd, &store, o);
  auto doc = nlohmann::json::parse(source.Json());
  EXPECT_EQ(store.lists, 1);
  EXPECT_EQ(doc["backup_list_error"], "listing backups: connection refused") << doc.dump(2);
  // The page asks every 2 s; the store is asked again only after list_every (15 s).
  for (int i = 0; i < 5; ++i) {
    clock.Advance(2s);
    doc = nlohmann::json::parse(source.Json());
  }
  EXPECT_EQ(store.lists, 1);
  EXPECT_EQ(doc["backup_list_error"], "listing backups: connection refused");
  clock.Advance(6s);
  source.Json();
  EXPECT_EQ(store.lists, 2);
}

TEST(StatusPageDashboardTest, ParsesAgentUrls) {
  auto a = ParseAgentUrl("https://10.0.0.1:2391/");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->scheme, "https");
  EXPECT_EQ(a->host, "10.0.0.1");
  EXPECT_EQ(a->port, 2391);
  auto v6 = ParseAgentUrl("http://[::1]:8080");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->ToString(), "http://[::1]:8080");
  for (const char* bad : {"10.0.0.1:2391", "ftp://h:1", "https://h", "https://h:x", "https://:1",
                          "https://h:70000"}) {
    EXPECT_FALSE(ParseAgentUrl(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace steward::testing
