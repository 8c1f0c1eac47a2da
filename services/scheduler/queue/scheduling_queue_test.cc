#include "queue/scheduling_queue.h"

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queue/fake_clock.h"
#include "queue/mock_queueing_hint_evaluator.h"

namespace podium::scheduler {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::Property;
using ::testing::Return;
using ::testing::SizeIs;

v1::Pod MakePodProto(const std::string& uid, int32_t priority = 0, int64_t created_us = 0,
                     std::vector<std::string> gates = {}) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(uid);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(uid);
  pod.mutable_meta()->set_creation_timestamp_us(created_us);
  pod.set_priority(priority);
  for (auto& g : gates) pod.add_scheduling_gates(g);
  pod.add_containers()->set_name("c");
  return pod;
}

sdk::PodInfoPtr MakePod(const std::string& uid, int32_t priority = 0, int64_t created_us = 0,
                        std::vector<std::string> gates = {}) {
  return sdk::PodInfo::Create(MakePodProto(uid, priority, created_us, std::move(gates)));
}

v1::ClusterEvent Event(v1::ClusterResource resource, uint32_t action) {
  v1::ClusterEvent e;
  e.set_resource(resource);
  e.set_action(action);
  return e;
}

v1::ClusterEventInterest Interest(v1::ClusterResource resource, uint32_t mask, bool hint) {
  v1::ClusterEventInterest i;
  i.set_resource(resource);
  i.set_action_mask(mask);
  i.set_has_queueing_hint(hint);
  return i;
}

class SchedulingQueueTest : public ::testing::Test {
 protected:
  SchedulingQueue::Options Opts() {
    SchedulingQueue::Options o;
    o.clock = &clock_;
    o.pre_enqueue = SchedulingGatesPreEnqueue;
    o.hint_evaluator = &evaluator_;
    return o;
  }

  // Pops `uid` and fails it with the given rejecting plugins.
  void FailAttempt(SchedulingQueue& q, const std::string& uid, std::set<std::string> plugins,
                   bool move_request_during_cycle = false) {
    auto info = q.TryPop();
    ASSERT_TRUE(info.has_value());
    ASSERT_EQ(info->uid(), uid);
    const uint64_t cycle = q.scheduling_cycle();
    if (move_request_during_cycle) {
      // A wildcard event: something changed that any plugin may care about.
      q.MoveAllToActiveOrBackoffQueue(Event(v1::RESOURCE_UNSPECIFIED, v1::ALL));
    }
    info->unschedulable_plugins = std::move(plugins);
    info->message = "0/1 nodes are available";
    ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, cycle).ok());
    q.Done(uid);
  }

  QueueKind Where(const SchedulingQueue& q, const std::string& uid) {
    auto s = q.Find(uid);
    EXPECT_TRUE(s.has_value()) << uid;
    return s.has_value() ? s->queue : QueueKind::kActive;
  }

  std::vector<std::string> PopAll(SchedulingQueue& q) {
    std::vector<std::string> out;
    while (auto info = q.TryPop()) out.push_back(info->uid());
    return out;
  }

  FakeClock clock_;
  testing::StrictMock<MockQueueingHintEvaluator> evaluator_;
};

EventRegistry TestRegistry() {
  EventRegistry r;
  r["NodeAffinity"] = {Interest(v1::NODE, v1::ADD | v1::UPDATE_NODE_LABEL, false)};
  r["TaintToleration"] = {Interest(v1::NODE, v1::ADD | v1::UPDATE_NODE_TAINT, true)};
  r["InterPodAffinity"] = {Interest(v1::POD, v1::ADD | v1::DELETE, true),
                           Interest(v1::NODE, v1::ADD, false)};
  r["NodeResourcesFit"] = {};
  return r;
}

TEST_F(SchedulingQueueTest, PopsByPriorityThenQueueTime) {
  struct Case {
    std::string uid;
    int32_t priority;
  };
  // Queued in this order, one millisecond apart. Creation times run the
  // other way round: they must not matter.
  const std::vector<Case> cases = {
      {"low-first", 0}, {"high-first", 100}, {"low-second", 0},
      {"high-second", 100}, {"mid", 50}, {"neg", -10},
  };
  SchedulingQueue q(Opts());
  int64_t created = 1'000'000;
  for (const auto& c : cases) {
    q.Add(MakePod(c.uid, c.priority, created--));
    clock_.Advance(absl::Milliseconds(1));
  }
  EXPECT_THAT(PopAll(q),
              ElementsAre("high-first", "high-second", "mid", "low-first", "low-second", "neg"));
  EXPECT_EQ(q.scheduling_cycle(), 6u);
}

// Batching's lookaheads peek at the pods Pop would take next, in its order.
TEST_F(SchedulingQueueTest, PeekActiveShowsTheNextPodsInPopOrderWithoutPoppingThem) {
  SchedulingQueue q(Opts());
  for (const auto& [uid, priority] : std::vector<std::pair<std::string, int32_t>>{
           {"low", 0}, {"high", 100}, {"mid", 50}}) {
    q.Add(MakePod(uid, priority));
    clock_.Advance(absl::Milliseconds(1));
  }
  auto uids = [](const std::vector<sdk::PodInfoPtr>& pods) {
    std::vector<std::string> out;
    for (const auto& p : pods) out.push_back(p->pod->meta().uid());
    return out;
  };
  EXPECT_THAT(uids(q.PeekActive(2)), ElementsAre("high", "mid"));
  EXPECT_THAT(uids(q.PeekActive(9)), ElementsAre("high", "mid", "low"));
  EXPECT_THAT(uids(q.PeekActive(1)), ElementsAre("high"));
  EXPECT_THAT(PopAll(q), ElementsAre("high", "mid", "low"));
  EXPECT_TRUE(q.PeekActive(3).empty());
}

// Issue 5, defect 13: kube's PrioritySort orders equal priorities by the time
// the pod was (re)queued. A pod that failed and comes back from backoff goes
// behind the pods queued while it was tried, however old it is.
TEST_F(SchedulingQueueTest, AFailedPodComesBackBehindPodsQueuedBeforeItsRetry) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("old", 0, /*created_us=*/1));
  clock_.Advance(absl::Milliseconds(100));
  auto attempt = q.TryPop();
  ASSERT_TRUE(attempt.has_value());
  q.Add(MakePod("newer", 0, /*created_us=*/2));  // Queued while "old" is tried.
  clock_.Advance(absl::Milliseconds(100));
  // "old" fails with an Error: backoffQ, then activeQ once its second is over.
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*attempt, q.scheduling_cycle()).ok());
  q.Done("old");
  clock_.Advance(absl::Seconds(2));
  ASSERT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_THAT(PopAll(q), ElementsAre("newer", "old"));
}

// The same with two profiles sharing the queue (kube-scheduler has one queue
// for every profile): the failing profile's old pod does not jump ahead of the
// other profile's pods queued while it was tried.
TEST_F(SchedulingQueueTest, AFailedPodOfOneProfileDoesNotJumpAheadOfAnotherProfilesPods) {
  auto pod = [](const std::string& uid, const std::string& profile, int64_t created_us) {
    v1::Pod p = MakePodProto(uid, 0, created_us);
    p.set_scheduler_name(profile);
    return sdk::PodInfo::Create(p);
  };
  SchedulingQueue q(Opts());
  q.Add(pod("a-old", "profile-a", 1));
  auto attempt = q.TryPop();
  ASSERT_TRUE(attempt.has_value());
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(absl::Milliseconds(10));
    q.Add(pod(absl::StrCat("b-", i), "profile-b", 10 + i));
  }
  // profile-a's plugin timed out: an Error, retried after its backoff.
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*attempt, q.scheduling_cycle()).ok());
  q.Done("a-old");
  clock_.Advance(absl::Seconds(2));
  ASSERT_EQ(q.FlushBackoffQCompleted(), 1u);
  clock_.Advance(absl::Milliseconds(10));
  q.Add(pod("b-later", "profile-b", 20));  // Queued after "a-old" came back.
  EXPECT_THAT(PopAll(q), ElementsAre("b-0", "b-1", "b-2", "a-old", "b-later"));
}

// KEP-5142: an empty activeQ pops the head of backoffQ instead of idling.
TEST_F(SchedulingQueueTest, PopsFromBackoffQWhenActiveQIsEmpty) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  clock_.Advance(absl::Milliseconds(1));
  q.Add(MakePod("fresh"));
  FailAttempt(q, "p", {"NodeResourcesFit"}, /*move_request_during_cycle=*/true);
  ASSERT_EQ(Where(q, "p"), QueueKind::kBackoff);
  // activeQ first.
  auto first = q.TryPop();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->uid(), "fresh");
  EXPECT_EQ(q.popped_from_backoff_q(), 0u);
  // activeQ is empty now; p is still within its backoff second, popped anyway.
  auto early = q.TryPop();
  ASSERT_TRUE(early.has_value());
  EXPECT_EQ(early->uid(), "p");
  EXPECT_EQ(early->attempts, 2);
  EXPECT_EQ(q.popped_from_backoff_q(), 1u);
  EXPECT_FALSE(q.TryPop().has_value());
}

TEST_F(SchedulingQueueTest, PodsBackingOffAfterAnErrorAreNotPoppedEarly) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("err"));
  FailAttempt(q, "err", {});  // No plugin rejected it: an Error.
  ASSERT_EQ(Where(q, "err"), QueueKind::kBackoff);
  EXPECT_FALSE(q.TryPop().has_value());
  EXPECT_FALSE(q.PopWithTimeout(absl::Milliseconds(1)).has_value());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_THAT(PopAll(q), ElementsAre("err"));
  EXPECT_EQ(q.popped_from_backoff_q(), 0u);
}

TEST_F(SchedulingQueueTest, BackoffQPopsByExpiryWindowThenPriority) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  const absl::Time t0 = clock_.Now();
  // Each fails with a move request, so it backs off for 1 s:
  // low-early at t0+0.2 (expires t0+1.2) and high-same-window at t0+0.4
  // (t0+1.4) share the window ending at t0+2; high-next-window at t0+1.1
  // (t0+2.1) is in the window ending at t0+3.
  for (auto [uid, priority, at] : std::vector<std::tuple<std::string, int, int>>{
           {"low-early", 0, 200}, {"high-same-window", 100, 400}, {"high-next-window", 100, 1100}}) {
    q.Add(MakePod(uid, priority));
    clock_.Set(t0 + absl::Milliseconds(at));
    FailAttempt(q, uid, {"NodeResourcesFit"}, /*move_request_during_cycle=*/true);
  }
  EXPECT_EQ(q.Find("low-early")->backoff_expiry, t0 + absl::Seconds(2));
  EXPECT_EQ(q.Find("high-same-window")->backoff_expiry, t0 + absl::Seconds(2));
  EXPECT_EQ(q.Find("high-next-window")->backoff_expiry, t0 + absl::Seconds(3));
  EXPECT_THAT(PopAll(q), ElementsAre("high-same-window", "low-early", "high-next-window"));
}

TEST_F(SchedulingQueueTest, WithoutPopFromBackoffQTheBackoffIsWaitedOut) {
  SchedulingQueue::Options o = Opts();
  o.pop_from_backoff_q = false;
  SchedulingQueue q(o);
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"}, /*move_request_during_cycle=*/true);
  ASSERT_EQ(Where(q, "p"), QueueKind::kBackoff);
  EXPECT_FALSE(q.TryPop().has_value());
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_THAT(PopAll(q), ElementsAre("p"));
}

TEST_F(SchedulingQueueTest, PopCountsAttemptsAndInitialAttemptTime) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  const absl::Time t0 = clock_.Now();
  auto info = q.TryPop();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->attempts, 1);
  EXPECT_EQ(info->initial_attempt_timestamp, t0);
  clock_.Advance(absl::Seconds(3));
  info->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
  EXPECT_EQ(q.MoveAllToActiveQueue(), 1u);
  auto again = q.TryPop();
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->attempts, 2);
  EXPECT_EQ(again->initial_attempt_timestamp, t0);
  EXPECT_TRUE(again->unschedulable_plugins.empty());  // Cleared for the new attempt.
}

TEST_F(SchedulingQueueTest, BackoffDoublesToTheCap) {
  SchedulingQueue q(Opts());
  std::vector<int64_t> seconds;
  for (int attempts = 1; attempts <= 6; ++attempts) {
    seconds.push_back(absl::ToInt64Seconds(q.BackoffDuration(attempts)));
  }
  EXPECT_THAT(seconds, ElementsAre(1, 2, 4, 8, 10, 10));
  EXPECT_EQ(q.BackoffDuration(0), absl::ZeroDuration());
  EXPECT_EQ(q.BackoffDuration(100), absl::Seconds(10));

  SchedulingQueue::Options o = Opts();
  o.initial_backoff = absl::Milliseconds(500);
  o.max_backoff = absl::Seconds(3);
  SchedulingQueue custom(o);
  EXPECT_EQ(custom.BackoffDuration(3), absl::Seconds(2));
  EXPECT_EQ(custom.BackoffDuration(4), absl::Seconds(3));
}

TEST_F(SchedulingQueueTest, BackoffExpiryFollowsAttempts) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  const std::vector<int64_t> want = {1, 2, 4, 8, 10, 10};
  for (size_t i = 0; i < want.size(); ++i) {
    FailAttempt(q, "p", {});  // An Error: straight to backoffQ.
    auto s = q.Find("p");
    ASSERT_TRUE(s.has_value());
    EXPECT_EQ(s->queue, QueueKind::kBackoff);
    EXPECT_EQ(s->backoff_expiry - clock_.Now(), absl::Seconds(want[i])) << "attempt " << i + 1;
    clock_.Advance(absl::Seconds(want[i]));
    EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  }
}

// kube-scheduler #128748: the backoff counts the consecutive Errors while
// they last, else the Unschedulable attempts; an outage's errors do not
// lengthen the backoff of the rejections after it (by attempts, the last
// three would be 8, 10 and 10 s).
TEST_F(SchedulingQueueTest, BackoffCountsTheErrorsWhileTheyLastElseTheUnschedulableAttempts) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  struct Step {
    bool error;
    int64_t seconds;
  };
  const std::vector<Step> steps = {{true, 1}, {true, 2}, {true, 4},     // An outage.
                                   {false, 1}, {false, 2},              // Rejections: counted apart.
                                   {true, 1}, {false, 4}};              // One error, then a third rejection.
  for (size_t i = 0; i < steps.size(); ++i) {
    // A rejection goes to backoffQ when a move request came during its cycle.
    FailAttempt(q, "p", steps[i].error ? std::set<std::string>{} : std::set<std::string>{"NodeResourcesFit"},
                /*move_request_during_cycle=*/!steps[i].error);
    auto s = q.Find("p");
    ASSERT_TRUE(s.has_value());
    ASSERT_EQ(s->queue, QueueKind::kBackoff) << "attempt " << i + 1;
    EXPECT_EQ(s->backoff_expiry - clock_.Now(), absl::Seconds(steps[i].seconds)) << "attempt " << i + 1;
    clock_.Advance(absl::Seconds(steps[i].seconds));
    EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  }
}

TEST_F(SchedulingQueueTest, FlushBackoffQMovesOnlyExpiredPods) {
  // Exact expiries: without KEP-5142's ordering windows.
  SchedulingQueue::Options o = Opts();
  o.pop_from_backoff_q = false;
  SchedulingQueue q(o);
  q.Add(MakePod("a", 0, 1));
  q.Add(MakePod("b", 0, 2));
  FailAttempt(q, "a", {});  // attempts 1: 1 s.
  clock_.Advance(absl::Milliseconds(500));
  FailAttempt(q, "b", {});  // expires 500 ms after a.
  EXPECT_EQ(q.PendingPods().backoff, 2u);
  EXPECT_EQ(q.FlushBackoffQCompleted(), 0u);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_EQ(Where(q, "a"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "b"), QueueKind::kBackoff);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_EQ(q.PendingPods().active, 2u);
}

// kube-scheduler's scheduler_queue_incoming_pods_total{queue,event}: every
// entry into a queue is counted once, with what brought the pod there.
TEST_F(SchedulingQueueTest, EveryPodEnteringAQueueIsReportedWithItsEvent) {
  std::map<std::string, int> incoming;
  SchedulingQueue::Options o = Opts();
  o.on_incoming_pod = [&](std::string_view queue, std::string_view event) {
    ++incoming[std::string(queue) + "/" + std::string(event)];
  };
  SchedulingQueue q(o);
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("a", 0, 1));
  q.Add(MakePod("g", 0, 2, {"example.com/gate"}));
  q.Add(MakePod("e", 0, 3));
  FailAttempt(q, "a", {"NodeAffinity"});
  FailAttempt(q, "e", {});  // An Error: straight to backoffQ.
  // A priority change of a pod in backoffQ re-sorts it: not an arrival.
  q.Update(MakePod("e", 5, 3));
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::UPDATE_NODE_LABEL)), 1u);
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_EQ(q.Activate({"a"}), 0u);  // Already active: nothing enters.
  EXPECT_EQ(incoming, (std::map<std::string, int>{{"active/PodAdd", 2},
                                                  {"gated/PodAdd", 1},
                                                  {"unschedulable/ScheduleAttemptFailure", 1},
                                                  {"backoff/ScheduleAttemptFailure", 1},
                                                  {"active/NodeLabelChange", 1},
                                                  {"active/BackoffComplete", 1}}));
}

TEST_F(SchedulingQueueTest, BackoffEndsAtTheEndOfItsOrderingWindow) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("a"));
  q.Add(MakePod("b"));
  FailAttempt(q, "a", {});  // Expires at t0+1, a window's edge.
  clock_.Advance(absl::Milliseconds(500));
  FailAttempt(q, "b", {});  // Expires at t0+1.5: the window ends at t0+2.
  EXPECT_EQ(q.FlushBackoffQCompleted(), 0u);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_EQ(Where(q, "a"), QueueKind::kActive);
  clock_.Advance(absl::Milliseconds(500));  // t0+1.5: b's own expiry, mid-window.
  EXPECT_EQ(q.FlushBackoffQCompleted(), 0u);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_EQ(q.FlushBackoffQCompleted(), 1u);
  EXPECT_EQ(q.PendingPods().active, 2u);
}

TEST_F(SchedulingQueueTest, LeftoverFlushAfterFiveMinutes) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"});
  EXPECT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
  clock_.Advance(absl::Minutes(5));
  EXPECT_EQ(q.FlushUnschedulablePodsLeftover(), 0u);  // Not longer than 5 min yet.
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(q.FlushUnschedulablePodsLeftover(), 1u);
  EXPECT_EQ(Where(q, "p"), QueueKind::kActive);  // Backoff long over.
}

TEST_F(SchedulingQueueTest, SchedulingGatesHoldThePodUntilCleared) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("g", 0, 0, {"example.com/a", "example.com/b"}));
  auto s = q.Find("g");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->queue, QueueKind::kGated);
  EXPECT_EQ(s->gating_plugin, "SchedulingGates");
  EXPECT_EQ(s->message, "waiting for scheduling gates: [example.com/a example.com/b]");
  EXPECT_EQ(q.PendingPods().gated, 1u);
  EXPECT_EQ(q.PendingPods().unschedulable, 0u);
  EXPECT_FALSE(q.TryPop().has_value());

  // Nothing but an update clearing the gates lets it out.
  clock_.Advance(absl::Minutes(10));
  EXPECT_EQ(q.FlushUnschedulablePodsLeftover(), 0u);
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD)), 0u);
  EXPECT_EQ(q.MoveAllToActiveQueue(), 0u);
  EXPECT_EQ(q.Activate({"g"}), 0u);

  q.Update(MakePod("g", 0, 0, {"example.com/b"}));
  s = q.Find("g");
  EXPECT_EQ(s->queue, QueueKind::kGated);
  EXPECT_EQ(s->message, "waiting for scheduling gates: [example.com/b]");

  q.Update(MakePod("g", 0, 0, {}));
  EXPECT_EQ(Where(q, "g"), QueueKind::kActive);
  EXPECT_EQ(q.PendingPods().gated, 0u);
  auto info = q.TryPop();
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->attempts, 1);
}

TEST_F(SchedulingQueueTest, NoPreEnqueueMeansNoGating) {
  SchedulingQueue::Options o = Opts();
  o.pre_enqueue = nullptr;
  SchedulingQueue q(o);
  q.Add(MakePod("g", 0, 0, {"x"}));
  EXPECT_EQ(Where(q, "g"), QueueKind::kActive);
}

// Registry used by the hint tests:
//   NodeAffinity:      Node Add|UpdateNodeLabel, no hint
//   TaintToleration:   Node Add|UpdateNodeTaint, hint
//   InterPodAffinity:  Pod Add|Delete, hint;  Node Add, no hint
//   NodeResourcesFit:  registered for nothing
//   (NodePorts: not in the registry = every event, no hint)
TEST_F(SchedulingQueueTest, EventsWithoutHintsMoveOnlyRegisteredRejections) {
  struct Case {
    std::string name;
    std::set<std::string> plugins;
    v1::ClusterEvent event;
    bool moves;
  };
  const std::vector<Case> cases = {
      {"not registered for the event", {"NodeAffinity"}, Event(v1::POD, v1::ADD), false},
      {"action bits do not intersect", {"NodeAffinity"}, Event(v1::NODE, v1::UPDATE_NODE_TAINT),
       false},
      {"registered without hint", {"NodeAffinity"}, Event(v1::NODE, v1::UPDATE_NODE_LABEL), true},
      {"one of two rejectors without hint", {"NodeAffinity", "TaintToleration"},
       Event(v1::NODE, v1::ADD), true},
      {"plugin registered for nothing", {"NodeResourcesFit"}, Event(v1::NODE, v1::ALL), false},
      {"plugin missing from registry", {"NodePorts"}, Event(v1::POD, v1::DELETE), true},
      {"Error (no rejector) moves on any event", {}, Event(v1::POD_DISRUPTION_BUDGET, v1::ADD),
       true},
      {"wildcard event", {"NodeResourcesFit"}, Event(v1::RESOURCE_UNSPECIFIED, v1::ALL), true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulingQueue q(Opts());
    q.SetEventRegistry(TestRegistry());
    q.Add(MakePod("p"));
    auto info = q.TryPop();
    info->unschedulable_plugins = c.plugins;
    // Errors go to backoffQ directly; put the pod in the pool to test events.
    const bool error = c.plugins.empty();
    ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
    if (error) {
      EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);
      continue;
    }
    ASSERT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
    clock_.Advance(absl::Seconds(2));  // Past the 1 s backoff.
    EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(c.event), c.moves ? 1u : 0u);
    EXPECT_EQ(Where(q, "p"), c.moves ? QueueKind::kActive : QueueKind::kUnschedulable);
  }
}

TEST_F(SchedulingQueueTest, HintsAskedOnceWithAllCandidates) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  for (std::string uid : {"t1", "t2", "t3", "na", "fit"}) q.Add(MakePod(uid));
  FailAttempt(q, "fit", {"NodeResourcesFit"});
  FailAttempt(q, "na", {"NodeAffinity"});
  FailAttempt(q, "t1", {"TaintToleration"});
  FailAttempt(q, "t2", {"TaintToleration", "InterPodAffinity"});
  FailAttempt(q, "t3", {"TaintToleration"});
  clock_.Advance(absl::Seconds(2));

  const v1::ClusterEvent event = Event(v1::NODE, v1::UPDATE_NODE_TAINT);
  std::vector<std::string> asked_uids;
  std::vector<std::vector<std::string>> asked_plugins;
  EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(3)))
      .WillOnce([&](const v1::ClusterEvent& e, const std::vector<HintCandidate>& candidates) {
        EXPECT_EQ(e.action(), static_cast<uint32_t>(v1::UPDATE_NODE_TAINT));
        std::vector<bool> answers;
        for (const auto& c : candidates) {
          asked_uids.push_back(c.pod->meta().uid());
          asked_plugins.push_back(c.plugins);
          answers.push_back(c.pod->meta().uid() != "t1");  // t1: QueueSkip.
        }
        return answers;
      });
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(event), 2u);
  std::sort(asked_uids.begin(), asked_uids.end());
  EXPECT_THAT(asked_uids, ElementsAre("t1", "t2", "t3"));
  for (const auto& plugins : asked_plugins) {
    EXPECT_THAT(plugins, ElementsAre("TaintToleration"));  // Only plugins registered for it.
  }
  EXPECT_EQ(Where(q, "t1"), QueueKind::kUnschedulable);
  EXPECT_EQ(Where(q, "t2"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "t3"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "na"), QueueKind::kUnschedulable);  // Not registered for taints.
  EXPECT_EQ(Where(q, "fit"), QueueKind::kUnschedulable);

  // Node Add: NodeAffinity (no hint) moves directly; t1 asks TaintToleration.
  EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(1))).WillOnce(Return(std::vector<bool>{false}));
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD)), 1u);
  EXPECT_EQ(Where(q, "na"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "t1"), QueueKind::kUnschedulable);
}

TEST_F(SchedulingQueueTest, DeferredHintsAreAskedOnlyWhenTheDeferredWorkRuns) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  for (std::string uid : {"t1", "na", "gone"}) q.Add(MakePod(uid));
  FailAttempt(q, "gone", {"TaintToleration"});
  FailAttempt(q, "na", {"NodeAffinity"});
  FailAttempt(q, "t1", {"TaintToleration"});
  clock_.Advance(absl::Seconds(2));

  // Node Add: NodeAffinity (no hint) moves here at once; the TaintToleration
  // pods need a hint, which is not asked on this thread.
  std::function<void()> deferred;
  EXPECT_CALL(evaluator_, Evaluate(_, _)).Times(0);
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD),
                                           [&](std::function<void()> ask) { deferred = std::move(ask); }),
            1u);
  EXPECT_EQ(Where(q, "na"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "t1"), QueueKind::kUnschedulable);
  ASSERT_TRUE(deferred);
  testing::Mock::VerifyAndClearExpectations(&evaluator_);

  // Meanwhile one of them left the pool; the deferred work moves only the other.
  EXPECT_TRUE(q.Delete("gone"));
  EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(2))).WillOnce(Return(std::vector<bool>{true, true}));
  deferred();
  EXPECT_EQ(Where(q, "t1"), QueueKind::kActive);
  EXPECT_FALSE(q.Find("gone").has_value());

  // Nothing needs a hint: nothing is deferred.
  deferred = nullptr;
  q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD), [&](std::function<void()> ask) { deferred = std::move(ask); });
  EXPECT_FALSE(deferred);
}

TEST_F(SchedulingQueueTest, HintedMoveRespectsBackoff) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"TaintToleration"});
  EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(1))).WillOnce(Return(std::vector<bool>{true}));
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD)), 1u);
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);  // Still within its 1 s.
}

TEST_F(SchedulingQueueTest, MalformedHintAnswerRequeues) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"TaintToleration"});
  clock_.Advance(absl::Seconds(2));
  EXPECT_CALL(evaluator_, Evaluate(_, _)).WillOnce(Return(std::vector<bool>{}));
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD)), 1u);
}

TEST_F(SchedulingQueueTest, PodThatLeftThePoolWhileHintsWereAskedIsNotMoved) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"TaintToleration"});
  clock_.Advance(absl::Seconds(2));
  EXPECT_CALL(evaluator_, Evaluate(_, _))
      .WillOnce([&](const v1::ClusterEvent&, const std::vector<HintCandidate>&) {
        // Deleted while the plugin was asked (the queue lock is not held).
        EXPECT_TRUE(q.Delete("p"));
        return std::vector<bool>{true};
      });
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD)), 0u);
  EXPECT_FALSE(q.Find("p").has_value());
}

// kube-scheduler's inFlightEvents: the cluster events that came while a pod
// was being scheduled decide, through its rejecting plugins' registrations
// and hints, whether it is retried after its backoff or waits in the pool.
TEST_F(SchedulingQueueTest, EventsDuringTheAttemptDecideWhereTheFailedPodGoes) {
  struct Case {
    std::string name;
    std::set<std::string> plugins;
    std::vector<v1::ClusterEvent> during;
    std::optional<bool> hint;  // The hint's answer, when one is asked.
    QueueKind where;
  };
  const std::vector<Case> cases = {
      {"nothing happened", {"NodeAffinity"}, {}, std::nullopt, QueueKind::kUnschedulable},
      {"an event its rejector ignores", {"NodeAffinity"}, {Event(v1::POD, v1::ADD)}, std::nullopt,
       QueueKind::kUnschedulable},
      {"a rejector registered for nothing", {"NodeResourcesFit"}, {Event(v1::NODE, v1::ALL)}, std::nullopt,
       QueueKind::kUnschedulable},
      {"an event its rejector registered without a hint", {"NodeAffinity"},
       {Event(v1::POD, v1::ADD), Event(v1::NODE, v1::UPDATE_NODE_LABEL)}, std::nullopt, QueueKind::kBackoff},
      {"a wildcard event", {"NodeResourcesFit"}, {Event(v1::RESOURCE_UNSPECIFIED, v1::ALL)}, std::nullopt,
       QueueKind::kBackoff},
      {"an Error retries whatever came", {}, {}, std::nullopt, QueueKind::kBackoff},
      {"a hint says Queue", {"TaintToleration"}, {Event(v1::NODE, v1::UPDATE_NODE_TAINT)}, true,
       QueueKind::kBackoff},
      {"a hint says QueueSkip", {"TaintToleration"}, {Event(v1::NODE, v1::UPDATE_NODE_TAINT)}, false,
       QueueKind::kUnschedulable},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulingQueue q(Opts());
    q.SetEventRegistry(TestRegistry());
    q.Add(MakePod("p"));
    q.MoveAllToActiveOrBackoffQueue(Event(v1::RESOURCE_UNSPECIFIED, v1::ALL));  // Before the pop: not counted.
    auto info = q.TryPop();
    ASSERT_TRUE(info.has_value());
    for (const auto& e : c.during) q.MoveAllToActiveOrBackoffQueue(e);
    EXPECT_EQ(q.InFlightEventCount(), c.during.size());
    info->unschedulable_plugins = c.plugins;
    if (c.hint.has_value()) {
      EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(1)))
          .WillOnce([&](const v1::ClusterEvent& e, const std::vector<HintCandidate>& candidates) {
            EXPECT_EQ(e.action(), static_cast<uint32_t>(v1::UPDATE_NODE_TAINT));
            EXPECT_EQ(candidates[0].pod->meta().uid(), "p");
            EXPECT_THAT(candidates[0].plugins, ElementsAre("TaintToleration"));
            return std::vector<bool>{*c.hint};
          });
    }
    ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
    q.Done("p");
    EXPECT_EQ(Where(q, "p"), c.where);
    EXPECT_EQ(q.InFlightEventCount(), 0u);  // Nobody in flight: nothing kept.
    testing::Mock::VerifyAndClearExpectations(&evaluator_);
  }
}

// The hints about in-flight events may call plugins: asked where `defer`
// sends them, with the pod waiting in the pool meanwhile; not asked at all
// when it left the pool (a preemptor held, a later event moved it).
TEST_F(SchedulingQueueTest, InFlightHintsAreAskedWhereTheDeferralSendsThem) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  clock_.Advance(absl::Milliseconds(1));
  q.Add(MakePod("held"));
  auto p = q.TryPop();
  auto held = q.TryPop();
  ASSERT_TRUE(p.has_value() && held.has_value());
  ASSERT_EQ(p->uid(), "p");
  ASSERT_EQ(held->uid(), "held");
  q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::UPDATE_NODE_TAINT));
  q.MoveAllToActiveOrBackoffQueue(Event(v1::POD, v1::DELETE));
  std::vector<std::function<void()>> deferred;
  const SchedulingQueue::HintDeferral defer = [&](std::function<void()> ask) { deferred.push_back(std::move(ask)); };
  p->unschedulable_plugins = {"TaintToleration", "InterPodAffinity"};
  held->unschedulable_plugins = {"TaintToleration"};
  EXPECT_CALL(evaluator_, Evaluate(_, _)).Times(0);
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*p, q.scheduling_cycle(), defer).ok());
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*held, q.scheduling_cycle(), defer).ok());
  q.Done("p");
  q.Done("held");
  ASSERT_EQ(deferred.size(), 2u);
  EXPECT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
  ASSERT_TRUE(q.Hold("held", "DefaultPreemption", "waiting"));
  testing::Mock::VerifyAndClearExpectations(&evaluator_);

  // p: the taint update says QueueSkip, the pod deletion Queue, event by
  // event in the order they came, each asking only the plugins registered
  // for it.
  testing::InSequence in_order;
  EXPECT_CALL(evaluator_, Evaluate(Property(&v1::ClusterEvent::action, static_cast<uint32_t>(v1::UPDATE_NODE_TAINT)), _))
      .WillOnce([](const v1::ClusterEvent&, const std::vector<HintCandidate>& candidates) {
        EXPECT_THAT(candidates[0].plugins, ElementsAre("TaintToleration"));
        return std::vector<bool>{false};
      });
  EXPECT_CALL(evaluator_, Evaluate(Property(&v1::ClusterEvent::action, static_cast<uint32_t>(v1::DELETE)), _))
      .WillOnce([](const v1::ClusterEvent&, const std::vector<HintCandidate>& candidates) {
        EXPECT_THAT(candidates[0].plugins, ElementsAre("InterPodAffinity"));
        return std::vector<bool>{true};
      });
  deferred[0]();
  deferred[1]();  // Held: nothing asked.
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);
  EXPECT_EQ(Where(q, "held"), QueueKind::kGated);
}

TEST_F(SchedulingQueueTest, ManyHintedEventsInFlightRetryWithoutAsking) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  auto info = q.TryPop();
  for (size_t i = 0; i <= SchedulingQueue::kMaxInFlightHintEvents; ++i) {
    q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::UPDATE_NODE_TAINT));
  }
  info->unschedulable_plugins = {"TaintToleration"};
  EXPECT_CALL(evaluator_, Evaluate(_, _)).Times(0);
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);
}

TEST_F(SchedulingQueueTest, InFlightEventsAreKeptForTheOldestPodInFlightAndNoLonger) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  for (std::string uid : {"early", "late"}) q.Add(MakePod(uid));
  auto early = q.TryPop();
  ASSERT_EQ(early->uid(), "early");
  q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::UPDATE_NODE_LABEL));  // early's only.
  auto late = q.TryPop();
  q.MoveAllToActiveOrBackoffQueue(Event(v1::POD, v1::ADD));
  EXPECT_EQ(q.InFlightEventCount(), 2u);
  EXPECT_EQ(q.InFlightEventsByLabel(),
            (absl::flat_hash_map<std::string, size_t>{
                {"PodPoppedInFlightEvent", 2}, {"NodeLabelChange", 1}, {"AssignedPodAdd", 1}}));
  // late saw only the pod add, which NodeAffinity ignores.
  late->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*late, q.scheduling_cycle()).ok());
  q.Done("late");
  EXPECT_EQ(Where(q, "late"), QueueKind::kUnschedulable);
  EXPECT_EQ(q.InFlightEventCount(), 2u);  // early may still fail.
  early->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*early, q.scheduling_cycle()).ok());
  EXPECT_EQ(Where(q, "early"), QueueKind::kBackoff);
  EXPECT_EQ(q.InFlightEventCount(), 0u);
  // No pod in flight: events are not kept.
  q.MoveAllToActiveOrBackoffQueue(Event(v1::POD, v1::ADD));
  EXPECT_EQ(q.InFlightEventCount(), 0u);
  EXPECT_TRUE(q.InFlightEventsByLabel().empty());
}

TEST_F(SchedulingQueueTest, APodWhoseInFlightEventsOverflowedIsRetried) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  auto info = q.TryPop();
  // Events NodeAffinity ignores, one more than are kept.
  for (size_t i = 0; i <= SchedulingQueue::kMaxInFlightEvents; ++i) {
    q.MoveAllToActiveOrBackoffQueue(Event(v1::POD, v1::ADD));
  }
  EXPECT_EQ(q.InFlightEventCount(), SchedulingQueue::kMaxInFlightEvents);
  info->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);  // What was dropped may have mattered.
}

TEST_F(SchedulingQueueTest, AddUnschedulableOfQueuedPodFails) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  QueuedPodInfo info;
  info.pod_info = MakePod("p");
  EXPECT_EQ(q.AddUnschedulableIfNotPresent(info, 0).code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(SchedulingQueueTest, UpdateInActiveQReorders) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("a", 10, 1));
  q.Add(MakePod("b", 5, 2));
  q.Update(MakePodProto("b", 5, 2), MakePod("b", 20, 2));
  EXPECT_THAT(PopAll(q), ElementsAre("b", "a"));
}

TEST_F(SchedulingQueueTest, UpdateInBackoffQStaysThere) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {});
  auto before = q.Find("p");
  q.Update(MakePod("p", 7));
  auto after = q.Find("p");
  EXPECT_EQ(after->queue, QueueKind::kBackoff);
  EXPECT_EQ(after->backoff_expiry, before->backoff_expiry);
  EXPECT_EQ(after->pod_info->pod->priority(), 7);
}

TEST_F(SchedulingQueueTest, UpdateInPool) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"});

  // Status-only change: stays.
  v1::Pod status_only = MakePodProto("p");
  status_only.set_phase(v1::PENDING);
  status_only.mutable_meta()->set_resource_version("42");
  q.Update(sdk::PodInfo::Create(status_only));
  EXPECT_EQ(Where(q, "p"), QueueKind::kUnschedulable);

  // Spec change: out, to backoffQ while backing off.
  q.Update(MakePod("p", 3));
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);

  // Same again once the backoff is over: activeQ.
  q.Add(MakePod("r"));
  q.Delete("p");
  FailAttempt(q, "r", {"NodeResourcesFit"});
  clock_.Advance(absl::Seconds(5));
  q.Update(MakePod("r", 3));
  EXPECT_EQ(Where(q, "r"), QueueKind::kActive);
}

// kube-scheduler's UnscheduledPodUpdate with queueing hints: the pending pod's
// own update moves it only when a plugin that rejected it registered for
// what changed (and its hint, if any, says Queue).
TEST_F(SchedulingQueueTest, APendingPodsOwnUpdateMovesItOnlyForItsRejectingPlugins) {
  EventRegistry registry;
  registry["NodeAffinity"] = {Interest(v1::NODE, v1::ADD, false)};
  registry["NodeResourcesFit"] = {Interest(v1::UNSCHEDULED_POD, v1::UPDATE_POD_SCALE_DOWN, false)};
  registry["PodTopologySpread"] = {
      Interest(v1::UNSCHEDULED_POD, v1::UPDATE_POD_LABEL | v1::UPDATE_POD_TOLERATIONS, true)};
  registry["AnyUpdate"] = {Interest(v1::UNSCHEDULED_POD, v1::UPDATE, false)};
  v1::Pod big = MakePodProto("p");
  big.mutable_containers(0)->mutable_requests()->set_milli_cpu(2000);
  v1::Pod small = big;
  small.mutable_containers(0)->mutable_requests()->set_milli_cpu(1000);
  v1::Pod labelled = big;
  (*labelled.mutable_meta()->mutable_labels())["app"] = "web";
  v1::Pod annotated = big;
  (*annotated.mutable_meta()->mutable_annotations())["note"] = "x";
  struct Case {
    std::string name;
    std::string plugin;
    const v1::Pod* update;
    std::optional<bool> hint;
    bool moves;
  };
  const std::vector<Case> cases = {
      {"a label change NodeAffinity ignores", "NodeAffinity", &labelled, std::nullopt, false},
      {"an annotation: no UPDATE_POD_* bit, only an interest in every update", "NodeResourcesFit", &annotated,
       std::nullopt, false},
      {"the pod asks for less", "NodeResourcesFit", &small, std::nullopt, true},
      {"a label change, the hint says QueueSkip", "PodTopologySpread", &labelled, false, false},
      {"a label change, the hint says Queue", "PodTopologySpread", &labelled, true, true},
      {"an annotation, for a plugin registered for every update", "AnyUpdate", &annotated, std::nullopt, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SchedulingQueue q(Opts());
    q.SetEventRegistry(registry);
    q.Add(sdk::PodInfo::Create(big));
    FailAttempt(q, "p", {c.plugin});
    ASSERT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
    if (c.hint.has_value()) {
      EXPECT_CALL(evaluator_, Evaluate(_, SizeIs(1)))
          .WillOnce([&](const v1::ClusterEvent& e, const std::vector<HintCandidate>& candidates) {
            EXPECT_EQ(e.resource(), v1::UNSCHEDULED_POD);
            EXPECT_EQ(e.action(), static_cast<uint32_t>(v1::UPDATE_POD_LABEL));
            EXPECT_EQ(e.old_pod().meta().labels_size(), 0);
            EXPECT_EQ(e.new_pod().meta().labels().at("app"), "web");
            EXPECT_THAT(candidates[0].plugins, ElementsAre("PodTopologySpread"));
            return std::vector<bool>{*c.hint};
          });
    }
    q.Update(sdk::PodInfo::Create(*c.update));
    EXPECT_EQ(Where(q, "p"), c.moves ? QueueKind::kBackoff : QueueKind::kUnschedulable);
    // Moved or not, the queue holds the new version.
    EXPECT_EQ(q.Find("p")->pod_info->pod->SerializeAsString(), c.update->SerializeAsString());
    testing::Mock::VerifyAndClearExpectations(&evaluator_);
  }
}

// An update that comes while the pod is being scheduled is judged with the
// other in-flight events when the attempt fails; another pod's own update
// is not its event.
TEST_F(SchedulingQueueTest, AnUpdateInFlightIsJudgedByTheRejectingPlugins) {
  EventRegistry registry;
  registry["NodeAffinity"] = {Interest(v1::NODE, v1::ADD, false)};
  registry["NodeResourcesFit"] = {Interest(v1::UNSCHEDULED_POD, v1::UPDATE_POD_SCALE_DOWN, false)};
  SchedulingQueue q(Opts());
  q.SetEventRegistry(registry);
  v1::Pod big = MakePodProto("a");
  big.mutable_containers(0)->mutable_requests()->set_milli_cpu(2000);
  q.Add(sdk::PodInfo::Create(big));
  q.Add(MakePod("b"));
  q.Add(MakePod("c"));
  auto a = q.TryPop();
  auto b = q.TryPop();
  auto c = q.TryPop();
  ASSERT_TRUE(a.has_value() && b.has_value() && c.has_value());
  ASSERT_EQ(a->uid(), "a");  // Equal times: by uid.
  ASSERT_EQ(b->uid(), "b");
  v1::Pod a_small = big;
  a_small.mutable_containers(0)->mutable_requests()->set_milli_cpu(1000);
  q.Update(sdk::PodInfo::Create(a_small));
  v1::Pod b_labelled = MakePodProto("b");
  (*b_labelled.mutable_meta()->mutable_labels())["app"] = "web";
  q.Update(sdk::PodInfo::Create(b_labelled));
  // a asked for less: NodeResourcesFit registered for that.
  a->unschedulable_plugins = {"NodeResourcesFit"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*a, q.scheduling_cycle()).ok());
  q.Done("a");
  EXPECT_EQ(Where(q, "a"), QueueKind::kBackoff);
  EXPECT_EQ(q.Find("a")->pod_info->pod->containers(0).requests().milli_cpu(), 1000);
  // b's label change does not help NodeAffinity: the pool, with the new labels.
  b->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*b, q.scheduling_cycle()).ok());
  q.Done("b");
  EXPECT_EQ(Where(q, "b"), QueueKind::kUnschedulable);
  EXPECT_EQ(q.Find("b")->pod_info->pod->meta().labels().at("app"), "web");
  // c was not updated: a's scale-down is a's own.
  c->unschedulable_plugins = {"NodeResourcesFit"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*c, q.scheduling_cycle()).ok());
  q.Done("c");
  EXPECT_EQ(Where(q, "c"), QueueKind::kUnschedulable);
}

// A change of status alone while in flight (another component's
// nominatedNodeName) moves nothing, but the queue keeps that version.
TEST_F(SchedulingQueueTest, AStatusChangeInFlightIsKeptWithoutMovingThePod) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  auto p = q.TryPop();
  v1::Pod hinted = MakePodProto("p");
  hinted.set_nominated_node_name("n7");
  q.Update(sdk::PodInfo::Create(hinted));
  p->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*p, q.scheduling_cycle()).ok());
  q.Done("p");
  EXPECT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
  EXPECT_EQ(q.Find("p")->pod_info->pod->nominated_node_name(), "n7");
}

TEST_F(SchedulingQueueTest, AssignedPodLeavesTheQueue) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  v1::Pod bound = MakePodProto("p");
  bound.set_node_name("n1");
  q.Update(sdk::PodInfo::Create(bound));
  EXPECT_FALSE(q.Find("p").has_value());
  EXPECT_EQ(q.PendingPods().active, 0u);
}

TEST_F(SchedulingQueueTest, DeleteFromEachQueue) {
  SchedulingQueue q(Opts());
  // Queued in pop order (PrioritySort: equal priorities by queue time).
  for (std::string uid : {"backoff", "pool", "active"}) {
    q.Add(MakePod(uid));
    clock_.Advance(absl::Milliseconds(1));
  }
  q.Add(MakePod("gated", 0, 4, {"g"}));
  FailAttempt(q, "backoff", {});
  FailAttempt(q, "pool", {"NodeResourcesFit"});
  EXPECT_EQ(Where(q, "active"), QueueKind::kActive);
  for (std::string uid : {"active", "backoff", "pool", "gated"}) {
    EXPECT_TRUE(q.Delete(uid)) << uid;
    EXPECT_FALSE(q.Find(uid).has_value()) << uid;
  }
  EXPECT_FALSE(q.Delete("active"));
  PendingPodCounts c = q.PendingPods();
  EXPECT_EQ(c.active + c.backoff + c.unschedulable + c.gated, 0u);
}

TEST_F(SchedulingQueueTest, InFlightUpdateAndDelete) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("u", 0, 1));
  clock_.Advance(absl::Milliseconds(1));
  q.Add(MakePod("d", 0, 2));
  auto u = q.TryPop();
  const uint64_t u_cycle = q.scheduling_cycle();
  auto d = q.TryPop();
  const uint64_t d_cycle = q.scheduling_cycle();
  ASSERT_EQ(u->uid(), "u");

  q.Update(MakePod("u", 9, 1));  // Updated while being scheduled.
  EXPECT_FALSE(q.Find("u").has_value());  // Not duplicated into activeQ.
  EXPECT_TRUE(q.Delete("d"));

  u->unschedulable_plugins = {"NodeResourcesFit"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*u, u_cycle).ok());
  auto s = q.Find("u");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->queue, QueueKind::kBackoff);  // Retried: the update may help.
  EXPECT_EQ(s->pod_info->pod->priority(), 9);

  d->unschedulable_plugins = {"NodeResourcesFit"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*d, d_cycle).ok());
  EXPECT_FALSE(q.Find("d").has_value());  // Deleted meanwhile: dropped.
}

TEST_F(SchedulingQueueTest, AssignedPodEventsUsePodResource) {
  SchedulingQueue q(Opts());
  q.SetEventRegistry(TestRegistry());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"InterPodAffinity"});
  clock_.Advance(absl::Seconds(2));
  EXPECT_CALL(evaluator_,
              Evaluate(testing::AllOf(
                           testing::Property(&v1::ClusterEvent::resource, v1::POD),
                           testing::Property(&v1::ClusterEvent::action,
                                             static_cast<uint32_t>(v1::DELETE))),
                       SizeIs(1)))
      .WillOnce(Return(std::vector<bool>{true}));
  v1::Pod other = MakePodProto("other");
  other.set_node_name("n1");
  EXPECT_EQ(q.AssignedPodUpdated(other, other, v1::UPDATE_POD_LABEL), 0u);  // Not registered.
  EXPECT_EQ(q.AssignedPodDeleted(other), 1u);
}

TEST_F(SchedulingQueueTest, AdminMoveAndActivate) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("a", 0, 1));
  q.Add(MakePod("b", 0, 2));
  q.Add(MakePod("c", 0, 3));
  FailAttempt(q, "a", {});
  FailAttempt(q, "b", {"NodeResourcesFit"});
  FailAttempt(q, "c", {"NodeResourcesFit"});
  EXPECT_EQ(q.Activate({"b", "nope"}), 1u);
  EXPECT_EQ(Where(q, "b"), QueueKind::kActive);
  EXPECT_EQ(q.MoveAllToActiveQueue(), 2u);
  EXPECT_EQ(q.PendingPods().active, 3u);
}

// A preemptor is held while its victims go (kube-scheduler's DefaultPreemption
// PreEnqueue): shown as gated by the plugin, untouched by updates, moves,
// flushes and Activate, and let go only by Release.
TEST_F(SchedulingQueueTest, AHeldPodWaitsUntilReleased) {
  SchedulingQueue q(Opts());
  EXPECT_FALSE(q.Hold("p", "DefaultPreemption", "waiting"));  // Not queued.
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"});
  ASSERT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
  ASSERT_TRUE(q.Hold("p", "DefaultPreemption", "waiting for the preemption for this pod to be finished"));
  EXPECT_EQ(Where(q, "p"), QueueKind::kGated);
  EXPECT_EQ(q.Find("p")->gating_plugin, "DefaultPreemption");
  EXPECT_EQ(q.Find("p")->message, "waiting for the preemption for this pod to be finished");

  v1::Pod changed = MakePodProto("p");
  (*changed.mutable_meta()->mutable_labels())["new"] = "label";  // An update that would move it.
  q.Update(sdk::PodInfo::Create(changed));
  q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD));  // No hint asked: held pods are skipped.
  EXPECT_EQ(q.MoveAllToActiveQueue(), 0u);
  EXPECT_EQ(q.Activate({"p"}), 0u);
  clock_.Advance(absl::Minutes(10));
  q.FlushBackoffQCompleted();
  q.FlushUnschedulablePodsLeftover();
  EXPECT_EQ(Where(q, "p"), QueueKind::kGated);
  EXPECT_FALSE(q.TryPop().has_value());

  ASSERT_TRUE(q.Release("p", /*to_active=*/true));
  EXPECT_FALSE(q.Release("p", true));  // Once.
  auto popped = q.TryPop();
  ASSERT_TRUE(popped.has_value());
  EXPECT_EQ(popped->pod().meta().labels().at("new"), "label");  // The latest version.
}

// A preemptor whose preemption's API calls returned is unheld: it stays in
// the pool, ungated, and events move it as any unschedulable pod's.
TEST_F(SchedulingQueueTest, AnUnheldPodWaitsInThePoolForAnEvent) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"});
  ASSERT_TRUE(q.Hold("p", "DefaultPreemption", "waiting"));
  ASSERT_TRUE(q.Unhold("p"));
  EXPECT_FALSE(q.Unhold("p"));  // Once.
  EXPECT_FALSE(q.Release("p", true));  // Not held any more.
  EXPECT_EQ(Where(q, "p"), QueueKind::kUnschedulable);
  EXPECT_FALSE(q.TryPop().has_value());
  EXPECT_EQ(q.Activate({"p"}), 1u);  // Its last victim gone.
  EXPECT_EQ(Where(q, "p"), QueueKind::kActive);
}

TEST_F(SchedulingQueueTest, AReleaseAfterAFailedPreemptionBacksOff) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("p"));
  FailAttempt(q, "p", {"NodeResourcesFit"});
  ASSERT_TRUE(q.Hold("p", "DefaultPreemption", "waiting"));
  ASSERT_TRUE(q.Release("p", /*to_active=*/false));
  EXPECT_EQ(Where(q, "p"), QueueKind::kBackoff);  // One attempt: 1 s of backoff.
  clock_.Advance(absl::Seconds(1));
  q.FlushBackoffQCompleted();
  EXPECT_EQ(Where(q, "p"), QueueKind::kActive);
}

TEST_F(SchedulingQueueTest, ListSummarizesEveryPod) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("b", 0, 2));
  q.Add(MakePod("a", 0, 1));
  q.Add(MakePod("g", 0, 3, {"x"}));
  clock_.Advance(absl::Seconds(1));
  FailAttempt(q, "a", {"NodeAffinity", "TaintToleration"});
  auto list = q.List();
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].pod_info->uid(), "b");
  EXPECT_EQ(list[0].queue, QueueKind::kActive);
  EXPECT_EQ(list[1].pod_info->uid(), "g");  // Pool by timestamp: g was added first.
  EXPECT_EQ(list[1].queue, QueueKind::kGated);
  EXPECT_EQ(list[2].pod_info->uid(), "a");
  EXPECT_EQ(list[2].queue, QueueKind::kUnschedulable);
  EXPECT_EQ(list[2].attempts, 1);
  EXPECT_THAT(list[2].unschedulable_plugins, ElementsAre("NodeAffinity", "TaintToleration"));
  EXPECT_EQ(list[2].message, "0/1 nodes are available");

  EXPECT_EQ(QueueKindName(QueueKind::kGated), "gated");
}

std::vector<std::string> Uids(const QueueListPage& page) {
  std::vector<std::string> out;
  for (const auto& s : page.pods) out.push_back(s.pod_info->uid());
  return out;
}

TEST_F(SchedulingQueueTest, ListPageFollowsListOrderAndFilters) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("b", 0, 2));
  q.Add(MakePod("a", 0, 1));
  q.Add(MakePod("c", 5, 3));
  q.Add(MakePod("g", 0, 4, {"x"}));
  clock_.Advance(absl::Seconds(1));
  FailAttempt(q, "c", {"NodeAffinity"});  // c pops first (priority 5).
  clock_.Advance(absl::Seconds(1));
  FailAttempt(q, "a", {"TaintToleration"});
  // List order: activeQ (b), then the pool by timestamp (g, c, a).
  std::vector<std::string> all;
  for (const auto& s : q.List()) all.push_back(s.pod_info->uid());
  ASSERT_THAT(all, ElementsAre("b", "g", "c", "a"));

  std::vector<std::string> paged;
  for (size_t offset = 0; offset < 4; offset += 1) {
    QueueListPage page = q.ListPage({}, offset, 1);
    EXPECT_EQ(page.total, 4u);
    ASSERT_EQ(page.pods.size(), 1u);
    paged.push_back(page.pods[0].pod_info->uid());
  }
  EXPECT_EQ(paged, all);
  EXPECT_THAT(Uids(q.ListPage({}, 1, 2)), ElementsAre("g", "c"));
  EXPECT_TRUE(q.ListPage({}, 4, 10).pods.empty());

  QueueListFilter by_plugin;
  by_plugin.plugin = "NodeAffinity";
  EXPECT_THAT(Uids(q.ListPage(by_plugin, 0, 10)), ElementsAre("c"));
  by_plugin.plugin = "SchedulingGates";
  EXPECT_THAT(Uids(q.ListPage(by_plugin, 0, 10)), ElementsAre("g"));
  QueueListFilter gated;
  gated.queue = QueueKind::kGated;
  EXPECT_THAT(Uids(q.ListPage(gated, 0, 10)), ElementsAre("g"));
  QueueListFilter unschedulable;
  unschedulable.queue = QueueKind::kUnschedulable;
  QueueListPage page = q.ListPage(unschedulable, 1, 10);
  EXPECT_EQ(page.total, 2u);
  EXPECT_THAT(Uids(page), ElementsAre("a"));
  QueueListFilter other_ns;
  other_ns.namespace_name = "kube-system";
  EXPECT_EQ(q.ListPage(other_ns, 0, 10).total, 0u);
}

// Pods popped and not Done are listed after the queues, by when they were
// popped, so an operator sees the pods being scheduled too.
TEST_F(SchedulingQueueTest, ListPagePagesPodsInFlightAfterTheQueues) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("b", 0, 1));
  q.Add(MakePod("z", 7, 2));
  q.Add(MakePod("y", 8, 3));
  q.Add(MakePod("x", 9, 4));
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(q.TryPop()->uid(), "x");
  const absl::Time x_popped = clock_.Now();
  clock_.Advance(absl::Seconds(1));
  ASSERT_EQ(q.TryPop()->uid(), "y");

  std::vector<std::string> paged;
  for (size_t offset = 0; offset < 4; ++offset) {
    QueueListPage page = q.ListPage({}, offset, 1);
    EXPECT_EQ(page.total, 4u);
    ASSERT_EQ(page.pods.size(), 1u);
    paged.push_back(page.pods[0].pod_info->uid());
  }
  EXPECT_THAT(paged, ElementsAre("z", "b", "x", "y"));
  EXPECT_THAT(Uids(q.ListPage({}, 1, 2)), ElementsAre("b", "x"));

  QueueListFilter in_flight;
  in_flight.queue = QueueKind::kInFlight;
  QueueListPage page = q.ListPage(in_flight, 0, 10);
  EXPECT_EQ(page.total, 2u);
  ASSERT_THAT(Uids(page), ElementsAre("x", "y"));
  EXPECT_EQ(page.pods[0].queue, QueueKind::kInFlight);
  EXPECT_EQ(page.pods[0].attempts, 1);
  EXPECT_EQ(page.pods[0].timestamp, x_popped);
  EXPECT_EQ(page.pods[0].backoff_expiry, absl::InfinitePast());
  EXPECT_EQ(QueueKindName(QueueKind::kInFlight), "in_flight");

  // The Admin service lists pods waiting at Permit itself.
  in_flight.except_in_flight = {"x"};
  EXPECT_THAT(Uids(q.ListPage(in_flight, 0, 10)), ElementsAre("y"));
  QueueListFilter other_ns;
  other_ns.namespace_name = "kube-system";
  EXPECT_EQ(q.ListPage(other_ns, 0, 10).total, 0u);
  // No attempt in flight has a verdict yet: a plugin filter matches none.
  QueueListFilter by_plugin;
  by_plugin.plugin = "NodeAffinity";
  EXPECT_EQ(q.ListPage(by_plugin, 0, 10).total, 0u);

  // Deleted in flight: no longer pending. Done: no longer in flight.
  EXPECT_TRUE(q.Delete("y"));
  q.Done("x");
  EXPECT_THAT(Uids(q.ListPage({}, 0, 10)), ElementsAre("z", "b"));
}

TEST_F(SchedulingQueueTest, UidsOfIndexesQueuedPodsByName) {
  SchedulingQueue q(Opts());
  q.Add(MakePod("a"));
  EXPECT_THAT(q.UidsOf("default", "a"), ElementsAre("a"));
  EXPECT_TRUE(q.UidsOf("default", "nope").empty());
  EXPECT_TRUE(q.UidsOf("other", "a").empty());
  // In flight: not queued, not indexed; back in the pool: indexed again.
  auto info = q.TryPop();
  ASSERT_TRUE(info.has_value());
  EXPECT_TRUE(q.UidsOf("default", "a").empty());
  info->unschedulable_plugins = {"NodeAffinity"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
  q.Done("a");
  EXPECT_THAT(q.UidsOf("default", "a"), ElementsAre("a"));
  // A namesake with another uid (deleted and re-created) is found too.
  v1::Pod namesake = MakePodProto("a-2");
  namesake.mutable_meta()->set_name("a");
  q.Add(sdk::PodInfo::Create(namesake));
  EXPECT_THAT(q.UidsOf("default", "a"), ElementsAre("a", "a-2"));
  EXPECT_TRUE(q.Delete("a"));
  EXPECT_THAT(q.UidsOf("default", "a"), ElementsAre("a-2"));
  EXPECT_EQ(q.Activate(q.UidsOf("default", "a")), 0u);  // Already active.
  EXPECT_TRUE(q.Delete("a-2"));
  EXPECT_TRUE(q.UidsOf("default", "a").empty());
}

TEST_F(SchedulingQueueTest, PopBlocksUntilAPodArrives) {
  SchedulingQueue q(Opts());
  std::optional<QueuedPodInfo> popped;
  std::thread t([&] { popped = q.Pop(); });
  q.Add(MakePod("p"));
  t.join();
  ASSERT_TRUE(popped.has_value());
  EXPECT_EQ(popped->uid(), "p");
}

TEST_F(SchedulingQueueTest, CloseWakesPop) {
  SchedulingQueue q(Opts());
  std::optional<QueuedPodInfo> popped = QueuedPodInfo{};
  std::thread t([&] { popped = q.Pop(); });
  q.Close();
  t.join();
  EXPECT_FALSE(popped.has_value());
  EXPECT_TRUE(q.closed());
  q.Add(MakePod("late"));
  EXPECT_FALSE(q.Pop().has_value());
}

// Producers, a scheduler loop and an event/timer thread at once: every pod is
// scheduled exactly once after one failed attempt.
TEST_F(SchedulingQueueTest, ConcurrentUseLosesNoPod) {
  SchedulingQueue::Options o = Opts();
  o.hint_evaluator = nullptr;
  SchedulingQueue q(o);
  constexpr int kProducers = 4;
  constexpr int kPodsEach = 200;
  constexpr int kTotal = kProducers * kPodsEach;
  std::atomic<int> scheduled{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kProducers; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPodsEach; ++i) {
        q.Add(MakePod(absl::StrCat("p", t, "-", i), i % 3, i));
      }
    });
  }
  std::thread events([&] {
    while (scheduled.load() < kTotal) {
      clock_.Advance(absl::Seconds(1));
      q.MoveAllToActiveOrBackoffQueue(Event(v1::NODE, v1::ADD));
      q.FlushBackoffQCompleted();
      std::this_thread::yield();
    }
  });
  absl::flat_hash_set<std::string> done;
  while (static_cast<int>(done.size()) < kTotal) {
    auto info = q.PopWithTimeout(absl::Milliseconds(10));
    if (!info.has_value()) continue;
    const uint64_t cycle = q.scheduling_cycle();
    if (info->attempts == 1) {
      info->unschedulable_plugins = {"NotRegistered"};
      ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, cycle).ok());
    } else {
      EXPECT_TRUE(done.insert(info->uid()).second) << info->uid();
      scheduled.fetch_add(1);
    }
    q.Done(info->uid());
  }
  for (auto& t : threads) t.join();
  events.join();
  PendingPodCounts c = q.PendingPods();
  EXPECT_EQ(c.active + c.backoff + c.unschedulable + c.gated, 0u);
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

sdk::PodInfoPtr Member(const std::string& uid, const std::string& group, int32_t priority = 0) {
  v1::Pod p = MakePodProto(uid, priority);
  p.set_pod_group(group);
  return sdk::PodInfo::Create(std::move(p));
}

// Gangs: the scheduler takes a popped member's siblings from wherever they
// wait (activeQ, backoffQ, the pool), never a gated one, in pop order.
TEST_F(SchedulingQueueTest, PopGroupMembersTakesQueuedGangMembersAsPopDoes) {
  SchedulingQueue q(Opts());
  q.Add(Member("a1", "a", 9));
  q.Add(Member("a2", "a", 5));
  q.Add(Member("b1", "b"));
  q.Add(Member("a3", "a"));
  q.Add(MakePod("gated-a", 0, 0, {"wait"}));  // Not a member: stays.
  v1::Pod gated = MakePodProto("a4", 0, 0, {"wait"});
  gated.set_pod_group("a");
  q.Add(sdk::PodInfo::Create(gated));
  FailAttempt(q, "a1", {"Fit"}, /*move_request=*/true);  // a1 -> backoffQ.
  FailAttempt(q, "a2", {"Fit"});                         // a2 -> pool.
  ASSERT_EQ(Where(q, "a2"), QueueKind::kUnschedulable);
  ASSERT_EQ(Where(q, "a1"), QueueKind::kBackoff);
  std::vector<QueuedPodInfo> members = q.PopGroupMembers("default", "a");
  std::vector<std::string> uids;
  for (const auto& m : members) uids.push_back(m.uid());
  EXPECT_THAT(uids, ElementsAre("a1", "a2", "a3"));  // Priority order; the gated a4 stays.
  EXPECT_EQ(members[0].attempts, 2);
  EXPECT_EQ(members[1].attempts, 2);
  EXPECT_EQ(members[2].attempts, 1);
  EXPECT_EQ(Where(q, "a4"), QueueKind::kGated);
  EXPECT_FALSE(q.Find("a3").has_value());  // In flight now.
  // In flight like a popped pod: a failed attempt requeues it.
  members[2].unschedulable_plugins = {"Fit"};
  ASSERT_TRUE(q.AddUnschedulableIfNotPresent(members[2], q.scheduling_cycle()).ok());
  q.Done("a3");
  EXPECT_EQ(Where(q, "a3"), QueueKind::kUnschedulable);
  EXPECT_THAT(PopAll(q), ElementsAre("b1"));
}

TEST_F(SchedulingQueueTest, RetryGatedMembersRunsPreEnqueueAgainForTheGroupsGatedPods) {
  std::atomic<int> pods_in_group{1};
  SchedulingQueue::Options o = Opts();
  o.pre_enqueue = [&pods_in_group](const sdk::PodInfo& pod) {
    if (pod.pod->pod_group().empty() || pods_in_group.load() >= 2) return sdk::Status::Success();
    sdk::Status s(sdk::Code::kUnschedulableAndUnresolvable, "waiting for pod group default/a");
    s.WithPlugin("Coscheduling");
    return s;
  };
  SchedulingQueue q(o);
  q.Add(Member("a1", "a"));
  q.Add(Member("b1", "b"));
  ASSERT_EQ(Where(q, "a1"), QueueKind::kGated);
  EXPECT_EQ(q.RetryGatedMembers("default", "a"), 0u);  // Still gated.
  EXPECT_EQ(q.Find("a1")->message, "waiting for pod group default/a");
  pods_in_group = 2;
  EXPECT_EQ(q.RetryGatedMembers("default", "a", "a1"), 0u);  // The pod that is excepted.
  EXPECT_EQ(q.RetryGatedMembers("default", "a"), 1u);
  EXPECT_EQ(Where(q, "a1"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "b1"), QueueKind::kGated);  // Not selected.
}

TEST_F(SchedulingQueueTest, RetryGatedAsksTheNamedGatedPodsAgain) {
  std::atomic<bool> open{false};
  SchedulingQueue::Options o = Opts();
  o.pre_enqueue = [&open](const sdk::PodInfo& pod) {
    if (open.load() && pod.uid() != "b1") return sdk::Status::Success();
    return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, "held");
  };
  SchedulingQueue q(o);
  q.Add(Member("a1", "a"));
  q.Add(Member("a2", "a"));
  q.Add(Member("b1", "b"));
  open = true;
  // a2 is not named; b1 is asked and still held; "gone" is unknown.
  EXPECT_EQ(q.RetryGated({"a1", "b1", "gone"}), 1u);
  EXPECT_EQ(Where(q, "a1"), QueueKind::kActive);
  EXPECT_EQ(Where(q, "a2"), QueueKind::kGated);
  EXPECT_EQ(Where(q, "b1"), QueueKind::kGated);
  EXPECT_EQ(q.RetryGated({"a1"}), 0u);  // No longer gated: not asked again.
}


// The group index follows the pods: a member that leaves its gang (its label
// changed), joins another or is deleted is found under its current group only;
// `also` filters (the scheduler keeps members of another profile out).
TEST_F(SchedulingQueueTest, PopGroupMembersFollowsGroupChangesAndDeletions) {
  SchedulingQueue q(Opts());
  q.Add(Member("a1", "a"));
  q.Add(Member("a2", "a"));
  q.Add(Member("a3", "a"));
  v1::Pod elsewhere = *Member("other-ns", "a")->pod;
  elsewhere.mutable_meta()->set_namespace_("batch");  // Group "a" of another namespace.
  q.Add(sdk::PodInfo::Create(elsewhere));
  q.Update(Member("a2", "b"));  // Moved to group b.
  ASSERT_TRUE(q.Delete("a3"));
  std::vector<std::string> uids;
  for (const auto& m : q.PopGroupMembers("default", "a")) uids.push_back(m.uid());
  EXPECT_THAT(uids, ElementsAre("a1"));
  EXPECT_TRUE(q.PopGroupMembers("default", "a").empty());  // In flight now.
  EXPECT_TRUE(q.PopGroupMembers("default", "b", [](const QueuedPodInfo&) { return false; }).empty());
  uids.clear();
  for (const auto& m : q.PopGroupMembers("default", "b")) uids.push_back(m.uid());
  EXPECT_THAT(uids, ElementsAre("a2"));
  uids.clear();
  for (const auto& m : q.PopGroupMembers("batch", "a")) uids.push_back(m.uid());
  EXPECT_THAT(uids, ElementsAre("other-ns"));
  EXPECT_TRUE(q.PopGroupMembers("default", "nowhere").empty());
}

}  // namespace
}  // namespace podium::scheduler
