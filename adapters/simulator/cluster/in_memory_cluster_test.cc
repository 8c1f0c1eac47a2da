#include "cluster/in_memory_cluster.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "cluster/action_executor.h"

namespace podium::sim {
namespace {

class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

v1::Pod MakePod(const std::string& name, const std::string& uid) {
  v1::Pod p;
  p.mutable_meta()->set_namespace_("default");
  p.mutable_meta()->set_name(name);
  p.mutable_meta()->set_uid(uid);
  return p;
}

v1::ObjectRef Ref(const std::string& name, const std::string& uid) {
  v1::ObjectRef r;
  r.set_kind("Pod");
  r.set_namespace_("default");
  r.set_name(name);
  r.set_uid(uid);
  return r;
}

v1::Action BindAction(uint64_t id, const std::string& name, const std::string& uid, const std::string& node) {
  v1::Action a;
  a.set_id(id);
  *a.mutable_bind()->mutable_pod() = Ref(name, uid);
  a.mutable_bind()->set_node_name(node);
  return a;
}

class InMemoryClusterTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  InMemoryCluster cluster_{[this] { return clock_.Now(); }};
};

TEST_F(InMemoryClusterTest, BindSetsNodeNameAndSendsUpsert) {
  cluster_.CreatePod(MakePod("a", "uid-a"));
  clock_.Advance(absl::Milliseconds(30));
  ActionOutcome out = cluster_.Execute(BindAction(1, "a", "uid-a", "n1"));
  EXPECT_EQ(out.result.action_id(), 1u);
  EXPECT_EQ(out.result.code(), v1::ActionResult::OK);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::UPSERT);
  EXPECT_EQ(out.events[0].pod().node_name(), "n1");
  auto rec = cluster_.GetPod("default", "a");
  ASSERT_TRUE(rec && rec->bound);
  EXPECT_EQ(*rec->bound - rec->created, absl::Milliseconds(30));
}

TEST_F(InMemoryClusterTest, BindConflictsWhenAlreadyBoundOrUidDiffers) {
  cluster_.CreatePod(MakePod("a", "uid-a"));
  ASSERT_EQ(cluster_.Execute(BindAction(1, "a", "uid-a", "n1")).result.code(), v1::ActionResult::OK);
  ActionOutcome again = cluster_.Execute(BindAction(2, "a", "uid-a", "n2"));
  EXPECT_EQ(again.result.code(), v1::ActionResult::CONFLICT);
  EXPECT_THAT(again.result.message(), ::testing::HasSubstr("already assigned"));
  EXPECT_TRUE(again.events.empty());

  cluster_.CreatePod(MakePod("b", "uid-b"));
  EXPECT_EQ(cluster_.Execute(BindAction(3, "b", "other-uid", "n1")).result.code(), v1::ActionResult::CONFLICT);
  EXPECT_EQ(cluster_.Execute(BindAction(4, "gone", "uid-x", "n1")).result.code(), v1::ActionResult::NOT_FOUND);
  EXPECT_EQ(cluster_.GetPod("default", "b")->pod.node_name(), "");
  EXPECT_EQ(cluster_.Counts().failed, 3u);
}

TEST_F(InMemoryClusterTest, DeleteHonoursUidPrecondition) {
  cluster_.CreatePod(MakePod("victim", "uid-v"));
  v1::Action del;
  del.set_id(7);
  *del.mutable_delete_pod()->mutable_pod() = Ref("victim", "stale-uid");
  del.mutable_delete_pod()->set_reason("preempted by default/hi");
  EXPECT_EQ(cluster_.Execute(del).result.code(), v1::ActionResult::CONFLICT);
  EXPECT_FALSE(cluster_.GetPod("default", "victim")->deleted);

  *del.mutable_delete_pod()->mutable_pod() = Ref("victim", "uid-v");
  ActionOutcome out = cluster_.Execute(del);
  EXPECT_EQ(out.result.code(), v1::ActionResult::OK);
  ASSERT_EQ(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::DELETE);
  EXPECT_EQ(out.events[0].pod().meta().uid(), "uid-v");
  auto rec = cluster_.GetPod("default", "victim");
  ASSERT_TRUE(rec);
  EXPECT_TRUE(rec->deleted);
  EXPECT_EQ(rec->delete_reason, "preempted by default/hi");
  EXPECT_EQ(cluster_.Execute(del).result.code(), v1::ActionResult::NOT_FOUND);
}

// Protocol 2: a delete that carries a DisruptionTarget patches it first (the
// watch sees the pod with it, then gone) and is counted as the two API calls
// it is; a failed patch deletes nothing.
TEST_F(InMemoryClusterTest, DeleteWithDisruptionTargetPatchesThenDeletesAndCountsBoth) {
  cluster_.CreatePod(MakePod("victim", "uid-v"));
  v1::Action del;
  del.set_id(8);
  *del.mutable_delete_pod()->mutable_pod() = Ref("victim", "uid-v");
  auto* c = del.mutable_delete_pod()->mutable_disruption_target();
  c->set_type("DisruptionTarget");
  c->set_status("True");
  c->set_reason("PreemptionByScheduler");
  ActionOutcome out = cluster_.Execute(del);
  EXPECT_EQ(out.result.code(), v1::ActionResult::OK) << out.result.message();
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::UPSERT);
  ASSERT_EQ(out.events[0].pod().conditions_size(), 1);
  EXPECT_EQ(out.events[0].pod().conditions(0).type(), "DisruptionTarget");
  EXPECT_EQ(out.events[1].type(), v1::ObjectEvent::DELETE);
  EXPECT_TRUE(cluster_.GetPod("default", "victim")->deleted);
  EXPECT_EQ(cluster_.Counts().patch, 1u);
  EXPECT_EQ(cluster_.Counts().delete_pod, 1u);

  ActionOutcome gone = cluster_.Execute(del);
  EXPECT_EQ(gone.result.code(), v1::ActionResult::NOT_FOUND);
  EXPECT_THAT(gone.result.message(), ::testing::HasSubstr("DisruptionTarget patch"));
  EXPECT_TRUE(gone.events.empty());
  EXPECT_EQ(cluster_.Counts().patch, 2u);
  EXPECT_EQ(cluster_.Counts().delete_pod, 1u);  // No delete after the failed patch.
}

TEST_F(InMemoryClusterTest, PatchStatusMergesConditionsByTypeAndNominates) {
  v1::Pod pod = MakePod("p", "uid-p");
  auto* ready = pod.add_conditions();
  ready->set_type("Ready");
  ready->set_status("False");
  cluster_.CreatePod(pod);

  v1::Action patch;
  patch.set_id(9);
  auto* pp = patch.mutable_patch_pod_status();
  *pp->mutable_pod() = Ref("p", "uid-p");
  auto* c = pp->add_conditions();
  c->set_type("PodScheduled");
  c->set_status("False");
  c->set_reason("Unschedulable");
  c->set_message("0/3 nodes are available: 3 Insufficient cpu.");
  pp->set_nominated_node_name("n2");
  ActionOutcome out = cluster_.Execute(patch);
  EXPECT_EQ(out.result.code(), v1::ActionResult::OK);
  ASSERT_EQ(out.events.size(), 1u);
  const v1::Pod& sent = out.events[0].pod();
  EXPECT_EQ(sent.conditions_size(), 2);
  EXPECT_EQ(sent.nominated_node_name(), "n2");
  auto rec = cluster_.GetPod("default", "p");
  EXPECT_TRUE(rec->unschedulable);
  EXPECT_EQ(rec->failed_message, "0/3 nodes are available: 3 Insufficient cpu.");

  // Same type again replaces the condition; absent nominated name leaves it.
  c->set_message("0/3 nodes are available: 3 Insufficient memory.");
  pp->clear_nominated_node_name();
  out = cluster_.Execute(patch);
  EXPECT_EQ(out.events[0].pod().conditions_size(), 2);
  EXPECT_EQ(out.events[0].pod().nominated_node_name(), "n2");
  EXPECT_EQ(cluster_.GetPod("default", "p")->failed_message, "0/3 nodes are available: 3 Insufficient memory.");

  // Present and empty clears it.
  pp->clear_conditions();
  pp->set_nominated_node_name("");
  out = cluster_.Execute(patch);
  EXPECT_EQ(out.events[0].pod().nominated_node_name(), "");

  InMemoryCluster::Progress progress = cluster_.Summarize([](const v1::Pod&) { return true; });
  EXPECT_EQ(progress.unschedulable, 1u);
  EXPECT_TRUE(progress.settled());
}

// Defect 18: a failed attempt (an endpoint with failurePolicy Fail down) was
// counted as "unschedulable". SchedulerError is an error, kept apart.
TEST_F(InMemoryClusterTest, SchedulerErrorIsAnErrorNotUnschedulable) {
  cluster_.CreatePod(MakePod("p", "uid-p"));
  v1::Action patch;
  patch.set_id(9);
  auto* pp = patch.mutable_patch_pod_status();
  *pp->mutable_pod() = Ref("p", "uid-p");
  auto* c = pp->add_conditions();
  c->set_type("PodScheduled");
  c->set_status("False");
  c->set_reason("SchedulerError");
  c->set_message("running Filter on endpoint host: UNAVAILABLE");
  EXPECT_EQ(cluster_.Execute(patch).result.code(), v1::ActionResult::OK);
  auto rec = cluster_.GetPod("default", "p");
  EXPECT_FALSE(rec->unschedulable);
  EXPECT_TRUE(rec->scheduling_error);
  EXPECT_EQ(rec->failed_message, "running Filter on endpoint host: UNAVAILABLE");
  InMemoryCluster::Progress progress = cluster_.Summarize([](const v1::Pod&) { return true; });
  EXPECT_EQ(progress.unschedulable, 0u);
  EXPECT_EQ(progress.errors, 1u);
  EXPECT_TRUE(progress.settled());
}

// Settled() keeps its own index of the pods that could be pending or
// resizing; it must say what a walk over every pod (Summarize) says, through
// each change an action or the loop makes.
TEST_F(InMemoryClusterTest, SettledAgreesWithSummarizeThroughEveryChange) {
  auto ours = [](const v1::Pod& p) { return p.scheduler_name() != "other"; };
  auto check = [&](bool want, const std::string& step) {
    EXPECT_EQ(cluster_.Summarize(ours).settled(), want) << step;
    EXPECT_EQ(cluster_.Settled(ours), want) << step;
  };
  auto condition = [](uint64_t id, const std::string& name, const std::string& type, const std::string& reason) {
    v1::Action a;
    a.set_id(id);
    auto* pp = a.mutable_patch_pod_status();
    *pp->mutable_pod() = Ref(name, "uid-" + name);
    auto* c = pp->add_conditions();
    c->set_type(type);
    c->set_status("False");
    c->set_reason(reason);
    return a;
  };
  auto remove = [](uint64_t id, const std::string& name) {
    v1::Action a;
    a.set_id(id);
    *a.mutable_delete_pod()->mutable_pod() = Ref(name, "uid-" + name);
    return a;
  };
  check(true, "empty cluster");
  v1::Pod other = MakePod("other", "uid-other");
  other.set_scheduler_name("other");
  cluster_.CreatePod(other);
  v1::Pod gated = MakePod("gated", "uid-gated");
  gated.add_scheduling_gates("example.com/wait");
  cluster_.CreatePod(gated);
  check(true, "only another scheduler's pod and a gated pod");

  cluster_.CreatePod(MakePod("a", "uid-a"));
  cluster_.CreatePod(MakePod("b", "uid-b"));
  cluster_.CreatePod(MakePod("c", "uid-c"));
  cluster_.CreatePod(MakePod("d", "uid-d"));
  check(false, "four pending pods");
  ASSERT_EQ(cluster_.Execute(BindAction(1, "a", "uid-a", "n1")).result.code(), v1::ActionResult::OK);
  ASSERT_EQ(cluster_.Execute(condition(2, "b", "PodScheduled", "Unschedulable")).result.code(), v1::ActionResult::OK);
  ASSERT_EQ(cluster_.Execute(condition(3, "c", "PodScheduled", "SchedulerError")).result.code(), v1::ActionResult::OK);
  check(false, "d still pending");
  ASSERT_EQ(cluster_.Execute(condition(4, "d", "PodScheduled", "SchedulingGated")).result.code(), v1::ActionResult::OK);
  check(true, "bound, unschedulable, failed, held");
  // A failed bind changes nothing; a Ready condition leaves b unschedulable.
  EXPECT_EQ(cluster_.Execute(BindAction(5, "a", "uid-a", "n2")).result.code(), v1::ActionResult::CONFLICT);
  ASSERT_EQ(cluster_.Execute(condition(6, "b", "Ready", "")).result.code(), v1::ActionResult::OK);
  check(true, "after a conflict and an unrelated condition");

  // A bound pod with a Deferred resize is unsettled until the scheduler
  // answers it (PodResizePreemption=False) or it goes.
  v1::Pod big = MakePod("big", "uid-big");
  big.set_node_name("n1");
  big.set_resize_status("Deferred");
  cluster_.CreatePod(big);
  check(false, "an unanswered resize");
  ASSERT_EQ(cluster_.Execute(condition(7, "big", "PodResizePreemption", "")).result.code(), v1::ActionResult::OK);
  check(true, "the resize answered");
  v1::Pod big2 = MakePod("big2", "uid-big2");
  big2.set_node_name("n1");
  big2.set_resize_status("Deferred");
  cluster_.CreatePod(big2);
  check(false, "a second unanswered resize");
  ASSERT_EQ(cluster_.Execute(remove(8, "big2")).result.code(), v1::ActionResult::OK);
  check(true, "the resizing pod deleted");

  // A pending pod deleted, then one created again under its name.
  cluster_.CreatePod(MakePod("e", "uid-e"));
  check(false, "e pending");
  ASSERT_EQ(cluster_.Execute(remove(9, "e")).result.code(), v1::ActionResult::OK);
  check(true, "e deleted");
  cluster_.CreatePod(MakePod("e", "uid-e"));
  check(false, "e created again");
  ASSERT_EQ(cluster_.Execute(BindAction(10, "e", "uid-e", "n1")).result.code(), v1::ActionResult::OK);
  check(true, "e bound");
}

TEST_F(InMemoryClusterTest, ForEachPodVisitsWhatPodsReturnsInCreationOrder) {
  cluster_.CreatePod(MakePod("b", "uid-b"));
  cluster_.CreatePod(MakePod("a", "uid-a"));
  v1::Action del;
  del.set_id(1);
  *del.mutable_delete_pod()->mutable_pod() = Ref("b", "uid-b");
  ASSERT_EQ(cluster_.Execute(del).result.code(), v1::ActionResult::OK);
  ASSERT_EQ(cluster_.Execute(BindAction(2, "a", "uid-a", "n1")).result.code(), v1::ActionResult::OK);
  std::vector<std::string> visited;
  cluster_.ForEachPod([&](const PodRecord& r) {
    visited.push_back(absl::StrCat(r.pod.meta().name(), r.deleted ? " deleted" : "", " ", r.pod.node_name()));
  });
  std::vector<std::string> copied;
  for (const PodRecord& r : cluster_.Pods())
    copied.push_back(absl::StrCat(r.pod.meta().name(), r.deleted ? " deleted" : "", " ", r.pod.node_name()));
  EXPECT_THAT(visited, ::testing::ElementsAre("b deleted ", "a n1"));
  EXPECT_EQ(visited, copied);
}

TEST_F(InMemoryClusterTest, RecordEventIsKept) {
  v1::Action ev;
  ev.set_id(3);
  ev.mutable_record_event()->set_reason("Scheduled");
  EXPECT_EQ(cluster_.Execute(ev).result.code(), v1::ActionResult::OK);
  EXPECT_EQ(cluster_.RecordedEvents().size(), 1u);
}

TEST(ActionExecutorTest, ExecutesAsynchronouslyAndReportsEveryAction) {
  InMemoryCluster cluster;
  cluster.CreatePod(MakePod("a", "uid-a"));
  absl::Mutex mu;
  std::vector<ActionOutcome> outcomes;
  {
    ActionExecutor exec(cluster, {.concurrency = 2, .api_latency = absl::Microseconds(1)}, [&](ActionOutcome&& o) {
      absl::MutexLock lock(&mu);
      outcomes.push_back(std::move(o));
    });
    EXPECT_TRUE(exec.Submit(BindAction(1, "a", "uid-a", "n1")));
    EXPECT_TRUE(exec.Submit(BindAction(2, "missing", "", "n1")));
    exec.Stop();  // Drains.
    EXPECT_FALSE(exec.Submit(BindAction(3, "a", "uid-a", "n1")));
  }
  ASSERT_EQ(outcomes.size(), 2u);
}

// Without latency each action is executed, and its outcome sunk, before
// Submit returns, on the caller's thread and in order.
TEST(ActionExecutorTest, WithoutLatencyExecutesOnTheCallersThreadInOrder) {
  InMemoryCluster cluster;
  cluster.CreatePod(MakePod("a", "uid-a"));
  std::vector<uint64_t> ids;
  std::vector<std::thread::id> threads;
  ActionExecutor exec(cluster, {.concurrency = 4}, [&](ActionOutcome&& o) {
    ids.push_back(o.result.action_id());
    threads.push_back(std::this_thread::get_id());
  });
  EXPECT_TRUE(exec.Submit(BindAction(1, "a", "uid-a", "n1")));
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(exec.InFlight(), 0u);
  EXPECT_TRUE(exec.Submit(BindAction(2, "missing", "", "n1")));
  EXPECT_THAT(ids, ::testing::ElementsAre(1u, 2u));
  EXPECT_THAT(threads, ::testing::Each(std::this_thread::get_id()));
  EXPECT_TRUE(cluster.GetPod("default", "a")->bound);
  exec.Stop();
  EXPECT_FALSE(exec.Submit(BindAction(3, "a", "uid-a", "n1")));
  EXPECT_EQ(ids.size(), 2u);
}

}  // namespace
}  // namespace podium::sim
