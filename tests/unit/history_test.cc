// ReadHistory: the events of several nodes, in time order.
#include "control/history.h"

#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

namespace steward {
namespace {

// An etcd whose every range answers the events given, in etcd's creation order (the
// newest first, as ReadHistory asks).
class EventsEtcd : public EtcdApi {
 public:
  std::vector<Event> created;  // in the order etcd created them

  const std::vector<std::string>& endpoints() const override { return urls_; }
  absl::StatusOr<etcdserverpb::TxnResponse> Txn(const etcdserverpb::TxnRequest&) override {
    etcdserverpb::TxnResponse resp;
    auto* range = resp.add_responses()->mutable_response_range();
    for (auto it = created.rbegin(); it != created.rend(); ++it) {
      auto* kv = range->add_kvs();
      kv->set_value(EventToJson(*it).dump());
    }
    return resp;
  }
  absl::StatusOr<std::vector<MemberInfo>> MemberList(uint64_t*) override { return Unused(); }
  absl::StatusOr<std::vector<MemberInfo>> LinearizableMemberList(uint64_t*) override {
    return Unused();
  }
  absl::StatusOr<MemberInfo> MemberAdd(const std::vector<std::string>&, bool) override {
    return Unused();
  }
  absl::Status MemberRemove(uint64_t) override { return Unused(); }
  absl::Status MemberPromote(uint64_t) override { return Unused(); }
  absl::Status Put(const std::string&, const std::string&, int64_t) override { return Unused(); }
  absl::StatusOr<std::optional<std::string>> Get(const std::string&) override { return Unused(); }
  absl::StatusOr<int64_t> LeaseGrant(std::chrono::seconds) override { return Unused(); }
  absl::Status LeaseRevoke(int64_t) override { return Unused(); }
  absl::StatusOr<std::vector<int64_t>> LeaseLeases() override { return Unused(); }
  absl::Status LeaseKeepAliveOnce(int64_t) override { return Unused(); }
  absl::StatusOr<MemberStatus> Status(const std::string&, std::chrono::milliseconds) override {
    return Unused();
  }
  absl::StatusOr<uint64_t> Snapshot(const std::string&,
                                    const std::function<absl::Status(std::string_view)>&,
                                    std::chrono::milliseconds) override {
    return Unused();
  }

 private:
  static absl::Status Unused() { return absl::UnimplementedError("not in this test"); }
  std::vector<std::string> urls_;
};

Event At(int64_t ms, const std::string& node, const std::string& action) {
  Event e;
  e.at_ms = ms;
  e.node = node;
  e.action = action;
  return e;
}

// Issue 34 part 3: after a restore the nodes' events, queued while etcd was down, reach etcd
// after the coordinator's "done" that came two seconds later: `history` showed "done" first.
// It reads them in time order; events of one time keep etcd's order.
TEST(HistoryTest, EventsReadInTimeOrderNotTheOrderTheyReachedEtcd) {
  EventsEtcd etcd;
  etcd.created = {At(1000, "n1", "restore"), At(5000, "n1", "restore-done"),
                  At(3000, "n2", "restored"), At(3000, "n3", "restored"),
                  At(3100, "n1", "restored")};
  auto events = ReadHistory(etcd, "/p/", 0, 10);
  ASSERT_TRUE(events.ok()) << events.status();
  std::vector<std::string> got;
  for (const Event& e : *events) got.push_back(e.node + ":" + e.action);
  EXPECT_EQ(got, (std::vector<std::string>{"n1:restore", "n2:restored", "n3:restored",
                                           "n1:restored", "n1:restore-done"}));
  // `since` still filters by time.
  events = ReadHistory(etcd, "/p/", 3050, 10);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ(events->front().action, "restored");
}

}  // namespace
}  // namespace steward
