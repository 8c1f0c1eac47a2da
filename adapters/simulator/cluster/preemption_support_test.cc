// What preemption needs from podium-sim: PodDisruptionBudget status computed
// as the disruption controller does, and victims that terminate for a grace
// period, holding their node, before they are gone.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cluster/in_memory_cluster.h"

namespace podium::sim {
namespace {

class FakeClock {
 public:
  absl::Time Now() const { return now_; }
  void Advance(absl::Duration d) { now_ += d; }

 private:
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

v1::Pod BoundPod(const std::string& name, const std::string& app, const std::string& node = "node-1") {
  v1::Pod p;
  p.mutable_meta()->set_namespace_("default");
  p.mutable_meta()->set_name(name);
  p.mutable_meta()->set_uid("uid-" + name);
  (*p.mutable_meta()->mutable_labels())["app"] = app;
  p.set_node_name(node);
  p.set_phase(v1::RUNNING);
  return p;
}

v1::PodDisruptionBudget Pdb(const std::string& name, const std::string& app) {
  v1::PodDisruptionBudget pdb;
  pdb.mutable_meta()->set_namespace_("default");
  pdb.mutable_meta()->set_name(name);
  pdb.mutable_meta()->set_uid("uid-" + name);
  (*pdb.mutable_selector()->mutable_match_labels())["app"] = app;
  return pdb;
}

v1::Action Delete(uint64_t id, const std::string& name) {
  v1::Action a;
  a.set_id(id);
  auto* ref = a.mutable_delete_pod()->mutable_pod();
  ref->set_kind("Pod");
  ref->set_namespace_("default");
  ref->set_name(name);
  ref->set_uid("uid-" + name);
  a.mutable_delete_pod()->set_reason("Preempted");
  return a;
}

class PreemptionSupportTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  InMemoryCluster cluster_{[this] { return clock_.Now(); }};
};

TEST_F(PreemptionSupportTest, DisruptionsAllowedFollowsTheMatchingHealthyPods) {
  for (const char* n : {"db-1", "db-2", "db-3"}) cluster_.CreatePod(BoundPod(n, "db"));
  cluster_.CreatePod(BoundPod("web-1", "web"));
  v1::PodDisruptionBudget min2 = Pdb("db-min", "db");
  min2.mutable_min_available()->set_int_value(2);
  v1::ObjectEvent e = cluster_.AddPdb(min2);
  ASSERT_TRUE(e.has_pdb());
  EXPECT_EQ(e.pdb().expected_pods(), 3);
  EXPECT_EQ(e.pdb().current_healthy(), 3);
  EXPECT_EQ(e.pdb().desired_healthy(), 2);
  EXPECT_EQ(e.pdb().disruptions_allowed(), 1);

  v1::PodDisruptionBudget pct = Pdb("db-pct", "db");
  pct.mutable_max_unavailable()->set_percent("50%");  // 50% of 3, rounded up: 2.
  EXPECT_EQ(cluster_.AddPdb(pct).pdb().disruptions_allowed(), 2);

  // Deleting a db pod updates both budgets, in the same outcome.
  ActionOutcome out = cluster_.Execute(Delete(1, "db-1"));
  ASSERT_EQ(out.result.code(), v1::ActionResult::OK);
  std::map<std::string, int32_t> allowed;
  for (const auto& ev : out.events) {
    if (ev.has_pdb()) allowed[ev.pdb().meta().name()] = ev.pdb().disruptions_allowed();
  }
  EXPECT_EQ(allowed["db-min"], 0);  // 2 healthy, 2 desired.
  EXPECT_EQ(allowed["db-pct"], 1);  // 2 expected: 1 may be unavailable.
}

TEST_F(PreemptionSupportTest, AVictimTerminatesForTheGracePeriodHoldingItsNode) {
  cluster_.SetTerminationGrace(absl::Seconds(2));
  cluster_.CreatePod(BoundPod("victim", "db"));
  v1::PodDisruptionBudget pdb = Pdb("db", "db");
  pdb.mutable_min_available()->set_int_value(0);
  EXPECT_EQ(cluster_.AddPdb(pdb).pdb().current_healthy(), 1);

  ActionOutcome out = cluster_.Execute(Delete(1, "victim"));
  ASSERT_EQ(out.result.code(), v1::ActionResult::OK);
  ASSERT_GE(out.events.size(), 1u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::UPSERT);
  EXPECT_NE(out.events[0].pod().meta().deletion_timestamp_us(), 0);
  EXPECT_EQ(out.events[0].pod().node_name(), "node-1");  // Still holds its node.
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[1].pdb().current_healthy(), 0);  // Terminating is not healthy.
  EXPECT_EQ(cluster_.Terminating(), 1u);
  // A second delete of a terminating pod changes nothing.
  EXPECT_TRUE(cluster_.Execute(Delete(2, "victim")).events.empty());

  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(cluster_.FinalizeTerminating(clock_.Now()).empty());
  clock_.Advance(absl::Seconds(1));
  std::vector<v1::ObjectEvent> gone = cluster_.FinalizeTerminating(clock_.Now());
  ASSERT_EQ(gone.size(), 2u);  // The pod's DELETE, then the PDB's new status.
  EXPECT_EQ(gone[0].type(), v1::ObjectEvent::DELETE);
  EXPECT_EQ(gone[0].pod().meta().name(), "victim");
  EXPECT_EQ(gone[1].pdb().expected_pods(), 0);
  EXPECT_EQ(cluster_.Terminating(), 0u);
  EXPECT_TRUE(cluster_.GetPod("default", "victim")->deleted);
}

TEST_F(PreemptionSupportTest, AVictimWhoseUidChangedIsNotDeleted) {
  cluster_.CreatePod(BoundPod("victim", "db"));
  v1::Action stale = Delete(1, "victim");
  stale.mutable_delete_pod()->mutable_pod()->set_uid("uid-of-an-older-victim");
  ActionOutcome out = cluster_.Execute(stale);
  EXPECT_EQ(out.result.code(), v1::ActionResult::CONFLICT);
  EXPECT_FALSE(cluster_.GetPod("default", "victim")->deleted);
}


// The fault behind sim.podium.dev/replaces: a controller recreated the victim
// (same name, new uid, on another node) just before the scheduler's delete,
// which carries the old uid and so deletes nothing.
TEST_F(PreemptionSupportTest, AReplacementTakesTheNameBeforeTheDeleteWhichThenConflicts) {
  cluster_.CreatePod(BoundPod("victim", "db"));
  v1::Pod next = BoundPod("victim-next", "db", "node-2");
  next.mutable_meta()->set_uid("uid-next");
  cluster_.AddReplacement("default", "victim", next);
  v1::Action del = Delete(1, "victim");
  auto* target = del.mutable_delete_pod()->mutable_disruption_target();
  target->set_type("DisruptionTarget");
  target->set_status("True");
  ActionOutcome out = cluster_.Execute(del);
  EXPECT_EQ(out.result.code(), v1::ActionResult::CONFLICT);
  EXPECT_THAT(out.result.message(), ::testing::HasSubstr("uid precondition failed: want uid-victim, have uid-next"));
  ASSERT_GE(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::DELETE);
  EXPECT_EQ(out.events[0].pod().meta().uid(), "uid-victim");
  EXPECT_EQ(out.events[1].type(), v1::ObjectEvent::UPSERT);
  EXPECT_EQ(out.events[1].pod().meta().name(), "victim");
  EXPECT_EQ(out.events[1].pod().meta().uid(), "uid-next");
  std::optional<PodRecord> now = cluster_.GetPod("default", "victim");
  ASSERT_TRUE(now.has_value());
  EXPECT_FALSE(now->deleted);
  EXPECT_EQ(now->pod.node_name(), "node-2");
  EXPECT_TRUE(now->pod.conditions().empty());  // The DisruptionTarget patch met the new uid too.
  const std::vector<PodRecord> all = cluster_.Pods();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_TRUE(all[0].deleted);
  EXPECT_THAT(all[0].delete_reason, ::testing::StartsWith("replaced by a new incarnation"));
  EXPECT_EQ(cluster_.Counts().delete_pod, 0u);
  EXPECT_EQ(cluster_.Counts().failed, 1u);

  // Only the first delete replaces: the next one meets the pod as it is.
  v1::Action again = Delete(2, "victim");
  again.mutable_delete_pod()->mutable_pod()->set_uid("uid-next");
  EXPECT_EQ(cluster_.Execute(again).result.code(), v1::ActionResult::OK);
  EXPECT_TRUE(cluster_.GetPod("default", "victim")->deleted);
}

// KEP-5836's other half: the kubelet defers a resize for lack of room and
// applies it once the node has room for the new requests.
v1::Pod WithCpu(v1::Pod p, int64_t milli_cpu) {
  p.add_containers()->mutable_requests()->set_milli_cpu(milli_cpu);
  return p;
}

TEST_F(PreemptionSupportTest, ADeferredResizeIsAppliedOnceTheNodeHasRoom) {
  v1::Node node;
  node.mutable_meta()->set_name("node-1");
  node.mutable_allocatable()->set_milli_cpu(4000);
  cluster_.AddNode(node);
  // Asks for 3 CPU, admitted with 1; 2 + 1 others = 3 CPU held, 4 allocatable.
  v1::Pod big = WithCpu(BoundPod("big", "app"), 3000);
  big.set_resize_status("Deferred");
  big.mutable_allocated()->set_milli_cpu(1000);
  auto* pending = big.add_conditions();  // As Kubernetes 1.33+ reports it.
  pending->set_type("PodResizePending");
  pending->set_status("True");
  pending->set_reason("Deferred");
  big.add_conditions()->set_type("Ready");
  cluster_.CreatePod(big);
  cluster_.CreatePod(WithCpu(BoundPod("low-1", "x"), 1000));
  cluster_.CreatePod(WithCpu(BoundPod("low-2", "y"), 1000));
  cluster_.CreatePod(WithCpu(BoundPod("other", "z", "node-2"), 1000));

  // Another node's pod leaving changes nothing here.
  ActionOutcome elsewhere = cluster_.Execute(Delete(1, "other"));
  ASSERT_EQ(elsewhere.result.code(), v1::ActionResult::OK);
  EXPECT_EQ(cluster_.GetPod("default", "big")->pod.resize_status(), "Deferred");

  // low-1 gone: 3 + 1 = 4 <= 4, the resize goes through, with the delete.
  ActionOutcome out = cluster_.Execute(Delete(2, "low-1"));
  ASSERT_EQ(out.result.code(), v1::ActionResult::OK);
  const PodRecord big_now = *cluster_.GetPod("default", "big");
  EXPECT_EQ(big_now.pod.resize_status(), "");
  EXPECT_FALSE(big_now.pod.has_allocated());
  EXPECT_TRUE(big_now.resize_requested);
  EXPECT_TRUE(big_now.resize_applied);
  ASSERT_EQ(out.events.size(), 2u);
  EXPECT_EQ(out.events[0].type(), v1::ObjectEvent::DELETE);
  EXPECT_EQ(out.events[1].type(), v1::ObjectEvent::UPSERT);
  EXPECT_EQ(out.events[1].pod().meta().name(), "big");
  EXPECT_EQ(out.events[1].pod().resize_status(), "");
  // The kubelet's PodResizePending condition goes with it; the others stay.
  ASSERT_EQ(out.events[1].pod().conditions_size(), 1);
  EXPECT_EQ(out.events[1].pod().conditions(0).type(), "Ready");
}

TEST_F(PreemptionSupportTest, ATerminatingPodHoldsItsRoomFromADeferredResize) {
  v1::Node node;
  node.mutable_meta()->set_name("node-1");
  node.mutable_allocatable()->set_milli_cpu(4000);
  cluster_.AddNode(node);
  v1::Pod big = WithCpu(BoundPod("big", "app"), 3000);
  big.set_resize_status("Deferred");
  big.mutable_allocated()->set_milli_cpu(2000);
  cluster_.CreatePod(big);
  cluster_.CreatePod(WithCpu(BoundPod("low", "x"), 2000));
  cluster_.SetTerminationGrace(absl::Seconds(5));
  ASSERT_EQ(cluster_.Execute(Delete(1, "low")).result.code(), v1::ActionResult::OK);
  EXPECT_EQ(cluster_.GetPod("default", "big")->pod.resize_status(), "Deferred");
  clock_.Advance(absl::Seconds(6));
  std::vector<v1::ObjectEvent> gone = cluster_.FinalizeTerminating(clock_.Now());
  ASSERT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone[1].pod().meta().name(), "big");
  EXPECT_EQ(cluster_.GetPod("default", "big")->pod.resize_status(), "");
}

}  // namespace
}  // namespace podium::sim
