#include "plugins/node_name/node_name.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using testing::FakeSnapshot;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;
using ::testing::UnorderedElementsAre;

TEST(NodeNameTest, Filter) {
  struct Case {
    std::string name;
    std::string pod_node_name;
    sdk::Code want;
  };
  const std::vector<Case> cases = {
      {"no node name", "", sdk::Code::kSuccess},
      {"matching node name", "foo", sdk::Code::kSuccess},
      {"other node name", "bar", sdk::Code::kUnschedulableAndUnresolvable},
  };
  NodeName plugin;
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    sdk::CycleState state;
    sdk::NodeInfo node = MakeNodeInfo(NodeBuilder("foo").Build());
    sdk::Status status =
        plugin.Filter(state, *PodBuilder().NodeName(tc.pod_node_name).Info(), node);
    EXPECT_EQ(status.code(), tc.want);
    if (!status.IsSuccess()) {
      EXPECT_THAT(status.reasons(), ElementsAre("node(s) didn't match the requested node name"));
    }
  }
}

TEST(NodeNameTest, PreFilter) {
  NodeName plugin;
  FakeSnapshot snapshot;
  sdk::CycleState state;
  auto [none, skip] = plugin.PreFilter(state, *PodBuilder().Info(), snapshot);
  EXPECT_TRUE(skip.IsSkip());
  EXPECT_FALSE(none.node_names.has_value());

  auto [narrowed, ok] = plugin.PreFilter(state, *PodBuilder().NodeName("foo").Info(), snapshot);
  EXPECT_TRUE(ok.IsSuccess());
  ASSERT_TRUE(narrowed.node_names.has_value());
  EXPECT_THAT(*narrowed.node_names, UnorderedElementsAre("foo"));
}

TEST(NodeNameTest, QueueingHint) {
  NodeName plugin;
  auto events = plugin.EventsToRegister();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].resource, v1::NODE);
  EXPECT_EQ(events[0].action_mask, static_cast<uint32_t>(v1::ADD));
  v1::ClusterEvent e;
  *e.mutable_new_node() = NodeBuilder("foo").Build();
  EXPECT_EQ(events[0].hint(PodBuilder().NodeName("foo").Build(), e), sdk::QueueingHint::kQueue);
  EXPECT_EQ(events[0].hint(PodBuilder().NodeName("bar").Build(), e), sdk::QueueingHint::kQueueSkip);
}

// Through the event registration: only the named node's arrival requeues the
// pod; other nodes and updates do not.
TEST(NodeNameTest, RequeuesOnlyWhenTheNamedNodeArrives) {
  using namespace testing;  // Event builders.
  const v1::Pod pod = PodBuilder().NodeName("foo").Build();
  const v1::Node foo = NodeBuilder("foo").Build();
  v1::Node foo_labelled = foo;
  (*foo_labelled.mutable_meta()->mutable_labels())["k"] = "v";
  const auto events = NodeName().EventsToRegister();
  EXPECT_TRUE(Requeues(events, pod, NodeAdded(foo)));
  EXPECT_FALSE(Requeues(events, pod, NodeAdded(NodeBuilder("bar").Build())));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(foo, foo_labelled, v1::UPDATE_NODE_LABEL)));
  EXPECT_FALSE(Requeues(events, pod, PodDeleted(PodBuilder("d").NodeName("foo").Build())));
}

}  // namespace
}  // namespace podium::plugins
