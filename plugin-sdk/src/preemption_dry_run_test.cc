// The batched preemption dry run against a mirror, with a CPU filter that keeps
// its own PreFilter state through AddPod/RemovePod (as NodeResourcesFit-like
// plugins with extensions do), so the reprieve loop is seen through both.
#include "preemption_dry_run.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "mirror.h"

namespace podium::sdk::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// Counts the CPU of pods added/removed through the extensions; Filter checks
// node requested (NodeInfo aggregates) plus the pod against allocatable, and
// that the extension saw the same net change as the node did.
struct Delta : StateData {
  int64_t milli_cpu = 0;
  std::unique_ptr<StateData> Clone() const override { return std::make_unique<Delta>(*this); }
};

class CpuFit : public PreFilterPlugin, public FilterPlugin, public PreFilterExtensions {
 public:
  std::string_view Name() const override { return "CpuFit"; }
  std::pair<PreFilterResult, Status> PreFilter(CycleState& state, const PodInfo&, const Snapshot&) override {
    state.Write("CpuFit", std::make_unique<Delta>());
    return {{}, Status::Success()};
  }
  PreFilterExtensions* Extensions() override { return this; }
  Status AddPod(CycleState& state, const PodInfo&, const PodInfo& add, const NodeInfo&) override {
    state.ReadAs<Delta>("CpuFit")->milli_cpu += add.requests.milli_cpu;
    return Status::Success();
  }
  Status RemovePod(CycleState& state, const PodInfo&, const PodInfo& remove, const NodeInfo&) override {
    state.ReadAs<Delta>("CpuFit")->milli_cpu -= remove.requests.milli_cpu;
    return Status::Success();
  }
  Status Filter(CycleState& state, const PodInfo& pod, const NodeInfo& node) override {
    ++filter_calls;
    if (state.ReadAs<Delta>("CpuFit") == nullptr) return Status(Code::kError, "no prefilter state");
    if (node.requested().milli_cpu + pod.requests.milli_cpu > node.allocatable().milli_cpu) {
      return Status(Code::kUnschedulable, "Insufficient cpu");
    }
    return Status::Success();
  }
  int filter_calls = 0;
};

v1::Pod MakePod(const std::string& name, int32_t priority, int64_t milli_cpu) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-" + name);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(name);
  pod.set_priority(priority);
  pod.add_containers()->mutable_requests()->set_milli_cpu(milli_cpu);
  return pod;
}

class PreemptionDryRunTest : public ::testing::Test {
 protected:
  void AddNode(uint32_t id, int64_t milli_cpu) {
    auto* n = delta_.add_node_upserts();
    n->set_id(id);
    n->mutable_node()->mutable_meta()->set_name("node-" + std::to_string(id));
    n->mutable_node()->mutable_allocatable()->set_milli_cpu(milli_cpu);
    n->mutable_node()->mutable_allocatable()->set_pods(110);
  }
  void AddPod(uint32_t node_id, const std::string& name, int32_t priority, int64_t milli_cpu) {
    auto* p = delta_.add_pod_upserts();
    p->set_node_id(node_id);
    *p->mutable_pod() = MakePod(name, priority, milli_cpu);
    p->mutable_pod()->set_node_name("node-" + std::to_string(node_id));
  }
  v1::PreemptionDryRunRequest::Candidate* Candidate(uint32_t node_id, std::vector<std::string> victims,
                                                    uint32_t num_violating = 0) {
    auto* c = request_.add_candidates();
    c->set_node_id(node_id);
    for (const auto& v : victims) c->add_potential_victims("uid-" + v);
    c->set_num_pdb_violating(num_violating);
    return c;
  }
  // `bound_to`: the preemptor is bound there already (a deferred resize).
  // `with_extensions` false: CpuFit's AddPod/RemovePod are not offered (as
  // when PreFilter skipped every plugin with extensions).
  absl::Status Run(int64_t pod_cpu = 2000, int32_t priority = 100, const std::string& bound_to = "",
                   bool with_extensions = true) {
    delta_.set_reset(true);
    if (absl::Status s = mirror_.Apply(delta_); !s.ok()) return s;
    v1::Pod preemptor = MakePod("preemptor", priority, pod_cpu);
    preemptor.set_node_name(bound_to);
    PodInfoPtr pod = PodInfo::Create(std::move(preemptor));
    plugin_.PreFilter(state_, *pod, mirror_);
    std::vector<NamedFilter> filters{{&name_, &plugin_}};
    std::vector<NamedExtensions> extensions;
    if (with_extensions) extensions.push_back({&name_, &plugin_});
    return RunPreemptionDryRun(request_, mirror_, state_, *pod, filters, extensions, response_);
  }
  std::vector<std::string> Victims(int i) const {
    return {response_.nodes(i).victims().begin(), response_.nodes(i).victims().end()};
  }

  std::string name_ = "CpuFit";
  CpuFit plugin_;
  CycleState state_;  // The cycle's state after PreFilter (Run).
  Mirror mirror_;
  v1::StateDelta delta_;
  v1::PreemptionDryRunRequest request_;
  v1::PreemptionDryRunResponse response_;
};

// KEP-5836: the preemptor is bound to the node and asks for more CPU in
// place. It leaves the node before the evaluation (else it would count twice)
// and is never its own victim.
TEST_F(PreemptionDryRunTest, ABoundPodResizingInPlaceIsTakenOffItsNodeFirst) {
  AddNode(1, 5000);
  AddPod(1, "preemptor", 100, 3000);  // Its spec already asks for 3 CPU.
  AddPod(1, "low10", 10, 1000);
  AddPod(1, "low20", 20, 1000);
  Candidate(1, {"low20", "low10"});
  ASSERT_TRUE(Run(3000, 100, "node-1").ok());
  ASSERT_EQ(response_.nodes_size(), 1);
  EXPECT_EQ(response_.nodes(0).status().code(), v1::Status::SUCCESS);
  // 3 + 1 + 1 = 5 fits once its old self is off the node: nothing needs to go.
  EXPECT_THAT(Victims(0), IsEmpty());
}

TEST_F(PreemptionDryRunTest, ABoundPodResizingInPlaceEvictsOnlyWhatItNeeds) {
  AddNode(1, 5000);
  AddPod(1, "preemptor", 100, 4000);
  AddPod(1, "low10", 10, 1000);
  AddPod(1, "low20", 20, 1000);
  Candidate(1, {"low20", "low10"});
  ASSERT_TRUE(Run(4000, 100, "node-1").ok());
  ASSERT_EQ(response_.nodes_size(), 1);
  EXPECT_EQ(response_.nodes(0).status().code(), v1::Status::SUCCESS);
  EXPECT_THAT(Victims(0), ElementsAre("uid-low10"));
}

TEST_F(PreemptionDryRunTest, ReprievesFromTheMostImportantDownAndKeepsTheMinimalSet) {
  AddNode(1, 4000);
  AddPod(1, "low10", 10, 1000);
  AddPod(1, "low20", 20, 2000);
  AddPod(1, "low30", 30, 1000);
  Candidate(1, {"low30", "low20", "low10"});  // The scheduler's order.
  ASSERT_TRUE(Run().ok());
  ASSERT_EQ(response_.nodes_size(), 1);
  EXPECT_EQ(response_.nodes(0).status().code(), v1::Status::SUCCESS);
  // low30 goes back (3000 used), low20 cannot (5000), low10 can (4000).
  EXPECT_THAT(Victims(0), ElementsAre("uid-low20"));
  EXPECT_EQ(response_.nodes(0).num_pdb_violations(), 0u);
}

TEST_F(PreemptionDryRunTest, PdbViolatingVictimsAreReprievedFirst) {
  AddNode(1, 3000);
  AddPod(1, "protected", 10, 1000);
  AddPod(1, "free", 20, 1000);
  AddPod(1, "high", 200, 1000);  // Not a potential victim.
  Candidate(1, {"protected", "free"}, /*num_violating=*/1);
  ASSERT_TRUE(Run(1000).ok());
  EXPECT_THAT(Victims(0), ElementsAre("uid-free"));
  EXPECT_EQ(response_.nodes(0).num_pdb_violations(), 0u);
}

TEST_F(PreemptionDryRunTest, CountsViolationsOfVictimsThatCouldNotBeReprieved) {
  AddNode(1, 2000);
  AddPod(1, "protected", 10, 1000);
  AddPod(1, "free", 20, 1000);
  Candidate(1, {"protected", "free"}, /*num_violating=*/1);
  ASSERT_TRUE(Run(2000).ok());
  EXPECT_THAT(Victims(0), ElementsAre("uid-protected", "uid-free"));
  EXPECT_EQ(response_.nodes(0).num_pdb_violations(), 1u);
}

TEST_F(PreemptionDryRunTest, ANodeWhereRemovingEveryVictimIsNotEnoughSaysWhy) {
  AddNode(1, 2000);
  AddPod(1, "low", 10, 500);
  AddPod(1, "high", 200, 1500);
  Candidate(1, {"low"});
  ASSERT_TRUE(Run(1000).ok());
  EXPECT_EQ(response_.nodes(0).status().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(response_.nodes(0).status().plugin(), "CpuFit");
  EXPECT_THAT(response_.nodes(0).status().reasons(), ElementsAre("Insufficient cpu"));
  EXPECT_THAT(Victims(0), IsEmpty());
}

TEST_F(PreemptionDryRunTest, NominatedPodsOfHigherPriorityTakeTheirRoomFirst) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 1000);
  AddPod(1, "b", 20, 1000);
  AddPod(1, "c", 30, 2000);
  Candidate(1, {"c", "b", "a"});
  auto* nominated = request_.add_nominated_pods();
  nominated->set_node_id(1);
  *nominated->mutable_pod() = MakePod("nominated", 500, 1000);
  ASSERT_TRUE(Run(2000).ok());
  // Without the nominated pod, c alone would do; with it c and a must go... or
  // c and b: b (more important) is reprieved first.
  EXPECT_THAT(Victims(0), ElementsAre("uid-c", "uid-a"));
}

TEST_F(PreemptionDryRunTest, MirroredNominatedPodsTakeTheirRoomAsWell) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 1000);
  AddPod(1, "b", 20, 1000);
  AddPod(1, "c", 30, 2000);
  Candidate(1, {"c", "b", "a"});
  v1::Pod nominated = MakePod("nominated", 500, 1000);
  nominated.set_nominated_node_name("node-1");
  *delta_.add_nominated_pod_upserts() = nominated;
  v1::Pod lower = MakePod("lower-nominated", 50, 1000);  // Below the preemptor: ignored.
  lower.set_nominated_node_name("node-1");
  *delta_.add_nominated_pod_upserts() = lower;
  ASSERT_TRUE(Run(2000).ok());
  EXPECT_THAT(Victims(0), ElementsAre("uid-c", "uid-a"));
}

// Nominated pods are added to the candidate's node (and state) for each
// evaluation and taken out again: every candidate, the first's evaluations
// included, sees them once, and the cycle's state is left as it was.
TEST_F(PreemptionDryRunTest, NominatedPodsCountOncePerEvaluationOnEveryCandidate) {
  for (bool with_extensions : {true, false}) {
    SCOPED_TRACE(with_extensions ? "with extensions" : "without extensions");
    delta_.Clear();
    request_.Clear();
    response_.Clear();
    state_ = CycleState();
    for (uint32_t id = 1; id <= 2; ++id) {
      AddNode(id, 4000);
      const std::string n = std::to_string(id);
      AddPod(id, "a" + n, 10, 1000);
      AddPod(id, "b" + n, 20, 1000);
      AddPod(id, "c" + n, 30, 2000);
      Candidate(id, {"c" + n, "b" + n, "a" + n});
      auto* nominated = request_.add_nominated_pods();
      nominated->set_node_id(id);
      *nominated->mutable_pod() = MakePod("nominated" + n, 500, 1000);
    }
    ASSERT_TRUE(Run(2000, 100, "", with_extensions).ok());
    ASSERT_EQ(response_.nodes_size(), 2);
    EXPECT_THAT(Victims(0), ElementsAre("uid-c1", "uid-a1"));
    EXPECT_THAT(Victims(1), ElementsAre("uid-c2", "uid-a2"));
    EXPECT_EQ(state_.ReadAs<Delta>("CpuFit")->milli_cpu, 0);
  }
}

TEST_F(PreemptionDryRunTest, StopsOnceEnoughCandidatesWithoutViolationsAreFound) {
  for (uint32_t id = 1; id <= 3; ++id) {
    AddNode(id, 2000);
    AddPod(id, "low-" + std::to_string(id), 10, 2000);
    Candidate(id, {"low-" + std::to_string(id)});
  }
  request_.set_num_candidates(2);
  ASSERT_TRUE(Run(1000).ok());
  ASSERT_EQ(response_.nodes_size(), 2);
  EXPECT_EQ(response_.nodes(1).node_id(), 2u);
}

TEST_F(PreemptionDryRunTest, ViolatingCandidatesAloneDoNotStopTheSearch) {
  for (uint32_t id = 1; id <= 3; ++id) {
    AddNode(id, 2000);
    AddPod(id, "low-" + std::to_string(id), 10, 2000);
    Candidate(id, {"low-" + std::to_string(id)}, id < 3 ? 1 : 0);
  }
  request_.set_num_candidates(1);
  ASSERT_TRUE(Run(1000).ok());
  ASSERT_EQ(response_.nodes_size(), 3);
  EXPECT_EQ(response_.nodes(0).num_pdb_violations(), 1u);
  EXPECT_EQ(response_.nodes(2).num_pdb_violations(), 0u);
}

TEST_F(PreemptionDryRunTest, NoReprieveConfirmsTheWholeSet) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 1000);
  AddPod(1, "b", 20, 1000);
  Candidate(1, {"b", "a"});
  request_.set_no_reprieve(true);
  ASSERT_TRUE(Run(1000).ok());
  EXPECT_EQ(response_.nodes(0).status().code(), v1::Status::SUCCESS);
  EXPECT_THAT(Victims(0), ElementsAre("uid-b", "uid-a"));
}

TEST_F(PreemptionDryRunTest, AVictimThatIsNotOnItsNodeIsAnErrorNamingTheField) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 1000);
  Candidate(1, {"a", "ghost"});
  absl::Status s = Run();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("preemption_dry_run.candidates[0].potential_victims[1]: pod uid-ghost"));
}

// Protocol version 7: what-ifs. Each node is evaluated with a copy of the
// pod nominated there (counted as a nominated pod of its priority): Filter
// first, then, when it does not fit, the dry run.
TEST_F(PreemptionDryRunTest, WhatIfsCountACopyOfThePodNominatedOnTheNode) {
  AddNode(1, 4000);  // Full: 4 x 1 CPU.
  AddNode(2, 6000);  // 2 CPU free: fits the pod, not the pod and its copy.
  AddNode(3, 8000);  // 4 CPU free: fits both.
  for (uint32_t n = 1; n <= 3; ++n) {
    for (int k = 1; k <= 4; ++k) AddPod(n, "low" + std::to_string(n) + std::to_string(k), 10, 1000);
  }
  for (uint32_t n = 1; n <= 3; ++n) {
    auto* c = request_.add_what_if();
    c->set_node_id(n);
    for (int k = 4; k >= 1; --k) c->add_potential_victims("uid-low" + std::to_string(n) + std::to_string(k));
  }
  request_.set_what_if_copy_uid("uid-preemptor-copy");
  ASSERT_TRUE(Run(2000, 100).ok());
  EXPECT_EQ(response_.nodes_size(), 0);  // No candidates asked.
  ASSERT_EQ(response_.what_if_size(), 3);
  // node-1: rejected; with the copy's 2 CPU counted every pod must go.
  const v1::WhatIfNominated& full = response_.what_if(0);
  EXPECT_EQ(full.node_id(), 1u);
  EXPECT_EQ(full.filter().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(full.filter().plugin(), "CpuFit");
  EXPECT_EQ(full.dry_run().status().code(), v1::Status::SUCCESS);
  EXPECT_EQ(full.dry_run().victims_size(), 4);
  // node-2: the pod alone would fit; with the copy it needs two victims.
  const v1::WhatIfNominated& half = response_.what_if(1);
  EXPECT_EQ(half.filter().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_THAT(std::vector<std::string>(half.dry_run().victims().begin(), half.dry_run().victims().end()),
              ElementsAre("uid-low22", "uid-low21"));
  // node-3: room for both: it fits, no dry run.
  const v1::WhatIfNominated& room = response_.what_if(2);
  EXPECT_EQ(room.filter().code(), v1::Status::SUCCESS);
  EXPECT_FALSE(room.has_dry_run());
}

// Protocol version 8: what-ifs of pods gone. Each node is evaluated once the
// pods in `gone` have left it (the CPU fit's extension sees them go): Filter,
// then the dry run over the potential victims left; with none left, the
// verdict only.
TEST_F(PreemptionDryRunTest, WhatIfsOfPodsGoneEvaluateTheNodeWithoutThem) {
  AddNode(1, 4000);  // Full: 4 x 1 CPU; two of them are leaving.
  for (int k = 1; k <= 4; ++k) AddPod(1, "low1" + std::to_string(k), 10, 1000);
  AddNode(2, 4000);  // 3 CPU held by a pod of higher priority, 1 CPU leaving.
  AddPod(2, "high", 200, 3000);
  AddPod(2, "low21", 10, 1000);
  auto* one = request_.add_what_if_gone();
  one->set_node_id(1);
  one->add_gone("uid-low11");
  one->add_gone("uid-low12");
  one->add_potential_victims("uid-low14");
  one->add_potential_victims("uid-low13");
  auto* two = request_.add_what_if_gone();
  two->set_node_id(2);
  two->add_gone("uid-low21");
  ASSERT_TRUE(Run(3000, 100).ok());
  ASSERT_EQ(response_.what_if_gone_size(), 2);
  // node-1 without them: 2 CPU used, the pod's 3 do not fit; the dry run
  // reprieves low14 and takes low13.
  const v1::WhatIfNominated& first = response_.what_if_gone(0);
  EXPECT_EQ(first.node_id(), 1u);
  EXPECT_THAT(std::vector<std::string>(first.gone().begin(), first.gone().end()),
              ElementsAre("uid-low11", "uid-low12"));
  EXPECT_EQ(first.filter().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(first.dry_run().status().code(), v1::Status::SUCCESS);
  EXPECT_THAT(std::vector<std::string>(first.dry_run().victims().begin(), first.dry_run().victims().end()),
              ElementsAre("uid-low13"));
  // node-2 without low21: still no room, and no candidate.
  const v1::WhatIfNominated& second = response_.what_if_gone(1);
  EXPECT_EQ(second.filter().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_FALSE(second.has_dry_run());
}

TEST_F(PreemptionDryRunTest, AWhatIfOfPodsGoneWhereThePodFitsHasNoDryRun) {
  AddNode(1, 4000);
  for (int k = 1; k <= 4; ++k) AddPod(1, "low1" + std::to_string(k), 10, 1000);
  auto* c = request_.add_what_if_gone();
  c->set_node_id(1);
  c->add_gone("uid-low11");
  c->add_gone("uid-low12");
  c->add_potential_victims("uid-low14");
  ASSERT_TRUE(Run(2000, 100).ok());
  EXPECT_EQ(response_.what_if_gone(0).filter().code(), v1::Status::SUCCESS);
  EXPECT_FALSE(response_.what_if_gone(0).has_dry_run());
}

TEST_F(PreemptionDryRunTest, AGonePodThatIsNotOnItsNodeIsAnErrorNamingTheField) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 4000);
  auto* c = request_.add_what_if_gone();
  c->set_node_id(1);
  c->add_gone("uid-a");
  c->add_gone("uid-ghost");
  absl::Status s = Run(2000, 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              ::testing::HasSubstr("preemption_dry_run.what_if_gone[0].gone[1]: pod uid-ghost is not on node node-1"));
}

TEST_F(PreemptionDryRunTest, AWhatIfOfPodsGoneWithNoneGoneIsAnErrorNamingTheField) {
  AddNode(1, 4000);
  AddPod(1, "a", 10, 4000);
  request_.add_what_if_gone()->set_node_id(1);
  absl::Status s = Run(2000, 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("preemption_dry_run.what_if_gone[0].gone: empty"));
}

// A what-if with `gone` (protocol version 8) also answers the node once
// those pods (the victims the copy would take) have left, the copy still
// nominated: then_gone.
TEST_F(PreemptionDryRunTest, AWhatIfWithGonePodsAlsoAnswersTheNodeOnceTheyLeft) {
  AddNode(1, 4000);  // Full: 4 x 1 CPU.
  for (int k = 1; k <= 4; ++k) AddPod(1, "low1" + std::to_string(k), 10, 1000);
  auto* c = request_.add_what_if();
  c->set_node_id(1);
  for (int k = 4; k >= 1; --k) c->add_potential_victims("uid-low1" + std::to_string(k));
  c->add_gone("uid-low11");
  c->add_gone("uid-low12");
  request_.set_what_if_copy_uid("uid-preemptor-copy");
  ASSERT_TRUE(Run(2000, 100).ok());
  ASSERT_EQ(response_.what_if_size(), 1);
  const v1::WhatIfNominated& w = response_.what_if(0);
  EXPECT_EQ(w.dry_run().victims_size(), 4);
  ASSERT_TRUE(w.has_then_gone());
  // Without low11 and low12, the copy's 2 CPU and the pod's 2 need the rest.
  const v1::WhatIfNominated& then = w.then_gone();
  EXPECT_EQ(then.node_id(), 1u);
  EXPECT_THAT(std::vector<std::string>(then.gone().begin(), then.gone().end()), ElementsAre("uid-low11", "uid-low12"));
  EXPECT_EQ(then.filter().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_THAT(std::vector<std::string>(then.dry_run().victims().begin(), then.dry_run().victims().end()),
              ElementsAre("uid-low14", "uid-low13"));
}

TEST_F(PreemptionDryRunTest, AWhatIfWithoutACopyUidIsRefusedNamingTheField) {
  AddNode(1, 4000);
  AddPod(1, "low", 10, 4000);
  request_.add_what_if()->set_node_id(1);
  absl::Status s = Run(2000, 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("preemption_dry_run.what_if_copy_uid"));
}

TEST_F(PreemptionDryRunTest, AWhatIfCopyUnderThePodsOwnUidIsRefused) {
  AddNode(1, 4000);
  AddPod(1, "low", 10, 4000);
  request_.add_what_if()->set_node_id(1);
  request_.set_what_if_copy_uid("uid-preemptor");
  EXPECT_EQ(Run(2000, 100).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(PreemptionDryRunTest, AWhatIfOnAnUnknownNodeIsRefusedNamingTheEntry) {
  AddNode(1, 4000);
  AddPod(1, "low", 10, 4000);
  request_.add_what_if()->set_node_id(9);
  request_.set_what_if_copy_uid("uid-copy");
  absl::Status s = Run(2000, 100);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("preemption_dry_run.what_if[0].node_id: unknown node id 9"));
}

}  // namespace
}  // namespace podium::sdk::internal
