// The scheduler with its plugin processes mocked at the PluginProcess seam and
// the adapter replaced by a fake ActionSink: what a user of the adapter sees.
#include "scheduler.h"

#include "framework/mock_plugin_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queue/fake_clock.h"

namespace podium::scheduler {
namespace {

using ::testing::_;
using ::testing::Invoke;
using ::testing::NiceMock;

// Records actions; results are given by the test.
class FakeSink : public ActionSink {
 public:
  void Send(v1::Action action, ResultCallback on_result) override {
    absl::MutexLock lock(&mu_);
    action.set_id(next_id_++);
    actions_.push_back({action, std::move(on_result)});
  }
  // Waits until an action of the kind exists; returns its index.
  std::optional<size_t> WaitFor(v1::Action::KindCase kind, size_t from = 0) {
    absl::MutexLock lock(&mu_);
    std::optional<size_t> found;
    auto has = [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (size_t i = from; i < actions_.size(); ++i) {
        if (actions_[i].first.kind_case() == kind) {
          found = i;
          return true;
        }
      }
      return false;
    };
    mu_.AwaitWithTimeout(absl::Condition(&has), absl::Seconds(10));
    return found;
  }
  size_t Count(v1::Action::KindCase kind) {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& a : actions_) n += a.first.kind_case() == kind;
    return n;
  }
  v1::Action action(size_t i) {
    absl::MutexLock lock(&mu_);
    return actions_[i].first;
  }
  void Reply(size_t i, v1::ActionResult::Code code) {
    ResultCallback cb;
    v1::ActionResult result;
    {
      absl::MutexLock lock(&mu_);
      cb = actions_[i].second;
      result.set_action_id(actions_[i].first.id());
    }
    result.set_code(code);
    cb(result);
  }

 private:
  absl::Mutex mu_;
  uint64_t next_id_ = 1;
  std::vector<std::pair<v1::Action, ResultCallback>> actions_ ABSL_GUARDED_BY(mu_);
};

v1::ObjectEvent NodeEvent(const std::string& name) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* n = e.mutable_node();
  n->mutable_meta()->set_name(name);
  n->mutable_meta()->set_uid("uid-" + name);
  n->mutable_allocatable()->set_milli_cpu(4000);
  n->mutable_allocatable()->set_pods(110);
  return e;
}

v1::ObjectEvent PodEvent(const std::string& name, const std::string& node = "") {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* p = e.mutable_pod();
  p->mutable_meta()->set_name(name);
  p->mutable_meta()->set_namespace_("default");
  p->mutable_meta()->set_uid("uid-" + name);
  p->set_node_name(node);
  return e;
}

// A cycle answer that finds node 1 feasible, or nothing.
v1::PluginToScheduler CycleAnswer(bool fits) {
  v1::PluginToScheduler a;
  auto* c = a.mutable_cycle();
  if (fits) {
    c->add_feasible(1);
  } else {
    auto* r = c->add_rejected();
    r->set_node_id(1);
    r->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
    r->mutable_status()->add_reasons("Insufficient cpu");
    r->mutable_status()->set_plugin("Fit");
  }
  c->set_nodes_evaluated(1);
  return a;
}

class SchedulerTest : public testing::Test {
 protected:
  // The host finds node-1 feasible and its Gang plugin answers Permit with
  // WAIT for timeout_ms; Unreserve requests are counted.
  void ExpectGangWaits(int64_t timeout_ms) {
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this, timeout_ms](v1::SchedulerToPlugin req, auto) {
      v1::PluginToScheduler a;
      if (req.has_cycle()) return Answered(CycleAnswer(true));
      if (req.has_unreserve()) ++unreserves_;
      if (req.has_permit()) {
        auto* r = a.mutable_permit()->add_results();
        r->set_plugin("Gang");
        r->mutable_status()->set_code(v1::Status::WAIT);
        r->set_timeout_ms(timeout_ms);
        return Answered(a);
      }
      a.mutable_status();
      return Answered(a);
    }));
  }
  std::atomic<int> unreserves_{0};

  void Build(bool with_permit, PostFilterPluginPtr post_filter = nullptr) {
    ProfileSpec spec;
    spec.plugins[v1::FILTER] = {{"Fit", 0}};
    spec.plugins[v1::BIND] = {{"DefaultBinder", 0}};
    spec.processes["Fit"] = &host_;
    if (with_permit) {
      spec.plugins[v1::PERMIT] = {{"Gang", 0}};
      spec.plugins[v1::RESERVE] = {{"Gang", 0}};
      spec.processes["Gang"] = &host_;
    }
    std::vector<FrameworkPtr> profiles;
    profiles.push_back(std::make_unique<Framework>(spec, 1));
    if (post_filter) profiles.back()->AddPostFilterPlugin(std::move(post_filter));
    SchedulingQueue::Options qo;
    qo.clock = &clock_;
    queue_ = std::make_unique<SchedulingQueue>(qo);
    queue_->SetEventRegistry({{"Fit", {[] {
                                 v1::ClusterEventInterest i;
                                 i.set_resource(v1::NODE);
                                 i.set_action_mask(v1::ADD);
                                 return i;
                               }()}}});
    scheduler_ = std::make_unique<Scheduler>(Scheduler::Options{}, cache_, snapshot_, *queue_,
                                             std::move(profiles), metrics_, clock_);
    scheduler_->SetActionSink(&sink_);
    scheduler_->OnListBegin();
    scheduler_->OnObjectEvent(NodeEvent("node-1"));
  }
  void TearDown() override {
    if (scheduler_) scheduler_->Stop();
  }
  void StartWithPod(const std::string& name) {
    scheduler_->OnObjectEvent(PodEvent(name));
    scheduler_->OnListEnd();
    scheduler_->Start();
  }
  bool WaitForQueue(QueueKind kind) {
    for (int i = 0; i < 1000; ++i) {
      for (const auto& s : queue_->List()) {
        if (s.queue == kind) return true;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  NiceMock<MockPluginProcess> host_{"host"};
  FakeClock clock_;
  Cache cache_;
  Snapshot snapshot_;
  SchedulerMetrics metrics_{std::make_shared<prometheus::Registry>()};
  FakeSink sink_;
  std::unique_ptr<SchedulingQueue> queue_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BindsThenTheAdapterConfirmsTheAssumedPod) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  auto bind = sink_.WaitFor(v1::Action::kBind);
  ASSERT_TRUE(bind);
  EXPECT_EQ(sink_.action(*bind).bind().node_name(), "node-1");
  EXPECT_EQ(sink_.action(*bind).bind().pod().name(), "web");
  EXPECT_TRUE(cache_.IsAssumed("uid-web"));
  sink_.Reply(*bind, v1::ActionResult::OK);
  EXPECT_TRUE(sink_.WaitFor(v1::Action::kRecordEvent));  // Scheduled.
  scheduler_->OnObjectEvent(PodEvent("web", "node-1"));
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 1u);
}

TEST_F(SchedulerTest, FailedBindForgetsTheAssumedPodAndRequeuesIt) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  auto bind = sink_.WaitFor(v1::Action::kBind);
  ASSERT_TRUE(bind);
  sink_.Reply(*bind, v1::ActionResult::CONFLICT);
  auto patch = sink_.WaitFor(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  const v1::Action patch_action = sink_.action(*patch);
  const auto& condition = patch_action.patch_pod_status().conditions(0);
  EXPECT_EQ(condition.reason(), "SchedulerError");
  EXPECT_THAT(condition.message(), testing::HasSubstr("CONFLICT"));
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 0u);
  EXPECT_TRUE(WaitForQueue(QueueKind::kBackoff));  // An error backs off.
}

TEST_F(SchedulerTest, UnschedulablePodGetsPodScheduledFalseAndAFailedSchedulingEvent) {
  Build(false);
  std::atomic<int> cycles{0};
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](auto, auto) {
    ++cycles;
    return Answered(CycleAnswer(false));
  }));
  StartWithPod("big");
  auto patch = sink_.WaitFor(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  const v1::Action patch_action = sink_.action(*patch);
  const auto& status = patch_action.patch_pod_status();
  EXPECT_EQ(status.pod().name(), "big");
  EXPECT_EQ(status.conditions(0).type(), "PodScheduled");
  EXPECT_EQ(status.conditions(0).status(), "False");
  EXPECT_EQ(status.conditions(0).reason(), "Unschedulable");
  EXPECT_EQ(status.conditions(0).message(), "0/1 nodes are available: 1 Insufficient cpu.");
  auto event = sink_.WaitFor(v1::Action::kRecordEvent);
  ASSERT_TRUE(event);
  EXPECT_EQ(sink_.action(*event).record_event().reason(), "FailedScheduling");
  ASSERT_TRUE(WaitForQueue(QueueKind::kUnschedulable));
  EXPECT_EQ(cycles.load(), 1);
  // A new node is an event Fit registered for: the pod leaves the pool for
  // backoffQ, and is tried again once its backoff expired.
  scheduler_->OnObjectEvent(NodeEvent("node-2"));
  EXPECT_EQ(queue_->PendingPods().unschedulable, 0u);
  EXPECT_EQ(queue_->PendingPods().backoff, 1u);
  clock_.Advance(absl::Seconds(2));
  scheduler_->Housekeeping();
  for (int i = 0; i < 1000 && cycles.load() < 2; ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(cycles.load(), 2);
}

// A PostFilter that nominates node-1 and says so, as preemption will.
class NominatingPostFilter : public PostFilterPlugin {
 public:
  std::string_view Name() const override { return "FakePreemption"; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod, const Diagnosis& d) override {
    seen_nodes = d.num_all_nodes;
    return {PostFilterResult{"node-1"}, sdk::Status(sdk::Code::kSuccess, "preemption: 1 victim on node-1")};
  }
  static inline uint32_t seen_nodes = 0;
};

TEST_F(SchedulerTest, PostFilterSeesTheDiagnosisAndNominatesANode) {
  Build(false, std::make_unique<NominatingPostFilter>());
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(false)); }));
  StartWithPod("big");
  // One patch carries the nomination and PodScheduled=False, as kube-scheduler's updatePod.
  auto failed = sink_.WaitFor(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(failed);
  const v1::Action failed_action = sink_.action(*failed);
  EXPECT_EQ(failed_action.patch_pod_status().nominated_node_name(), "node-1");
  EXPECT_EQ(failed_action.patch_pod_status().conditions(0).message(),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 1 victim on node-1");
  ASSERT_TRUE(sink_.WaitFor(v1::Action::kRecordEvent, *failed + 1));  // Sent after the patch.
  EXPECT_EQ(sink_.Count(v1::Action::kPatchPodStatus), 1u);
  EXPECT_EQ(NominatingPostFilter::seen_nodes, 1u);
}

TEST_F(SchedulerTest, PermitWaitThenAllowBinds) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  // No bind while it waits.
  // Assumed comes before Permit: wait until the pod waits there, so that the
  // decision (or the clock's advance) is not earlier than its deadline.
  for (int i = 0; i < 1000 && !scheduler_->WaitingAtPermit("uid-member"); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(cache_.IsAssumed("uid-member"));
  v1::PermitDecision allow;
  allow.set_pod_uid("uid-member");
  allow.set_plugin("Gang");
  allow.set_allow(true);
  scheduler_->OnPermitDecision(allow);
  EXPECT_TRUE(sink_.WaitFor(v1::Action::kBind));
}

TEST_F(SchedulerTest, AllowSentBeforeTheWaitAnswerIsNotLost) {
  Build(true);
  // The plugin allows the pod before its WAIT answer is even returned, as a
  // gang plugin does when the pod completes its gang at that moment.
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
    v1::PluginToScheduler a;
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    if (req.has_permit()) {
      v1::PermitDecision allow;
      allow.set_pod_uid(req.permit().pod().meta().uid());
      allow.set_plugin("Gang");
      allow.set_allow(true);
      scheduler_->OnPermitDecision(allow);
      auto* r = a.mutable_permit()->add_results();
      r->set_plugin("Gang");
      r->mutable_status()->set_code(v1::Status::WAIT);
      r->set_timeout_ms(60000);
      return Answered(a);
    }
    a.mutable_status();
    return Answered(a);
  }));
  StartWithPod("member");
  EXPECT_TRUE(sink_.WaitFor(v1::Action::kBind));
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
}

TEST_F(SchedulerTest, PermitTimeoutUnreservesAndRequeues) {
  Build(true);
  ExpectGangWaits(1000);
  StartWithPod("member");
  // Assumed comes before Permit: wait until the pod waits there, so that the
  // decision (or the clock's advance) is not earlier than its deadline.
  for (int i = 0; i < 1000 && !scheduler_->WaitingAtPermit("uid-member"); ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(cache_.IsAssumed("uid-member"));
  clock_.Advance(absl::Seconds(2));
  scheduler_->Housekeeping();
  auto patch = sink_.WaitFor(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  EXPECT_THAT(sink_.action(*patch).patch_pod_status().conditions(0).message(),
              testing::HasSubstr("rejected due to timeout after waiting at plugin Gang"));
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);
}

}  // namespace
}  // namespace podium::scheduler
