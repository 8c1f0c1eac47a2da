#include "plugins/taint_toleration/taint_toleration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

constexpr auto kEqual = v1::Toleration::EQUAL;
constexpr auto kExists = v1::Toleration::EXISTS;

TEST(TaintTolerationTest, Filter) {
  struct Case {
    std::string name;
    v1::Pod pod;
    v1::Node node;
    std::string want_reason;  // Empty: fits.
  };
  const std::vector<Case> cases = {
      {"no tolerations, node with a NoSchedule taint", PodBuilder().Build(),
       NodeBuilder().Taint("dedicated", "user1", v1::NO_SCHEDULE).Build(),
       "node(s) had untolerated taint {dedicated: user1}"},
      {"toleration matches key, value and effect",
       PodBuilder().Toleration("dedicated", kEqual, "user1", v1::NO_SCHEDULE).Build(),
       NodeBuilder().Taint("dedicated", "user1", v1::NO_SCHEDULE).Build(), ""},
      {"toleration value differs",
       PodBuilder().Toleration("dedicated", kEqual, "user2", v1::NO_SCHEDULE).Build(),
       NodeBuilder().Taint("dedicated", "user1", v1::NO_SCHEDULE).Build(),
       "node(s) had untolerated taint {dedicated: user1}"},
      {"Exists tolerates any value",
       PodBuilder().Toleration("foo", kExists, "", v1::NO_SCHEDULE).Build(),
       NodeBuilder().Taint("foo", "bar", v1::NO_SCHEDULE).Build(), ""},
      {"every taint tolerated",
       PodBuilder()
           .Toleration("dedicated", kEqual, "user2", v1::NO_SCHEDULE)
           .Toleration("foo", kExists, "", v1::NO_SCHEDULE)
           .Build(),
       NodeBuilder()
           .Taint("dedicated", "user2", v1::NO_SCHEDULE)
           .Taint("foo", "bar", v1::NO_SCHEDULE)
           .Build(),
       ""},
      {"toleration effect differs",
       PodBuilder().Toleration("foo", kEqual, "bar", v1::PREFER_NO_SCHEDULE).Build(),
       NodeBuilder().Taint("foo", "bar", v1::NO_SCHEDULE).Build(),
       "node(s) had untolerated taint {foo: bar}"},
      {"toleration without effect tolerates every effect",
       PodBuilder().Toleration("foo", kEqual, "bar", v1::TAINT_EFFECT_UNSPECIFIED).Build(),
       NodeBuilder().Taint("foo", "bar", v1::NO_SCHEDULE).Build(), ""},
      {"PreferNoSchedule taints do not filter",
       PodBuilder().Toleration("dedicated", kEqual, "user2", v1::NO_SCHEDULE).Build(),
       NodeBuilder().Taint("dedicated", "user1", v1::PREFER_NO_SCHEDULE).Build(), ""},
      {"no tolerations, PreferNoSchedule taint", PodBuilder().Build(),
       NodeBuilder().Taint("dedicated", "user1", v1::PREFER_NO_SCHEDULE).Build(), ""},
      {"NoExecute taint filters", PodBuilder().Build(),
       NodeBuilder().Taint("node.kubernetes.io/not-ready", "", v1::NO_EXECUTE).Build(),
       "node(s) had untolerated taint {node.kubernetes.io/not-ready: }"},
      {"first untolerated taint is reported",
       PodBuilder().Toleration("a", kExists, "", v1::NO_SCHEDULE).Build(),
       NodeBuilder()
           .Taint("a", "1", v1::NO_SCHEDULE)
           .Taint("b", "2", v1::NO_EXECUTE)
           .Taint("c", "3", v1::NO_SCHEDULE)
           .Build(),
       "node(s) had untolerated taint {b: 2}"},
      {"empty key with Exists tolerates everything",
       PodBuilder().Toleration("", kExists, "", v1::TAINT_EFFECT_UNSPECIFIED).Build(),
       NodeBuilder().Taint("x", "y", v1::NO_EXECUTE).Build(), ""},
  };
  TaintToleration plugin;
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    sdk::CycleState state;
    sdk::NodeInfo node = MakeNodeInfo(tc.node);
    sdk::Status status = plugin.Filter(state, *sdk::PodInfo::Create(tc.pod), node);
    if (tc.want_reason.empty()) {
      EXPECT_TRUE(status.IsSuccess()) << status.Message();
    } else {
      EXPECT_EQ(status.code(), sdk::Code::kUnschedulableAndUnresolvable);
      EXPECT_THAT(status.reasons(), ElementsAre(tc.want_reason));
    }
  }
}

TEST(TaintTolerationTest, Score) {
  struct Case {
    std::string name;
    v1::Pod pod;
    std::vector<v1::Node> nodes;
    std::vector<int64_t> want;
  };
  const std::vector<Case> cases = {
      {"tolerated taints score higher than intolerable ones",
       PodBuilder().Toleration("foo", kEqual, "bar", v1::PREFER_NO_SCHEDULE).Build(),
       {NodeBuilder("a").Taint("foo", "bar", v1::PREFER_NO_SCHEDULE).Build(),
        NodeBuilder("b").Taint("foo", "blah", v1::PREFER_NO_SCHEDULE).Build()},
       {100, 0}},
      {"nodes whose taints are all tolerated score the same",
       PodBuilder()
           .Toleration("cpu-type", kEqual, "arm64", v1::PREFER_NO_SCHEDULE)
           .Toleration("disk-type", kEqual, "ssd", v1::PREFER_NO_SCHEDULE)
           .Build(),
       {NodeBuilder("a").Build(),
        NodeBuilder("b").Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE).Build(),
        NodeBuilder("c")
            .Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE)
            .Taint("disk-type", "ssd", v1::PREFER_NO_SCHEDULE)
            .Build()},
       {100, 100, 100}},
      {"more intolerable taints, lower score",
       PodBuilder().Toleration("foo", kEqual, "bar", v1::PREFER_NO_SCHEDULE).Build(),
       {NodeBuilder("a").Build(),
        NodeBuilder("b").Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE).Build(),
        NodeBuilder("c")
            .Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE)
            .Taint("disk-type", "ssd", v1::PREFER_NO_SCHEDULE)
            .Build()},
       {100, 50, 0}},
      {"only PreferNoSchedule taints and tolerations count",
       PodBuilder()
           .Toleration("cpu-type", kEqual, "arm64", v1::NO_SCHEDULE)
           .Toleration("disk-type", kEqual, "ssd", v1::NO_SCHEDULE)
           .Build(),
       {NodeBuilder("a").Build(),
        NodeBuilder("b").Taint("cpu-type", "arm64", v1::NO_SCHEDULE).Build(),
        NodeBuilder("c")
            .Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE)
            .Taint("disk-type", "ssd", v1::PREFER_NO_SCHEDULE)
            .Build()},
       {100, 100, 0}},
      {"no tolerations lands on the node without taints",
       PodBuilder().Build(),
       {NodeBuilder("a").Build(),
        NodeBuilder("b").Taint("cpu-type", "arm64", v1::PREFER_NO_SCHEDULE).Build()},
       {100, 0}},
  };
  TaintToleration plugin;
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::vector<sdk::NodeInfo> infos;
    for (const v1::Node& n : tc.nodes) infos.push_back(MakeNodeInfo(n));
    std::vector<const sdk::NodeInfo*> nodes;
    for (const sdk::NodeInfo& n : infos) nodes.push_back(&n);
    sdk::CycleState state;
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    ASSERT_TRUE(plugin.PreScore(state, *pod, nodes).IsSuccess());
    EXPECT_THAT(testing::ScoreAndNormalize(plugin, state, *pod, nodes), ElementsAreArray(tc.want));
  }
}

TEST(TaintTolerationTest, QueueingHint) {
  struct Case {
    std::string name;
    std::optional<v1::Node> old_node;
    v1::Node new_node;
    sdk::QueueingHint want;
  };
  const v1::Pod pod = PodBuilder().Toleration("foo", kEqual, "bar", v1::NO_SCHEDULE).Build();
  const std::vector<Case> cases = {
      {"added node with a tolerated taint", std::nullopt,
       NodeBuilder().Taint("foo", "bar", v1::NO_SCHEDULE).Build(), sdk::QueueingHint::kQueue},
      {"added node with an untolerated taint", std::nullopt,
       NodeBuilder().Taint("foo", "baz", v1::NO_SCHEDULE).Build(), sdk::QueueingHint::kQueueSkip},
      {"untolerated taint removed", NodeBuilder().Taint("x", "y", v1::NO_SCHEDULE).Build(),
       NodeBuilder().Build(), sdk::QueueingHint::kQueue},
      {"was already tolerated", NodeBuilder().Build(),
       NodeBuilder().Taint("foo", "bar", v1::NO_SCHEDULE).Build(), sdk::QueueingHint::kQueueSkip},
  };
  TaintToleration plugin;
  auto events = plugin.EventsToRegister();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].action_mask, v1::ADD | v1::UPDATE_NODE_TAINT);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    v1::ClusterEvent e;
    if (tc.old_node) *e.mutable_old_node() = *tc.old_node;
    *e.mutable_new_node() = tc.new_node;
    EXPECT_EQ(events[0].hint(pod, e), tc.want);
  }
}

// Through the event registration: only a taint change that makes the node
// tolerable requeues the pod; label changes and pod events never do.
TEST(TaintTolerationTest, RequeuesOnlyWhenTheTaintsBecomeTolerable) {
  using namespace testing;  // Event builders.
  const v1::Pod pod = PodBuilder().Toleration("foo", kEqual, "bar", v1::NO_SCHEDULE).Build();
  const v1::Node untolerated = NodeBuilder("n").Taint("x", "y", v1::NO_SCHEDULE).Build();
  const v1::Node still_untolerated =
      NodeBuilder("n").Taint("x", "y", v1::NO_SCHEDULE).Taint("foo", "bar", v1::NO_SCHEDULE).Build();
  const v1::Node tolerated = NodeBuilder("n").Taint("foo", "bar", v1::NO_SCHEDULE).Build();
  v1::Node untolerated_labelled = untolerated;
  (*untolerated_labelled.mutable_meta()->mutable_labels())["k"] = "v";
  const auto events = TaintToleration().EventsToRegister();
  EXPECT_TRUE(Requeues(events, pod, NodeUpdated(untolerated, tolerated, v1::UPDATE_NODE_TAINT)));
  EXPECT_TRUE(Requeues(events, pod, NodeAdded(tolerated)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(untolerated, still_untolerated, v1::UPDATE_NODE_TAINT)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(untolerated, untolerated_labelled, v1::UPDATE_NODE_LABEL)));
  EXPECT_FALSE(Requeues(events, pod, PodDeleted(PodBuilder("d").NodeName("n").Build())));
}

// The pending pod's own update: new tolerations requeue it (without a hint,
// as kube-scheduler's hint always says Queue then); a label change does not.
TEST(TaintTolerationTest, RequeuesWhenThePendingPodGetsTolerations) {
  using namespace testing;  // Event builders.
  const v1::Pod before = PodBuilder("p").Build();
  const v1::Pod tolerating = PodBuilder("p").Toleration("x", kEqual, "y", v1::NO_SCHEDULE).Build();
  v1::Pod labelled = before;
  (*labelled.mutable_meta()->mutable_labels())["k"] = "v";
  const auto events = TaintToleration().EventsToRegister();
  EXPECT_TRUE(Requeues(events, tolerating, PendingPodUpdated(before, tolerating, v1::UPDATE_POD_TOLERATIONS)));
  EXPECT_FALSE(Requeues(events, labelled, PendingPodUpdated(before, labelled, v1::UPDATE_POD_LABEL)));
}

}  // namespace
}  // namespace podium::plugins
