#include "plugins/node_unschedulable/node_unschedulable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using testing::FakeHandle;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

TEST(NodeUnschedulableTest, Filter) {
  struct Case {
    std::string name;
    v1::Pod pod;
    v1::Node node;
    sdk::Code want;
  };
  const std::vector<Case> cases = {
      {"schedulable node", PodBuilder().Build(), NodeBuilder().Build(), sdk::Code::kSuccess},
      {"unschedulable node", PodBuilder().Build(), NodeBuilder().Unschedulable().Build(),
       sdk::Code::kUnschedulableAndUnresolvable},
      {"pod tolerates the unschedulable taint",
       PodBuilder()
           .Toleration("node.kubernetes.io/unschedulable", v1::Toleration::EXISTS, "",
                       v1::NO_SCHEDULE)
           .Build(),
       NodeBuilder().Unschedulable().Build(), sdk::Code::kSuccess},
      {"pod tolerates everything",
       PodBuilder()
           .Toleration("", v1::Toleration::EXISTS, "", v1::TAINT_EFFECT_UNSPECIFIED)
           .Build(),
       NodeBuilder().Unschedulable().Build(), sdk::Code::kSuccess},
      {"a NoExecute toleration does not tolerate NoSchedule",
       PodBuilder()
           .Toleration("node.kubernetes.io/unschedulable", v1::Toleration::EXISTS, "",
                       v1::NO_EXECUTE)
           .Build(),
       NodeBuilder().Unschedulable().Build(), sdk::Code::kUnschedulableAndUnresolvable},
  };
  FakeHandle handle;
  auto plugin = NodeUnschedulable::New({}, handle);
  ASSERT_TRUE(plugin.ok());
  auto& filter = dynamic_cast<sdk::FilterPlugin&>(**plugin);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    sdk::CycleState state;
    sdk::NodeInfo node = MakeNodeInfo(tc.node);
    sdk::Status status = filter.Filter(state, *sdk::PodInfo::Create(tc.pod), node);
    EXPECT_EQ(status.code(), tc.want);
    if (!status.IsSuccess()) {
      EXPECT_THAT(status.reasons(), ElementsAre("node(s) were unschedulable"));
    }
  }
}

TEST(NodeUnschedulableTest, QueueingHint) {
  struct Case {
    std::string name;
    std::optional<v1::Node> old_node;
    v1::Node new_node;
    sdk::QueueingHint want;
  };
  const std::vector<Case> cases = {
      {"schedulable node added", std::nullopt, NodeBuilder().Build(), sdk::QueueingHint::kQueue},
      {"unschedulable node added", std::nullopt, NodeBuilder().Unschedulable().Build(),
       sdk::QueueingHint::kQueueSkip},
      {"node became schedulable", NodeBuilder().Unschedulable().Build(), NodeBuilder().Build(),
       sdk::QueueingHint::kQueue},
      {"node stayed schedulable", NodeBuilder().Build(), NodeBuilder().Build(),
       sdk::QueueingHint::kQueueSkip},
  };
  NodeUnschedulable plugin;
  auto events = plugin.EventsToRegister();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].resource, v1::NODE);
  EXPECT_EQ(events[0].action_mask, v1::ADD | v1::UPDATE_NODE_TAINT);
  ASSERT_TRUE(events[0].hint);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    v1::ClusterEvent e;
    e.set_resource(v1::NODE);
    if (tc.old_node) *e.mutable_old_node() = *tc.old_node;
    *e.mutable_new_node() = tc.new_node;
    EXPECT_EQ(events[0].hint(PodBuilder().Build(), e), tc.want);
  }
}

TEST(NodeUnschedulableTest, RejectsArgs) {
  FakeHandle handle;
  boost::json::object args;
  args["foo"] = 1;
  auto plugin = NodeUnschedulable::New(args, handle);
  ASSERT_FALSE(plugin.ok());
  EXPECT_THAT(std::string(plugin.status().message()),
              ::testing::HasSubstr("NodeUnschedulable args: foo"));
}

// Through the event registration: a node that becomes schedulable requeues
// the pod; a label change or a pod deletion does not.
TEST(NodeUnschedulableTest, RequeuesOnlyWhenTheNodeBecomesSchedulable) {
  using namespace testing;  // Event builders.
  const v1::Pod pod = PodBuilder().Build();
  const v1::Node cordoned = NodeBuilder("n").Unschedulable().Build();
  v1::Node cordoned_labelled = cordoned;
  (*cordoned_labelled.mutable_meta()->mutable_labels())["k"] = "v";
  const v1::Node uncordoned = NodeBuilder("n").Build();
  const auto events = NodeUnschedulable().EventsToRegister();
  EXPECT_TRUE(Requeues(events, pod, NodeUpdated(cordoned, uncordoned, v1::UPDATE_NODE_TAINT)));
  EXPECT_TRUE(Requeues(events, pod, NodeAdded(uncordoned)));
  EXPECT_FALSE(Requeues(events, pod, NodeAdded(cordoned)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(cordoned, cordoned_labelled, v1::UPDATE_NODE_LABEL)));
  EXPECT_FALSE(Requeues(events, pod, PodDeleted(PodBuilder("d").NodeName("n").Build())));
}

// The pending pod's own update: requeued when it comes to tolerate the
// unschedulable taint, not for another toleration.
TEST(NodeUnschedulableTest, RequeuesWhenThePendingPodToleratesCordonedNodes) {
  using namespace testing;  // Event builders.
  const v1::Pod before = PodBuilder("p").Build();
  const v1::Pod tolerating =
      PodBuilder("p").Toleration("node.kubernetes.io/unschedulable", v1::Toleration::EXISTS, "", v1::NO_SCHEDULE).Build();
  const v1::Pod other = PodBuilder("p").Toleration("x", v1::Toleration::EQUAL, "y", v1::NO_SCHEDULE).Build();
  const auto events = NodeUnschedulable().EventsToRegister();
  EXPECT_TRUE(Requeues(events, tolerating, PendingPodUpdated(before, tolerating, v1::UPDATE_POD_TOLERATIONS)));
  EXPECT_FALSE(Requeues(events, other, PendingPodUpdated(before, other, v1::UPDATE_POD_TOLERATIONS)));
  // Already tolerated before: this update changes nothing for the plugin.
  EXPECT_FALSE(Requeues(events, tolerating, PendingPodUpdated(tolerating, tolerating, v1::UPDATE_POD_TOLERATIONS)));
}

}  // namespace
}  // namespace podium::plugins
