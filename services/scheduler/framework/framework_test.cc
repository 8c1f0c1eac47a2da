#include "framework/framework.h"

#include <algorithm>
#include <future>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "framework/mock_plugin_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

using ::testing::_;
using ::testing::Invoke;

// A snapshot of n nodes named node-<id>, ids 1..n.
class FakeSnapshot : public sdk::Snapshot {
 public:
  explicit FakeSnapshot(uint32_t n) {
    for (uint32_t id = 1; id <= n; ++id) {
      auto node = std::make_shared<v1::Node>();
      node->mutable_meta()->set_name("node-" + std::to_string(id));
      infos_.push_back(std::make_unique<sdk::NodeInfo>(id, node));
      nodes_.push_back(infos_.back().get());
    }
  }
  const std::vector<const sdk::NodeInfo*>& Nodes() const override { return nodes_; }
  const sdk::NodeInfo* Get(std::string_view name) const override {
    for (auto* n : nodes_) {
      if (n->name() == name) return n;
    }
    return nullptr;
  }
  const sdk::NodeInfo* GetById(uint32_t id) const override {
    return id >= 1 && id <= nodes_.size() ? nodes_[id - 1] : nullptr;
  }
  size_t NumNodes() const override { return nodes_.size(); }

 private:
  std::vector<std::unique_ptr<sdk::NodeInfo>> infos_;
  std::vector<const sdk::NodeInfo*> nodes_;
};

v1::Pod TestPod() {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-1");
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name("web");
  return pod;
}

ProfileSpec SpecFor(std::map<std::string, PluginProcess*> served,
                    std::vector<std::string> filters, std::vector<PluginRef> scores) {
  ProfileSpec spec;
  for (auto& f : filters) spec.plugins[v1::FILTER].push_back({f, 0});
  for (auto& s : scores) spec.plugins[v1::SCORE].push_back(s);
  for (auto& [name, p] : served) spec.processes[name] = p;
  return spec;
}

v1::PluginToScheduler CycleAnswer(std::vector<uint32_t> feasible,
                                  std::map<std::string, std::vector<int64_t>> scores,
                                  std::vector<std::pair<uint32_t, std::string>> rejected = {},
                                  uint32_t evaluated = 0) {
  v1::PluginToScheduler answer;
  auto* cycle = answer.mutable_cycle();
  for (uint32_t id : feasible) cycle->add_feasible(id);
  for (auto& [plugin, values] : scores) {
    auto* s = cycle->add_scores();
    s->set_plugin(plugin);
    for (int64_t v : values) s->add_scores(v);
  }
  for (auto& [id, reason] : rejected) {
    auto* r = cycle->add_rejected();
    r->set_node_id(id);
    r->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
    r->mutable_status()->add_reasons(reason);
    r->mutable_status()->set_plugin("Fit");
  }
  cycle->set_nodes_evaluated(evaluated ? evaluated : feasible.size() + rejected.size());
  return answer;
}

TEST(NumFeasibleNodesToFind, FollowsKubeSchedulerRule) {
  struct Case {
    int percentage;
    uint32_t nodes;
    uint32_t want;
  } cases[] = {
      {0, 50, 50},       // Fewer than 100 nodes: all.
      {0, 100, 100},     // 50 - 0 = 50% of 100 = 50, at least 100.
      {0, 500, 230},     // 50 - 4 = 46%.
      {0, 5000, 500},    // 50 - 40 = 10%.
      {0, 6000, 300},    // 50 - 48 = 2% -> floor 5%.
      {30, 1000, 300},   // Configured.
      {100, 5000, 5000}, // Everything.
      {1, 1000, 100},    // At least 100 nodes.
  };
  for (const auto& c : cases) {
    EXPECT_EQ(NumFeasibleNodesToFind(c.percentage, c.nodes), c.want)
        << "percentage " << c.percentage << ", nodes " << c.nodes;
  }
}

TEST(Diagnosis, MessageMatchesFailedSchedulingFormat) {
  Diagnosis d;
  d.num_all_nodes = 10;
  for (int i = 0; i < 3; ++i) d.node_statuses.emplace_back("a", MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable, "Insufficient cpu")));
  for (int i = 0; i < 7; ++i) {
    d.node_statuses.emplace_back("b", MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                                                                   "node(s) had untolerated taint {edge: true}")));
  }
  EXPECT_EQ(d.Message(),
            "0/10 nodes are available: 3 Insufficient cpu, 7 node(s) had untolerated taint {edge: true}.");
}

// kube-scheduler's FitError.Error appends the PreFilter, Filter and PostFilter
// parts each as " %v.": a PostFilter message that ends in a period ends in two.
TEST(Diagnosis, MessageAppendsEachPartAsKubeSchedulerDoes) {
  Diagnosis d;
  d.num_all_nodes = 1;
  d.node_statuses.emplace_back("a", MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable, "Insufficient cpu")));
  d.post_filter_message = "preemption: not eligible due to preemptionPolicy=Never.";
  EXPECT_EQ(d.Message(),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never..");

  Diagnosis pre;
  pre.num_all_nodes = 3;
  pre.pre_filter_message = "persistentvolumeclaim \"data\" not found";
  pre.post_filter_message = "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.";
  EXPECT_EQ(pre.Message(),
            "0/3 nodes are available: persistentvolumeclaim \"data\" not found. preemption: 0/3 nodes are "
            "available: 3 Preemption is not helpful for scheduling..");

  Diagnosis none;  // No node statuses: no empty ". " part.
  none.num_all_nodes = 0;
  EXPECT_EQ(none.Message(), "0/0 nodes are available:");
  none.post_filter_message = "preemption: no nodes";
  EXPECT_EQ(none.Message(), "0/0 nodes are available: preemption: no nodes.");
}

TEST(Framework, OneProcessFiltersAndScoresInOneRequest) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(5);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 2}}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, std::optional<uint64_t> seq) {
    EXPECT_EQ(seq, 42u);
    const auto& c = req.cycle();
    EXPECT_TRUE(c.nodes().all_nodes());
    EXPECT_EQ(c.nodes().start_index(), 0u);
    EXPECT_EQ(c.num_feasible_to_find(), 5u);
    // The one filtering process: its rejections are read only when nothing fits.
    EXPECT_TRUE(c.rejections_only_when_none_feasible());
    EXPECT_THAT(c.filter_plugins(), testing::ElementsAre("Fit"));
    EXPECT_THAT(c.score_plugins(), testing::ElementsAre("Spread"));
    return Answered(CycleAnswer({2, 4}, {{"Spread", {10, 90}}}, {{1, "Insufficient cpu"}}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 42, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-4");
  EXPECT_EQ(r.evaluated_nodes, 3u);
}

// Nominated pods ride in the request only to processes that do not mirror
// them (MirrorScope.nominated_pods).
TEST(Framework, NominatedPodsRideOnlyToProcessesThatDoNotMirrorThem) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  ProfileSpec spec = SpecFor({{"Fit", &host}}, {"Fit"}, {});
  int asked = 0;
  spec.nominated_pods = [&asked](const v1::Pod&, const sdk::Snapshot&,
                                 google::protobuf::RepeatedPtrField<v1::MirroredPod>* out) {
    ++asked;
    out->Add()->set_node_id(2);
  };
  Framework fw(spec, 1);
  std::vector<int> carried;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    carried.push_back(req.cycle().nominated_pods_size());
    return Answered(CycleAnswer({1}, {}));
  }));
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 1).outcome, ScheduleResult::Outcome::kScheduled);
  host.mirrors_nominated_pods = true;
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 2).outcome, ScheduleResult::Outcome::kScheduled);
  EXPECT_THAT(carried, testing::ElementsAre(1, 0));
  EXPECT_EQ(asked, 1);  // Not even built for the mirroring process.
}

// Issue 6, external node hints: kube-scheduler's nominated-node fast path.
TEST(Framework, ANominatedPodIsTriedOnItsNodeFirstAndOnlyThereWhenItFits) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(5);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
  v1::Pod pod = TestPod();
  pod.set_nominated_node_name("node-4");
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    const auto& c = req.cycle();
    EXPECT_FALSE(c.nodes().all_nodes());
    EXPECT_THAT(c.nodes().node_ids(), testing::ElementsAre(4));
    EXPECT_EQ(c.num_feasible_to_find(), 1u);
    return Answered(CycleAnswer({4}, {{"Spread", {0}}}));
  }));
  ScheduleResult r = fw.SchedulePod(pod, snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-4");
}

TEST(Framework, ANominatedPodThatDoesNotFitThereGoesOnWithEveryNode) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(5);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  v1::Pod pod = TestPod();
  pod.set_nominated_node_name("node-4");
  testing::InSequence order;
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAre(4));
    return Answered(CycleAnswer({}, {}, {{4, "Insufficient cpu"}}));
  }));
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_TRUE(req.cycle().nodes().all_nodes());
    return Answered(CycleAnswer({2}, {}, {{1, "Insufficient cpu"}}));
  }));
  ScheduleResult r = fw.SchedulePod(pod, snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-2");

  // A hint naming a node the snapshot does not have is not tried.
  pod.set_nominated_node_name("gone");
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_TRUE(req.cycle().nodes().all_nodes());
    return Answered(CycleAnswer({3}, {}));
  }));
  EXPECT_EQ(fw.SchedulePod(pod, snapshot, 1, 2).node_name, "node-3");
}

TEST(Framework, RotatesTheStartNodeAcrossCycles) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(5);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  std::vector<uint32_t> starts;
  EXPECT_CALL(host, Call(_, _)).Times(3).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    starts.push_back(req.cycle().nodes().start_index());
    return Answered(CycleAnswer({1, 2}, {}, {}, 2));
  }));
  for (int i = 0; i < 3; ++i) fw.SchedulePod(TestPod(), snapshot, 1, i);
  EXPECT_THAT(starts, testing::ElementsAre(0u, 2u, 4u));
}

TEST(Framework, NoFeasibleNodeIsUnschedulableWithEveryReason) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](auto, auto) {
    return Answered(CycleAnswer({}, {}, {{1, "Insufficient cpu"}, {2, "Insufficient cpu"}, {3, "Too many pods"}}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable);
  EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: 1 Too many pods, 2 Insufficient cpu.");
  EXPECT_TRUE(r.diagnosis.unschedulable_plugins.contains("Fit"));
}

TEST(Framework, PreFilterRejectionFailsEveryNode) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  ProfileSpec spec = SpecFor({{"Fit", &host}}, {"Fit"}, {});
  spec.plugins[v1::PRE_FILTER].push_back({"Fit", 0});
  Framework fw(spec, 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().pre_filter_plugins(), testing::ElementsAre("Fit"));
    v1::PluginToScheduler a;
    auto* s = a.mutable_cycle()->mutable_pre_filter_status();
    s->set_code(v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
    s->add_reasons("node(s) didn't match the requested node name");
    s->set_plugin("Fit");
    return Answered(a);
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable);
  EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: node(s) didn't match the requested node name.");
}

// Protocol version 2: rejected nodes point into CycleResponse.status_table.
// `index` is 1-based; each entry a rejection by `plugin` with one reason.
v1::PluginToScheduler TableAnswer(std::vector<std::pair<std::string, std::string>> table,
                                  std::vector<std::pair<uint32_t, uint32_t>> rejected) {
  v1::PluginToScheduler answer;
  auto* cycle = answer.mutable_cycle();
  for (auto& [plugin, reason] : table) {
    v1::Status* s = cycle->add_status_table();
    s->set_code(v1::Status::UNSCHEDULABLE);
    s->add_reasons(reason);
    s->set_plugin(plugin);
  }
  for (auto& [id, index] : rejected) {
    auto* r = cycle->add_rejected();
    r->set_node_id(id);
    r->set_status_index(index);
  }
  cycle->set_nodes_evaluated(rejected.size());
  return answer;
}

// A table answer for node 3 (`rejected`) with nodes 1 and 2 feasible and
// scored by Spread: the bad-table cases differ only in the table.
v1::PluginToScheduler TableAnswerWithNodes12Feasible(std::vector<std::pair<std::string, std::string>> table,
                                                     std::vector<std::pair<uint32_t, uint32_t>> rejected) {
  v1::PluginToScheduler a = TableAnswer(std::move(table), std::move(rejected));
  a.mutable_cycle()->add_feasible(1);
  a.mutable_cycle()->add_feasible(2);
  auto* s = a.mutable_cycle()->add_scores();
  s->set_plugin("Spread");
  s->add_scores(1);
  s->add_scores(2);
  return a;
}

struct NodeVerdict {
  std::string node;
  sdk::Code code;
  std::vector<std::string> reasons;
  std::string plugin;
  bool operator==(const NodeVerdict&) const = default;
};

std::vector<NodeVerdict> Verdicts(const Diagnosis& d) {
  std::vector<NodeVerdict> out;
  for (const auto& [node, status] : d.node_statuses) {
    out.push_back({node, status->code(), status->reasons(), status->plugin()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.node < b.node; });
  return out;
}

TEST(Framework, AStatusTableDecodesToTheSameDiagnosisAsStatusesPerNode) {
  FakeSnapshot snapshot(4);
  auto schedule = [&](v1::PluginToScheduler answer) {
    MockPluginProcess host("host");
    Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) { return Answered(answer); }));
    return fw.SchedulePod(TestPod(), snapshot, 1, 1);
  };
  ScheduleResult inline_statuses = schedule(CycleAnswer(
      {}, {}, {{1, "Insufficient cpu"}, {2, "Insufficient cpu"}, {3, "Too many pods"}, {4, "Insufficient cpu"}}));
  // Nodes 1, 2 and 4 share entry 1; node 3 sends its own status (both forms
  // may meet in one answer).
  v1::PluginToScheduler table = TableAnswer({{"Fit", "Insufficient cpu"}}, {{1, 1}, {2, 1}, {4, 1}});
  v1::NodeStatus* own = table.mutable_cycle()->add_rejected();
  own->set_node_id(3);
  own->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
  own->mutable_status()->add_reasons("Too many pods");
  own->mutable_status()->set_plugin("Fit");
  table.mutable_cycle()->set_nodes_evaluated(4);
  ScheduleResult tabled = schedule(table);

  ASSERT_EQ(inline_statuses.outcome, ScheduleResult::Outcome::kUnschedulable) << inline_statuses.error;
  ASSERT_EQ(tabled.outcome, ScheduleResult::Outcome::kUnschedulable) << tabled.error;
  EXPECT_EQ(tabled.diagnosis.Message(), "0/4 nodes are available: 1 Too many pods, 3 Insufficient cpu.");
  EXPECT_EQ(tabled.diagnosis.Message(), inline_statuses.diagnosis.Message());
  EXPECT_EQ(Verdicts(tabled.diagnosis), Verdicts(inline_statuses.diagnosis));
  EXPECT_EQ(tabled.diagnosis.unschedulable_plugins, inline_statuses.diagnosis.unschedulable_plugins);
  // The nodes of one entry hold one status, not a copy each.
  std::map<std::string, const sdk::Status*> by_node;
  for (const auto& [node, status] : tabled.diagnosis.node_statuses) by_node[node] = status.get();
  EXPECT_EQ(by_node["node-1"], by_node["node-2"]);
  EXPECT_EQ(by_node["node-1"], by_node["node-4"]);
  EXPECT_NE(by_node["node-1"], by_node["node-3"]);
}

TEST(Framework, AStatusIndexOutsideTheTableFailsTheCycleNamingEndpointAndField) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](auto, auto) {
    return Answered(TableAnswer({{"Fit", "Insufficient cpu"}}, {{1, 1}, {2, 2}, {3, 1}}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kError);
  EXPECT_THAT(std::string(r.error.message()),
              testing::AllOf(testing::HasSubstr("plugin endpoint host"),
                             testing::HasSubstr("rejected[1].status_index 2 (node id 2) is outside "
                                                "status_table (1 entries)")));
  EXPECT_EQ(host.invalid_answers, 1);
}

// What-if verdicts (protocol version 3): asked of a lone process that
// answers them, kept in the ranking, and checked like any answer.
v1::PluginToScheduler WhatIfAnswer(std::vector<v1::WhatIfVerdicts::Verdict> verdicts,
                                   std::vector<int64_t> scores, uint32_t copies = 2,
                                   std::string plugin = "Spread") {
  v1::PluginToScheduler answer = CycleAnswer({2, 4}, {{"Spread", {10, 90}}});
  v1::WhatIfVerdicts& w = *answer.mutable_cycle()->mutable_what_if();
  w.set_copies(copies);
  for (auto v : verdicts) w.add_verdicts(v);
  v1::PluginScores& s = *w.add_scores();
  s.set_plugin(plugin);
  for (int64_t v : scores) s.add_scores(v);
  return answer;
}

TEST(Framework, WhatIfIsAskedOfAProcessThatAnswersItAndKeptInTheRanking) {
  using V = v1::WhatIfVerdicts;
  for (bool answers : {true, false}) {
    MockPluginProcess host("host");
    host.answers_what_if = answers;
    FakeSnapshot snapshot(5);
    Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 2}}), 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([answers](v1::SchedulerToPlugin req, auto) {
      EXPECT_EQ(req.cycle().what_if_copies(), answers ? 2u : 0u);
      if (!answers) return Answered(CycleAnswer({2, 4}, {{"Spread", {10, 90}}}));
      return Answered(WhatIfAnswer({V::FEASIBLE, V::INFEASIBLE, V::FEASIBLE, V::UNKNOWN}, {7, 0, 60, 0}));
    }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1,
                                      CycleScope{.want_ranking = true, .examine_all = true, .what_if_copies = 2});
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
    if (!answers) {
      EXPECT_EQ(r.ranking.what_if_copies, 0u);
      EXPECT_TRUE(r.ranking.what_if.empty());
      continue;
    }
    EXPECT_EQ(r.ranking.what_if_copies, 2u);
    EXPECT_THAT(r.ranking.what_if, testing::ElementsAre(V::FEASIBLE, V::INFEASIBLE, V::FEASIBLE, V::UNKNOWN));
    EXPECT_THAT(r.ranking.what_if_scores.at("Spread"), testing::ElementsAre(7, 0, 60, 0));
  }
}

TEST(Framework, BadWhatIfAnswersFailTheCycleNamingTheField) {
  using V = v1::WhatIfVerdicts;
  const std::vector<std::pair<v1::PluginToScheduler, std::string>> cases = {
      {WhatIfAnswer({V::FEASIBLE, V::FEASIBLE, V::FEASIBLE}, {1, 2, 3}),
       "what_if.verdicts has 3 entries for 2 feasible nodes times 2 copies"},
      {WhatIfAnswer({V::FEASIBLE}, {1}, /*copies=*/1), "what_if.copies 1 is not the 2 asked for"},
      {WhatIfAnswer({V::FEASIBLE, V::FEASIBLE, V::FEASIBLE, static_cast<V::Verdict>(7)}, {1, 2, 3, 4}),
       "what_if.verdicts[3] is not a verdict (7)"},
      {WhatIfAnswer({V::FEASIBLE, V::FEASIBLE, V::FEASIBLE, V::FEASIBLE}, {1, 2, 3, 101}),
       "what_if.scores: plugin \"Spread\" returned score 101, outside [0, 100]"},
      {WhatIfAnswer({V::FEASIBLE, V::FEASIBLE, V::FEASIBLE, V::FEASIBLE}, {1, 2, 3, 4}, 2, "Other"),
       "what_if.scores from plugin \"Other\" that the request did not name"},
  };
  for (const auto& [answer, message] : cases) {
    MockPluginProcess host("host");
    host.answers_what_if = true;
    FakeSnapshot snapshot(5);
    Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 2}}), 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&answer](auto, auto) { return Answered(answer); }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1,
                                      CycleScope{.want_ranking = true, .examine_all = true, .what_if_copies = 2});
    EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kError) << message;
    EXPECT_THAT(std::string(r.error.message()), testing::HasSubstr(message));
    EXPECT_EQ(host.invalid_answers, 1) << message;
  }
  // Verdicts nobody asked for are refused too.
  MockPluginProcess host("host");
  FakeSnapshot snapshot(5);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 2}}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](auto, auto) {
    return Answered(WhatIfAnswer({V::FEASIBLE, V::FEASIBLE, V::FEASIBLE, V::FEASIBLE}, {1, 2, 3, 4}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_THAT(std::string(r.error.message()), testing::HasSubstr("what_if answered, but the request asked for none"));
}

// A PostFilter that predicts a dry run and records what reached it.
class PredictingPostFilter final : public PostFilterPlugin {
 public:
  std::string_view Name() const override { return "Predicting"; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod&, const Diagnosis& d) override {
    answers.push_back(d.dry_run_answer);
    return {{}, sdk::Status(sdk::Code::kUnschedulable, "no")};
  }
  std::optional<v1::PreemptionDryRunRequest> PredictDryRun(const v1::Pod&, uint64_t cycle_id) override {
    v1::PreemptionDryRunRequest r = what_ifs;
    r.set_cycle_id(cycle_id);
    r.add_candidates()->set_node_id(2);
    return r;
  }
  std::vector<std::shared_ptr<const v1::PreemptionDryRunResponse>> answers;
  v1::PreemptionDryRunRequest what_ifs;  // Its what_if and what_if_gone ride along.
};

TEST(Framework, ADryRunRidesInTheCycleAfterACycleThatFoundNoNode) {
  MockPluginProcess host("host");
  host.runs_dry_runs_in_cycles = true;
  host.mirrors_nominated_pods = true;
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  auto* post = new PredictingPostFilter;
  fw.AddPostFilterPlugin(PostFilterPluginPtr(post));
  std::vector<bool> carried;
  EXPECT_CALL(host, FinishCycle(_)).Times(testing::AnyNumber());
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    carried.push_back(req.cycle().has_preemption_dry_run());
    v1::PluginToScheduler a = CycleAnswer({}, {}, {{1, "full"}, {2, "full"}, {3, "full"}});
    if (req.cycle().has_preemption_dry_run()) {
      EXPECT_EQ(req.cycle().preemption_dry_run().cycle_id(), req.cycle().cycle_id());
      auto* n = a.mutable_cycle()->mutable_preemption_dry_run()->add_nodes();
      n->set_node_id(2);
      n->add_victims("v");
    }
    return Answered(a);
  }));
  for (uint64_t cycle = 1; cycle <= 2; ++cycle) {
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, cycle);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable) << r.error;
    fw.RunPostFilter(TestPod(), r.diagnosis);
  }
  // The first cycle had no reason to expect a failure; the second did.
  EXPECT_THAT(carried, testing::ElementsAre(false, true));
  ASSERT_EQ(post->answers.size(), 2u);
  EXPECT_EQ(post->answers[0], nullptr);
  ASSERT_NE(post->answers[1], nullptr);
  ASSERT_EQ(post->answers[1]->nodes_size(), 1);
  EXPECT_THAT(post->answers[1]->nodes(0).victims(), testing::ElementsAre("v"));
}

// The what-ifs a predicted dry run carries are answered with victims the
// scheduler checks against the request, as it checks a dry run's: the PDB
// count is recounted from the request's order, and a list naming a pod that
// was not a potential victim there is dropped (an invalid answer) while the
// rest of the answer stands.
TEST(Framework, WhatIfAnswersAreCheckedAgainstTheRequest) {
  auto owned = std::make_unique<PredictingPostFilter>();
  PredictingPostFilter* post = owned.get();
  auto* w = post->what_ifs.add_what_if();
  w->set_node_id(3);
  for (const char* uid : {"a", "b", "c"}) w->add_potential_victims(uid);
  w->set_num_pdb_violating(1);  // "a" violates a PDB.
  auto* g = post->what_ifs.add_what_if_gone();
  g->set_node_id(1);
  g->add_potential_victims("d");
  g->add_gone("e");
  MockPluginProcess host("host");
  host.runs_dry_runs_in_cycles = true;
  host.mirrors_nominated_pods = true;
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  fw.AddPostFilterPlugin(std::move(owned));
  EXPECT_CALL(host, FinishCycle(_)).Times(testing::AnyNumber());
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    v1::PluginToScheduler a = CycleAnswer({}, {}, {{1, "full"}, {2, "full"}, {3, "full"}});
    if (req.cycle().has_preemption_dry_run()) {
      v1::PreemptionDryRunResponse& dry = *a.mutable_cycle()->mutable_preemption_dry_run();
      auto* n = dry.add_nodes();
      n->set_node_id(2);
      n->add_victims("v");
      auto* w = dry.add_what_if();
      w->set_node_id(3);
      w->mutable_filter()->set_code(v1::Status::UNSCHEDULABLE);
      w->mutable_dry_run()->set_node_id(3);
      w->mutable_dry_run()->add_victims("a");
      w->mutable_dry_run()->add_victims("c");
      w->mutable_dry_run()->set_num_pdb_violations(0);  // Wrong: "a" violates.
      auto* g = dry.add_what_if_gone();
      g->set_node_id(1);
      g->add_gone("e");
      g->mutable_filter()->set_code(v1::Status::UNSCHEDULABLE);
      g->mutable_dry_run()->set_node_id(1);
      g->mutable_dry_run()->add_victims("e");  // Gone, not a potential victim.
    }
    return Answered(a);
  }));
  for (uint64_t cycle = 1; cycle <= 2; ++cycle) {
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, cycle);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable) << r.error;
    fw.RunPostFilter(TestPod(), r.diagnosis);
  }
  ASSERT_EQ(post->answers.size(), 2u);
  ASSERT_NE(post->answers[1], nullptr);
  const v1::PreemptionDryRunResponse& taken = *post->answers[1];
  ASSERT_EQ(taken.nodes_size(), 1);  // The dry run's own answer stands.
  EXPECT_THAT(taken.nodes(0).victims(), testing::ElementsAre("v"));
  ASSERT_EQ(taken.what_if_size(), 1);
  EXPECT_THAT(taken.what_if(0).dry_run().victims(), testing::ElementsAre("a", "c"));
  EXPECT_EQ(taken.what_if(0).dry_run().num_pdb_violations(), 1u);  // Recounted.
  EXPECT_EQ(taken.what_if_gone_size(), 0);  // Dropped.
  EXPECT_EQ(host.invalid_answers, 1);
}

TEST(Framework, NoDryRunRidesToAProcessThatDoesNotRunThem) {
  MockPluginProcess host("host");  // Protocol version 1.
  host.mirrors_nominated_pods = true;
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  fw.AddPostFilterPlugin(std::make_unique<PredictingPostFilter>());
  EXPECT_CALL(host, FinishCycle(_)).Times(testing::AnyNumber());
  EXPECT_CALL(host, Call(_, _)).Times(2).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    EXPECT_FALSE(req.cycle().has_preemption_dry_run());
    return Answered(CycleAnswer({}, {}, {{1, "full"}, {2, "full"}, {3, "full"}}));
  }));
  for (uint64_t cycle = 1; cycle <= 2; ++cycle) {
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, cycle);
    fw.RunPostFilter(TestPod(), r.diagnosis);
  }
}

struct BadAnswerCase {
  std::string name;
  v1::PluginToScheduler answer;
};
// ctest lists the case by its name, not as a dump of its bytes.
void PrintTo(const BadAnswerCase& c, std::ostream* os) { *os << c.name; }

class BadAnswers : public testing::TestWithParam<BadAnswerCase> {};

TEST_P(BadAnswers, FailPolicyFailsTheCycleAndCountsIt) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) { return Answered(GetParam().answer); }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kError);
  EXPECT_THAT(std::string(r.error.message()), testing::HasSubstr("plugin endpoint host"));
  EXPECT_EQ(host.invalid_answers, 1);
}

TEST_P(BadAnswers, IgnorePolicyDropsTheAnswerAndSchedules) {
  MockPluginProcess host("host", FailurePolicy::kIgnore);
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) { return Answered(GetParam().answer); }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled);
  EXPECT_EQ(host.ignored_failures, 1);
}

// An answer whose verdicts are sound but whose scores are bad, under Ignore:
// only the scores are dropped; the nodes its filters rejected stay rejected.
// (Dropping the whole answer would place pods where a filter said no.)
TEST(Framework, IgnoreDropsOnlyTheScoresOfAnAnswerWhoseScoresAreBad) {
  MockPluginProcess host("host", FailurePolicy::kIgnore);
  FakeSnapshot snapshot(4);
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) {
    return Answered(CycleAnswer({2, 4}, {{"Spread", {1000, 50}}}, {{1, "full"}, {3, "full"}}));
  }));
  for (uint64_t cycle = 1; cycle <= 12; ++cycle) {
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, cycle);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
    EXPECT_THAT(r.node_name, testing::AnyOf("node-2", "node-4")) << "cycle " << cycle;
  }
  EXPECT_EQ(host.invalid_answers, 12);
  EXPECT_EQ(host.ignored_failures, 12);
}

// A plugin's ERROR status at PreFilter, Filter or PreScore is decided by its
// endpoint's failurePolicy, as an invalid answer is: Fail fails the cycle
// naming the plugin, Ignore schedules as if that process let every node
// through (or, at PreScore, added no scores), and counts it.
TEST(Framework, APluginErrorStatusIsDecidedByTheFailurePolicyAndCounted) {
  auto filter_error = [] {
    v1::PluginToScheduler a = CycleAnswer({2}, {{"Spread", {50}}}, {{1, "x"}});
    v1::Status* st = a.mutable_cycle()->mutable_rejected(0)->mutable_status();
    st->set_code(v1::Status::ERROR);
    st->clear_reasons();
    st->add_reasons("quota service unreachable");
    return a;
  };
  auto pre_filter_error = [] {
    v1::PluginToScheduler a;
    v1::Status* st = a.mutable_cycle()->mutable_pre_filter_status();
    st->set_code(v1::Status::ERROR);
    st->set_plugin("Fit");
    st->add_reasons("quota service unreachable");
    return a;
  };
  auto pre_score_error = [] {
    v1::PluginToScheduler a = CycleAnswer({1, 2}, {});
    v1::Status* st = a.mutable_cycle()->mutable_pre_score_status();
    st->set_code(v1::Status::ERROR);
    st->set_plugin("Spread");
    st->add_reasons("metrics unreachable");
    return a;
  };
  struct Case {
    std::string name;
    v1::PluginToScheduler answer;
    std::string error;
  };
  for (const Case& c : {Case{"Filter", filter_error(), "Filter plugin Fit: quota service unreachable"},
                        Case{"PreFilter", pre_filter_error(), "PreFilter plugin Fit: quota service unreachable"},
                        Case{"PreScore", pre_score_error(), "PreScore plugin Spread: metrics unreachable"}}) {
    SCOPED_TRACE(c.name);
    {
      MockPluginProcess host("host");
      FakeSnapshot snapshot(3);
      Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
      EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) { return Answered(c.answer); }));
      ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
      EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kError);
      EXPECT_EQ(std::string(r.error.message()), "plugin endpoint host: " + c.error);
      EXPECT_EQ(host.ignored_failures, 0);
    }
    {
      MockPluginProcess host("host", FailurePolicy::kIgnore);
      FakeSnapshot snapshot(3);
      Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}}), 1);
      EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) { return Answered(c.answer); }));
      ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
      EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
      EXPECT_EQ(host.ignored_failures, 1);
      EXPECT_EQ(host.invalid_answers, 0) << "an ERROR status is the plugin's word, not an invalid answer";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Framework, BadAnswers,
    testing::Values(BadAnswerCase{"ScoreOutOfRange", CycleAnswer({1, 2}, {{"Spread", {50, 1000}}})},
                    BadAnswerCase{"UnknownNode", CycleAnswer({1, 99}, {{"Spread", {50, 50}}})},
                    BadAnswerCase{"TooFewScores", CycleAnswer({1, 2}, {{"Spread", {50}}})},
                    BadAnswerCase{"UnrequestedPlugin", CycleAnswer({1, 2}, {{"Other", {1, 2}}})},
                    BadAnswerCase{"StatusIndexOutsideTable",
                                  TableAnswerWithNodes12Feasible({{"Fit", "full"}}, {{3, 2}})},
                    BadAnswerCase{"TableEntryOfAnUnrequestedPlugin",
                                  TableAnswerWithNodes12Feasible({{"Other", "full"}}, {{3, 1}})},
                    BadAnswerCase{"TableEntryThatIsNoRejection",
                                  [] {
                                    v1::PluginToScheduler a = TableAnswerWithNodes12Feasible({{"Fit", "ok"}}, {{3, 1}});
                                    a.mutable_cycle()->mutable_status_table(0)->set_code(v1::Status::SUCCESS);
                                    return a;
                                  }()}),
    [](const auto& info) { return info.param.name; });

TEST(Framework, TimeoutFailsTheCycle) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](auto, auto) {
    return Answered(absl::DeadlineExceededError("did not answer within 1s"));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_EQ(r.outcome, ScheduleResult::Outcome::kError);
  EXPECT_THAT(std::string(r.error.message()), testing::HasSubstr("did not answer"));
}

// A plugin process's own errors already name it ("plugin endpoint host did
// not answer ..."): the cycle's error names it once, and prefixes the rest.
TEST(Framework, AnErrorNamesItsPluginEndpointOnce) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  EXPECT_CALL(host, Call(_, _))
      .WillOnce(Invoke([](auto, auto) {
        return Answered(absl::DeadlineExceededError("plugin endpoint host did not answer cycle within 1s"));
      }))
      .WillOnce(Invoke([](auto, auto) { return Answered(absl::UnavailableError("stream ended")); }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  EXPECT_EQ(std::string(r.error.message()), "plugin endpoint host did not answer cycle within 1s");
  r = fw.SchedulePod(TestPod(), snapshot, 1, 2);
  EXPECT_EQ(std::string(r.error.message()), "plugin endpoint host: stream ended");
}

// Two processes, each serving a filter and a score plugin: the host Fit and
// Spread (weight 1), the other Deny and Zone (weight 10).
struct TwoFilterScoreProcesses {
  MockPluginProcess host{"host"};
  MockPluginProcess extra{"extra"};
  Framework fw{SpecFor({{"Fit", &host}, {"Spread", &host}, {"Deny", &extra}, {"Zone", &extra}}, {"Fit", "Deny"},
                       {{"Spread", 1}, {"Zone", 10}}),
               1};
};

// Two filter+score processes get their requests at once (N processes cost one
// round trip): neither answer is awaited before both requests are out.
TEST(FrameworkFanOut, AgreeingProcessesCostOneRoundTripEach) {
  TwoFilterScoreProcesses p;
  auto& [host, extra, fw] = p;
  FakeSnapshot snapshot(4);
  bool extra_called = false;
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin req, std::optional<uint64_t> seq) {
    EXPECT_EQ(seq, 7u);
    EXPECT_TRUE(req.cycle().nodes().all_nodes());
    // Another process's verdicts may reject what this one lets through.
    EXPECT_FALSE(req.cycle().rejections_only_when_none_feasible());
    EXPECT_EQ(req.cycle().num_feasible_to_find(), 4u);
    EXPECT_THAT(req.cycle().filter_plugins(), testing::ElementsAre("Fit"));
    EXPECT_THAT(req.cycle().score_plugins(), testing::ElementsAre("Spread"));
    // Answered only when waited for: by then the other request must be out.
    return std::async(std::launch::deferred, [&]() -> PluginAnswer {
      EXPECT_TRUE(extra_called) << "the second process was asked only after the first answered";
      return CycleAnswer({1, 2, 3, 4}, {{"Spread", {100, 0, 0, 0}}});
    });
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    extra_called = true;
    EXPECT_TRUE(req.cycle().nodes().all_nodes());
    EXPECT_EQ(req.cycle().num_feasible_to_find(), 4u);
    EXPECT_THAT(req.cycle().filter_plugins(), testing::ElementsAre("Deny"));
    EXPECT_THAT(req.cycle().score_plugins(), testing::ElementsAre("Zone"));
    return Answered(CycleAnswer({1, 2, 3, 4}, {{"Zone", {0, 0, 100, 0}}}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 7, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-3");  // Zone 100 x 10 outweighs Spread 100 x 1.
  EXPECT_EQ(r.feasible_nodes, 4u);
}

// A node rejected by any process is rejected; a process whose own feasible
// nodes were not the final ones scores the final ones again (normalisation is
// over the feasible nodes, as in kube-scheduler).
TEST(FrameworkFanOut, RejectionAnywhereRejectsAndScoresAreOverTheFinalNodes) {
  TwoFilterScoreProcesses p;
  auto& [host, extra, fw] = p;
  FakeSnapshot snapshot(4);
  testing::Sequence host_calls;
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
    return Answered(CycleAnswer({1, 2, 3, 4}, {{"Spread", {0, 0, 0, 100}}}));
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
    v1::PluginToScheduler a = CycleAnswer({2, 3}, {{"Zone", {0, 0}}}, {{1, "denied"}, {4, "denied"}});
    for (auto& r : *a.mutable_cycle()->mutable_rejected()) r.mutable_status()->set_plugin("Deny");
    return Answered(a);
  }));
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAre(2u, 3u));
    EXPECT_TRUE(req.cycle().filter_plugins().empty());
    EXPECT_THAT(req.cycle().score_plugins(), testing::ElementsAre("Spread"));
    v1::PluginToScheduler a;
    auto* s = a.mutable_cycle()->add_scores();
    s->set_plugin("Spread");
    s->add_scores(10), s->add_scores(90);
    return Answered(a);
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-3");
  EXPECT_EQ(r.feasible_nodes, 2u);
}

// kube-scheduler stops at the first numFeasibleNodesToFind nodes (in the
// rotation) that pass every filter. When one process stopped early on nodes
// the other rejected, it is asked only about the nodes still undecided, and
// the result is the one sequential filtering gives.
TEST(FrameworkFanOut, EarlyStopDisagreementAsksOnlyTheUndecidedNodes) {
  MockPluginProcess host("host");
  MockPluginProcess extra("extra");
  FakeSnapshot snapshot(200);  // numFeasibleNodesToFind: 100.
  Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}, {"Odd", &extra}}, {"Fit", "Odd"},
                       {{"Spread", 1}}),
               1);
  std::vector<uint32_t> evens;
  for (uint32_t id = 2; id <= 200; id += 2) evens.push_back(id);
  testing::Sequence host_calls;
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_EQ(req.cycle().num_feasible_to_find(), 100u);
    std::vector<uint32_t> first;
    std::vector<int64_t> scores;
    for (uint32_t id = 1; id <= 100; ++id) first.push_back(id), scores.push_back(0);
    return Answered(CycleAnswer(first, {{"Spread", scores}}));
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    EXPECT_TRUE(req.cycle().nodes().all_nodes());
    std::vector<std::pair<uint32_t, std::string>> odd;
    for (uint32_t id = 1; id <= 199; id += 2) odd.push_back({id, "odd"});
    v1::PluginToScheduler a = CycleAnswer(evens, {}, odd);
    for (auto& r : *a.mutable_cycle()->mutable_rejected()) r.mutable_status()->set_plugin("Odd");
    return Answered(a);
  }));
  // Nodes 102, 104, ... 200: passed by `extra`, not yet seen by `host`; 50 more to find.
  std::vector<uint32_t> missing(evens.begin() + 50, evens.end());
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAreArray(missing));
    EXPECT_EQ(req.cycle().num_feasible_to_find(), 50u);
    EXPECT_TRUE(req.cycle().score_plugins().empty());
    return Answered(CycleAnswer(missing, {}));
  }));
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAreArray(evens));
    v1::PluginToScheduler a;
    auto* s = a.mutable_cycle()->add_scores();
    s->set_plugin("Spread");
    for (uint32_t id : evens) s->add_scores(id == 150 ? 100 : 0);
    return Answered(a);
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-150");
  EXPECT_EQ(r.feasible_nodes, 100u);
  EXPECT_EQ(r.evaluated_nodes, 200u);
}

// A batch's re-evaluation (a few listed nodes) with two filter+score
// processes: both are asked about exactly the listed nodes at once (one round
// trip, not filter by filter and then score), a node rejected by either is
// out, and the process whose feasible nodes were not the final ones scores the
// final ones again.
TEST(FrameworkFanOut, ABatchsFewNodesAreAskedOfEveryProcessAtOnce) {
  TwoFilterScoreProcesses p;
  auto& [host, extra, fw] = p;
  FakeSnapshot snapshot(6);
  const std::vector<uint32_t> changed = {2, 5, 6};
  bool extra_called = false;
  testing::Sequence host_calls;
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAre(2u, 5u, 6u));
    EXPECT_FALSE(req.cycle().nodes().all_nodes());
    EXPECT_THAT(req.cycle().filter_plugins(), testing::ElementsAre("Fit"));
    EXPECT_THAT(req.cycle().score_plugins(), testing::ElementsAre("Spread"));
    return std::async(std::launch::deferred, [&]() -> PluginAnswer {
      EXPECT_TRUE(extra_called) << "the second process was asked only after the first answered";
      return CycleAnswer({2, 5, 6}, {{"Spread", {0, 40, 100}}});
    });
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin req, auto) {
    extra_called = true;
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAre(2u, 5u, 6u));
    EXPECT_THAT(req.cycle().filter_plugins(), testing::ElementsAre("Deny"));
    EXPECT_THAT(req.cycle().score_plugins(), testing::ElementsAre("Zone"));
    v1::PluginToScheduler a = CycleAnswer({2, 5}, {{"Zone", {0, 100}}}, {{6, "denied"}});
    a.mutable_cycle()->mutable_rejected(0)->mutable_status()->set_plugin("Deny");
    return Answered(a);
  }));
  // The host scored 2, 5, 6; the final nodes are 2 and 5: scored again.
  EXPECT_CALL(host, Call(_, _)).InSequence(host_calls).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().nodes().node_ids(), testing::ElementsAre(2u, 5u));
    EXPECT_TRUE(req.cycle().filter_plugins().empty());
    v1::PluginToScheduler a;
    auto* s = a.mutable_cycle()->add_scores();
    s->set_plugin("Spread");
    s->add_scores(100), s->add_scores(0);
    return Answered(a);
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1,
                                    CycleScope{.node_ids = &changed, .want_ranking = true});
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-5");  // Zone 100 x 10 outweighs Spread 100 x 1.
  EXPECT_EQ(r.evaluated_nodes, 3u);
  EXPECT_THAT(r.ranking.feasible, testing::ElementsAre(2u, 5u));
  EXPECT_THAT(r.ranking.scores["Spread"], testing::ElementsAre(100, 0));
  EXPECT_THAT(r.ranking.scores["Zone"], testing::ElementsAre(0, 100));
}

// With every listed node agreed on, the processes' own scores stand: one
// round trip, even for a single feasible node (the ranking needs its score).
TEST(FrameworkFanOut, ABatchsAgreedNodesCostOneRoundTrip) {
  TwoFilterScoreProcesses p;
  auto& [host, extra, fw] = p;
  FakeSnapshot snapshot(6);
  const std::vector<uint32_t> changed = {4};
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
    return Answered(CycleAnswer({4}, {{"Spread", {70}}}));
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
    return Answered(CycleAnswer({4}, {{"Zone", {30}}}));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1,
                                    CycleScope{.node_ids = &changed, .want_ranking = true});
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_EQ(r.node_name, "node-4");
  EXPECT_THAT(r.ranking.scores["Spread"], testing::ElementsAre(70));
  EXPECT_THAT(r.ranking.scores["Zone"], testing::ElementsAre(30));
}

// The diagnosis keeps, per node, the rejection of the first process in plugin
// order, with its code (UnschedulableAndUnresolvable stays so for preemption),
// whether the second process sends its rejections inline or through a status
// table.
TEST(FrameworkFanOut, NoNodeFitsKeepsEachNodesFirstRejection) {
  for (const bool table : {false, true}) {
    SCOPED_TRACE(table ? "status table" : "inline statuses");
    MockPluginProcess host("host");
    MockPluginProcess extra("extra");
    FakeSnapshot snapshot(3);
    Framework fw(SpecFor({{"Fit", &host}, {"Deny", &extra}}, {"Fit", "Deny"}, {}), 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
      return Answered(CycleAnswer({2, 3}, {}, {{1, "Insufficient cpu"}}));
    }));
    EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([table](v1::SchedulerToPlugin, auto) {
      if (table) {
        v1::PluginToScheduler a = TableAnswer({{"Deny", "denied"}}, {{1, 1}, {2, 1}, {3, 1}});
        a.mutable_cycle()->mutable_status_table(0)->set_code(v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
        return Answered(a);
      }
      v1::PluginToScheduler a = CycleAnswer({}, {}, {{1, "denied"}, {2, "denied"}, {3, "denied"}});
      for (auto& r : *a.mutable_cycle()->mutable_rejected()) {
        r.mutable_status()->set_plugin("Deny");
        r.mutable_status()->set_code(v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
      }
      return Answered(a);
    }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable) << r.error;
    EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: 1 Insufficient cpu, 2 denied.");
    EXPECT_THAT(r.diagnosis.unschedulable_plugins, testing::UnorderedElementsAre("Fit", "Deny"));
    for (const auto& [node, status] : r.diagnosis.node_statuses) {
      EXPECT_EQ(status->code(), node == "node-1" ? sdk::Code::kUnschedulable
                                                : sdk::Code::kUnschedulableAndUnresolvable)
          << node;
    }
  }
}

TEST(FrameworkFanOut, IgnoredProcessFailureLetsEveryNodeThroughAndFailFailsTheCycle) {
  for (FailurePolicy policy : {FailurePolicy::kIgnore, FailurePolicy::kFail}) {
    MockPluginProcess host("host");
    MockPluginProcess extra("extra", policy);
    FakeSnapshot snapshot(3);
    Framework fw(SpecFor({{"Fit", &host}, {"Spread", &host}, {"Deny", &extra}, {"Zone", &extra}},
                         {"Fit", "Deny"}, {{"Spread", 1}, {"Zone", 10}}),
                 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
      return Answered(CycleAnswer({1, 2}, {{"Spread", {0, 100}}}, {{3, "Insufficient cpu"}}));
    }));
    EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin, auto) {
      return Answered(absl::DeadlineExceededError("did not answer within 1s"));
    }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
    if (policy == FailurePolicy::kIgnore) {
      ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
      EXPECT_EQ(r.node_name, "node-2");
      EXPECT_EQ(extra.ignored_failures, 1);
    } else {
      ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kError);
      EXPECT_THAT(std::string(r.error.message()), testing::HasSubstr("plugin endpoint extra"));
    }
  }
}

TEST(FrameworkFanOut, PreFilterRejectionOfTheFirstProcessInOrderWins) {
  MockPluginProcess host("host");
  MockPluginProcess extra("extra");
  FakeSnapshot snapshot(3);
  ProfileSpec spec = SpecFor({{"Fit", &host}, {"Deny", &extra}}, {"Fit", "Deny"}, {});
  spec.plugins[v1::PRE_FILTER].push_back({"Fit", 0});
  spec.plugins[v1::PRE_FILTER].push_back({"Deny", 0});
  Framework fw(spec, 1);
  auto pre_filter_rejection = [](std::string plugin, std::string reason) {
    v1::PluginToScheduler a;
    auto* s = a.mutable_cycle()->mutable_pre_filter_status();
    s->set_code(v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
    s->add_reasons(reason);
    s->set_plugin(plugin);
    return a;
  };
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin, auto) {
    return Answered(pre_filter_rejection("Fit", "first"));
  }));
  EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin, auto) {
    return Answered(pre_filter_rejection("Deny", "second"));
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable);
  EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: first.");
}

v1::PluginToScheduler PreFilterAnswer(v1::Status::Code code, const std::string& plugin, const std::string& reason) {
  v1::PluginToScheduler a;
  auto* s = a.mutable_cycle()->mutable_pre_filter_status();
  s->set_code(code);
  s->add_reasons(reason);
  s->set_plugin(plugin);
  return a;
}

// Protocol version 9: a PreFilter's plain Unschedulable leaves every node to
// preemption (kube-scheduler #119770); from an older process, whose later
// PreFilters did not run, it is taken as UnschedulableAndUnresolvable.
TEST(Framework, APreFilterUnschedulableLeavesPreemptionEveryNodeOnlyFromAProcessThatRanThemAll) {
  for (bool v9 : {true, false}) {
    MockPluginProcess host("host");
    host.leaves_pre_filter_unschedulable = v9;
    FakeSnapshot snapshot(3);
    ProfileSpec spec = SpecFor({{"Fit", &host}}, {"Fit"}, {});
    spec.plugins[v1::PRE_FILTER].push_back({"Fit", 0});
    Framework fw(spec, 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](auto, auto) {
      return Answered(PreFilterAnswer(v1::Status::UNSCHEDULABLE, "Fit", "quota used up"));
    }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable);
    EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: quota used up.");
    EXPECT_TRUE(r.diagnosis.unschedulable_plugins.contains("Fit"));
    EXPECT_EQ(r.diagnosis.pre_filter_code,
              v9 ? sdk::Code::kUnschedulable : sdk::Code::kUnschedulableAndUnresolvable);
  }
}

// Across processes, as kube-scheduler's PreFilter loop over the plugins in
// order: an UnschedulableAndUnresolvable anywhere wins (the first in order),
// otherwise the last plain Unschedulable.
TEST(FrameworkFanOut, AHardPreFilterRejectionWinsOverAPlainUnschedulableAndTheLastPlainOneIsKept) {
  struct Case {
    v1::Status::Code host_code, extra_code;
    std::string message;
    sdk::Code code;
  };
  for (const Case& c : {Case{v1::Status::UNSCHEDULABLE, v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE, "second",
                             sdk::Code::kUnschedulableAndUnresolvable},
                        Case{v1::Status::UNSCHEDULABLE, v1::Status::UNSCHEDULABLE, "second", sdk::Code::kUnschedulable},
                        Case{v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE, v1::Status::UNSCHEDULABLE, "first",
                             sdk::Code::kUnschedulableAndUnresolvable}}) {
    MockPluginProcess host("host");
    MockPluginProcess extra("extra");
    host.leaves_pre_filter_unschedulable = extra.leaves_pre_filter_unschedulable = true;
    FakeSnapshot snapshot(3);
    ProfileSpec spec = SpecFor({{"Fit", &host}, {"Deny", &extra}}, {"Fit", "Deny"}, {});
    spec.plugins[v1::PRE_FILTER].push_back({"Fit", 0});
    spec.plugins[v1::PRE_FILTER].push_back({"Deny", 0});
    Framework fw(spec, 1);
    EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](auto, auto) {
      return Answered(PreFilterAnswer(c.host_code, "Fit", "first"));
    }));
    EXPECT_CALL(extra, Call(_, _)).WillOnce(Invoke([&](auto, auto) {
      return Answered(PreFilterAnswer(c.extra_code, "Deny", "second"));
    }));
    ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
    ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kUnschedulable);
    EXPECT_EQ(r.diagnosis.Message(), "0/3 nodes are available: " + c.message + ".");
    EXPECT_EQ(r.diagnosis.pre_filter_code, c.code) << c.message;
  }
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

TEST(Framework, RemotePreEnqueueGatesThePodWithItsReason) {
  MockPluginProcess host("host");
  ProfileSpec spec;
  spec.plugins[v1::PRE_ENQUEUE] = {{"SchedulingGates", 0}, {"QuotaGate", 0}};
  spec.processes["QuotaGate"] = &host;
  Framework fw(spec, 1);
  EXPECT_CALL(host, Call(testing::_, testing::_)).WillOnce(testing::Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.pre_enqueue().plugins(), testing::ElementsAre("QuotaGate"));  // Built-ins stay local.
    v1::PluginToScheduler a;
    auto* s = a.mutable_status()->add_statuses();
    s->set_code(v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
    s->add_reasons("namespace quota exhausted");
    s->set_plugin("QuotaGate");
    return Answered(a);
  }));
  sdk::Status status = fw.RunPreEnqueue(TestPod());
  EXPECT_EQ(status.code(), sdk::Code::kUnschedulableAndUnresolvable);
  EXPECT_EQ(status.plugin(), "QuotaGate");
  EXPECT_EQ(status.Message(), "namespace quota exhausted");
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

// Defect 13: a hung endpoint used by one profile must not cost a pod of
// another profile anything: a framework calls only the processes of its own
// profile, at every extension point.
TEST(Framework, AProfileCallsOnlyItsOwnProcesses) {
  MockPluginProcess host("host");
  MockPluginProcess hung("hung");
  EXPECT_CALL(hung, Call(_, _)).Times(0);
  FakeSnapshot snapshot(3);
  ProfileSpec other = SpecFor({{"Slow", &hung}}, {"Slow"}, {});
  other.scheduler_name = "other";
  Framework other_fw(std::move(other), 1);  // Exists, as in a two-profile config.
  ProfileSpec spec = SpecFor({{"Fit", &host}}, {"Fit"}, {});
  spec.processes["Gate"] = &host;
  for (v1::ExtensionPoint point : {v1::PRE_ENQUEUE, v1::RESERVE, v1::PERMIT, v1::PRE_BIND,
                                   v1::BIND, v1::POST_BIND}) {
    spec.plugins[point] = {PluginRef{"Gate", 0}};
  }
  Framework fw(std::move(spec), 1);
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer({1, 2}, {}, {}, 2));
    v1::PluginToScheduler a;
    if (req.has_permit()) {
      a.mutable_permit();
    } else {
      a.mutable_status();
    }
    return Answered(a);
  }));
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled) << r.error;
  EXPECT_TRUE(fw.RunPreEnqueue(TestPod()).IsSuccess());
  EXPECT_TRUE(fw.RunReserve(TestPod(), r.node_name, 1).IsSuccess());
  EXPECT_TRUE(fw.RunPermit(TestPod(), r.node_name, 1).status.IsSuccess());
  EXPECT_TRUE(fw.RunPreBind(TestPod(), r.node_name, 1).IsSuccess());
  fw.RunBindPlugins(TestPod(), r.node_name, 1);
  fw.RunPostBind(TestPod(), r.node_name, 1);
  fw.RunUnreserve(TestPod(), r.node_name, 1);
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

// Defect 7: the processes of the profile are told when a cycle ends, so that
// they drop its state: after an unschedulable attempt (no PostFilter), after
// PostBind, and after Unreserve.
TEST(Framework, EndedCyclesAreToldToTheProfilesProcesses) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  ProfileSpec spec = SpecFor({{"Fit", &host}}, {"Fit"}, {});
  Framework fw(std::move(spec), 1);
  bool fits = false;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    if (fits) return Answered(CycleAnswer({1}, {}, {}, 1));
    return Answered(CycleAnswer({}, {}, {{1, "no"}, {2, "no"}, {3, "no"}}));
  }));
  {
    testing::InSequence in_order;
    EXPECT_CALL(host, FinishCycle(1));
    EXPECT_CALL(host, FinishCycle(2));
    EXPECT_CALL(host, FinishCycle(3));
  }
  EXPECT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 1).outcome,
            ScheduleResult::Outcome::kUnschedulable);
  fits = true;
  ScheduleResult r = fw.SchedulePod(TestPod(), snapshot, 1, 2);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled);
  fw.RunPostBind(TestPod(), r.node_name, 2);
  r = fw.SchedulePod(TestPod(), snapshot, 1, 3);
  ASSERT_EQ(r.outcome, ScheduleResult::Outcome::kScheduled);
  fw.RunUnreserve(TestPod(), r.node_name, 3);
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

class FakeRecorder final : public ExtensionPointRecorder {
 public:
  void Observe(std::string_view point, std::string_view status, absl::Duration d) override {
    observed.emplace_back(std::string(point) + "/" + std::string(status), d);
  }
  void ObservePlugin(std::string_view plugin, std::string_view point, std::string_view status,
                     absl::Duration d) override {
    plugins.emplace_back(std::string(plugin) + "/" + std::string(point) + "/" + std::string(status), d);
  }
  void CountFailurePolicy(std::string_view endpoint, std::string_view policy) override {
    policies.push_back(std::string(endpoint) + "/" + std::string(policy));
  }
  std::vector<std::pair<std::string, absl::Duration>> observed;
  std::vector<std::pair<std::string, absl::Duration>> plugins;
  std::vector<std::string> policies;
};

// scheduler_plugin_execution_duration_seconds: the process's time for a phase
// is a plugin's when the process ran one plugin there, else labelled
// "endpoint/NAME"; a failed process is counted with the policy applied.
TEST(Framework, PluginExecutionIsRecordedPerPluginOrPerProcessAndFailuresByPolicy) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  FakeRecorder recorder;
  ProfileSpec spec = SpecFor({{"Fit", &host}, {"Taint", &host}, {"Spread", &host}}, {"Fit", "Taint"}, {{"Spread", 1}});
  spec.recorder = &recorder;
  Framework fw(std::move(spec), 1);
  int call = 0;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin, auto) {
    if (++call == 1) {
      v1::PluginToScheduler a = CycleAnswer({1, 2}, {{"Spread", {10, 20}}});
      a.mutable_cycle()->mutable_durations()->set_filter_ns(2000);
      a.mutable_cycle()->mutable_durations()->set_score_ns(3000);
      return Answered(a);
    }
    return Answered(absl::InternalError("plugin threw"));
  }));
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 1).outcome, ScheduleResult::Outcome::kScheduled);
  using Obs = std::pair<std::string, absl::Duration>;
  EXPECT_THAT(recorder.plugins, testing::ElementsAre(Obs{"endpoint/host/Filter/Success", absl::Microseconds(2)},
                                                     Obs{"Spread/Score/Success", absl::Microseconds(3)}));
  EXPECT_TRUE(recorder.policies.empty());
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 2).outcome, ScheduleResult::Outcome::kError);
  EXPECT_THAT(recorder.policies, testing::ElementsAre("host/Fail"));
}

// Defect 10: PreFilter, Filter and Score are recorded on their own, with their
// own status, from the durations the process reports; an error is an Error.
TEST(Framework, EachExtensionPointIsRecordedWithItsStatus) {
  MockPluginProcess host("host");
  FakeSnapshot snapshot(3);
  FakeRecorder recorder;
  ProfileSpec spec = SpecFor({{"Fit", &host}, {"Spread", &host}}, {"Fit"}, {{"Spread", 1}});
  spec.plugins[v1::PRE_FILTER].push_back({"Fit", 0});
  spec.recorder = &recorder;
  Framework fw(std::move(spec), 1);
  int call = 0;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin, auto) {
    switch (++call) {
      case 1: {
        v1::PluginToScheduler a = CycleAnswer({1, 2}, {{"Spread", {10, 20}}});
        a.mutable_cycle()->mutable_durations()->set_pre_filter_ns(1000);
        a.mutable_cycle()->mutable_durations()->set_filter_ns(2000);
        a.mutable_cycle()->mutable_durations()->set_score_ns(3000);
        return Answered(a);
      }
      case 2:
        return Answered(CycleAnswer({}, {}, {{1, "no"}, {2, "no"}, {3, "no"}}));
      default:
        return Answered(absl::InternalError("plugin threw"));
    }
  }));
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 1).outcome, ScheduleResult::Outcome::kScheduled);
  using Obs = std::pair<std::string, absl::Duration>;
  EXPECT_THAT(recorder.observed,
              testing::ElementsAre(Obs{"PreFilter/Success", absl::Microseconds(1)},
                                   Obs{"Filter/Success", absl::Microseconds(2)},
                                   Obs{"Score/Success", absl::Microseconds(3)}));
  recorder.observed.clear();
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 2).outcome,
            ScheduleResult::Outcome::kUnschedulable);
  ASSERT_EQ(recorder.observed.size(), 1u);  // No durations reported: the round trip.
  EXPECT_EQ(recorder.observed[0].first, "Filter/Unschedulable");
  recorder.observed.clear();
  ASSERT_EQ(fw.SchedulePod(TestPod(), snapshot, 1, 3).outcome, ScheduleResult::Outcome::kError);
  ASSERT_EQ(recorder.observed.size(), 1u);
  EXPECT_EQ(recorder.observed[0].first, "Filter/Error");
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

// Defect 14: an endpoint that connects after start (its plugins were not
// resolved then) is used from the next pod on.
TEST(Framework, ReconfiguredProfileUsesALateEndpointForLaterPods) {
  MockPluginProcess host("host");
  MockPluginProcess late("late", FailurePolicy::kIgnore);
  FakeSnapshot snapshot(3);
  Framework fw(SpecFor({{"Fit", &host}}, {"Fit"}, {}), 1);
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([](v1::SchedulerToPlugin, auto) {
    return Answered(CycleAnswer({1, 2, 3}, {}));
  }));
  EXPECT_CALL(late, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    EXPECT_THAT(req.cycle().filter_plugins(), testing::ElementsAre("DenyLabel"));
    EXPECT_TRUE(req.cycle().nodes().all_nodes());  // Asked alongside host (fan-out).
    v1::PluginToScheduler a = CycleAnswer({2}, {}, {{1, "maintenance"}, {3, "maintenance"}});
    for (auto& r : *a.mutable_cycle()->mutable_rejected()) r.mutable_status()->set_plugin("DenyLabel");
    return Answered(a);
  }));
  ScheduleResult before = fw.SchedulePod(TestPod(), snapshot, 1, 1);
  ASSERT_EQ(before.outcome, ScheduleResult::Outcome::kScheduled);

  fw.Reconfigure(SpecFor({{"Fit", &host}, {"DenyLabel", &late}}, {"Fit", "DenyLabel"}, {}));
  ScheduleResult after = fw.SchedulePod(TestPod(), snapshot, 1, 2);
  ASSERT_EQ(after.outcome, ScheduleResult::Outcome::kScheduled) << after.error;
  EXPECT_EQ(after.node_name, "node-2");
  EXPECT_EQ(fw.name(), "default-scheduler");
}

}  // namespace
}  // namespace podium::scheduler

namespace podium::scheduler {
namespace {

// A plugin registered pod_group_members_only (Coscheduling) costs pods that
// name no group nothing: no PreEnqueue, Reserve, Unreserve or Permit request.
// A member gets them, with its group and how many pods name it at PreEnqueue.
TEST(Framework, PodGroupMembersOnlyPluginsAreCalledOnlyForGangMembers) {
  MockPluginProcess host("host");
  ProfileSpec spec;
  for (v1::ExtensionPoint point : {v1::PRE_ENQUEUE, v1::RESERVE, v1::PERMIT}) {
    spec.plugins[point] = {PluginRef{"Coscheduling", 0}};
  }
  spec.plugins[v1::BIND] = {{"DefaultBinder", 0}};
  spec.processes["Coscheduling"] = &host;
  spec.pod_group_members_only.insert("Coscheduling");
  Framework fw(std::move(spec), 1);
  std::vector<v1::SchedulerToPlugin> seen;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&seen](v1::SchedulerToPlugin req, auto) {
    seen.push_back(req);
    v1::PluginToScheduler a;
    if (req.has_permit()) {
      a.mutable_permit();
    } else {
      a.mutable_status();
    }
    return Answered(a);
  }));
  const v1::Pod loner = TestPod();
  EXPECT_TRUE(fw.RunPreEnqueue(loner).IsSuccess());
  EXPECT_TRUE(fw.RunReserve(loner, "n1", 1).IsSuccess());
  EXPECT_TRUE(fw.RunPermit(loner, "n1", 1).status.IsSuccess());
  fw.RunUnreserve(loner, "n1", 1);
  EXPECT_TRUE(seen.empty());

  v1::Pod member = TestPod();
  member.set_pod_group("train");
  v1::PodGroup group;
  group.mutable_meta()->set_name("train");
  group.set_min_member(3);
  EXPECT_TRUE(fw.RunPreEnqueue(member, &group, 2).IsSuccess());
  EXPECT_TRUE(fw.RunReserve(member, "n1", 2).IsSuccess());
  EXPECT_TRUE(fw.RunPermit(member, "n1", 2).status.IsSuccess());
  fw.RunUnreserve(member, "n1", 2);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen[0].has_pre_enqueue());
  EXPECT_EQ(seen[0].pre_enqueue().pod_group().min_member(), 3);
  EXPECT_EQ(seen[0].pre_enqueue().pod_group_pods(), 2u);
  EXPECT_TRUE(seen[1].has_reserve());
  EXPECT_TRUE(seen[2].has_permit());
  EXPECT_TRUE(seen[3].has_unreserve());
}

// A plugin whose Reserve does nothing (Coscheduling) costs no Reserve round
// trip; its Unreserve is still called, and other Reserve plugins still are.
TEST(Framework, UnreserveOnlyPluginsGetUnreserveButNoReserveRequest) {
  MockPluginProcess host("host");
  ProfileSpec spec;
  spec.plugins[v1::RESERVE] = {PluginRef{"Coscheduling", 0}, PluginRef{"Volumes", 0}};
  spec.plugins[v1::BIND] = {{"DefaultBinder", 0}};
  spec.processes["Coscheduling"] = &host;
  spec.processes["Volumes"] = &host;
  spec.unreserve_only.insert("Coscheduling");
  Framework fw(std::move(spec), 1);
  std::vector<std::string> seen;
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke([&seen](v1::SchedulerToPlugin req, auto) {
    if (req.has_reserve()) seen.push_back(absl::StrCat("reserve ", absl::StrJoin(req.reserve().plugins(), ",")));
    if (req.has_unreserve()) {
      seen.push_back(absl::StrCat("unreserve ", absl::StrJoin(req.unreserve().plugins(), ",")));
    }
    v1::PluginToScheduler a;
    a.mutable_status();
    return Answered(a);
  }));
  v1::Pod member = TestPod();
  member.set_pod_group("train");
  EXPECT_TRUE(fw.RunReserve(member, "n1", 1).IsSuccess());
  fw.RunUnreserve(member, "n1", 1);
  EXPECT_EQ(seen, (std::vector<std::string>{"reserve Volumes", "unreserve Volumes,Coscheduling"}));
}

}  // namespace
}  // namespace podium::scheduler
