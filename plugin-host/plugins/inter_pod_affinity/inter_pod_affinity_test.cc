#include "plugins/inter_pod_affinity/inter_pod_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "boost/json/parse.hpp"
#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using testing::FakeHandle;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

constexpr std::string_view kZone = "topology.kubernetes.io/zone";
constexpr std::string_view kHost = "kubernetes.io/hostname";
const std::string kOk;
const std::string kAff(InterPodAffinity::kReasonAffinity);
const std::string kAnti(InterPodAffinity::kReasonAntiAffinity);
const std::string kExisting(InterPodAffinity::kReasonExistingAntiAffinity);

v1::PodAffinityTerm Term(std::string app, std::string_view topology) {
  v1::PodAffinityTerm t;
  (*t.mutable_label_selector()->mutable_match_labels())["app"] = std::move(app);
  t.set_topology_key(std::string(topology));
  return t;
}

PodBuilder App(std::string name, std::string app) { return PodBuilder(name).Label("app", app); }

PodBuilder WithRequired(PodBuilder b, bool anti, v1::PodAffinityTerm t) {
  v1::Affinity* a = b.mutable_pod().mutable_affinity();
  *(anti ? a->mutable_pod_anti_affinity() : a->mutable_pod_affinity())->add_required() = std::move(t);
  return b;
}

PodBuilder WithPreferred(PodBuilder b, bool anti, int32_t weight, v1::PodAffinityTerm t) {
  v1::Affinity* a = b.mutable_pod().mutable_affinity();
  auto* w = (anti ? a->mutable_pod_anti_affinity() : a->mutable_pod_affinity())->add_preferred();
  w->set_weight(weight);
  *w->mutable_term() = std::move(t);
  return b;
}

struct NodeSpec {
  std::string name;
  std::string zone;  // Empty: no zone label.
  std::vector<PodBuilder> pods;
};

class Cluster {
 public:
  explicit Cluster(std::vector<NodeSpec> nodes) {
    uint32_t id = 1;
    for (NodeSpec& spec : nodes) {
      NodeBuilder nb(spec.name);
      nb.Label(std::string(kHost), spec.name);
      if (!spec.zone.empty()) nb.Label(std::string(kZone), spec.zone);
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

std::unique_ptr<InterPodAffinity> NewPlugin(sdk::Handle& handle, std::string_view args = "{}") {
  auto plugin = InterPodAffinity::New(boost::json::parse(args).as_object(), handle);
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return std::unique_ptr<InterPodAffinity>(dynamic_cast<InterPodAffinity*>(plugin->release()));
}

std::vector<std::string> FilterAll(InterPodAffinity& plugin, sdk::CycleState& state,
                                   const sdk::PodInfo& pod, const sdk::Snapshot& snapshot) {
  std::vector<std::string> out;
  for (const sdk::NodeInfo* node : snapshot.Nodes()) {
    sdk::Status s = plugin.Filter(state, pod, *node);
    out.push_back(s.IsSuccess() ? "" : s.Message());
  }
  return out;
}

TEST(InterPodAffinityTest, FilterFollowsKubeScheduler) {
  struct Case {
    std::string name;
    PodBuilder pod;
    std::vector<NodeSpec> nodes;
    std::vector<std::string> want;
  };
  std::vector<Case> cases = {
      {"required affinity: the zone of a matching pod",
       WithRequired(App("new", "web"), false, Term("db", kZone)),
       {{"a1", "a", {App("db", "db")}}, {"a2", "a", {}}, {"b1", "b", {App("x", "web")}}},
       {kOk, kOk, kAff}},
      {"required affinity: a node without the topology key",
       WithRequired(App("new", "web"), false, Term("db", kZone)),
       {{"a1", "a", {App("db", "db")}}, {"x", "", {}}},
       {kOk, kAff}},
      {"required affinity: pods of another namespace do not match",
       WithRequired(App("new", "web"), false, Term("db", kZone)),
       {{"a1", "a", {App("db", "db").Namespace("other")}}, {"b1", "b", {App("db2", "db")}}},
       {kAff, kOk}},
      {"the first pod of a self-affine group may go anywhere with the key",
       WithRequired(App("new", "web"), false, Term("web", kZone)),
       {{"a1", "a", {App("x", "other")}}, {"b1", "b", {}}, {"x", "", {}}},
       {kOk, kOk, kAff}},
      {"not self-affine and nothing matches: nowhere",
       WithRequired(App("new", "web"), false, Term("db", kZone)),
       {{"a1", "a", {}}, {"b1", "b", {}}},
       {kAff, kAff}},
      {"required anti-affinity by hostname",
       WithRequired(App("new", "cache"), true, Term("cache", kHost)),
       {{"n1", "a", {App("c0", "cache")}}, {"n2", "a", {}}, {"n3", "b", {App("w", "web")}}},
       {kAnti, kOk, kOk}},
      {"required anti-affinity by zone",
       WithRequired(App("new", "cache"), true, Term("cache", kZone)),
       {{"a1", "a", {App("c0", "cache")}}, {"a2", "a", {}}, {"b1", "b", {}}},
       {kAnti, kAnti, kOk}},
      {"required anti-affinity: a node without the key is fine",
       WithRequired(App("new", "cache"), true, Term("cache", kZone)),
       {{"a1", "a", {App("c0", "cache")}}, {"x", "", {}}},
       {kAnti, kOk}},
      {"symmetry: an existing pod's required anti-affinity keeps the pod away",
       App("new", "web"),
       {{"n1", "a", {WithRequired(App("loner", "db"), true, Term("web", kHost))}}, {"n2", "a", {}}},
       {kExisting, kOk}},
      {"symmetry by zone",
       App("new", "web"),
       {{"a1", "a", {WithRequired(App("loner", "db"), true, Term("web", kZone))}},
        {"a2", "a", {}}, {"b1", "b", {}}},
       {kExisting, kExisting, kOk}},
      {"symmetry: an existing pod's terms default to its own namespace",
       App("new", "web").Namespace("other"),
       {{"n1", "a", {WithRequired(App("loner", "db"), true, Term("web", kHost))}}},
       {kOk}},
  };
  {
    v1::PodAffinityTerm t = Term("db", kZone);
    t.add_namespaces("data");
    cases.push_back({"a namespaces list replaces the pod's own",
                     WithRequired(App("new", "web"), false, t),
                     {{"a1", "a", {App("db", "db")}}, {"b1", "b", {App("db", "db").Namespace("data")}}},
                     {kAff, kOk}});
  }
  {
    v1::PodAffinityTerm t = Term("db", kZone);
    t.mutable_namespace_selector();  // {}: every namespace.
    cases.push_back({"an empty namespaceSelector matches every namespace",
                     WithRequired(App("new", "web"), false, t),
                     {{"a1", "a", {App("db", "db").Namespace("data")}}, {"b1", "b", {}}},
                     {kOk, kAff}});
  }
  {
    v1::PodAffinityTerm t = Term("web", kHost);
    t.add_match_label_keys("rev");
    cases.push_back({"matchLabelKeys: only the same revision repels",
                     WithRequired(App("new", "web").Label("rev", "2"), true, t),
                     {{"n1", "a", {App("old", "web").Label("rev", "1")}},
                      {"n2", "a", {App("cur", "web").Label("rev", "2")}}},
                     {kOk, kAnti}});
  }
  {
    v1::PodAffinityTerm t = Term("web", kHost);
    t.add_mismatch_label_keys("tenant");
    cases.push_back({"mismatchLabelKeys: only other tenants repel",
                     WithRequired(App("new", "web").Label("tenant", "a"), true, t),
                     {{"n1", "a", {App("mine", "web").Label("tenant", "a")}},
                      {"n2", "a", {App("theirs", "web").Label("tenant", "b")}}},
                     {kOk, kAnti}});
  }
  // Both ways of finding the pods the incoming pod's terms select: a scan of
  // every pod, and the label index of the SDK's mirror.
  for (const bool label_index : {false, true}) {
    for (Case& c : cases) {
      SCOPED_TRACE(label_index ? "with the label index" : "scanning every pod");
      Cluster cluster(c.nodes);
      cluster.handle().fake_snapshot().set_label_index(label_index);
      auto plugin = NewPlugin(cluster.handle());
      sdk::PodInfoPtr pod = c.pod.Info();
      sdk::CycleState state;
      auto [result, status] = plugin->PreFilter(state, *pod, cluster.snapshot());
      if (status.IsSkip()) {  // Filter is not run: every node passes.
        EXPECT_THAT(c.want, ::testing::Each(kOk)) << c.name;
        continue;
      }
      ASSERT_TRUE(status.IsSuccess()) << c.name << ": " << status.Message();
      EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAreArray(c.want))
          << c.name;
    }
  }
}

// With the label index, PreFilter finds the pods a term's `key In (values)`
// requirement admits without scanning every pod; a term without one (here
// only `Exists`) still scans, and both give kube-scheduler's answer.
TEST(InterPodAffinityTest, PreFilterUsesTheLabelIndexWhenTheTermsAllowIt) {
  std::vector<NodeSpec> nodes = {{"n1", "a", {App("c0", "cache"), App("w0", "web")}},
                                 {"n2", "a", {App("w1", "web")}},
                                 {"n3", "b", {App("db", "db")}}};
  Cluster cluster(nodes);
  cluster.handle().fake_snapshot().set_label_index(true);
  auto plugin = NewPlugin(cluster.handle());

  // Anti-affinity to app=cache by hostname and affinity to app=db by zone.
  PodBuilder b = WithRequired(App("new", "cache"), true, Term("cache", kHost));
  b = WithRequired(std::move(b), false, Term("db", kZone));
  sdk::PodInfoPtr pod = b.Info();
  const int scans = cluster.handle().fake_snapshot().nodes_calls();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(cluster.handle().fake_snapshot().nodes_calls(), scans);  // No scan.
  EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAreArray({kAff, kAff, kOk}));
  sdk::CycleState anti_only;
  sdk::PodInfoPtr anti = WithRequired(App("new", "cache"), true, Term("cache", kHost)).Info();
  ASSERT_TRUE(plugin->PreFilter(anti_only, *anti, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, anti_only, *anti, cluster.snapshot()), ElementsAreArray({kAnti, kOk, kOk}));

  v1::PodAffinityTerm exists;
  auto* e = exists.mutable_label_selector()->add_match_expressions();
  e->set_key("app");
  e->set_operator_(v1::LabelSelectorRequirement::EXISTS);
  exists.set_topology_key(std::string(kZone));
  sdk::PodInfoPtr scanning = WithRequired(App("new", "x"), true, exists).Info();
  const int before = cluster.handle().fake_snapshot().nodes_calls();
  sdk::CycleState scan_state;
  ASSERT_TRUE(plugin->PreFilter(scan_state, *scanning, cluster.snapshot()).second.IsSuccess());
  EXPECT_GT(cluster.handle().fake_snapshot().nodes_calls(), before);
  EXPECT_THAT(FilterAll(*plugin, scan_state, *scanning, cluster.snapshot()), ElementsAreArray({kAnti, kAnti, kAnti}));
}

v1::PodAffinityTerm WithNamespaceSelector(v1::PodAffinityTerm t, std::string key, std::string value) {
  (*t.mutable_namespace_selector()->mutable_match_labels())[std::move(key)] = std::move(value);
  return t;
}

// namespaceSelector against Namespace labels, as kube-scheduler does: the
// namespaces list and the selector are a union; `{}` selects every namespace;
// a namespace without a Namespace object has no labels.
TEST(InterPodAffinityTest, NamespaceSelectorMatchesNamespaceLabels) {
  struct Case {
    std::string name;
    PodBuilder pod;
    std::vector<NodeSpec> nodes;
    std::vector<std::string> want;
  };
  // prod and staging are labelled team=data; dev is not; ghost has no object.
  const std::vector<NodeSpec> dbs = {{"a1", "a", {App("db1", "db").Namespace("prod")}},
                                     {"b1", "b", {App("db2", "db").Namespace("dev")}},
                                     {"c1", "c", {App("db3", "db")}},
                                     {"d1", "d", {App("db4", "db").Namespace("staging")}},
                                     {"e1", "e", {App("db5", "db").Namespace("ghost")}}};
  v1::PodAffinityTerm data_db = WithNamespaceSelector(Term("db", kZone), "team", "data");
  v1::PodAffinityTerm data_or_dev = data_db;
  data_or_dev.add_namespaces("dev");
  std::vector<Case> cases = {
      {"required affinity: only pods in the labelled namespaces count",
       WithRequired(App("new", "web"), false, data_db), dbs,
       {kOk, kAff, kAff, kOk, kAff}},
      {"the namespaces list and the selector are a union",
       WithRequired(App("new", "web"), false, data_or_dev), dbs,
       {kOk, kOk, kAff, kOk, kAff}},
      {"required anti-affinity: only pods in the labelled namespaces repel",
       WithRequired(App("new", "web"), true, WithNamespaceSelector(Term("db", kHost), "team", "data")),
       dbs,
       {kAnti, kOk, kOk, kAnti, kOk}},
      {"symmetry: an existing pod's selector sees the labels of the new pod's namespace",
       App("new", "web").Namespace("prod"),
       {{"n1", "a",
         {WithRequired(App("r", "x").Namespace("other"), true,
                       WithNamespaceSelector(Term("web", kHost), "team", "data"))}},
        {"n2", "a", {}}},
       {kExisting, kOk}},
      {"symmetry: a new pod in an unlabelled namespace is not selected",
       App("new", "web").Namespace("dev"),
       {{"n1", "a",
         {WithRequired(App("r", "x").Namespace("other"), true,
                       WithNamespaceSelector(Term("web", kHost), "team", "data"))}},
        {"n2", "a", {}}},
       {kOk, kOk}},
  };
  for (Case& c : cases) {
    Cluster cluster(c.nodes);
    cluster.handle().fake_snapshot().AddNamespace("prod", {{"team", "data"}});
    cluster.handle().fake_snapshot().AddNamespace("staging", {{"team", "data"}, {"tier", "2"}});
    cluster.handle().fake_snapshot().AddNamespace("dev", {{"team", "web"}});
    cluster.handle().fake_snapshot().AddNamespace("default");
    auto plugin = NewPlugin(cluster.handle());
    sdk::PodInfoPtr pod = c.pod.Info();
    sdk::CycleState state;
    auto [result, status] = plugin->PreFilter(state, *pod, cluster.snapshot());
    if (status.IsSkip()) {
      EXPECT_THAT(c.want, ::testing::Each(kOk)) << c.name;
      continue;
    }
    ASSERT_TRUE(status.IsSuccess()) << c.name << ": " << status.Message();
    EXPECT_THAT(FilterAll(*plugin, state, *pod, cluster.snapshot()), ElementsAreArray(c.want))
        << c.name;
  }
}

// A Namespace relabelled between cycles: the next PreFilter sees it.
TEST(InterPodAffinityTest, NamespaceSelectorIsResolvedEachCycle) {
  Cluster cluster({{"a1", "a", {App("db1", "db").Namespace("prod")}}, {"b1", "b", {}}});
  cluster.handle().fake_snapshot().AddNamespace("prod");
  auto plugin = NewPlugin(cluster.handle());
  sdk::PodInfoPtr pod =
      WithRequired(App("new", "web"), false, WithNamespaceSelector(Term("db", kZone), "team", "data"))
          .Info();
  sdk::CycleState before;
  ASSERT_TRUE(plugin->PreFilter(before, *pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, before, *pod, cluster.snapshot()), ElementsAreArray({kAff, kAff}));
  cluster.handle().fake_snapshot().AddNamespace("prod", {{"team", "data"}});
  sdk::CycleState after;
  ASSERT_TRUE(plugin->PreFilter(after, *pod, cluster.snapshot()).second.IsSuccess());
  EXPECT_THAT(FilterAll(*plugin, after, *pod, cluster.snapshot()), ElementsAreArray({kOk, kAff}));
}

TEST(InterPodAffinityTest, StatusCodesAndSkip) {
  Cluster cluster({{"n1", "a", {App("c0", "cache"), App("d", "db")}}, {"n2", "b", {}}});
  auto plugin = NewPlugin(cluster.handle());
  sdk::CycleState plain_state;
  // No terms and no existing anti-affinity: nothing to check.
  EXPECT_EQ(plugin->PreFilter(plain_state, *App("p", "web").Info(), cluster.snapshot()).second.code(),
            sdk::Code::kSkip);

  sdk::PodInfoPtr anti = WithRequired(App("new", "cache"), true, Term("cache", kHost)).Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *anti, cluster.snapshot()).second.IsSuccess());
  // Anti-affinity can be lifted by preemption; a missing affinity cannot.
  EXPECT_EQ(plugin->Filter(state, *anti, cluster.node("n1")).code(), sdk::Code::kUnschedulable);
  sdk::PodInfoPtr aff = WithRequired(App("new", "web"), false, Term("db", kZone)).Info();
  sdk::CycleState aff_state;
  ASSERT_TRUE(plugin->PreFilter(aff_state, *aff, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(plugin->Filter(aff_state, *aff, cluster.node("n2")).code(),
            sdk::Code::kUnschedulableAndUnresolvable);
}

TEST(InterPodAffinityTest, AddPodAndRemovePodUpdateTheCounts) {
  Cluster cluster({{"n1", "a", {App("c0", "cache"),
                                WithRequired(App("loner", "db"), true, Term("web", kHost))}},
                   {"n2", "a", {}}});
  auto plugin = NewPlugin(cluster.handle());
  const sdk::NodeInfo& n1 = cluster.node("n1");
  const sdk::NodeInfo& n2 = cluster.node("n2");

  sdk::PodInfoPtr anti = WithRequired(App("new", "cache"), true, Term("cache", kHost)).Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *anti, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(plugin->Filter(state, *anti, n1).Message(), kAnti);
  auto removed = state.Clone();
  ASSERT_TRUE(plugin->RemovePod(*removed, *anti, *n1.pods()[0], n1).IsSuccess());
  EXPECT_TRUE(plugin->Filter(*removed, *anti, n1).IsSuccess());
  auto added = state.Clone();
  ASSERT_TRUE(plugin->AddPod(*added, *anti, *App("c1", "cache").Info(), n2).IsSuccess());
  EXPECT_EQ(plugin->Filter(*added, *anti, n2).Message(), kAnti);
  EXPECT_TRUE(plugin->Filter(state, *anti, n2).IsSuccess());

  // Symmetry: removing the pod whose anti-affinity repels web pods frees n1.
  sdk::PodInfoPtr web = App("web", "web").Info();
  sdk::CycleState web_state;
  ASSERT_TRUE(plugin->PreFilter(web_state, *web, cluster.snapshot()).second.IsSuccess());
  EXPECT_EQ(plugin->Filter(web_state, *web, n1).Message(), kExisting);
  ASSERT_TRUE(plugin->RemovePod(web_state, *web, *n1.pods()[1], n1).IsSuccess());
  EXPECT_TRUE(plugin->Filter(web_state, *web, n1).IsSuccess());
  // ...and adding one elsewhere repels from there.
  ASSERT_TRUE(plugin->AddPod(web_state, *web, *n1.pods()[1], n2).IsSuccess());
  EXPECT_EQ(plugin->Filter(web_state, *web, n2).Message(), kExisting);

  // Affinity: the first matching pod added makes only its domain feasible.
  Cluster empty({{"a1", "a", {}}, {"b1", "b", {}}});
  auto aff_plugin = NewPlugin(empty.handle());
  sdk::PodInfoPtr aff = WithRequired(App("new", "web"), false, Term("db", kZone)).Info();
  sdk::CycleState aff_state;
  ASSERT_TRUE(aff_plugin->PreFilter(aff_state, *aff, empty.snapshot()).second.IsSuccess());
  ASSERT_TRUE(aff_plugin->AddPod(aff_state, *aff, *App("db", "db").Info(), empty.node("b1")).IsSuccess());
  EXPECT_THAT(FilterAll(*aff_plugin, aff_state, *aff, empty.snapshot()),
              ElementsAreArray({kAff, kOk}));
}

// Filter's verdict on every node after a fresh PreFilter.
std::vector<std::string> Verdicts(InterPodAffinity& plugin, const sdk::PodInfo& pod,
                                  const sdk::Snapshot& snapshot) {
  sdk::CycleState state;
  sdk::Status pre = plugin.PreFilter(state, pod, snapshot).second;
  if (pre.IsSkip()) return std::vector<std::string>(snapshot.NumNodes(), kOk);
  EXPECT_TRUE(pre.IsSuccess()) << pre.Message();
  return FilterAll(plugin, state, pod, snapshot);
}

// The anti-affinity counts a plugin keeps across cycles follow the
// snapshot's pod changes: after each change its verdicts are those of a new
// plugin that counts everything afresh, and a kept term costs no recount.
TEST(InterPodAffinityTest, KeptCountsFollowPodChanges) {
  Cluster cluster({{"n1", "a", {WithRequired(App("a0", "anti"), true, Term("anti", kHost))}},
                   {"n2", "a", {}},
                   {"n3", "b", {}},
                   {"n4", "b", {}}});
  testing::FakeSnapshot& snap = cluster.handle().fake_snapshot();
  snap.set_label_index(true);
  snap.EnablePodChangeLog();
  auto kept = NewPlugin(cluster.handle());
  sdk::PodInfoPtr anti = WithRequired(App("new", "anti"), true, Term("anti", kHost)).Info();
  sdk::PodInfoPtr web = App("web", "web").Info();
  auto expect = [&](const sdk::PodInfo& pod, std::vector<std::string> want) {
    EXPECT_THAT(Verdicts(*kept, pod, cluster.snapshot()), ElementsAreArray(want));
    auto fresh = NewPlugin(cluster.handle());
    EXPECT_THAT(Verdicts(*fresh, pod, cluster.snapshot()), ElementsAreArray(want));
  };
  expect(*anti, {kAnti, kOk, kOk, kOk});

  // Added: counted without visiting a pod again.
  snap.AddPod("n2", WithRequired(App("a1", "anti"), true, Term("anti", kHost)).Build());
  const int visits = snap.index_visits();
  EXPECT_THAT(Verdicts(*kept, *anti, cluster.snapshot()), ElementsAreArray({kAnti, kAnti, kOk, kOk}));
  EXPECT_EQ(snap.index_visits(), visits);
  expect(*anti, {kAnti, kAnti, kOk, kOk});

  // Deleted.
  snap.RemovePod("n1", "uid-a0");
  expect(*anti, {kOk, kAnti, kOk, kOk});

  // Relabelled (the old version removed, the new one added): no longer
  // selected, and its own term is gone with it.
  snap.RemovePod("n2", "uid-a1");
  snap.AddPod("n2", App("a1", "other").Build());
  expect(*anti, {kOk, kOk, kOk, kOk});

  // Symmetry: an existing pod's term by zone keeps web pods out of zone b...
  snap.AddPod("n3", WithRequired(App("db", "db"), true, Term("web", kZone)).Build());
  expect(*web, {kOk, kOk, kExisting, kExisting});
  // ...and a node moved to zone a takes the pod's domain with it.
  snap.SetNodeLabels("n3", {{std::string(kHost), "n3"}, {std::string(kZone), "a"}});
  expect(*web, {kExisting, kExisting, kExisting, kOk});
  snap.RemovePod("n3", "uid-db");
  expect(*web, {kOk, kOk, kOk, kOk});
}

// A cycle's state keeps the counts of its PreFilter, with its own AddPod /
// RemovePod changes (preemption's dry runs), whatever the kept counts
// become in later cycles.
TEST(InterPodAffinityTest, CycleStateKeepsItsCountsWhileKeptCountsMove) {
  Cluster cluster({{"n1", "a", {WithRequired(App("a0", "anti"), true, Term("anti", kHost))}},
                   {"n2", "a", {}},
                   {"n3", "b", {}}});
  testing::FakeSnapshot& snap = cluster.handle().fake_snapshot();
  snap.set_label_index(true);
  snap.EnablePodChangeLog();
  auto plugin = NewPlugin(cluster.handle());
  sdk::PodInfoPtr anti = WithRequired(App("new", "anti"), true, Term("anti", kHost)).Info();
  sdk::CycleState state;
  ASSERT_TRUE(plugin->PreFilter(state, *anti, cluster.snapshot()).second.IsSuccess());
  // A dry run: the pod on n1 removed, one added on n3.
  auto dry = state.Clone();
  const sdk::NodeInfo& n1 = cluster.node("n1");
  ASSERT_TRUE(plugin->RemovePod(*dry, *anti, *n1.pods()[0], n1).IsSuccess());
  sdk::PodInfoPtr extra = WithRequired(App("a9", "anti"), true, Term("anti", kHost)).Info();
  ASSERT_TRUE(plugin->AddPod(*dry, *anti, *extra, cluster.node("n3")).IsSuccess());

  // Later cycles see a pod added on n2 and the one on n1 gone.
  snap.AddPod("n2", WithRequired(App("a1", "anti"), true, Term("anti", kHost)).Build());
  snap.RemovePod("n1", "uid-a0");
  EXPECT_THAT(Verdicts(*plugin, *anti, cluster.snapshot()), ElementsAreArray({kOk, kAnti, kOk}));

  EXPECT_THAT(FilterAll(*plugin, state, *anti, cluster.snapshot()), ElementsAreArray({kAnti, kOk, kOk}));
  EXPECT_THAT(FilterAll(*plugin, *dry, *anti, cluster.snapshot()), ElementsAreArray({kOk, kOk, kAnti}));
  // The symmetry rule alone (a pod the incoming one's own terms do not select).
  sdk::PodInfoPtr anti_b = App("b", "anti").Info();
  sdk::CycleState b_state;
  ASSERT_TRUE(plugin->PreFilter(b_state, *anti_b, cluster.snapshot()).second.IsSuccess());
  auto b_dry = b_state.Clone();
  const sdk::NodeInfo& n2 = cluster.node("n2");
  ASSERT_TRUE(plugin->RemovePod(*b_dry, *anti_b, *n2.pods()[0], n2).IsSuccess());
  snap.RemovePod("n2", "uid-a1");
  snap.AddPod("n3", WithRequired(App("a2", "anti"), true, Term("anti", kHost)).Build());
  EXPECT_THAT(Verdicts(*plugin, *anti_b, cluster.snapshot()), ElementsAreArray({kOk, kOk, kExisting}));
  EXPECT_THAT(FilterAll(*plugin, b_state, *anti_b, cluster.snapshot()), ElementsAreArray({kOk, kExisting, kOk}));
  EXPECT_THAT(FilterAll(*plugin, *b_dry, *anti_b, cluster.snapshot()), ElementsAreArray({kOk, kOk, kOk}));
}

TEST(InterPodAffinityTest, InvalidTermIsUnresolvableAndNamed) {
  Cluster cluster(std::vector<NodeSpec>{{"n1", "a", {}}});
  auto plugin = NewPlugin(cluster.handle());
  v1::PodAffinityTerm bad = Term("x", kHost);
  bad.mutable_label_selector()->add_match_expressions()->set_key("tier");  // No operator.
  sdk::CycleState state;
  sdk::Status s =
      plugin->PreFilter(state, *WithRequired(App("bad", "web"), true, bad).Info(), cluster.snapshot())
          .second;
  EXPECT_EQ(s.code(), sdk::Code::kUnschedulableAndUnresolvable);
  EXPECT_THAT(s.Message(), HasSubstr("default/bad"));
  EXPECT_THAT(s.Message(), HasSubstr("podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                                     ".labelSelector.matchExpressions[0].operator"));
}

std::vector<int64_t> ScoreAll(InterPodAffinity& plugin, const Cluster& cluster,
                              const sdk::PodInfo& pod, sdk::Code* code = nullptr) {
  sdk::CycleState state;
  const auto& nodes = cluster.snapshot().Nodes();
  sdk::Status s = plugin.PreScore(state, pod, nodes);
  if (code != nullptr) *code = s.code();
  if (!s.IsSuccess()) return {};
  return testing::ScoreAndNormalize(plugin, state, pod, nodes);
}

TEST(InterPodAffinityTest, ScoreFollowsKubeScheduler) {
  struct Case {
    std::string name;
    std::string args;
    PodBuilder pod;
    std::vector<NodeSpec> nodes;
    std::vector<int64_t> want;
  };
  std::vector<Case> cases = {
      {"preferred affinity pulls to the zone",
       "{}",
       WithPreferred(App("new", "web"), false, 5, Term("db", kZone)),
       {{"a1", "a", {App("db", "db")}}, {"a2", "a", {}}, {"b1", "b", {}}},
       {100, 100, 0}},
      {"preferred anti-affinity pushes away",
       "{}",
       WithPreferred(App("new", "web"), true, 5, Term("db", kZone)),
       {{"a1", "a", {App("db", "db")}}, {"a2", "a", {}}, {"b1", "b", {}}},
       {0, 0, 100}},
      {"weights add up and normalise between min and max",
       "{}",
       WithPreferred(WithPreferred(App("new", "web"), true, 5, Term("db", kHost)), false, 10,
                     Term("cache", kHost)),
       {{"n1", "a", {App("db", "db")}}, {"n2", "a", {}}, {"n3", "b", {App("c", "cache")}}},
       {0, 33, 100}},
      {"symmetry: an existing pod's preferred affinity scores",
       "{}",
       App("new", "web"),
       {{"n1", "a", {WithPreferred(App("fan", "db"), false, 10, Term("web", kHost))}}, {"n2", "a", {}}},
       {100, 0}},
      {"symmetry: an existing pod's preferred anti-affinity scores down",
       "{}",
       App("new", "web"),
       {{"n1", "a", {WithPreferred(App("shy", "db"), true, 10, Term("web", kHost))}}, {"n2", "a", {}}},
       {0, 100}},
      {"preferred affinity: a namespaceSelector counts only the labelled namespaces",
       "{}",
       WithPreferred(App("new", "web"), false, 5,
                     WithNamespaceSelector(Term("db", kZone), "team", "data")),
       {{"a1", "a", {App("db", "db").Namespace("prod")}}, {"b1", "b", {App("db", "db").Namespace("dev")}}},
       {100, 0}},
      {"an existing pod's required affinity at hardPodAffinityWeight",
       "{}",
       App("new", "web"),
       {{"n1", "a", {WithRequired(App("fan", "db"), false, Term("web", kZone))}}, {"n2", "b", {}}},
       {100, 0}},
  };
  {
    // A term the label index cannot answer (Exists) beside one it can.
    v1::PodAffinityTerm any_app;
    auto* e = any_app.mutable_label_selector()->add_match_expressions();
    e->set_key("app");
    e->set_operator_(v1::LabelSelectorRequirement::EXISTS);
    any_app.set_topology_key(std::string(kHost));
    cases.push_back({"an Exists term is scanned for, a matchLabels term looked up",
                     "{}",
                     WithPreferred(WithPreferred(App("new", "web"), true, 10, any_app), false, 5, Term("db", kZone)),
                     {{"a1", "a", {App("db", "db")}}, {"a2", "a", {}}, {"b1", "b", {}}},
                     {0, 100, 50}});
  }
  for (const bool label_index : {false, true}) {
    for (Case& c : cases) {
      SCOPED_TRACE(label_index ? "with the label index" : "scanning every pod");
      Cluster cluster(c.nodes);
      cluster.handle().fake_snapshot().set_label_index(label_index);
      cluster.handle().fake_snapshot().AddNamespace("prod", {{"team", "data"}});
      cluster.handle().fake_snapshot().AddNamespace("dev");
      auto plugin = NewPlugin(cluster.handle(), c.args);
      EXPECT_THAT(ScoreAll(*plugin, cluster, *c.pod.Info()), ElementsAreArray(c.want)) << c.name;
    }
  }
}

TEST(InterPodAffinityTest, ScoreSkipsWhenNothingCanScore) {
  Cluster cluster({{"n1", "a", {WithRequired(App("fan", "db"), false, Term("web", kZone)),
                                WithPreferred(App("p", "db"), false, 3, Term("web", kHost))}},
                   {"n2", "b", {App("x", "web")}}});
  sdk::Code code;
  auto plugin = NewPlugin(cluster.handle());
  ScoreAll(*plugin, cluster, *App("new", "other").Info(), &code);
  EXPECT_EQ(code, sdk::Code::kSkip) << "no term matches the pod";
  auto no_hard = NewPlugin(cluster.handle(),
                           R"({"hardPodAffinityWeight": 0, "ignorePreferredTermsOfExistingPods": true})");
  ScoreAll(*no_hard, cluster, *App("new", "web").Info(), &code);
  EXPECT_EQ(code, sdk::Code::kSkip) << "existing pods' terms are ignored";
  auto only_hard = NewPlugin(cluster.handle(), R"({"ignorePreferredTermsOfExistingPods": false})");
  EXPECT_THAT(ScoreAll(*only_hard, cluster, *App("new", "web").Info()), ElementsAreArray({100, 0}));
}

// kube-scheduler's ignorePreferredTermsOfExistingPods skips scoring for a pod
// with no preferred terms of its own; a pod with some still counts the
// existing pods' preferred terms next to its own.
TEST(InterPodAffinityTest, IgnoringExistingPodsPreferredTermsAppliesOnlyToAPodWithoutItsOwn) {
  Cluster cluster({{"n1", "a", {WithPreferred(App("fan", "db"), false, 10, Term("web", kHost))}},
                   {"n2", "b", {App("cache", "cache")}},
                   {"n3", "c", {}}});
  auto plugin = NewPlugin(cluster.handle(), R"({"ignorePreferredTermsOfExistingPods": true})");
  sdk::Code code;
  ScoreAll(*plugin, cluster, *App("new", "web").Info(), &code);
  EXPECT_EQ(code, sdk::Code::kSkip) << "a pod without preferred terms is not scored";
  // Its own term (weight 5 towards cache, on n2) and the existing pod's term
  // (weight 10 towards web, on n1): n1 scores 10, n2 5, n3 0.
  EXPECT_THAT(ScoreAll(*plugin, cluster,
                       *WithPreferred(App("new", "web"), false, 5, Term("cache", kHost)).Info()),
              ElementsAreArray({100, 50, 0}));
}

TEST(InterPodAffinityTest, BadArgs) {
  FakeHandle handle;
  for (const auto& [args, error] : std::vector<std::pair<std::string, std::string>>{
           {R"({"hardPodAffinityWeight": 101})", "hardPodAffinityWeight: not in valid range [0-100]"},
           {R"({"ignorePreferredTermsOfExistingPods": 1})", "must be a boolean"},
           {R"({"x": 1})", "x: unknown field"}}) {
    auto plugin = InterPodAffinity::New(boost::json::parse(args).as_object(), handle);
    ASSERT_FALSE(plugin.ok()) << args;
    EXPECT_THAT(std::string(plugin.status().message()), HasSubstr(error));
  }
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

v1::ClusterEvent NamespaceEvent(uint32_t action, const v1::Namespace* before,
                                const v1::Namespace* after) {
  v1::ClusterEvent e;
  e.set_resource(v1::NAMESPACE);
  e.set_action(action);
  if (before != nullptr) *e.mutable_old_namespace() = *before;
  if (after != nullptr) *e.mutable_new_namespace() = *after;
  return e;
}

v1::Namespace MakeNamespace(std::string name, std::map<std::string, std::string> labels = {}) {
  v1::Namespace ns;
  ns.mutable_meta()->set_name(std::move(name));
  for (auto& [k, v] : labels) (*ns.mutable_meta()->mutable_labels())[k] = v;
  return ns;
}

sdk::QueueingHint Hint(const InterPodAffinity& plugin, const v1::Pod& pod, const v1::ClusterEvent& e) {
  for (const sdk::ClusterEventWithHint& ev : plugin.EventsToRegister()) {
    if (ev.resource == e.resource() && (ev.action_mask & e.action()) != 0) return ev.hint(pod, e);
  }
  return sdk::QueueingHint::kQueueSkip;
}

TEST(InterPodAffinityTest, QueueingHints) {
  FakeHandle handle;
  auto plugin = NewPlugin(handle);
  const v1::Pod wants_db =
      WithRequired(WithRequired(App("p", "web"), false, Term("db", kZone)), true, Term("cache", kHost))
          .Build();
  const v1::Pod plain_web = App("w", "web").Build();
  const v1::Pod db = App("db", "db").NodeName("n").Build();
  const v1::Pod cache = App("c", "cache").NodeName("n").Build();
  const v1::Pod other = App("o", "other").NodeName("n").Build();
  const v1::Pod repeller = WithRequired(App("r", "x"), true, Term("web", kHost)).NodeName("n").Build();
  const v1::Node zoned = NodeBuilder("n").Label(std::string(kZone), "a").Build();
  const v1::Node zoned_more = NodeBuilder("n").Label(std::string(kZone), "a").Label("k", "v").Build();
  const v1::Node bare = NodeBuilder("n").Build();
  const v1::Node hosted = NodeBuilder("n").Label(std::string(kHost), "n").Build();
  const v1::Node rehosted = NodeBuilder("n").Label(std::string(kHost), "n2").Build();
  const v1::Pod unassigned_db = App("db", "db").Build();
  const v1::Pod unassigned_cache = App("c", "cache").Build();
  const v1::Pod only_anti = WithRequired(App("p", "web"), true, Term("cache", kHost)).Build();
  const v1::Pod only_affinity = WithRequired(App("p", "web"), false, Term("db", kZone)).Build();
  using H = sdk::QueueingHint;
  struct Case {
    std::string name;
    const v1::Pod* pod;
    v1::ClusterEvent event;
    H want;
  };
  std::vector<Case> cases = {
      {"a pod matching the affinity added", &wants_db, PodEvent(v1::ADD, nullptr, &db), H::kQueue},
      {"an unrelated pod added", &wants_db, PodEvent(v1::ADD, nullptr, &other), H::kQueueSkip},
      {"an anti-affine pod added", &wants_db, PodEvent(v1::ADD, nullptr, &cache), H::kQueueSkip},
      {"an anti-affine pod deleted", &wants_db, PodEvent(v1::DELETE, &cache, nullptr), H::kQueue},
      {"an unrelated pod deleted", &wants_db, PodEvent(v1::DELETE, &other, nullptr), H::kQueueSkip},
      {"a pod relabelled to match the affinity", &wants_db,
       PodEvent(v1::UPDATE_POD_LABEL, &other, &db), H::kQueue},
      {"a pod relabelled away from the anti-affinity", &wants_db,
       PodEvent(v1::UPDATE_POD_LABEL, &cache, &other), H::kQueue},
      {"symmetry: the pod repelling it deleted", &plain_web,
       PodEvent(v1::DELETE, &repeller, nullptr), H::kQueue},
      {"a node with the topology key added", &wants_db, NodeEvent(v1::ADD, nullptr, &zoned), H::kQueue},
      {"a node label unrelated to the terms", &wants_db,
       NodeEvent(v1::UPDATE_NODE_LABEL, &zoned, &zoned_more), H::kQueueSkip},
      {"a node gets the topology key", &wants_db, NodeEvent(v1::UPDATE_NODE_LABEL, &bare, &zoned),
       H::kQueue},
      {"a node taint (not registered)", &wants_db, NodeEvent(v1::UPDATE_NODE_TAINT, &zoned, &zoned),
       H::kQueueSkip},
      {"an unassigned pod matching the affinity added", &wants_db,
       PodEvent(v1::ADD, nullptr, &unassigned_db), H::kQueueSkip},
      {"an unassigned anti-affine pod deleted", &wants_db,
       PodEvent(v1::DELETE, &unassigned_cache, nullptr), H::kQueueSkip},
      {"an anti-affine pod finished (terminal)", &wants_db, PodEvent(v1::DELETE, &cache, &cache),
       H::kQueue},
      {"a pod added, pending pod has only anti-affinity", &only_anti,
       PodEvent(v1::ADD, nullptr, &cache), H::kQueueSkip},
      {"anti-affinity: a new node without the key", &only_anti, NodeEvent(v1::ADD, nullptr, &bare),
       H::kQueue},
      {"anti-affinity: a node lost the key", &only_anti,
       NodeEvent(v1::UPDATE_NODE_LABEL, &hosted, &bare), H::kQueue},
      {"anti-affinity: a node gained the key", &only_anti,
       NodeEvent(v1::UPDATE_NODE_LABEL, &bare, &hosted), H::kQueueSkip},
      {"anti-affinity: a node moved to another domain", &only_anti,
       NodeEvent(v1::UPDATE_NODE_LABEL, &hosted, &rehosted), H::kQueue},
      {"affinity: a new node without the key", &only_affinity, NodeEvent(v1::ADD, nullptr, &bare),
       H::kQueueSkip},
      {"affinity: a node lost the key", &only_affinity,
       NodeEvent(v1::UPDATE_NODE_LABEL, &zoned, &bare), H::kQueueSkip},
  };
  for (const Case& c : cases) EXPECT_EQ(Hint(*plugin, *c.pod, c.event), c.want) << c.name;

  const v1::Pod wants_data_db =
      WithRequired(App("p", "web"), false, WithNamespaceSelector(Term("db", kZone), "team", "data"))
          .Build();
  const v1::Namespace prod = MakeNamespace("prod");
  const v1::Namespace prod_data = MakeNamespace("prod", {{"team", "data"}});
  const v1::Namespace prod_data_more = MakeNamespace("prod", {{"team", "data"}, {"k", "v"}});
  const v1::Namespace own = MakeNamespace("default");
  const v1::Namespace own_relabelled = MakeNamespace("default", {{"k", "v"}});
  std::vector<Case> ns_cases = {
      {"a namespace relabelled into the selector", &wants_data_db,
       NamespaceEvent(v1::UPDATE, &prod, &prod_data), H::kQueue},
      {"a selected namespace relabelled, still selected", &wants_data_db,
       NamespaceEvent(v1::UPDATE, &prod_data, &prod_data_more), H::kQueueSkip},
      {"a selected namespace added", &wants_data_db, NamespaceEvent(v1::ADD, nullptr, &prod_data),
       H::kQueue},
      {"an unselected namespace added", &wants_data_db, NamespaceEvent(v1::ADD, nullptr, &prod),
       H::kQueueSkip},
      {"no namespaceSelector: other namespaces do not matter", &wants_db,
       NamespaceEvent(v1::UPDATE, &prod, &prod_data), H::kQueueSkip},
      {"the pod's own namespace relabelled (existing pods' selectors)", &plain_web,
       NamespaceEvent(v1::UPDATE, &own, &own_relabelled), H::kQueue},
  };
  for (const Case& c : ns_cases) EXPECT_EQ(Hint(*plugin, *c.pod, c.event), c.want) << c.name;
}

}  // namespace
}  // namespace podium::plugins
