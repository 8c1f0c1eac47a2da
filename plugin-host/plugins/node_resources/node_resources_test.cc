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
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].resource, v1::POD);
  EXPECT_EQ(events[0].action_mask, v1::DELETE | v1::UPDATE_POD_SCALE_DOWN);
  // The pending pod asking for less always may help: no hint to ask.
  EXPECT_EQ(events[1].resource, v1::UNSCHEDULED_POD);
  EXPECT_EQ(events[1].action_mask, static_cast<uint32_t>(v1::UPDATE_POD_SCALE_DOWN));
  EXPECT_FALSE(events[1].hint);
  EXPECT_EQ(events[2].resource, v1::NODE);
  EXPECT_EQ(events[2].action_mask, v1::ADD | v1::UPDATE_NODE_ALLOCATABLE);
  std::unique_ptr<NodeResourcesBalancedAllocation> balanced =
      New<NodeResourcesBalancedAllocation>("{}");
  EXPECT_THAT(balanced->EventsToRegister(), IsEmpty());  // Scores only: rejects nobody.
}

// kube-scheduler's fit.go isSchedulableAfterPodEvent / isSchedulableAfterNodeChange:
// a pod rejected for CPU comes back only for an event that can give it CPU.
TEST(NodeResourcesFitTest, QueueingHints) {
  std::unique_ptr<NodeResourcesFit> plugin = New<NodeResourcesFit>("{}");
  const auto events = plugin->EventsToRegister();
  const v1::Pod wants_cpu = PodBuilder("pending").Container(2000, 0).Build();
  const v1::Pod wants_cpu_and_memory = PodBuilder("pending").Container(2000, 1000).Build();
  const v1::Pod bound = PodBuilder("other").NodeName("n").Container(3000, 3000).Build();
  const v1::Node small = NodeBuilder("n").Allocatable(1000, 4000).Build();
  const v1::Node big = NodeBuilder("n").Allocatable(4000, 4000).Build();
  v1::Node big_labelled = big;
  (*big_labelled.mutable_meta()->mutable_labels())["zone"] = "b";
  v1::Node big_tainted = big;
  big_tainted.add_taints()->set_key("k");
  v1::Node big_more_storage = big;
  big_more_storage.mutable_allocatable()->set_ephemeral_storage_bytes(1 << 30);
  v1::Node big_more_memory = big;
  big_more_memory.mutable_allocatable()->set_memory_bytes(8000);
  v1::Node big_more_pods = big;
  big_more_pods.mutable_allocatable()->set_pods(200);
  v1::Node bigger = NodeBuilder("n").Allocatable(8000, 4000).Build();
  v1::Node small_grown = NodeBuilder("n").Allocatable(1500, 4000).Build();

  auto resized = [&](int64_t milli_cpu, int64_t memory) {
    v1::Pod p = bound;
    p.mutable_containers(0)->mutable_requests()->set_milli_cpu(milli_cpu);
    p.mutable_containers(0)->mutable_requests()->set_memory_bytes(memory);
    return p;
  };
  v1::Pod nominated = PodBuilder("nominated").Container(3000, 0).Build();
  nominated.set_nominated_node_name("n");
  v1::Pod relabelled = bound;
  (*relabelled.mutable_meta()->mutable_labels())["app"] = "x";
  v1::Pod unassigned_resized = PodBuilder("u").Container(1000, 0).Build();
  v1::Pod unassigned_before = PodBuilder("u").Container(3000, 0).Build();

  struct Case {
    std::string name;
    const v1::Pod* pod;
    v1::ClusterEvent event;
    bool requeue;
  };
  using namespace testing;  // Event builders.
  const std::vector<Case> cases = {
      {"bound pod deleted", &wants_cpu, PodDeleted(bound), true},
      {"unassigned pod deleted", &wants_cpu, PodDeleted(PodBuilder("u").Build()), false},
      {"nominated pod deleted: its reservation goes", &wants_cpu, PodDeleted(nominated), true},
      {"bound pod added", &wants_cpu, PodAdded(bound), false},
      {"bound pod relabelled", &wants_cpu,
       PodUpdated(bound, relabelled, v1::UPDATE_POD_LABEL), false},
      {"bound pod scaled down its CPU", &wants_cpu,
       PodUpdated(bound, resized(1000, 3000), v1::UPDATE_POD_SCALE_DOWN), true},
      {"bound pod scaled down memory only, pod wants CPU", &wants_cpu,
       PodUpdated(bound, resized(3000, 1000), v1::UPDATE_POD_SCALE_DOWN), false},
      {"bound pod scaled down memory, pod wants memory too", &wants_cpu_and_memory,
       PodUpdated(bound, resized(3000, 1000), v1::UPDATE_POD_SCALE_DOWN), true},
      {"unassigned pod scaled down", &wants_cpu,
       PodUpdated(unassigned_before, unassigned_resized, v1::UPDATE_POD_SCALE_DOWN), false},
      {"bound pod finished (terminal: frees its requests)", &wants_cpu,
       PodUpdated(bound, bound, v1::DELETE), true},
      {"node with enough CPU added", &wants_cpu, NodeAdded(big), true},
      {"node with too little CPU added", &wants_cpu, NodeAdded(small), false},
      {"node allowing no pods added", &wants_cpu,
       NodeAdded(NodeBuilder("n").Allocatable(4000, 4000, 0).Build()), false},
      {"node label changed", &wants_cpu, NodeUpdated(big, big_labelled, v1::UPDATE_NODE_LABEL),
       false},
      {"node taint changed", &wants_cpu, NodeUpdated(big, big_tainted, v1::UPDATE_NODE_TAINT),
       false},
      {"node CPU grew enough", &wants_cpu,
       NodeUpdated(small, bigger, v1::UPDATE_NODE_ALLOCATABLE), true},
      {"node CPU grew, still too little", &wants_cpu,
       NodeUpdated(small, small_grown, v1::UPDATE_NODE_ALLOCATABLE), false},
      {"node CPU grew on a node that already fit", &wants_cpu,
       NodeUpdated(big, bigger, v1::UPDATE_NODE_ALLOCATABLE), true},
      {"node grew a resource the pod does not request", &wants_cpu,
       NodeUpdated(big, big_more_storage, v1::UPDATE_NODE_ALLOCATABLE), false},
      {"node grew memory, pod wants memory", &wants_cpu_and_memory,
       NodeUpdated(big, big_more_memory, v1::UPDATE_NODE_ALLOCATABLE), true},
      {"node allows more pods", &wants_cpu,
       NodeUpdated(big, big_more_pods, v1::UPDATE_NODE_ALLOCATABLE), true},
      {"node label and allocatable changed together, CPU grew", &wants_cpu,
       NodeUpdated(small, bigger, v1::UPDATE_NODE_LABEL | v1::UPDATE_NODE_ALLOCATABLE), true},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    EXPECT_EQ(Requeues(events, *tc.pod, tc.event), tc.requeue);
  }
}

}  // namespace
}  // namespace podium::plugins
