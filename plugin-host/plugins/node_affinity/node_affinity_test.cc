#include "plugins/node_affinity/node_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "boost/json/parse.hpp"
#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using testing::FakeHandle;
using testing::FakeSnapshot;
using ::testing::HasSubstr;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;
using ::testing::UnorderedElementsAreArray;
using Op = v1::NodeSelectorRequirement;

constexpr std::string_view kReasonPod = "node(s) didn't match Pod's node affinity/selector";

v1::NodeSelectorRequirement Req(std::string key, Op::Operator op,
                                std::vector<std::string> values = {}) {
  v1::NodeSelectorRequirement r;
  r.set_key(std::move(key));
  r.set_operator_(op);
  for (auto& v : values) r.add_values(std::move(v));
  return r;
}

v1::NodeSelectorTerm Term(std::vector<v1::NodeSelectorRequirement> exprs,
                          std::vector<v1::NodeSelectorRequirement> fields = {}) {
  v1::NodeSelectorTerm t;
  for (auto& e : exprs) *t.add_match_expressions() = std::move(e);
  for (auto& f : fields) *t.add_match_fields() = std::move(f);
  return t;
}

// A pod whose required node affinity has these terms.
PodBuilder Required(std::vector<v1::NodeSelectorTerm> terms) {
  PodBuilder b;
  v1::NodeSelector* req = b.MutableNodeAffinity()->mutable_required();
  for (auto& t : terms) *req->add_terms() = std::move(t);
  return b;
}

PodBuilder Preferred(std::vector<std::pair<int32_t, v1::NodeSelectorTerm>> terms) {
  PodBuilder b;
  for (auto& [w, t] : terms) {
    v1::PreferredSchedulingTerm* p = b.MutableNodeAffinity()->add_preferred();
    p->set_weight(w);
    *p->mutable_preference() = std::move(t);
  }
  return b;
}

std::unique_ptr<NodeAffinity> NewPlugin(std::string_view args_json = "{}") {
  FakeHandle handle;
  auto plugin = NodeAffinity::New(boost::json::parse(args_json).as_object(), handle);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return std::unique_ptr<NodeAffinity>(dynamic_cast<NodeAffinity*>(plugin->release()));
}

TEST(NodeAffinityTest, Filter) {
  struct Case {
    std::string name;
    v1::Pod pod;
    v1::Node node;
    bool want_fit;
    std::string args = "{}";
    std::string want_reason = std::string(kReasonPod);
  };
  const std::vector<Case> cases = {
      {"no constraints", PodBuilder().Build(), NodeBuilder().Build(), true},
      {"nodeSelector label missing", PodBuilder().NodeSelector("foo", "bar").Build(),
       NodeBuilder().Build(), false},
      {"nodeSelector same labels", PodBuilder().NodeSelector("foo", "bar").Build(),
       NodeBuilder().Label("foo", "bar").Build(), true},
      {"node labels a superset", PodBuilder().NodeSelector("foo", "bar").Build(),
       NodeBuilder().Label("foo", "bar").Label("baz", "blah").Build(), true},
      {"node labels a subset",
       PodBuilder().NodeSelector("foo", "bar").NodeSelector("baz", "blah").Build(),
       NodeBuilder().Label("foo", "bar").Build(), false},
      {"In matches", Required({Term({Req("foo", Op::IN, {"value1", "bar"})})}).Build(),
       NodeBuilder().Label("foo", "bar").Build(), true},
      {"In does not match", Required({Term({Req("foo", Op::IN, {"value1", "value2"})})}).Build(),
       NodeBuilder().Label("foo", "bar").Build(), false},
      {"Gt matches", Required({Term({Req("kernel-version", Op::GT, {"0204"})})}).Build(),
       NodeBuilder().Label("kernel-version", "0206").Build(), true},
      {"Gt on a label that is not a number",
       Required({Term({Req("kernel-version", Op::GT, {"0204"})})}).Build(),
       NodeBuilder().Label("kernel-version", "6.1").Build(), false},
      {"Lt matches", Required({Term({Req("cores", Op::LT, {"8"})})}).Build(),
       NodeBuilder().Label("cores", "4").Build(), true},
      {"Gt with a value that is not a number matches nothing",
       Required({Term({Req("cores", Op::GT, {"abc"})})}).Build(),
       NodeBuilder().Label("cores", "4").Build(), false},
      {"NotIn with another value",
       Required({Term({Req("mem-type", Op::NOT_IN, {"DDR", "DDR2"})})}).Build(),
       NodeBuilder().Label("mem-type", "DDR3").Build(), true},
      {"NotIn with the label missing",
       Required({Term({Req("mem-type", Op::NOT_IN, {"DDR"})})}).Build(), NodeBuilder().Build(),
       true},
      {"Exists", Required({Term({Req("GPU", Op::EXISTS)})}).Build(),
       NodeBuilder().Label("GPU", "NVIDIA-GRID-K1").Build(), true},
      {"DoesNotExist", Required({Term({Req("GPU", Op::DOES_NOT_EXIST)})}).Build(),
       NodeBuilder().Label("GPU", "NVIDIA-GRID-K1").Build(), false},
      {"required without terms matches nothing", Required({}).Build(),
       NodeBuilder().Label("foo", "bar").Build(), false},
      {"an empty term matches nothing", Required({Term({})}).Build(),
       NodeBuilder().Label("foo", "bar").Build(), false},
      {"expressions of a term are ANDed (match)",
       Required({Term({Req("GPU", Op::EXISTS), Req("GPU", Op::NOT_IN, {"AMD", "INTER"})})}).Build(),
       NodeBuilder().Label("GPU", "NVIDIA-GRID-K1").Build(), true},
      {"expressions of a term are ANDed (no match)",
       Required({Term({Req("GPU", Op::EXISTS), Req("GPU", Op::IN, {"AMD", "INTER"})})}).Build(),
       NodeBuilder().Label("GPU", "NVIDIA-GRID-K1").Build(), false},
      {"terms are ORed",
       Required({Term({Req("foo", Op::IN, {"bar", "value2"})}),
                 Term({Req("diffkey", Op::IN, {"wrong", "value2"})})})
           .Build(),
       NodeBuilder().Label("foo", "bar").Build(), true},
      {"affinity and nodeSelector both satisfied",
       Required({Term({Req("foo", Op::EXISTS)})}).NodeSelector("foo", "bar").Build(),
       NodeBuilder().Label("foo", "bar").Build(), true},
      {"affinity satisfied, nodeSelector not",
       Required({Term({Req("foo", Op::EXISTS)})}).NodeSelector("foo", "baz").Build(),
       NodeBuilder().Label("foo", "bar").Build(), false},
      {"matchFields metadata.name matches",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1"})})}).Build(),
       NodeBuilder("node1").Build(), true},
      {"matchFields metadata.name does not match",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1"})})}).Build(),
       NodeBuilder("node2").Build(), false},
      {"matchFields NotIn",
       Required({Term({}, {Req("metadata.name", Op::NOT_IN, {"node1"})})}).Build(),
       NodeBuilder("node2").Build(), true},
      {"matchFields with two values is invalid",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1", "node2"})})}).Build(),
       NodeBuilder("node1").Build(), false},
      {"matchFields and matchExpressions ANDed",
       Required({Term({Req("foo", Op::IN, {"bar"})}, {Req("metadata.name", Op::IN, {"node1"})})})
           .Build(),
       NodeBuilder("node1").Build(), false},
      {"added affinity not matched", PodBuilder().Build(), NodeBuilder().Label("zone", "b").Build(),
       false,
       R"({"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}})",
       "node(s) didn't match scheduler-enforced node affinity"},
      {"added affinity matched, pod selector not", PodBuilder().NodeSelector("foo", "bar").Build(),
       NodeBuilder().Label("zone", "a").Build(), false,
       R"({"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}})"},
      {"added affinity and pod selector matched", PodBuilder().NodeSelector("foo", "bar").Build(),
       NodeBuilder().Label("zone", "a").Label("foo", "bar").Build(), true,
       R"({"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In","values":["a"]}]}]}}})"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::unique_ptr<NodeAffinity> plugin = NewPlugin(tc.args);
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    sdk::NodeInfo node = MakeNodeInfo(tc.node);
    FakeSnapshot snapshot;
    sdk::CycleState state;
    auto [result, pre_status] = plugin->PreFilter(state, *pod, snapshot);
    sdk::Status status = pre_status;
    if (status.IsSuccess() || status.IsSkip()) status = plugin->Filter(state, *pod, node);
    if (tc.want_fit) {
      EXPECT_TRUE(status.IsSuccess()) << status.Message();
    } else {
      EXPECT_EQ(status.code(), sdk::Code::kUnschedulableAndUnresolvable);
      EXPECT_THAT(status.reasons(), ElementsAre(tc.want_reason));
    }
  }
}

TEST(NodeAffinityTest, PreFilter) {
  struct Case {
    std::string name;
    v1::Pod pod;
    sdk::Code want_code;
    std::optional<std::vector<std::string>> want_nodes;
  };
  const std::vector<Case> cases = {
      {"nothing to check is a Skip", PodBuilder().Build(), sdk::Code::kSkip, std::nullopt},
      {"only preferred affinity is a Skip",
       Preferred({{1, Term({Req("foo", Op::EXISTS)})}}).Build(), sdk::Code::kSkip, std::nullopt},
      {"nodeSelector: all nodes", PodBuilder().NodeSelector("a", "b").Build(), sdk::Code::kSuccess,
       std::nullopt},
      {"one term naming a node",
       Required({Term({Req("foo", Op::IN, {"bar"})}, {Req("metadata.name", Op::IN, {"node1"})})})
           .Build(),
       sdk::Code::kSuccess, std::vector<std::string>{"node1"}},
      {"a term without names: all nodes",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1"})}),
                 Term({Req("foo", Op::IN, {"bar"})})})
           .Build(),
       sdk::Code::kSuccess, std::nullopt},
      {"terms naming nodes are united",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1"})}),
                 Term({}, {Req("metadata.name", Op::IN, {"node2"})})})
           .Build(),
       sdk::Code::kSuccess, std::vector<std::string>{"node1", "node2"}},
      {"names within a term are intersected to nothing: conflict",
       Required({Term({}, {Req("metadata.name", Op::IN, {"node1"}),
                           Req("metadata.name", Op::IN, {"node2"})})})
           .Build(),
       sdk::Code::kUnschedulableAndUnresolvable, std::nullopt},
  };
  std::unique_ptr<NodeAffinity> plugin = NewPlugin();
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    FakeSnapshot snapshot;
    sdk::CycleState state;
    auto [result, status] = plugin->PreFilter(state, *sdk::PodInfo::Create(tc.pod), snapshot);
    EXPECT_EQ(status.code(), tc.want_code);
    if (tc.want_code == sdk::Code::kUnschedulableAndUnresolvable) {
      EXPECT_THAT(status.reasons(), ElementsAre("pod affinity terms conflict"));
    }
    ASSERT_EQ(result.node_names.has_value(), tc.want_nodes.has_value());
    if (tc.want_nodes) {
      EXPECT_THAT(*result.node_names, UnorderedElementsAreArray(*tc.want_nodes));
    }
  }
}

TEST(NodeAffinityTest, Score) {
  const v1::NodeSelectorTerm foo_bar = Term({Req("foo", Op::IN, {"bar"})});
  const v1::NodeSelectorTerm key_value = Term({Req("key", Op::IN, {"value"})});
  const v1::NodeSelectorTerm all_three = Term(
      {Req("foo", Op::IN, {"bar"}), Req("key", Op::IN, {"value"}), Req("az", Op::IN, {"az1"})});
  const v1::Node label1 = NodeBuilder("m1").Label("foo", "bar").Build();
  const v1::Node label2 = NodeBuilder("m2").Label("key", "value").Build();
  const v1::Node label3 = NodeBuilder("m3").Label("az", "az1").Build();
  const v1::Node label4 = NodeBuilder("m4").Label("abc", "az11").Label("def", "az22").Build();
  const v1::Node label5 =
      NodeBuilder("m5").Label("foo", "bar").Label("key", "value").Label("az", "az1").Build();
  struct Case {
    std::string name;
    v1::Pod pod;
    std::vector<v1::Node> nodes;
    std::vector<int64_t> want;
    std::string args = "{}";
  };
  const std::vector<Case> cases = {
      {"no node matches the preference",
       Preferred({{2, foo_bar}}).Build(),
       {label4, label2, label3},
       {0, 0, 0}},
      {"only one node matches",
       Preferred({{2, foo_bar}}).Build(),
       {label1, label2, label3},
       {100, 0, 0}},
      {"weights add up",
       Preferred({{2, foo_bar}, {4, key_value}, {5, all_three}}).Build(),
       {label1, label5, label2},
       {18, 100, 36}},
      {"added preferred affinity counts too",
       Preferred({{2, foo_bar}}).Build(),
       {label1, label2, label5},
       {28, 71, 100},
       R"({"addedAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"key","operator":"In","values":["value"]}]}}]}})"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    std::unique_ptr<NodeAffinity> plugin = NewPlugin(tc.args);
    std::vector<sdk::NodeInfo> infos;
    for (const v1::Node& n : tc.nodes) infos.push_back(MakeNodeInfo(n));
    std::vector<const sdk::NodeInfo*> nodes;
    for (const sdk::NodeInfo& n : infos) nodes.push_back(&n);
    sdk::CycleState state;
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(tc.pod);
    ASSERT_TRUE(plugin->PreScore(state, *pod, nodes).IsSuccess());
    EXPECT_THAT(testing::ScoreAndNormalize(*plugin, state, *pod, nodes), ElementsAreArray(tc.want));
  }
}

TEST(NodeAffinityTest, PreScoreSkipsWithoutPreferences) {
  std::unique_ptr<NodeAffinity> plugin = NewPlugin();
  sdk::NodeInfo node = MakeNodeInfo(NodeBuilder().Build());
  sdk::CycleState state;
  EXPECT_TRUE(plugin->PreScore(state, *PodBuilder().Info(), {&node}).IsSkip());
}

TEST(NodeAffinityTest, QueueingHint) {
  struct Case {
    std::string name;
    std::optional<v1::Node> old_node;
    v1::Node new_node;
    sdk::QueueingHint want;
  };
  const v1::Pod pod = Required({Term({Req("foo", Op::IN, {"bar"})})}).Build();
  const std::vector<Case> cases = {
      {"added node matches", std::nullopt, NodeBuilder().Label("foo", "bar").Build(),
       sdk::QueueingHint::kQueue},
      {"added node does not match", std::nullopt, NodeBuilder().Label("foo", "baz").Build(),
       sdk::QueueingHint::kQueueSkip},
      {"updated node now matches", NodeBuilder().Build(), NodeBuilder().Label("foo", "bar").Build(),
       sdk::QueueingHint::kQueue},
      {"updated node matched already", NodeBuilder().Label("foo", "bar").Build(),
       NodeBuilder().Label("foo", "bar").Label("x", "y").Build(), sdk::QueueingHint::kQueueSkip},
  };
  std::unique_ptr<NodeAffinity> plugin = NewPlugin();
  auto events = plugin->EventsToRegister();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].resource, v1::NODE);
  EXPECT_EQ(events[0].action_mask, v1::ADD | v1::UPDATE_NODE_LABEL);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    v1::ClusterEvent e;
    if (tc.old_node) *e.mutable_old_node() = *tc.old_node;
    *e.mutable_new_node() = tc.new_node;
    EXPECT_EQ(events[0].hint(pod, e), tc.want);
  }
}

TEST(NodeAffinityTest, BadArgs) {
  struct Case {
    std::string args;
    std::string want_error;
  };
  const std::vector<Case> cases = {
      {R"({"foo":1})", "NodeAffinity args: foo: unknown field"},
      {R"({"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"Near"}]}]}}})",
       "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
       "matchExpressions[0].operator: unknown value \"Near\""},
      {R"({"addedAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"a","operator":"In"}]}]}}})",
       "matchExpressions[0].values"},
      {R"({"addedAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":0,"preference":{}}]}})",
       "preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.args);
    FakeHandle handle;
    auto plugin = NodeAffinity::New(boost::json::parse(tc.args).as_object(), handle);
    ASSERT_FALSE(plugin.ok());
    EXPECT_EQ(plugin.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(plugin.status().message()), HasSubstr(tc.want_error));
  }
}

// Through the event registration, as the queue and the SDK decide: only a
// node that now matches the pod's required terms requeues it.
TEST(NodeAffinityTest, RequeuesOnlyForANodeThatNowMatches) {
  using namespace testing;  // Event builders.
  const v1::Pod pod = Required({Term({Req("foo", Op::IN, {"bar"})})}).Build();
  const v1::Node plain = NodeBuilder("n").Label("zone", "a").Build();
  const v1::Node relabelled = NodeBuilder("n").Label("zone", "b").Build();
  const v1::Node matching = NodeBuilder("n").Label("foo", "bar").Build();
  v1::Node matching_tainted = matching;
  matching_tainted.add_taints()->set_key("k");
  const auto events = NewPlugin()->EventsToRegister();
  EXPECT_TRUE(Requeues(events, pod, NodeAdded(matching)));
  EXPECT_TRUE(Requeues(events, pod, NodeUpdated(plain, matching, v1::UPDATE_NODE_LABEL)));
  EXPECT_FALSE(Requeues(events, pod, NodeAdded(plain)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(plain, relabelled, v1::UPDATE_NODE_LABEL)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(matching, matching_tainted, v1::UPDATE_NODE_TAINT)));
  EXPECT_FALSE(Requeues(events, pod, PodDeleted(PodBuilder("d").NodeName("n").Build())));
}

}  // namespace
}  // namespace podium::plugins
