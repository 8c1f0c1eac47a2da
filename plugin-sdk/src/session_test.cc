// The session without the transport: cycle state and waiting pods end when the
// scheduler says their cycle finished; the safety bounds drop the oldest only.
#include "session.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace podium::sdk::internal {
namespace {

class CollectingSink final : public ResponseSink {
 public:
  bool Send(ResponsePtr response) override {
    absl::MutexLock lock(&mu_);
    messages_.push_back(response->message());
    return true;
  }
  std::vector<v1::PluginToScheduler> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<v1::PluginToScheduler> messages_;
};

// Every pod waits at Permit; the test allows pods through the handle.
class Waiter final : public PermitPlugin, public ReservePlugin {
 public:
  explicit Waiter(Handle& handle) : handle(handle) {}
  std::string_view Name() const override { return "Waiter"; }
  PermitResult Permit(CycleState&, const PodInfo&, const std::string&) override {
    return {Status(Code::kWait), 60000};
  }
  Status Reserve(CycleState&, const PodInfo&, const std::string&) override {
    return Status::Success();
  }
  void Unreserve(CycleState&, const PodInfo&, const std::string&) override {}
  Handle& handle;
};

class SessionTest : public testing::Test {
 protected:
  SessionTest()
      : definitions_{{"Waiter",
                      [this](const boost::json::object&, Handle& handle) -> absl::StatusOr<PluginPtr> {
                        auto plugin = std::make_unique<Waiter>(handle);
                        waiter_ = plugin.get();
                        return plugin;
                      }}},
        sink_(std::make_shared<CollectingSink>()),
        session_(definitions_, "test", sink_, Session::Limits{.max_cycle_states = 4,
                                                               .max_waiting_pods = 3}) {
    v1::SchedulerToPlugin open;
    open.set_id(1);
    open.mutable_open()->set_protocol_version(1);
    open.mutable_open()->add_plugins()->set_name("Waiter");
    session_.Handle(open);
  }

  void Permit(const std::string& uid, uint64_t cycle_id) {
    v1::SchedulerToPlugin m;
    m.set_id(++id_);
    m.mutable_permit()->set_cycle_id(cycle_id);
    m.mutable_permit()->mutable_pod()->mutable_meta()->set_uid(uid);
    m.mutable_permit()->set_node_name("n1");
    m.mutable_permit()->add_plugins("Waiter");
    session_.Handle(m);
  }
  void Finished(std::vector<uint64_t> cycles) {
    v1::SchedulerToPlugin m;  // State only: no request, no answer.
    for (uint64_t c : cycles) m.add_finished_cycles(c);
    session_.Handle(m);
  }
  // Whether the pod waited (allowing it ends its wait; allowing a pod that
  // does not wait returns false).
  bool Waiting(const std::string& uid) {
    const size_t before = session_.NumWaitingPods();
    const bool allowed = waiter_->handle.AllowWaitingPod(uid, "Waiter");
    EXPECT_EQ(session_.NumWaitingPods(), allowed ? before - 1 : before);
    return allowed;
  }

  std::vector<PluginDefinition> definitions_;
  std::shared_ptr<CollectingSink> sink_;
  Session session_;
  Waiter* waiter_ = nullptr;
  uint64_t id_ = 1;
};

TEST_F(SessionTest, FinishedCyclesEndTheirWaitingPodsAndState) {
  ASSERT_NE(waiter_, nullptr);
  Permit("a", 10);
  Permit("b", 11);
  EXPECT_EQ(session_.NumWaitingPods(), 2u);
  EXPECT_EQ(session_.NumCycleStates(), 2u);
  Finished({10});
  EXPECT_EQ(session_.NumWaitingPods(), 1u);
  EXPECT_EQ(session_.NumCycleStates(), 1u);
  EXPECT_FALSE(Waiting("a"));
  EXPECT_TRUE(Waiting("b"));
}

TEST_F(SessionTest, TheSafetyBoundDropsOnlyTheOldestWaitingPod) {
  Permit("a", 1);
  Permit("b", 2);
  Permit("c", 3);
  Permit("d", 4);  // Beyond the bound of 3: a goes, nobody else.
  EXPECT_EQ(session_.NumWaitingPods(), 3u);
  EXPECT_FALSE(Waiting("a"));
  EXPECT_TRUE(Waiting("b"));
  EXPECT_TRUE(Waiting("c"));
  EXPECT_TRUE(Waiting("d"));
  // Cycle states: at most 4, the oldest dropped first.
  for (uint64_t cycle = 5; cycle < 10; ++cycle) Permit("x" + std::to_string(cycle), cycle);
  EXPECT_EQ(session_.NumCycleStates(), 4u);
}

}  // namespace
}  // namespace podium::sdk::internal
