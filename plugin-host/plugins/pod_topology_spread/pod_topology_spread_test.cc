#include "plugins/pod_topology_spread/pod_topology_spread.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <random>

#include "boost/json/parse.hpp"
#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::FakeHandle;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;
using TSC = v1::TopologySpreadConstraint;

constexpr std::string_view kZone = "topology.kubernetes.io/zone";
constexpr std::string_view kHost = "kubernetes.io/hostname";
constexpr std::string_view kNotMatch = "node(s) didn't match pod topology spread constraints";
constexpr std::string_view kMissingLabel =
    "node(s) didn't match pod topology spread constraints (missing required label)";

TSC Constraint(std::string_view key, int32_t max_skew, TSC::WhenUnsatisfiable when,
               std::string app = "foo") {
  TSC c;
  c.set_max_skew(max_skew);
  c.set_topology_key(std::string(key));
  c.set_when_unsatisfiable(when);
  (*c.mutable_label_selector()->mutable_match_labels())["app"] = app;
  return c;
}

PodBuilder Foo(std::string name) { return PodBuilder(name).Label("app", "foo"); }

// A node in `zone` (empty: no zone label) with these pods.
struct NodeSpec {
  std::string name;
  std::string zone;
  std::vector<PodBuilder> pods;
  std::vector<std::pair<std::string, std::string>> labels = {};
  bool tainted = false;
};

class Cluster {
 public:
  explicit Cluster(std::vector<NodeSpec> nodes) {
    uint32_t id = 1;
    for (NodeSpec& spec : nodes) {
      NodeBuilder nb(spec.name);
      nb.Label(std::string(kHost), spec.name);
      if (!spec.zone.empty()) nb.Label(std::string(kZone), spec.zone);
      for (auto& [k, v] : spec.labels) nb.Label(k, v);
      if (spec.tainted) nb.Taint("dedicated", "x", v1::NO_SCHEDULE);
      std::vector<v1::Pod> pods;
      for (PodBuilder& p : spec.pods) pods.push_back(p.NodeName(spec.name).Build());
      handle_.fake_snapshot().Add(MakeNodeInfo(nb.Build(), pods, id++));
    }
  }
  FakeHandle& handle() { return handle_; }
  const sdk::Snapshot& snapshot() const { return handle_.snapshot(); }
  const sdk::NodeInfo& node(std::string_view name) const { return *snapshot().Get(name); }

 private:
  FakeHandle handle_;
};

std::unique_ptr<PodTopologySpread> NewPlugin(sdk::Handle& handle,
                                             std::string_view args_json = "{}") {
  auto plugin = PodTopologySpread::New(boost::json::parse(args_json).as_object(), handle);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return std::unique_ptr<PodTopologySpread>(dynamic_cast<PodTopologySpread*>(plugin->release()));
}

// Filter outcome per node, "" for success, else the reason.
std::vector<std::string> FilterAll(PodTopologySpread& plugin, sdk::CycleState& state,
                                   const sdk::PodInfo& pod, const sdk::Snapshot& snapshot) {
  std::vector<std::string> out;
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    sdk::Status s = plugin.Filter(state, pod, *node);
    out.push_back(s.IsSuccess() ? "" : s.Message());
  }
  return out;
}

struct FilterCase {
  std::string name;
  PodBuilder pod;
  std::vector<NodeSpec> nodes;
  std::vector<std::string> want;  // Per node, in order.
};

TEST(PodTopologySpreadTest, FilterFollowsKubeScheduler) {
  const std::string ok;
  const std::string no(kNotMatch);
  const std::string missing(kMissingLabel);
  auto zone1 = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  std::vector<FilterCase> cases;
  {
    PodBuilder pod = Foo("new");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"zone skew: the zone with more pods is full",
                     pod,
                     {{"a1", "a", {Foo("p1"), Foo("p2")}}, {"a2", "a", {}},
                      {"b1", "b", {Foo("p3")}}, {"b2", "b", {}}},
                     {no, no, ok, ok}});
  }
  {
    PodBuilder pod = Foo("new");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"node without the topology label",
                     pod,
                     {{"a1", "a", {}}, {"x", "", {}}},
                     {ok, missing}});
  }
  {
    PodBuilder pod = Foo("new");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"pods of other namespaces and terminating pods do not count",
                     pod,
                     {{"a1", "a", {Foo("o1").Namespace("other"), Foo("o2").Namespace("other"),
                                   Foo("t").Terminating()}},
                      {"b1", "b", {}}},
                     {ok, ok}});
  }
  {
    PodBuilder pod = PodBuilder("new").Label("app", "bar");  // Does not match itself.
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"a pod its selector does not match adds no skew",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"b1", "b", {}}},
                     {ok, ok}});
  }
  {
    PodBuilder pod = Foo("new");
    auto c = zone1;
    c.set_min_domains(3);
    *pod.mutable_pod().add_topology_spread_constraints() = c;
    cases.push_back({"minDomains above the domains there are: the global minimum is 0",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"b1", "b", {Foo("p2")}}},
                     {no, no}});
  }
  {
    PodBuilder pod = Foo("new");
    auto c = zone1;
    c.set_min_domains(2);
    *pod.mutable_pod().add_topology_spread_constraints() = c;
    cases.push_back({"minDomains met: the usual minimum",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"b1", "b", {Foo("p2")}}},
                     {ok, ok}});
  }
  {
    // Zone c's only node does not match the pod's nodeSelector: with Honor
    // (the default) zone c does not count, so the minimum is 1.
    PodBuilder pod = Foo("new").NodeSelector("disk", "ssd");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"nodeAffinityPolicy Honor leaves out nodes the pod cannot use",
                     pod,
                     {{"a1", "a", {Foo("p1")}, {{"disk", "ssd"}}},
                      {"b1", "b", {Foo("p2")}, {{"disk", "ssd"}}},
                      {"c1", "c", {}}},
                     {ok, ok, ok}});
  }
  {
    PodBuilder pod = Foo("new").NodeSelector("disk", "ssd");
    auto c = zone1;
    c.set_node_affinity_policy(TSC::IGNORE);
    *pod.mutable_pod().add_topology_spread_constraints() = c;
    cases.push_back({"nodeAffinityPolicy Ignore counts them (empty zone c is the minimum)",
                     pod,
                     {{"a1", "a", {Foo("p1")}, {{"disk", "ssd"}}},
                      {"b1", "b", {Foo("p2")}, {{"disk", "ssd"}}},
                      {"c1", "c", {}}},
                     {no, no, ok}});
  }
  {
    PodBuilder pod = Foo("new");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    cases.push_back({"nodeTaintsPolicy Ignore (default) counts tainted nodes",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"b1", "b", {Foo("p2")}}, {"c1", "c", {}, {}, true}},
                     {no, no, ok}});
  }
  {
    PodBuilder pod = Foo("new");
    auto c = zone1;
    c.set_node_taints_policy(TSC::HONOR);
    *pod.mutable_pod().add_topology_spread_constraints() = c;
    cases.push_back({"nodeTaintsPolicy Honor leaves out untolerated tainted nodes",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"b1", "b", {Foo("p2")}}, {"c1", "c", {}, {}, true}},
                     {ok, ok, ok}});
  }
  {
    PodBuilder pod = Foo("new").Label("rev", "2");
    auto c = zone1;
    c.add_match_label_keys("rev");
    *pod.mutable_pod().add_topology_spread_constraints() = c;
    cases.push_back({"matchLabelKeys: only pods with the same value count",
                     pod,
                     {{"a1", "a", {Foo("old1").Label("rev", "1"), Foo("old2").Label("rev", "1")}},
                      {"b1", "b", {Foo("new1").Label("rev", "2")}}},
                     {ok, no}});
  }
  {
    PodBuilder pod = Foo("new");
    *pod.mutable_pod().add_topology_spread_constraints() = zone1;
    *pod.mutable_pod().add_topology_spread_constraints() =
        Constraint(kHost, 1, TSC::DO_NOT_SCHEDULE);
    cases.push_back({"two constraints: both must hold",
                     pod,
                     {{"a1", "a", {Foo("p1")}}, {"a2", "a", {}}, {"b1", "b", {Foo("p2")}},
                      {"b2", "b", {Foo("p3")}}},
                     {no, ok, no, no}});
  }
  // Both ways of counting the matching pods: a scan of each node's pods, and
  // the label index of the SDK's mirror.
  for (const bool label_index : {false, true}) {
    SCOPED_TRACE(label_index ? "with the label index" : "scanning every pod");
    for (FilterCase& c : cases) {
      Cluster cluster(c.nodes);
      cluster.handle().fake_snapshot().set_label_index(label_index);
      auto plugin = NewPlugin(cluster.handle());
      sdk::CycleState state;
      sdk::PodInfoPtr pod = c.pod.Info();
      auto [result, status] = plugin->PreFilter(state, *pod, cluster.snapshot());
      ASSERT_TRUE(status.IsSuccess()) << c.name << ": " << status.Message();
      EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAreArray(c.want))
          << c.name;
    }
  }
}

TEST(PodTopologySpreadTest, StatusCodes) {
  PodBuilder pod = Foo("new");
  *pod.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  Cluster cluster({{"a1", "a", {Foo("p1"), Foo("p2")}}, {"b1", "b", {}}, {"x", "", {}}});
  auto plugin = NewPlugin(cluster.handle());
  sdk::CycleState state;
  sdk::PodInfoPtr info = pod.Info();
  ASSERT_TRUE(plugin->PreFilter(state, *info, cluster.snapshot()).second.IsSuccess());
  // Skew can change as pods go (preemption may help); a missing label cannot.
  EXPECT_EQ(plugin->Filter(state, *info, cluster.node("a1")).code(), sdk::Code::kUnschedulable);
  EXPECT_EQ(plugin->Filter(state, *info, cluster.node("x")).code(),
            sdk::Code::kUnschedulableAndUnresolvable);
}

TEST(PodTopologySpreadTest, PreFilterSkipsPodsWithoutHardConstraints) {
  Cluster cluster(std::vector<NodeSpec>{{"a1", "a", {}}});
  auto plugin = NewPlugin(cluster.handle());
  struct Case {
    std::string name;
    PodBuilder pod;
  };
  PodBuilder soft = Foo("soft");
  *soft.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY);
  std::vector<Case> cases = {
      {"no constraints, no owner", Foo("p")},
      {"owned by a ReplicaSet: the system defaults are ScheduleAnyway", Foo("p").OwnedBy("ReplicaSet")},
      {"ScheduleAnyway only", soft},
  };
  for (Case& c : cases) {
    sdk::CycleState state;
    EXPECT_EQ(plugin->PreFilter(state, *c.pod.Info(), cluster.snapshot()).second.code(),
              sdk::Code::kSkip)
        << c.name;
  }
}

TEST(PodTopologySpreadTest, ListDefaultConstraintsApplyToOwnedPods) {
  Cluster cluster({{"a1", "a", {Foo("p1").OwnedBy("ReplicaSet")}}, {"b1", "b", {}}});
  auto plugin = NewPlugin(cluster.handle(), R"({"defaultingType": "List", "defaultConstraints": [
      {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule"}]})");
  sdk::PodInfoPtr owned = Foo("new").OwnedBy("ReplicaSet").Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *owned, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, state, *owned, cluster.snapshot()),
              ElementsAre(std::string(kNotMatch), ""));
  // Not owned by a controller: no default selector, no constraint.
  sdk::CycleState bare;
  EXPECT_EQ(plugin->PreFilter(bare, *Foo("x").Info(), cluster.snapshot()).second.code(),
            sdk::Code::kSkip);
  // A pod's own constraints replace the defaults.
  PodBuilder own = Foo("own").OwnedBy("ReplicaSet");
  *own.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 5, TSC::DO_NOT_SCHEDULE);
  sdk::CycleState own_state;
  sdk::PodInfoPtr own_info = own.Info();
  ASSERT_TRUE(plugin->PreFilter(own_state, *own_info, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, own_state, *own_info, cluster.snapshot()), ElementsAre("", ""));
}

TEST(PodTopologySpreadTest, AddPodAndRemovePodUpdateTheCounts) {
  PodBuilder pod = Foo("new");
  *pod.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  Cluster cluster({{"a1", "a", {Foo("p1"), Foo("p2")}}, {"b1", "b", {Foo("p3")}}});
  auto plugin = NewPlugin(cluster.handle());
  sdk::PodInfoPtr info = pod.Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *info, cluster.snapshot()).second.IsSuccess());
  EXPECT_FALSE(plugin->Filter(state, *info, cluster.node("a1")).IsSuccess());

  // Preemption's dry run: removing a matching pod from a1 makes room.
  auto removed = state.Clone();
  const sdk::PodInfo& victim = *cluster.node("a1").pods()[0];
  ASSERT_TRUE(plugin->RemovePod(*removed, *info, victim, cluster.node("a1")).IsSuccess());
  EXPECT_TRUE(plugin->Filter(*removed, *info, cluster.node("a1")).IsSuccess());
  // The original state is untouched.
  EXPECT_FALSE(plugin->Filter(state, *info, cluster.node("a1")).IsSuccess());

  // Two nominated pods added to b1 raise the minimum: a1 fits, b1 no longer.
  auto added = state.Clone();
  sdk::PodInfoPtr nominated = Foo("nominated").Info();
  sdk::PodInfoPtr nominated2 = Foo("nominated2").Info();
  ASSERT_TRUE(plugin->AddPod(*added, *info, *nominated, cluster.node("b1")).IsSuccess());
  ASSERT_TRUE(plugin->AddPod(*added, *info, *nominated2, cluster.node("b1")).IsSuccess());
  EXPECT_TRUE(plugin->Filter(*added, *info, cluster.node("a1")).IsSuccess());
  EXPECT_FALSE(plugin->Filter(*added, *info, cluster.node("b1")).IsSuccess());
  // Pods of other namespaces change nothing.
  auto other = state.Clone();
  sdk::PodInfoPtr foreign = Foo("foreign").Namespace("other").Info();
  ASSERT_TRUE(plugin->AddPod(*other, *info, *foreign, cluster.node("b1")).IsSuccess());
  EXPECT_TRUE(plugin->Filter(*other, *info, cluster.node("b1")).IsSuccess());
}

std::vector<int64_t> ScoreAll(PodTopologySpread& plugin, const Cluster& cluster,
                              const sdk::PodInfo& pod, sdk::Code* pre_score = nullptr) {
  sdk::CycleState state;
  const auto& nodes = cluster.snapshot().Nodes();
  sdk::Status s = plugin.PreScore(state, pod, nodes);
  if (pre_score != nullptr) *pre_score = s.code();
  if (!s.IsSuccess()) return {};
  return testing::ScoreAndNormalize(plugin, state, pod, nodes);
}

TEST(PodTopologySpreadTest, ScoreFollowsKubeScheduler) {
  struct Case {
    std::string name;
    TSC constraint;
    std::vector<NodeSpec> nodes;
    std::vector<int64_t> want;
  };
  std::vector<Case> cases = {
      // Zone a holds 2, zone b 1: weight ln(2+2); raw 3, 3, 1; normalised
      // 100 * (max + min - score) / max.
      {"zone",
       Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY),
       {{"a1", "a", {Foo("p1"), Foo("p2")}}, {"a2", "a", {}}, {"b1", "b", {Foo("p3")}}},
       {33, 33, 100}},
      // Per node: 2, 0, 1 with weight ln(3+2): raw 3, 0, 2.
      {"hostname",
       Constraint(kHost, 1, TSC::SCHEDULE_ANYWAY),
       {{"a1", "a", {Foo("p1"), Foo("p2")}}, {"a2", "a", {}}, {"b1", "b", {Foo("p3")}}},
       {0, 100, 33}},
      {"a node without the key gets 0",
       Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY),
       {{"a1", "a", {Foo("p1")}}, {"b1", "b", {}}, {"x", "", {}}},
       {0, 100, 0}},
      {"no matching pods anywhere: every node 100",
       Constraint(kZone, 2, TSC::SCHEDULE_ANYWAY),
       {{"a1", "a", {Foo("p1").Label("app", "other")}}, {"b1", "b", {}}},
       {100, 100}},
  };
  for (const bool label_index : {false, true}) {
    SCOPED_TRACE(label_index ? "with the label index" : "scanning every pod");
    for (Case& c : cases) {
      Cluster cluster(c.nodes);
      cluster.handle().fake_snapshot().set_label_index(label_index);
      auto plugin = NewPlugin(cluster.handle());
      PodBuilder pod = Foo("new");
      *pod.mutable_pod().add_topology_spread_constraints() = c.constraint;
      EXPECT_THAT(ScoreAll(*plugin, cluster, *pod.Info()), ElementsAreArray(c.want)) << c.name;
    }
  }
}

// With the label index, PreFilter and PreScore visit only the pods a
// selector's `key In (values)` requirement admits (cost O(nodes + matching
// pods)); a selector without one (only Exists) still counts every node's pods.
// Scores are the same either way.
// Either way the answer is kube-scheduler's.
TEST(PodTopologySpreadTest, CountsThroughTheLabelIndexWhenTheSelectorAllowsIt) {
  std::vector<NodeSpec> nodes;
  for (int i = 0; i < 6; ++i) {
    NodeSpec n{"n" + std::to_string(i), i % 2 == 0 ? "a" : "b", {}};
    for (int j = 0; j < 20; ++j) n.pods.push_back(PodBuilder(n.name + "-other-" + std::to_string(j)).Label("app", "bar"));
    nodes.push_back(std::move(n));
  }
  nodes[0].pods.push_back(Foo("f0"));
  nodes[2].pods.push_back(Foo("f1"));
  nodes[1].pods.push_back(Foo("f2").Namespace("elsewhere"));  // Another namespace: not counted.
  Cluster cluster(nodes);
  cluster.handle().fake_snapshot().set_label_index(true);
  auto plugin = NewPlugin(cluster.handle());

  PodBuilder hard = Foo("new");
  *hard.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  sdk::PodInfoPtr pod = hard.Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(cluster.handle().fake_snapshot().index_visits(), 3);  // The app=foo pods only.
  const std::string no(kNotMatch);
  // Zone a holds 2, zone b 0: only zone b's nodes keep the skew within 1.
  EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAre(no, "", no, "", no, ""));

  PodBuilder soft = Foo("new");
  *soft.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY);
  *soft.mutable_pod().add_topology_spread_constraints() = Constraint(kHost, 1, TSC::SCHEDULE_ANYWAY);
  const int before = cluster.handle().fake_snapshot().index_visits();
  std::vector<int64_t> scores = ScoreAll(*plugin, cluster, *soft.Info());
  // The zone constraint's app=foo pods (hostname counts are per node, in Score).
  EXPECT_EQ(cluster.handle().fake_snapshot().index_visits() - before, 3);
  cluster.handle().fake_snapshot().set_label_index(false);
  EXPECT_EQ(ScoreAll(*plugin, cluster, *soft.Info()), scores);  // The same without the index.
  cluster.handle().fake_snapshot().set_label_index(true);

  TSC exists = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  exists.mutable_label_selector()->clear_match_labels();
  auto* e = exists.mutable_label_selector()->add_match_expressions();
  e->set_key("app");
  e->set_operator_(v1::LabelSelectorRequirement::EXISTS);
  PodBuilder any = Foo("new");
  *any.mutable_pod().add_topology_spread_constraints() = exists;
  sdk::PodInfoPtr any_pod = any.Info();
  const int visits = cluster.handle().fake_snapshot().index_visits();
  sdk::CycleState any_state;
  ASSERT_TRUE(plugin->PreFilter(any_state, *any_pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(cluster.handle().fake_snapshot().index_visits(), visits);  // Not by the index.
  // 62 pods in zone a, 60 in b (the other namespace's pod does not count).
  EXPECT_THAT(FilterAll(*plugin, any_state, *any_pod, cluster.snapshot()), ElementsAre(no, "", no, "", no, ""));
}

// The plugin keeps each topology key's domains and the matching pods per
// node across cycles, following the snapshot's pod change log: its verdicts
// and scores stay those of a plugin that counts from scratch.
TEST(PodTopologySpreadTest, KeptCountsFollowPodAndNodeChanges) {
  Cluster cluster({{"a1", "a", {Foo("p1")}}, {"a2", "a", {}}, {"b1", "b", {}}, {"b2", "b", {}}});
  testing::FakeSnapshot& snap = cluster.handle().fake_snapshot();
  snap.set_label_index(true);
  snap.EnablePodChangeLog();
  auto kept = NewPlugin(cluster.handle());
  PodBuilder hard = Foo("new");
  *hard.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  sdk::PodInfoPtr pod = hard.Info();
  PodBuilder soft = Foo("soft");
  *soft.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY);
  *soft.mutable_pod().add_topology_spread_constraints() = Constraint(kHost, 1, TSC::SCHEDULE_ANYWAY);
  sdk::PodInfoPtr soft_pod = soft.Info();
  const std::string no(kNotMatch);
  auto verdicts = [&](PodTopologySpread& plugin) {
    sdk::CycleState state;
    EXPECT_TRUE(plugin.PreFilter(state, *pod, cluster.snapshot()).second.IsSuccess());
    return FilterAll(plugin, state, *pod, cluster.snapshot());
  };
  auto expect = [&](const std::vector<std::string>& want, const std::vector<int64_t>& scores,
                    const std::string& step) {
    EXPECT_THAT(verdicts(*kept), ElementsAreArray(want)) << step;
    EXPECT_THAT(ScoreAll(*kept, cluster, *soft_pod), ElementsAreArray(scores)) << step;
    auto fresh = NewPlugin(cluster.handle());
    EXPECT_THAT(verdicts(*fresh), ElementsAreArray(want)) << step << " (fresh)";
    EXPECT_THAT(ScoreAll(*fresh, cluster, *soft_pod), ElementsAreArray(scores)) << step << " (fresh)";
  };
  // Zone a 1, zone b 0. Raw scores: zone count * ln(domains + 2) + host
  // count * ln(nodes + 2), rounded; normalised 100 * (max + min - raw) / max.
  expect({no, no, "", ""}, {0, 66, 100, 100}, "start");

  // Added: counted from the log, not by visiting the index again.
  snap.AddPod("b1", Foo("p2").Build());
  const int visits = snap.index_visits();
  EXPECT_THAT(verdicts(*kept), ElementsAre("", "", "", ""));
  EXPECT_EQ(snap.index_visits(), visits);
  expect({"", "", "", ""}, {33, 100, 33, 100}, "added");

  // Deleted.
  snap.RemovePod("a1", "uid-p1");
  expect({"", "", no, no}, {100, 100, 0, 66}, "deleted");

  // Relabelled (the old version removed, the new one added): no longer counted.
  snap.RemovePod("b1", "uid-p2");
  snap.AddPod("b1", PodBuilder("p2").Label("app", "bar").Build());
  expect({"", "", "", ""}, {100, 100, 100, 100}, "relabelled");

  // Terminating pods and pods of other namespaces do not count.
  snap.AddPod("a2", Foo("t").Terminating().Build());
  snap.AddPod("a2", Foo("o").Namespace("other").Build());
  expect({"", "", "", ""}, {100, 100, 100, 100}, "not counted");

  // A node added to a new zone: an empty domain, learnt without a rebuild,
  // lowers the minimum to 0.
  snap.AddPod("a1", Foo("p4").Build());
  snap.AddPod("b2", Foo("p3").Build());
  expect({"", "", "", ""}, {33, 100, 100, 33}, "a 1, b 1");
  snap.Add(MakeNodeInfo(NodeBuilder("c1").Label(std::string(kHost), "c1").Label(std::string(kZone), "c").Build(),
                        {}, 5));
  expect({no, no, no, no, ""}, {0, 50, 50, 0, 100}, "node added");

  // A node moved to another zone (a barrier: the plugin counts again).
  snap.SetNodeLabels("b2", {{std::string(kHost), "b2"}, {std::string(kZone), "c"}});
  expect({no, no, "", no, no}, {0, 50, 100, 0, 50}, "node relabelled");
}

// kube-scheduler's Filter computed from scratch for one DoNotSchedule
// constraint: the domains of the nodes that have every key and count
// (nodeAffinityPolicy Honor with the pod's nodeSelector), the matching pods
// in them, the minimum (0 below minDomains).
std::vector<std::string> ReferenceFilter(const sdk::Snapshot& snapshot, const v1::Pod& pod,
                                         const TSC& c) {
  auto matches = [&](const v1::Pod& p) {
    if (p.meta().deletion_timestamp_us() != 0 || p.meta().namespace_() != pod.meta().namespace_()) return false;
    for (const auto& [k, v] : c.label_selector().match_labels()) {
      auto it = p.meta().labels().find(k);
      if (it == p.meta().labels().end() || it->second != v) return false;
    }
    return true;
  };
  auto included = [&](const v1::Node& node) {
    for (const auto& [k, v] : pod.node_selector()) {
      auto it = node.meta().labels().find(k);
      if (it == node.meta().labels().end() || it->second != v) return false;
    }
    return true;
  };
  std::map<std::string, int64_t> counts;
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    const auto& labels = node->node().meta().labels();
    auto it = labels.find(c.topology_key());
    if (it == labels.end() || !included(node->node())) continue;
    int64_t& count = counts[it->second];
    for (const sdk::PodInfoPtr& p : node->pods()) count += matches(*p->pod) ? 1 : 0;
  }
  int64_t min = std::numeric_limits<int64_t>::max();
  for (const auto& [value, count] : counts) min = std::min(min, count);
  const int32_t min_domains = c.has_min_domains() ? c.min_domains() : 1;
  if (static_cast<int64_t>(counts.size()) < min_domains) min = 0;
  const int64_t self = matches(pod) ? 1 : 0;
  std::vector<std::string> out;
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    const auto& labels = node->node().meta().labels();
    auto it = labels.find(c.topology_key());
    if (it == labels.end()) {
      out.emplace_back(kMissingLabel);
      continue;
    }
    auto count = counts.find(it->second);
    const int64_t match = count == counts.end() ? 0 : count->second;
    out.push_back(match + self - min > c.max_skew() ? std::string(kNotMatch) : "");
  }
  return out;
}

// Random pod and node changes, one at a time: after each, the plugin that
// keeps its counts across cycles filters as kube-scheduler's algorithm does
// from scratch, and filters and scores as a plugin that counts from scratch.
TEST(PodTopologySpreadTest, KeptCountsMatchCountingFromScratchUnderRandomChanges) {
  std::mt19937 rng(7);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const std::vector<std::string> zones = {"a", "b", "c", ""};
  std::vector<NodeSpec> specs;
  for (int i = 0; i < 6; ++i) specs.push_back({"n" + std::to_string(i), zones[i % 3], {}});
  Cluster cluster(specs);
  testing::FakeSnapshot& snap = cluster.handle().fake_snapshot();
  snap.set_label_index(true);
  snap.EnablePodChangeLog();
  auto kept = NewPlugin(cluster.handle());
  std::vector<std::string> node_names;
  for (const NodeSpec& n : specs) node_names.push_back(n.name);
  std::vector<std::pair<std::string, std::string>> pods;  // (node, uid) of assigned pods.
  uint32_t next_node_id = 7;

  // Incoming pods: a hard zone constraint (with and without minDomains, with
  // a nodeSelector that Honor counts), a hard hostname one, and soft ones.
  struct Incoming {
    sdk::PodInfoPtr pod;
    TSC hard;
  };
  std::vector<Incoming> incoming;
  {
    TSC zone = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
    TSC zone_min = Constraint(kZone, 2, TSC::DO_NOT_SCHEDULE);
    zone_min.set_min_domains(4);
    TSC host = Constraint(kHost, 1, TSC::DO_NOT_SCHEDULE);
    for (const TSC& c : {zone, zone_min, host}) {
      PodBuilder p = Foo("in-" + std::to_string(incoming.size()));
      *p.mutable_pod().add_topology_spread_constraints() = c;
      *p.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::SCHEDULE_ANYWAY);
      *p.mutable_pod().add_topology_spread_constraints() = Constraint(kHost, 2, TSC::SCHEDULE_ANYWAY);
      incoming.push_back({p.Info(), c});
    }
    PodBuilder selective = Foo("in-selective").NodeSelector("pool", "x");
    *selective.mutable_pod().add_topology_spread_constraints() = zone;
    incoming.push_back({selective.Info(), zone});
  }

  for (int step = 0; step < 300; ++step) {
    const int op = pick(10);
    if (op < 4 || pods.empty()) {
      const std::string& node = node_names[pick(static_cast<int>(node_names.size()))];
      PodBuilder p = PodBuilder("p" + std::to_string(step)).Label("app", pick(3) == 0 ? "bar" : "foo");
      if (pick(5) == 0) p.Namespace("other");
      if (pick(8) == 0) p.Terminating();
      snap.AddPod(node, p.Build());
      pods.emplace_back(node, "uid-p" + std::to_string(step));
    } else if (op < 7) {
      const size_t i = static_cast<size_t>(pick(static_cast<int>(pods.size())));
      snap.RemovePod(pods[i].first, pods[i].second);
      pods.erase(pods.begin() + static_cast<std::ptrdiff_t>(i));
    } else if (op < 8) {
      // Relabelled: the old version out, the new one in.
      const size_t i = static_cast<size_t>(pick(static_cast<int>(pods.size())));
      snap.RemovePod(pods[i].first, pods[i].second);
      const std::string name = pods[i].second.substr(4);
      snap.AddPod(pods[i].first, PodBuilder(name).Label("app", pick(2) == 0 ? "bar" : "foo").Build());
    } else if (op < 9 && node_names.size() < 16) {
      const std::string name = "n" + std::to_string(next_node_id);
      NodeBuilder nb(name);
      nb.Label(std::string(kHost), name);
      const std::string& zone = zones[pick(4)];
      if (!zone.empty()) nb.Label(std::string(kZone), zone);
      if (pick(2) == 0) nb.Label("pool", "x");
      snap.Add(MakeNodeInfo(nb.Build(), {}, next_node_id++));
      node_names.push_back(name);
    } else {
      const std::string& name = node_names[pick(static_cast<int>(node_names.size()))];
      std::map<std::string, std::string> labels = {{std::string(kHost), name}};
      const std::string& zone = zones[pick(4)];
      if (!zone.empty()) labels[std::string(kZone)] = zone;
      if (pick(2) == 0) labels["pool"] = "x";
      snap.SetNodeLabels(name, labels);
    }
    auto fresh = NewPlugin(cluster.handle());
    for (const Incoming& in : incoming) {
      sdk::CycleState kept_state, fresh_state;
      ASSERT_TRUE(kept->PreFilter(kept_state, *in.pod, cluster.snapshot()).second.IsSuccess());
      ASSERT_TRUE(fresh->PreFilter(fresh_state, *in.pod, cluster.snapshot()).second.IsSuccess());
      const std::vector<std::string> want = ReferenceFilter(cluster.snapshot(), *in.pod->pod, in.hard);
      ASSERT_THAT(FilterAll(*kept, kept_state, *in.pod, cluster.snapshot()), ElementsAreArray(want))
          << "step " << step << ", " << in.pod->pod->meta().name();
      ASSERT_THAT(FilterAll(*fresh, fresh_state, *in.pod, cluster.snapshot()), ElementsAreArray(want))
          << "step " << step << ", " << in.pod->pod->meta().name();
      ASSERT_EQ(ScoreAll(*kept, cluster, *in.pod), ScoreAll(*fresh, cluster, *in.pod))
          << "step " << step << ", " << in.pod->pod->meta().name();
    }
  }
}

// A cycle's state keeps the counts and domains of its PreFilter, with its
// own AddPod / RemovePod changes (preemption's dry runs, also on a node added
// since), whatever the kept counts become in later cycles.
TEST(PodTopologySpreadTest, CycleStateKeepsItsCountsWhileKeptCountsMove) {
  Cluster cluster({{"a1", "a", {Foo("p1"), Foo("p2")}}, {"b1", "b", {Foo("p3")}}});
  testing::FakeSnapshot& snap = cluster.handle().fake_snapshot();
  snap.set_label_index(true);
  snap.EnablePodChangeLog();
  auto plugin = NewPlugin(cluster.handle());
  PodBuilder hard = Foo("new");
  *hard.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  sdk::PodInfoPtr pod = hard.Info();
  const std::string no(kNotMatch);
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *pod, cluster.snapshot()).second.IsSuccess());

  // Later cycles: a pod leaves a1, one joins b1, and a node joins zone c.
  snap.RemovePod("a1", "uid-p1");
  snap.AddPod("b1", Foo("p4").Build());
  const sdk::NodeInfo& c1 = snap.Add(
      MakeNodeInfo(NodeBuilder("c1").Label(std::string(kHost), "c1").Label(std::string(kZone), "c").Build(), {}, 3));
  sdk::CycleState later;
  ASSERT_TRUE(plugin->PreFilter(later, *pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, later, *pod, cluster.snapshot()), ElementsAre(no, no, ""));

  // The first state still sees a 2, b 1; zone c was not counted then, so a
  // node of it has no matching pods and does not lower the minimum.
  EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAre(no, "", ""));
  // Its dry runs: two pods added on c1 make zone c a domain of its own,
  // holding 2; taking one out of a1 then leaves a 1, b 1, c 2.
  auto dry = state.Clone();
  sdk::PodInfoPtr n1 = Foo("n1").Info();
  sdk::PodInfoPtr n2 = Foo("n2").Info();
  ASSERT_TRUE(plugin->AddPod(*dry, *pod, *n1, c1).IsSuccess());
  ASSERT_TRUE(plugin->AddPod(*dry, *pod, *n2, c1).IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, *dry, *pod, cluster.snapshot()), ElementsAre(no, "", no));
  sdk::PodInfoPtr victim = Foo("p1").Info();
  ASSERT_TRUE(plugin->RemovePod(*dry, *pod, *victim, cluster.node("a1")).IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, *dry, *pod, cluster.snapshot()), ElementsAre("", "", no));
  EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAre(no, "", ""));
}

TEST(PodTopologySpreadTest, SystemDefaultsScoreOwnedPodsOnly) {
  Cluster cluster({{"a1", "a", {Foo("p1").OwnedBy("ReplicaSet"), Foo("p2").OwnedBy("ReplicaSet")}},
                   {"b1", "b", {}},
                   {"c1", "", {}}});  // No zone: still scored by hostname (system defaults).
  auto plugin = NewPlugin(cluster.handle());
  std::vector<int64_t> scores = ScoreAll(*plugin, cluster, *Foo("new").OwnedBy("ReplicaSet").Info());
  ASSERT_EQ(scores.size(), 3u);
  EXPECT_LT(scores[0], scores[1]);
  EXPECT_GT(scores[2], 0);
  sdk::Code code;
  ScoreAll(*plugin, cluster, *Foo("bare").Info(), &code);
  EXPECT_EQ(code, sdk::Code::kSkip);

  auto no_defaults = NewPlugin(cluster.handle(), R"({"defaultingType": "List"})");
  ScoreAll(*no_defaults, cluster, *Foo("new").OwnedBy("ReplicaSet").Info(), &code);
  EXPECT_EQ(code, sdk::Code::kSkip);
}

TEST(PodTopologySpreadTest, BadArgsAndSelectorsNameTheField) {
  FakeHandle handle;
  struct Case {
    std::string args;
    std::string error;
  };
  std::vector<Case> cases = {
      {R"({"defaultingType": "Sometimes"})", "defaultingType: unknown value"},
      {R"({"defaultConstraints": [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}]})",
       "defaultConstraints: must be empty when defaultingType is System"},
      {R"({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule"}]})",
       "defaultConstraints[0].maxSkew: must be greater than zero"},
      {R"({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]})",
       "defaultConstraints[0].labelSelector"},
      {R"({"bogus": 1})", "bogus: unknown field"},
  };
  for (const Case& c : cases) {
    auto plugin = PodTopologySpread::New(boost::json::parse(c.args).as_object(), handle);
    ASSERT_FALSE(plugin.ok()) << c.args;
    EXPECT_THAT(std::string(plugin.status().message()), HasSubstr(c.error));
  }
  // A pod with an invalid selector is unresolvable, with the field named.
  Cluster cluster(std::vector<NodeSpec>{{"a1", "a", {}}});
  auto plugin = NewPlugin(cluster.handle());
  PodBuilder pod = Foo("bad");
  TSC c = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  c.mutable_label_selector()->add_match_expressions()->set_key("app");  // No operator.
  *pod.mutable_pod().add_topology_spread_constraints() = c;
  sdk::CycleState state;
  sdk::Status s = plugin->PreFilter(state, *pod.Info(), cluster.snapshot()).second;
  EXPECT_EQ(s.code(), sdk::Code::kUnschedulableAndUnresolvable);
  EXPECT_THAT(s.Message(), HasSubstr("default/bad"));
  EXPECT_THAT(s.Message(),
              HasSubstr("spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator"));
}

v1::ClusterEvent PodEvent(uint32_t action, const v1::Pod* before, const v1::Pod* after) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(action);
  if (before != nullptr) *e.mutable_old_pod() = *before;
  if (after != nullptr) *e.mutable_new_pod() = *after;
  return e;
}

v1::ClusterEvent NodeEvent(uint32_t action, const v1::Node* before, const v1::Node* after) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(action);
  if (before != nullptr) *e.mutable_old_node() = *before;
  if (after != nullptr) *e.mutable_new_node() = *after;
  return e;
}

sdk::QueueingHint Hint(const PodTopologySpread& plugin, const v1::Pod& pod,
                       const v1::ClusterEvent& e) {
  for (const sdk::ClusterEventWithHint& ev : plugin.EventsToRegister()) {
    if (ev.resource == e.resource() && (ev.action_mask & e.action()) != 0) return ev.hint(pod, e);
  }
  return sdk::QueueingHint::kQueueSkip;  // Not registered: never requeued.
}

TEST(PodTopologySpreadTest, QueueingHints) {
  FakeHandle handle;
  auto plugin = NewPlugin(handle);
  PodBuilder pb = Foo("pending");
  *pb.mutable_pod().add_topology_spread_constraints() = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
  // A ScheduleAnyway constraint never rejects: its key and its pods do not
  // requeue the pod.
  TSC soft = Constraint(kHost, 1, TSC::SCHEDULE_ANYWAY);
  soft.mutable_label_selector()->mutable_match_labels()->erase("app");
  (*soft.mutable_label_selector()->mutable_match_labels())["tier"] = "soft";
  *pb.mutable_pod().add_topology_spread_constraints() = soft;
  const v1::Pod pod = pb.Build();
  const v1::Pod match = Foo("m").NodeName("a1").Build();
  const v1::Pod unassigned_match = Foo("m").Build();
  const v1::Pod soft_match = PodBuilder("s").Label("tier", "soft").NodeName("a1").Build();
  const v1::Node zoned_host =
      NodeBuilder("n").Label(std::string(kZone), "a").Label(std::string(kHost), "n").Build();
  const v1::Node zoned_host2 =
      NodeBuilder("n").Label(std::string(kZone), "a").Label(std::string(kHost), "n2").Build();
  const v1::Node tainted =
      NodeBuilder("n").Label(std::string(kZone), "a").Taint("k", "v", v1::NO_SCHEDULE).Build();
  const v1::Node bare_tainted = NodeBuilder("n").Taint("k", "v", v1::NO_SCHEDULE).Build();
  const v1::Pod other = PodBuilder("o").Label("app", "bar").NodeName("a1").Build();
  const v1::Pod foreign = Foo("f").Namespace("x").NodeName("a1").Build();
  const v1::Node zoned = NodeBuilder("n").Label(std::string(kZone), "a").Build();
  const v1::Node rezoned = NodeBuilder("n").Label(std::string(kZone), "b").Build();
  const v1::Node zoned_more = NodeBuilder("n").Label(std::string(kZone), "a").Label("x", "y").Build();
  const v1::Node bare = NodeBuilder("n").Build();
  using H = sdk::QueueingHint;
  struct Case {
    std::string name;
    v1::ClusterEvent event;
    H want;
  };
  std::vector<Case> cases = {
      {"matching pod deleted", PodEvent(v1::DELETE, &match, nullptr), H::kQueue},
      {"matching pod added", PodEvent(v1::ADD, nullptr, &match), H::kQueue},
      {"unrelated pod deleted", PodEvent(v1::DELETE, &other, nullptr), H::kQueueSkip},
      {"pod of another namespace deleted", PodEvent(v1::DELETE, &foreign, nullptr), H::kQueueSkip},
      {"label change making a pod match", PodEvent(v1::UPDATE_POD_LABEL, &other, &match), H::kQueue},
      {"label change keeping it unmatched",
       PodEvent(v1::UPDATE_POD_LABEL, &other, &other), H::kQueueSkip},
      {"pod scaled down (not registered)", PodEvent(v1::UPDATE_POD_SCALE_DOWN, &match, &match),
       H::kQueueSkip},
      {"node with the key added", NodeEvent(v1::ADD, nullptr, &zoned), H::kQueue},
      {"node without the key added", NodeEvent(v1::ADD, nullptr, &bare), H::kQueueSkip},
      {"node moved to another zone", NodeEvent(v1::UPDATE_NODE_LABEL, &zoned, &rezoned), H::kQueue},
      {"unrelated node label", NodeEvent(v1::UPDATE_NODE_LABEL, &zoned, &zoned_more), H::kQueueSkip},
      {"node got the key", NodeEvent(v1::UPDATE_NODE_LABEL, &bare, &zoned), H::kQueue},
      {"node with the key deleted", NodeEvent(v1::DELETE, &zoned, nullptr), H::kQueue},
      {"node allocatable change (not registered)",
       NodeEvent(v1::UPDATE_NODE_ALLOCATABLE, &zoned, &zoned), H::kQueueSkip},
      {"unassigned matching pod added (counts nowhere)", PodEvent(v1::ADD, nullptr, &unassigned_match),
       H::kQueueSkip},
      {"unassigned matching pod deleted", PodEvent(v1::DELETE, &unassigned_match, nullptr),
       H::kQueueSkip},
      {"pod matching only a ScheduleAnyway selector added", PodEvent(v1::ADD, nullptr, &soft_match),
       H::kQueueSkip},
      {"matching pod finished (terminal)", PodEvent(v1::DELETE, &match, &match), H::kQueue},
      {"node lost the key", NodeEvent(v1::UPDATE_NODE_LABEL, &zoned, &bare), H::kQueue},
      {"node without the key deleted", NodeEvent(v1::DELETE, &bare, nullptr), H::kQueueSkip},
      {"only a ScheduleAnyway key changed",
       NodeEvent(v1::UPDATE_NODE_LABEL, &zoned_host, &zoned_host2), H::kQueueSkip},
      {"counted node tainted", NodeEvent(v1::UPDATE_NODE_TAINT, &zoned, &tainted), H::kQueue},
      {"uncounted node tainted", NodeEvent(v1::UPDATE_NODE_TAINT, &bare, &bare_tainted),
       H::kQueueSkip},
  };
  for (const Case& c : cases) EXPECT_EQ(Hint(*plugin, pod, c.event), c.want) << c.name;
}

// kube's isSchedulableAfterPodChange for the pending pod's own update: a
// label change that flips whether it matches its own selector (it counts in
// its domain), or new tolerations when a constraint honours taints.
TEST(PodTopologySpreadTest, QueueingHintsForThePendingPodsOwnUpdate) {
  FakeHandle handle;
  auto plugin = NewPlugin(handle);
  auto pending = [](std::string app, bool honor_taints, bool tolerates) {
    PodBuilder pb = PodBuilder("pending").Label("app", app);
    if (tolerates) pb.Toleration("k", v1::Toleration::EQUAL, "v", v1::NO_SCHEDULE);
    TSC c = Constraint(kZone, 1, TSC::DO_NOT_SCHEDULE);
    if (honor_taints) c.set_node_taints_policy(TSC::HONOR);
    *pb.mutable_pod().add_topology_spread_constraints() = c;
    return pb.Build();
  };
  auto self = [](const v1::Pod& before, const v1::Pod& after, uint32_t actions) {
    v1::ClusterEvent e;
    e.set_resource(v1::UNSCHEDULED_POD);
    e.set_action(actions);
    *e.mutable_old_pod() = before;
    *e.mutable_new_pod() = after;
    return e;
  };
  using H = sdk::QueueingHint;
  const v1::Pod matching = pending("foo", false, false);
  const v1::Pod unmatching = pending("bar", false, false);
  v1::Pod matching_relabelled = matching;
  (*matching_relabelled.mutable_meta()->mutable_labels())["tier"] = "web";
  EXPECT_EQ(Hint(*plugin, unmatching, self(matching, unmatching, v1::UPDATE_POD_LABEL)), H::kQueue);
  EXPECT_EQ(Hint(*plugin, matching, self(unmatching, matching, v1::UPDATE_POD_LABEL)), H::kQueue);
  EXPECT_EQ(Hint(*plugin, matching_relabelled, self(matching, matching_relabelled, v1::UPDATE_POD_LABEL)),
            H::kQueueSkip);
  EXPECT_EQ(Hint(*plugin, pending("foo", true, true),
                 self(pending("foo", true, false), pending("foo", true, true), v1::UPDATE_POD_TOLERATIONS)),
            H::kQueue);
  EXPECT_EQ(Hint(*plugin, pending("foo", false, true),
                 self(pending("foo", false, false), pending("foo", false, true), v1::UPDATE_POD_TOLERATIONS)),
            H::kQueueSkip);
  // Resources are not this plugin's: not registered.
  EXPECT_EQ(Hint(*plugin, matching, self(matching, matching, v1::UPDATE_POD_SCALE_DOWN)), H::kQueueSkip);
}

}  // namespace
}  // namespace podium::plugins
