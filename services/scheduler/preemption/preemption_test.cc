// DefaultPreemption's rules, table-driven, with cases following
// kube-scheduler's documented behaviour (default_preemption_test.go shapes).
#include "preemption/preemption.h"

#include <limits>

#include "cache/cache.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::scheduler::preemption {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::IsEmpty;

v1::Pod MakePod(const std::string& name, int32_t priority, int64_t created_us = 0,
                std::map<std::string, std::string> labels = {}, const std::string& ns = "default") {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-" + name);
  pod.mutable_meta()->set_namespace_(ns);
  pod.mutable_meta()->set_name(name);
  pod.mutable_meta()->set_creation_timestamp_us(created_us);
  pod.set_start_time_us(created_us);  // Victims here run since they were created.
  for (const auto& [k, v] : labels) (*pod.mutable_meta()->mutable_labels())[k] = v;
  pod.set_priority(priority);
  return pod;
}

sdk::PodInfoPtr Info(v1::Pod pod) { return sdk::PodInfo::Create(std::move(pod)); }

std::vector<std::string> Names(const std::vector<sdk::PodInfoPtr>& pods) {
  std::vector<std::string> out;
  for (const auto& p : pods) out.push_back(p->pod->meta().name());
  return out;
}

TEST(MoreImportantPodTest, HigherPriorityThenEarlierStart) {
  EXPECT_TRUE(MoreImportantPod(MakePod("a", 10), MakePod("b", 5)));
  EXPECT_FALSE(MoreImportantPod(MakePod("a", 5), MakePod("b", 10)));
  EXPECT_TRUE(MoreImportantPod(MakePod("a", 5, 100), MakePod("b", 5, 200)));
  EXPECT_FALSE(MoreImportantPod(MakePod("a", 5, 200), MakePod("b", 5, 100)));
}

// kube-scheduler's GetPodStartTime: status.startTime, not the creation time;
// a pod not started yet (just bound) counts as starting now, the least
// important of its priority. Before, Podium ordered by creation time.
TEST(MoreImportantPodTest, StartTimeNotCreationTimeAndNotStartedLast) {
  v1::Pod created_early_started_late = MakePod("a", 5, 100);
  created_early_started_late.set_start_time_us(300);
  const v1::Pod created_late_started_early = MakePod("b", 5, 200);
  EXPECT_TRUE(MoreImportantPod(created_late_started_early, created_early_started_late));
  v1::Pod not_started = MakePod("c", 5, 50);
  not_started.clear_start_time_us();
  EXPECT_TRUE(MoreImportantPod(created_early_started_late, not_started));
  EXPECT_FALSE(MoreImportantPod(not_started, created_early_started_late));
  EXPECT_EQ(PodStartTime(not_started), std::numeric_limits<int64_t>::max());
}

TEST(NumCandidatesTest, TenPercentAtLeastOneHundredAtMostAll) {
  struct Case {
    uint32_t nodes;
    int percentage, absolute;
    uint32_t want;
  };
  const Case cases[] = {
      {10, 10, 100, 10},     {500, 10, 100, 100}, {1000, 10, 100, 100}, {5000, 10, 100, 500},
      {5000, 40, 10, 2000},  {50, 40, 10, 20},    {100, 0, 0, 0},       {0, 10, 100, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(NumCandidates(c.nodes, c.percentage, c.absolute), c.want)
        << c.nodes << " nodes, " << c.percentage << "%, abs " << c.absolute;
  }
}

class EligibilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    v1::Node node;
    node.mutable_meta()->set_name("node-1");
    node.mutable_allocatable()->set_milli_cpu(4000);
    cache_.AddOrUpdateNode(node);
  }
  void AddPod(v1::Pod pod) {
    pod.set_node_name("node-1");
    ASSERT_TRUE(cache_.AddOrUpdatePod(pod).ok());
  }
  const Snapshot& Snap() {
    cache_.UpdateSnapshot(snapshot_);
    return snapshot_;
  }
  static v1::Pod Terminating(v1::Pod pod) {
    pod.mutable_meta()->set_deletion_timestamp_us(1);
    auto* c = pod.add_conditions();
    c->set_type("DisruptionTarget");
    c->set_status("True");
    c->set_reason("PreemptionByScheduler");
    return pod;
  }
  Cache cache_;
  Snapshot snapshot_;
};

TEST_F(EligibilityTest, FollowsKubeSchedulerPodEligibleToPreemptOthers) {
  AddPod(Terminating(MakePod("victim", 10)));
  v1::Pod never = MakePod("never", 100);
  never.set_preemption_policy(v1::NEVER);
  EXPECT_EQ(PodEligibleToPreemptOthers(never, Snap(), "", nullptr),
            "not eligible due to preemptionPolicy=Never.");
  v1::Pod pod = MakePod("p", 100);
  EXPECT_EQ(PodEligibleToPreemptOthers(pod, Snap(), "", nullptr), "");
  EXPECT_EQ(PodEligibleToPreemptOthers(pod, Snap(), "node-1", nullptr),
            "not eligible due to a terminating pod on the nominated node.");
  // The nominated node cannot take it whatever is evicted: preempt again.
  sdk::Status unresolvable(sdk::Code::kUnschedulableAndUnresolvable, "node(s) didn't match");
  EXPECT_EQ(PodEligibleToPreemptOthers(pod, Snap(), "node-1", &unresolvable), "");
  // A terminating pod of higher priority is not ours to wait for.
  EXPECT_EQ(PodEligibleToPreemptOthers(MakePod("low", 5), Snap(), "node-1", nullptr), "");
}

TEST_F(EligibilityTest, TerminatingWithoutTheDisruptionConditionDoesNotHold) {
  v1::Pod deleting = MakePod("deleting", 10);
  deleting.mutable_meta()->set_deletion_timestamp_us(1);
  AddPod(deleting);
  EXPECT_EQ(PodEligibleToPreemptOthers(MakePod("p", 100), Snap(), "node-1", nullptr), "");
}

TEST_F(EligibilityTest, UnresolvableNodesAreNeverCandidates) {
  v1::Node node;
  node.mutable_meta()->set_name("node-2");
  cache_.AddOrUpdateNode(node);
  node.mutable_meta()->set_name("node-3");
  cache_.AddOrUpdateNode(node);
  Diagnosis d;
  d.node_statuses.emplace_back("node-1", MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable, "Insufficient cpu")));
  d.node_statuses.emplace_back("node-2", MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                                                     "node(s) didn't match Pod's node affinity/selector")));
  NodeStatuses unresolvable;
  std::vector<const sdk::NodeInfo*> nodes = NodesWherePreemptionMightHelp(Snap(), d, &unresolvable);
  std::vector<std::string> names;
  for (const auto* n : nodes) names.push_back(n->name());
  EXPECT_THAT(names, ElementsAre("node-1", "node-3"));
  ASSERT_EQ(unresolvable.size(), 1u);
  EXPECT_EQ(unresolvable[0].first, "node-2");
  EXPECT_EQ(unresolvable[0].second->Message(), "Preemption is not helpful for scheduling");

  d.pre_filter_message = "pod has unbound immediate PersistentVolumeClaims";
  unresolvable.clear();
  EXPECT_THAT(NodesWherePreemptionMightHelp(Snap(), d, &unresolvable), IsEmpty());
  EXPECT_EQ(unresolvable.size(), 3u);

  // A PreFilter's plain Unschedulable (from a process that ran every
  // PreFilter): every node may help, as kube-scheduler gives each that status.
  d.node_statuses.clear();
  d.pre_filter_message = "quota used up";
  d.pre_filter_code = sdk::Code::kUnschedulable;
  unresolvable.clear();
  EXPECT_EQ(NodesWherePreemptionMightHelp(Snap(), d, &unresolvable).size(), 3u);
  EXPECT_THAT(unresolvable, IsEmpty());
}

std::shared_ptr<const v1::PodDisruptionBudget> Pdb(const std::string& name, std::map<std::string, std::string> match,
                                                   int32_t allowed, const std::string& ns = "default") {
  auto pdb = std::make_shared<v1::PodDisruptionBudget>();
  pdb->mutable_meta()->set_name(name);
  pdb->mutable_meta()->set_namespace_(ns);
  for (const auto& [k, v] : match) (*pdb->mutable_selector()->mutable_match_labels())[k] = v;
  pdb->set_disruptions_allowed(allowed);
  return pdb;
}

TEST(OrderPotentialVictimsTest, FollowsFilterPodsWithPdbViolation) {
  struct Case {
    std::string name;
    std::vector<v1::Pod> pods;
    std::vector<std::shared_ptr<const v1::PodDisruptionBudget>> pdbs;
    std::vector<std::string> want;
    size_t want_violating;
  };
  auto invalid = std::make_shared<v1::PodDisruptionBudget>(*Pdb("bad", {}, 0));
  {
    auto* e = invalid->mutable_selector()->add_match_expressions();
    e->set_key("app");
    e->set_operator_(v1::LabelSelectorRequirement::IN);  // In without values.
  }
  auto disrupted = std::make_shared<v1::PodDisruptionBudget>(*Pdb("pdb", {{"app", "db"}}, 0));
  (*disrupted->mutable_disrupted_pods())["db-1"] = 1;
  const std::vector<Case> cases = {
      {"no PDBs: most important first",
       {MakePod("a", 1, 10), MakePod("b", 3, 10), MakePod("c", 3, 5)}, {}, {"c", "b", "a"}, 0},
      {"budget of one: the second pod of the set violates",
       {MakePod("db-1", 5, 0, {{"app", "db"}}), MakePod("db-2", 4, 0, {{"app", "db"}}), MakePod("web", 3)},
       {Pdb("pdb", {{"app", "db"}}, 1)}, {"db-2", "db-1", "web"}, 1},
      {"budget of zero: every matching pod violates",
       {MakePod("db-1", 5, 0, {{"app", "db"}}), MakePod("web", 9, 0, {{"app", "web"}})},
       {Pdb("pdb", {{"app", "db"}}, 0)}, {"db-1", "web"}, 1},
      {"other namespace does not match",
       {MakePod("db-1", 5, 0, {{"app", "db"}}, "prod")}, {Pdb("pdb", {{"app", "db"}}, 0)}, {"db-1"}, 0},
      {"empty selector matches nothing", {MakePod("db-1", 5, 0, {{"app", "db"}})}, {Pdb("pdb", {}, 0)}, {"db-1"}, 0},
      {"invalid selector matches nothing", {MakePod("db-1", 5, 0, {{"app", "db"}})}, {invalid}, {"db-1"}, 0},
      {"a pod already in disruptedPods is not a new violation",
       {MakePod("db-1", 5, 0, {{"app", "db"}}), MakePod("db-2", 4, 0, {{"app", "db"}})}, {disrupted},
       {"db-2", "db-1"}, 1},
  };
  for (const Case& c : cases) {
    std::vector<sdk::PodInfoPtr> pods;
    for (const auto& p : c.pods) pods.push_back(Info(p));
    PotentialVictims got = OrderPotentialVictims(pods, c.pdbs);
    EXPECT_THAT(Names(got.pods), ElementsAreArray(c.want)) << c.name;
    EXPECT_EQ(got.num_pdb_violating, c.want_violating) << c.name;
  }
}

TEST(SelectorTest, ExpressionsAndValidation) {
  v1::LabelSelector s;
  auto* e = s.add_match_expressions();
  e->set_key("tier");
  e->set_operator_(v1::LabelSelectorRequirement::NOT_IN);
  e->add_values("frontend");
  google::protobuf::Map<std::string, std::string> labels;
  labels["tier"] = "backend";
  EXPECT_TRUE(SelectorMatches(s, labels));
  labels["tier"] = "frontend";
  EXPECT_FALSE(SelectorMatches(s, labels));
  e->clear_values();
  absl::Status bad = ValidateLabelSelector(s);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "matchExpressions[0].values: must be non-empty for operator In and NotIn");
}

Candidate MakeCandidate(const std::string& node, std::vector<v1::Pod> victims, int64_t violations = 0) {
  Candidate c;
  c.node_name = node;
  for (auto& v : victims) c.victims.push_back(Info(std::move(v)));
  c.num_pdb_violations = violations;
  return c;
}

TEST(PickOneNodeForPreemptionTest, FollowsKubeSchedulerCriteriaInOrder) {
  struct Case {
    std::string name;
    std::vector<Candidate> candidates;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"fewest PDB violations first",
       {MakeCandidate("n1", {MakePod("a", 1)}, 1), MakeCandidate("n2", {MakePod("b", 100), MakePod("c", 100)}, 0)},
       "n2"},
      {"lowest highest-priority victim",
       {MakeCandidate("n1", {MakePod("a", 50)}), MakeCandidate("n2", {MakePod("b", 10), MakePod("c", 10)})}, "n2"},
      {"smallest priority sum",
       {MakeCandidate("n1", {MakePod("a", 10), MakePod("b", 10)}), MakeCandidate("n2", {MakePod("c", 10), MakePod("d", 5)})},
       "n2"},
      {"negative priorities still sum by count",
       {MakeCandidate("n1", {MakePod("a", -10), MakePod("b", -10)}), MakeCandidate("n2", {MakePod("c", -10)})}, "n2"},
      {"fewest victims",
       {MakeCandidate("n1", {MakePod("a", 10), MakePod("b", 0), MakePod("c", 0)}),
        MakeCandidate("n2", {MakePod("d", 10), MakePod("e", 0)})},
       "n2"},
      {"latest start of the highest-priority victims",
       {MakeCandidate("n1", {MakePod("a", 10, 100)}), MakeCandidate("n2", {MakePod("b", 10, 300)}),
        MakeCandidate("n3", {MakePod("c", 10, 200)})},
       "n2"},
      {"the start time, not the creation time",
       {MakeCandidate("n1", {[] {
          v1::Pod p = MakePod("a", 10, 100);  // Created first, started last.
          p.set_start_time_us(500);
          return p;
        }()}),
        MakeCandidate("n2", {MakePod("b", 10, 200)})},
       "n1"},
      {"still tied: the first in order",
       {MakeCandidate("n1", {MakePod("a", 10, 100)}), MakeCandidate("n2", {MakePod("b", 10, 100)})}, "n1"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.candidates[PickOneNodeForPreemption(c.candidates)].node_name, c.want) << c.name;
  }
}

}  // namespace
}  // namespace podium::scheduler::preemption
