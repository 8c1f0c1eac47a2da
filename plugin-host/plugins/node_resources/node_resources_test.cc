#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "boost/json/parse.hpp"
#include "plugins/helper/testing.h"
#include "plugins/node_resources/balanced_allocation.h"
#include "plugins/node_resources/fit.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAreArray;
using testing::FakeHandle;
using testing::FakeSnapshot;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

template <typename P>
std::unique_ptr<P> New(std::string_view args_json) {
  FakeHandle handle;
  auto plugin = P::New(boost::json::parse(args_json).as_object(), handle);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  if (!plugin.ok()) return nullptr;
  return std::unique_ptr<P>(dynamic_cast<P*>(plugin->release()));
}

// kube-scheduler's fit_test node: 10m CPU, 20 bytes memory, 32 pods, 20 bytes
// ephemeral storage, 5 example.com/aaa, 5 hugepages-2Mi.
v1::Node FitNode(int64_t pods = 32) {
  return NodeBuilder("n")
      .Allocatable(10, 20, pods)
      .Ephemeral(20)
      .Scalar("example.com/aaa", 5)
      .Scalar("hugepages-2Mi", 5)
      .Build();
}

TEST(NodeResourcesFitTest, Filter) {
  struct Case {
    std::string name;
    v1::Pod pod;
    std::vector<v1::Pod> existing;
    std::vector<std::string> want_reasons;  // Empty: fits.
    std::string args = "{}";
    int64_t node_pods = 32;
  };
  const std::vector<Case> cases = {
      {"no resources requested always fits",
       PodBuilder().Build(),
       {PodBuilder("e").Container(10, 20).Build()},
       {}},
      {"too many resources fails",
       PodBuilder().Container(1, 1).Build(),
       {PodBuilder("e").Container(10, 20).Build()},
       {"Insufficient cpu", "Insufficient memory"}},
      {"init container cpu does not fit",
       PodBuilder().Container(1, 1).InitContainer(3, 1).Build(),
       {PodBuilder("e").Container(8, 19).Build()},
       {"Insufficient cpu"}},
      {"highest init container cpu does not fit",
       PodBuilder().Container(1, 1).InitContainer(3, 1).InitContainer(2, 1).Build(),
       {PodBuilder("e").Container(8, 19).Build()},
       {"Insufficient cpu"}},
      {"init container memory does not fit",
       PodBuilder().Container(1, 1).InitContainer(1, 3).Build(),
       {PodBuilder("e").Container(9, 19).Build()},
       {"Insufficient memory"}},
      {"max, not sum, of containers and init containers",
       PodBuilder().Container(1, 1).InitContainer(1, 1).Build(),
       {PodBuilder("e").Container(9, 19).Build()},
       {}},
      {"sidecar adds to the containers",
       PodBuilder().Container(1, 1).InitContainer(1, 1, /*restartable=*/true).Build(),
       {PodBuilder("e").Container(9, 18).Build()},
       {"Insufficient cpu"}},
      {"both resources fit",
       PodBuilder().Container(1, 1).Build(),
       {PodBuilder("e").Container(5, 5).Build()},
       {}},
      {"memory fits, cpu does not",
       PodBuilder().Container(2, 1).Build(),
       {PodBuilder("e").Container(9, 5).Build()},
       {"Insufficient cpu"}},
      {"cpu fits, memory does not",
       PodBuilder().Container(1, 2).Build(),
       {PodBuilder("e").Container(5, 19).Build()},
       {"Insufficient memory"}},
      {"equal edge case",
       PodBuilder().Container(5, 1).Build(),
       {PodBuilder("e").Container(5, 19).Build()},
       {}},
      {"extended resource fits",
       PodBuilder().Container(0, 0).Scalar("example.com/aaa", 1).Build(),
       {PodBuilder("e").Container(0, 0).Scalar("example.com/aaa", 4).Build()},
       {}},
      {"extended resource capacity enforced",
       PodBuilder().Container(0, 0).Scalar("example.com/aaa", 10).Build(),
       {},
       {"Insufficient example.com/aaa"}},
      {"extended resource the node does not have",
       PodBuilder().Container(0, 0).Scalar("example.com/ccc", 1).Build(),
       {},
       {"Insufficient example.com/ccc"}},
      {"ignored extended resource",
       PodBuilder().Container(0, 0).Scalar("example.com/bbb", 2).Build(),
       {},
       {},
       R"({"ignoredResources":["example.com/bbb"]})"},
      {"ignored extended resource group",
       PodBuilder().Container(0, 0).Scalar("example.com/bbb", 2).Build(),
       {},
       {},
       R"({"ignoredResourceGroups":["example.com"]})"},
      {"hugepages are native and cannot be ignored",
       PodBuilder().Container(0, 0).Scalar("hugepages-2Mi", 10).Build(),
       {},
       {"Insufficient hugepages-2Mi"},
       R"({"ignoredResources":["hugepages-2Mi"]})"},
      {"requests + overhead fit",
       PodBuilder().Container(1, 1).Overhead(3, 13).Build(),
       {PodBuilder("e").Container(5, 5).Build()},
       {}},
      {"requests + overhead do not fit memory",
       PodBuilder().Container(1, 1).Overhead(1, 15).Build(),
       {PodBuilder("e").Container(5, 5).Build()},
       {"Insufficient memory"}},
      {"ephemeral storage",
       PodBuilder().Container(0, 0).Ephemeral(25).Build(),
       {},
       {"Insufficient ephemeral-storage"}},
      {"too many pods, and every other reason too",
       PodBuilder().Container(1, 1).Build(),
       {PodBuilder("e").Container(10, 20).Build()},
       {"Too many pods", "Insufficient cpu", "Insufficient memory"},
       "{}",
       1},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::unique_ptr<NodeResourcesFit> plugin = New<NodeResourcesFit>(tc.args);
    ASSERT_NE(plugin, nullptr);
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    sdk::NodeInfo node = MakeNodeInfo(FitNode(tc.node_pods), tc.existing);
    FakeSnapshot snapshot;
    sdk::CycleState state;
    ASSERT_TRUE(plugin->PreFilter(state, *pod, snapshot).second.IsSuccess());
    sdk::Status status = plugin->Filter(state, *pod, node);
    if (tc.want_reasons.empty()) {
      EXPECT_TRUE(status.IsSuccess()) << status.Message();
    } else {
      EXPECT_EQ(status.code(), sdk::Code::kUnschedulable);
      EXPECT_THAT(status.reasons(), ElementsAreArray(tc.want_reasons));
    }
    // Without PreFilter state the plugin computes the same answer.
    sdk::CycleState empty;
    EXPECT_EQ(plugin->Filter(empty, *pod, node).reasons(), status.reasons());
  }
}

struct ScoreCase {
  std::string name;
  v1::Pod pod;
  std::vector<v1::Node> nodes;
  std::vector<std::vector<v1::Pod>> existing;  // Per node; may be shorter.
  std::vector<int64_t> want;
  std::string args = "{}";
};

template <typename P>
void RunScoreCases(const std::vector<ScoreCase>& cases) {
  for (const ScoreCase& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::unique_ptr<P> plugin = New<P>(tc.args);
    ASSERT_NE(plugin, nullptr);
    std::vector<sdk::NodeInfo> infos;
    for (size_t i = 0; i < tc.nodes.size(); ++i) {
      infos.push_back(MakeNodeInfo(
          tc.nodes[i], i < tc.existing.size() ? tc.existing[i] : std::vector<v1::Pod>{}));
    }
    std::vector<const sdk::NodeInfo*> nodes;
    for (const sdk::NodeInfo& n : infos) nodes.push_back(&n);
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    sdk::CycleState state;
    ASSERT_TRUE(plugin->PreScore(state, *pod, nodes).IsSuccess());
    EXPECT_THAT(testing::ScoreAndNormalize(*plugin, state, *pod, nodes), ElementsAreArray(tc.want));
  }
}

const v1::Node kNode1 = NodeBuilder("machine1").Allocatable(4000, 10000).Build();
const v1::Node kNode2 = NodeBuilder("machine2").Allocatable(6000, 10000).Build();
const v1::Node kNode3 = NodeBuilder("machine3").Allocatable(4000, 10000).Build();

TEST(NodeResourcesFitTest, LeastAllocatedScore) {
  RunScoreCases<NodeResourcesFit>({
      {"nothing scheduled, nothing requested",
       PodBuilder().Build(),
       {kNode1, kNode3},
       {},
       {100, 100}},
      {"nothing scheduled, differently sized nodes",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       {37, 50}},
      {"pods scheduled with resources",
       PodBuilder().Container(1000, 2000).Build(),
       {kNode1, kNode3},
       {{PodBuilder("a").Container(1000, 2000).Build()},
        {PodBuilder("b").Container(2000, 5000).Build()}},
       // machine1: cpu (4000-2000)/4000 = 50, mem (10000-4000)/10000 = 60 -> 55;
       // machine3: cpu 25, mem 30 -> 27.
       {55, 27}},
      {"a pod requesting nothing counts the non-zero defaults",
       PodBuilder().Container(0, 0).Build(),
       {NodeBuilder("big").Allocatable(1000, 1024 * 1024 * 1024).Build()},
       {},
       // cpu (1000-100)/1000 = 90, memory (1024-200)/1024 = 80 -> 85.
       {85}},
      {"requested more than the node has",
       PodBuilder().Container(5000, 2000).Build(),
       {kNode1},
       {},
       {40}},
      {"weights",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       // machine1: (25*3 + 50*1)/4 = 31; machine2: 50.
       {31, 50},
       R"({"scoringStrategy":{"type":"LeastAllocated","resources":[{"name":"cpu","weight":3},{"name":"memory","weight":1}]}})"},
      {"an extended resource the pod does not request is not scored",
       PodBuilder().Container(1000, 2000).Build(),
       {NodeBuilder("gpu").Allocatable(4000, 10000).Scalar("nvidia.com/gpu", 4).Build()},
       {},
       // cpu 75, memory 80; the GPU is left out.
       {77},
       R"({"scoringStrategy":{"resources":[{"name":"cpu","weight":1},{"name":"memory","weight":1},{"name":"nvidia.com/gpu","weight":1}]}})"},
      {"an extended resource the pod requests is scored",
       PodBuilder().Container(1000, 2000).Scalar("nvidia.com/gpu", 2).Build(),
       {NodeBuilder("gpu").Allocatable(4000, 10000).Scalar("nvidia.com/gpu", 4).Build()},
       {},
       // (75 + 80 + 50) / 3 = 68.
       {68},
       R"({"scoringStrategy":{"resources":[{"name":"cpu","weight":1},{"name":"memory","weight":1},{"name":"nvidia.com/gpu","weight":1}]}})"},
  });
}

TEST(NodeResourcesFitTest, MostAllocatedScore) {
  const std::string args = R"({"scoringStrategy":{"type":"MostAllocated"}})";
  RunScoreCases<NodeResourcesFit>({
      {"nothing scheduled, nothing requested",
       PodBuilder().Build(),
       {kNode1, kNode3},
       {},
       {0, 0},
       args},
      {"nothing scheduled, differently sized nodes",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       {62, 50},
       args},
      {"requested more than the node has is capped",
       PodBuilder().Container(5000, 9000).Build(),
       {kNode1},
       {},
       {95},
       args},
  });
}

TEST(NodeResourcesFitTest, RequestedToCapacityRatioScore) {
  const std::string least =
      R"({"scoringStrategy":{"type":"RequestedToCapacityRatio","requestedToCapacityRatio":{"shape":[{"utilization":0,"score":10},{"utilization":100,"score":0}]}}})";
  const std::string most =
      R"({"scoringStrategy":{"type":"RequestedToCapacityRatio","requestedToCapacityRatio":{"shape":[{"utilization":0,"score":0},{"utilization":100,"score":10}]}}})";
  RunScoreCases<NodeResourcesFit>({
      {"nothing requested", PodBuilder().Build(), {kNode1, kNode3}, {}, {100, 100}, least},
      {"differently sized nodes, rounded",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       {38, 50},
       least},
      {"most-allocated shape",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       // machine1: cpu 75, memory 50 -> 62.5 -> 63.
       {63, 50},
       most},
      {"over capacity scores as full utilization",
       PodBuilder().Container(5000, 2000).Build(),
       {kNode1},
       {},
       // cpu at 100% scores 0 and drops out of the weights; memory 20% -> 80.
       {80},
       least},
  });
}

TEST(NodeResourcesBalancedAllocationTest, Score) {
  RunScoreCases<NodeResourcesBalancedAllocation>({
      {"nothing scheduled, nothing requested",
       PodBuilder().Build(),
       {kNode1, kNode3},
       {},
       {100, 100}},
      {"nothing scheduled, differently sized nodes",
       PodBuilder().Container(1000, 2000).Container(2000, 3000).Build(),
       {kNode1, kNode2},
       {},
       {87, 100}},
      {"pods scheduled with resources",
       PodBuilder().Container(1000, 2000).Build(),
       {kNode1, kNode3},
       {{PodBuilder("a").Container(1000, 2000).Build()},
        {PodBuilder("b").Container(3000, 1000).Build()}},
       // machine1: cpu .5, mem .4 -> 95; machine3: cpu 1, mem .3 -> 65.
       {95, 65}},
      {"fractions above 1 are capped",
       PodBuilder().Container(8000, 5000).Build(),
       {kNode1},
       {},
       {75}},
      {"three resources use the standard deviation",
       PodBuilder().Container(1000, 2000).Scalar("nvidia.com/gpu", 1).Build(),
       {NodeBuilder("gpu").Allocatable(4000, 10000).Scalar("nvidia.com/gpu", 4).Build()},
       {},
       {97},
       R"({"resources":[{"name":"cpu"},{"name":"memory"},{"name":"nvidia.com/gpu","weight":1}]})"},
  });
}

TEST(NodeResourcesFitTest, BadArgs) {
  struct Case {
    std::string args;
    std::string want_error;
  };
  const std::vector<Case> cases = {
      {R"({"scoringStrategy":{"type":"Foo"}})",
       "NodeResourcesFit args: scoringStrategy.type: unknown value \"Foo\""},
      {R"({"scoringStrategy":{"resources":[{"name":"cpu","weight":101}]}})",
       "NodeResourcesFit args: scoringStrategy.resources[0].weight: resource weight of cpu not in "
       "valid range (0, 100]"},
      {R"({"scoringStrategy":{"resources":[{"name":"cpu","weight":-1}]}})",
       "scoringStrategy.resources[0].weight"},
      {R"({"scoringStrategy":{"type":"RequestedToCapacityRatio"}})",
       "scoringStrategy.requestedToCapacityRatio.shape: at least one point must be specified"},
      {R"({"scoringStrategy":{"type":"RequestedToCapacityRatio","requestedToCapacityRatio":{"shape":[{"utilization":50,"score":1},{"utilization":10,"score":2}]}}})",
       "scoringStrategy.requestedToCapacityRatio.shape[1].utilization: utilization values must be "
       "sorted in increasing order"},
      {R"({"scoringStrategy":{"type":"RequestedToCapacityRatio","requestedToCapacityRatio":{"shape":[{"utilization":50,"score":11}]}}})",
       "scoringStrategy.requestedToCapacityRatio.shape[0].score: not in valid range [0, 10]"},
      {R"({"ignoredResourceGroups":["example.com/aaa"]})",
       "ignoredResourceGroups[0]: resource group name can't contain '/'"},
      {R"({"ignoredResources":"cpu"})", "ignoredResources: must be a list"},
      {R"({"scoringStrategy":{"typo":"LeastAllocated"}})", "scoringStrategy.typo: unknown field"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.args);
    FakeHandle handle;
    auto plugin = NodeResourcesFit::New(boost::json::parse(tc.args).as_object(), handle);
    ASSERT_FALSE(plugin.ok());
    EXPECT_EQ(plugin.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plugin.status().message()), HasSubstr(tc.want_error));
  }
}

TEST(NodeResourcesBalancedAllocationTest, BadArgs) {
  FakeHandle handle;
  auto plugin = NodeResourcesBalancedAllocation::New(
      boost::json::parse(R"({"resources":[{"name":"cpu","weight":2}]})").as_object(), handle);
  ASSERT_FALSE(plugin.ok());
  EXPECT_THAT(std::string(plugin.status().message()),
              HasSubstr("NodeResourcesBalancedAllocation args: resources[0].weight: must be 1"));
  plugin = NodeResourcesBalancedAllocation::New(
      boost::json::parse(R"({"resources":[{"name":"cpu"},{"name":"cpu"}]})").as_object(), handle);
  ASSERT_FALSE(plugin.ok());
  EXPECT_THAT(std::string(plugin.status().message()), HasSubstr("resources[1].name: duplicate"));
}

TEST(NodeResourcesFitTest, Events) {
  std::unique_ptr<NodeResourcesFit> plugin = New<NodeResourcesFit>("{}");
  auto events = plugin->EventsToRegister();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].resource, v1::POD);
  EXPECT_EQ(events[0].action_mask, static_cast<uint32_t>(v1::DELETE));
  EXPECT_EQ(events[1].resource, v1::NODE);
  EXPECT_EQ(events[1].action_mask, v1::ADD | v1::UPDATE_NODE_ALLOCATABLE);
  const v1::Pod pod = PodBuilder().Container(2000, 1000).Build();

  struct Case {
    std::string name;
    size_t event;
    v1::ClusterEvent e;
    sdk::QueueingHint want;
  };
  std::vector<Case> cases;
  {
    v1::ClusterEvent e;
    *e.mutable_old_pod() = PodBuilder("d").NodeName("n").Build();
    cases.push_back({"assigned pod deleted", 0, e, sdk::QueueingHint::kQueue});
  }
  {
    v1::ClusterEvent e;
    *e.mutable_old_pod() = PodBuilder("d").Build();
    cases.push_back({"unassigned pod deleted", 0, e, sdk::QueueingHint::kQueueSkip});
  }
  {
    v1::ClusterEvent e;
    *e.mutable_new_node() = NodeBuilder().Allocatable(4000, 4000).Build();
    cases.push_back({"node large enough added", 1, e, sdk::QueueingHint::kQueue});
  }
  {
    v1::ClusterEvent e;
    *e.mutable_new_node() = NodeBuilder().Allocatable(1000, 4000).Build();
    cases.push_back({"node too small added", 1, e, sdk::QueueingHint::kQueueSkip});
  }
  {
    v1::ClusterEvent e;
    *e.mutable_new_node() = NodeBuilder().Allocatable(4000, 4000, 0).Build();
    cases.push_back({"node allowing no pods added", 1, e, sdk::QueueingHint::kQueueSkip});
  }
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    EXPECT_EQ(events[tc.event].hint(pod, tc.e), tc.want);
  }
  std::unique_ptr<NodeResourcesBalancedAllocation> balanced =
      New<NodeResourcesBalancedAllocation>("{}");
  EXPECT_THAT(balanced->EventsToRegister(), IsEmpty());
}

}  // namespace
}  // namespace podium::plugins
