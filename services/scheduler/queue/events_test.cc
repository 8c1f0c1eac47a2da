#include "queue/events.h"

#include <string>

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

v1::Node BaseNode() {
  v1::Node n;
  n.mutable_meta()->set_name("n");
  (*n.mutable_meta()->mutable_labels())["zone"] = "a";
  n.mutable_allocatable()->set_milli_cpu(1000);
  return n;
}

TEST(EventsTest, NodeUpdateActions) {
  const v1::Node base = BaseNode();
  EXPECT_EQ(NodeUpdateActions(base, base), 0u);

  v1::Node n = base;
  (*n.mutable_meta()->mutable_labels())["zone"] = "b";
  EXPECT_EQ(NodeUpdateActions(base, n), static_cast<uint32_t>(v1::UPDATE_NODE_LABEL));

  n = base;
  n.mutable_allocatable()->set_milli_cpu(2000);
  EXPECT_EQ(NodeUpdateActions(base, n), static_cast<uint32_t>(v1::UPDATE_NODE_ALLOCATABLE));

  n = base;
  n.set_unschedulable(true);
  EXPECT_EQ(NodeUpdateActions(base, n), static_cast<uint32_t>(v1::UPDATE_NODE_TAINT));

  n = base;
  n.add_taints()->set_key("k");
  n.add_conditions()->set_type("Ready");
  (*n.mutable_meta()->mutable_annotations())["a"] = "b";
  EXPECT_EQ(NodeUpdateActions(base, n),
            static_cast<uint32_t>(v1::UPDATE_NODE_TAINT | v1::UPDATE_NODE_CONDITION |
                                  v1::UPDATE_NODE_ANNOTATION));
}

TEST(EventsTest, PodUpdateActions) {
  v1::Pod base;
  base.mutable_meta()->set_uid("p");
  auto* c = base.add_containers();
  c->mutable_requests()->set_milli_cpu(500);
  base.add_scheduling_gates("g");
  EXPECT_EQ(PodUpdateActions(base, base), 0u);

  v1::Pod p = base;
  p.mutable_meta()->set_resource_version("2");
  p.set_phase(v1::RUNNING);
  p.set_start_time_us(1'700'000'000'000'000);  // Status, as the phase: no event.
  EXPECT_EQ(PodUpdateActions(base, p), 0u);

  p = base;
  (*p.mutable_meta()->mutable_labels())["app"] = "x";
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE_POD_LABEL));

  p = base;
  p.mutable_containers(0)->mutable_requests()->set_milli_cpu(100);
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE_POD_SCALE_DOWN));

  // A request that went up, or a container changed otherwise, is no scale down.
  p = base;
  p.mutable_containers(0)->mutable_requests()->set_milli_cpu(900);
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE));
  p = base;
  p.mutable_containers(0)->set_name("renamed");
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE));
  p = base;
  p.add_init_containers()->mutable_requests()->set_milli_cpu(100);
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE));
  p.mutable_init_containers(0)->mutable_requests()->set_milli_cpu(900);
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE));
  v1::Pod q = p;
  q.mutable_init_containers(0)->mutable_requests()->set_milli_cpu(700);
  EXPECT_EQ(PodUpdateActions(p, q), static_cast<uint32_t>(v1::UPDATE_POD_SCALE_DOWN));

  p = base;
  p.add_tolerations()->set_key("k");
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE_POD_TOLERATIONS));

  p = base;
  p.clear_scheduling_gates();
  EXPECT_EQ(PodUpdateActions(base, p),
            static_cast<uint32_t>(v1::UPDATE_POD_SCHEDULING_GATES_ELIMINATED));

  p = base;
  p.set_priority_class_name("other");
  EXPECT_EQ(PodUpdateActions(base, p), static_cast<uint32_t>(v1::UPDATE));

  // Maps compare by content, whatever order their entries were added in; a
  // status-only patch (a victim's DisruptionTarget condition) is no update.
  v1::Pod x = base;
  v1::Pod y = base;
  for (int i = 0; i < 20; ++i) (*x.mutable_meta()->mutable_annotations())["k" + std::to_string(i)] = "v";
  for (int i = 19; i >= 0; --i) (*y.mutable_meta()->mutable_annotations())["k" + std::to_string(i)] = "v";
  auto* condition = y.add_conditions();
  condition->set_type("DisruptionTarget");
  condition->set_status("True");
  y.mutable_meta()->set_resource_version("3");
  EXPECT_EQ(PodUpdateActions(x, y), 0u);
  (*y.mutable_meta()->mutable_annotations())["k7"] = "w";
  EXPECT_EQ(PodUpdateActions(x, y), static_cast<uint32_t>(v1::UPDATE));
}

TEST(EventsTest, SamePodExceptSkipsOnlyTheNamedFields) {
  v1::Pod base;
  base.mutable_meta()->set_uid("p");
  base.mutable_meta()->set_name("web");
  base.mutable_meta()->set_resource_version("1");
  (*base.mutable_meta()->mutable_labels())["app"] = "web";
  base.add_containers()->mutable_requests()->set_milli_cpu(500);
  base.set_priority(100);
  const std::initializer_list<int> kStatus = {v1::Pod::kConditionsFieldNumber,
                                              v1::Pod::kNominatedNodeNameFieldNumber};
  const std::initializer_list<int> kVersion = {v1::ObjectMeta::kResourceVersionFieldNumber};
  EXPECT_TRUE(SamePodExcept(base, base, {}, {}));
  EXPECT_TRUE(SamePodExcept(base, base, kStatus, kVersion));

  // Named fields: changed, added or removed on one side only.
  v1::Pod p = base;
  p.mutable_meta()->set_resource_version("2");
  p.set_nominated_node_name("node-1");
  p.add_conditions()->set_type("PodScheduled");
  EXPECT_TRUE(SamePodExcept(base, p, kStatus, kVersion));
  EXPECT_TRUE(SamePodExcept(p, base, kStatus, kVersion));
  EXPECT_FALSE(SamePodExcept(base, p, {}, {}));
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, {}));
  EXPECT_FALSE(SamePodExcept(base, p, {v1::Pod::kConditionsFieldNumber}, kVersion));

  // Any other field, at the top or in the meta, counts; so does its absence.
  p = base;
  p.set_priority(101);
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));
  p = base;
  p.clear_priority();
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));
  p = base;
  (*p.mutable_meta()->mutable_labels())["app"] = "api";
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));
  p = base;
  p.mutable_meta()->set_name("wep");
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));
  p = base;
  p.mutable_containers(0)->mutable_requests()->set_milli_cpu(501);
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));
  p = base;
  p.add_containers();
  EXPECT_FALSE(SamePodExcept(base, p, kStatus, kVersion));

  // A meta holding only a skipped field equals no meta.
  v1::Pod bare;
  bare.set_priority(5);
  v1::Pod versioned = bare;
  versioned.mutable_meta()->set_resource_version("9");
  EXPECT_TRUE(SamePodExcept(bare, versioned, {}, kVersion));
  EXPECT_FALSE(SamePodExcept(bare, versioned, {}, {}));

  // Maps compare by content, not by insertion order.
  v1::Pod x = base;
  v1::Pod y = base;
  for (int i = 0; i < 20; ++i) (*x.mutable_meta()->mutable_annotations())["k" + std::to_string(i)] = "v";
  for (int i = 19; i >= 0; --i) (*y.mutable_meta()->mutable_annotations())["k" + std::to_string(i)] = "v";
  EXPECT_TRUE(SamePodExcept(x, y, kStatus, kVersion));
  EXPECT_TRUE(SamePodExcept(x, y, {}, {}));
}

// Protocol version 10: a process's registrations name the pending pod's own
// updates; an older one's plugins keep moving a pod on any such update.
TEST(EventsTest, RegisteredEventsGiveOlderProcessesEveryPendingPodUpdate) {
  v1::PluginRegistration reg;
  reg.set_name("Fit");
  v1::ClusterEventInterest& node = *reg.add_events();
  node.set_resource(v1::NODE);
  node.set_action_mask(v1::ADD);
  node.set_has_queueing_hint(true);

  std::vector<v1::ClusterEventInterest> current = RegisteredEvents(reg, /*registers_pending_pod_updates=*/true);
  ASSERT_EQ(current.size(), 1u);
  EXPECT_EQ(current[0].resource(), v1::NODE);

  std::vector<v1::ClusterEventInterest> older = RegisteredEvents(reg, false);
  ASSERT_EQ(older.size(), 2u);
  EXPECT_EQ(older[0].resource(), v1::NODE);
  EXPECT_EQ(older[1].resource(), v1::UNSCHEDULED_POD);
  EXPECT_EQ(older[1].action_mask(), static_cast<uint32_t>(v1::UPDATE));
  EXPECT_FALSE(older[1].has_queueing_hint());

  // Registered nothing: left empty (the registry treats it as every event).
  EXPECT_TRUE(RegisteredEvents(v1::PluginRegistration(), false).empty());
}

}  // namespace
}  // namespace podium::scheduler
