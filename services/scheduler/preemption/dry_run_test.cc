// The batched dry runs at the PluginProcess seam: one request per process with
// every candidate, union and confirmation across processes, answers checked.
#include "preemption/dry_run.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "preemption/testing.h"

namespace podium::scheduler::preemption {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::Invoke;
using ::testing::NiceMock;
using testing::DryRunAnswer;
using testing::MakeNode;
using testing::MakePod;

class DryRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (int i = 1; i <= 3; ++i) {
      cache_.AddOrUpdateNode(MakeNode("node-" + std::to_string(i), 4000));
      ASSERT_TRUE(cache_.AddOrUpdatePod(MakePod("a" + std::to_string(i), 10, 2000, "node-" + std::to_string(i))).ok());
      ASSERT_TRUE(cache_.AddOrUpdatePod(MakePod("b" + std::to_string(i), 20, 2000, "node-" + std::to_string(i))).ok());
    }
    cache_.UpdateSnapshot(snapshot_);
    for (const sdk::NodeInfo* node : snapshot_.Nodes()) {
      nodes_.push_back(DryRunNode{node, OrderPotentialVictims(node->pods(), {})});
    }
  }
  ProfileSpec Spec(std::vector<std::pair<std::string, PluginProcess*>> filters) {
    ProfileSpec spec;
    for (auto& [name, process] : filters) {
      spec.plugins[v1::FILTER].push_back(PluginRef{name, 1});
      spec.processes[name] = process;
    }
    return spec;
  }

  Cache cache_;
  Snapshot snapshot_;
  std::vector<DryRunNode> nodes_;
  google::protobuf::RepeatedPtrField<v1::MirroredPod> nominated_;
  v1::Pod pod_ = MakePod("preemptor", 100, 2000);
};

TEST_F(DryRunTest, OneRequestCarriesEveryCandidateWithItsOrderedVictims) {
  NiceMock<MockPluginProcess> host("host");
  v1::MirroredPod* n = nominated_.Add();
  n->set_node_id(2);
  *n->mutable_pod() = MakePod("nominated", 500, 1000);
  std::vector<v1::SchedulerToPlugin> seen;
  EXPECT_CALL(host, Call(_, _)).Times(1).WillOnce(Invoke([&](v1::SchedulerToPlugin m, std::optional<uint64_t> seq) {
    EXPECT_EQ(seq, std::optional<uint64_t>(snapshot_.delta_seq()));
    seen.push_back(m);
    return Answered(DryRunAnswer({{1, {{"uid-b1"}, ""}}, {2, {{}, "Insufficient cpu"}}, {3, {{"uid-a3"}, ""}}}));
  }));
  auto out = RunDryRuns(Spec({{"NodeResourcesFit", &host}}), pod_, 7, snapshot_.delta_seq(), nodes_, nominated_, 100);
  ASSERT_TRUE(out.ok()) << out.status();
  const v1::PreemptionDryRunRequest& r = seen[0].preemption_dry_run();
  EXPECT_EQ(r.cycle_id(), 7u);
  EXPECT_THAT(r.filter_plugins(), ElementsAre("NodeResourcesFit"));
  ASSERT_EQ(r.candidates_size(), 3);
  EXPECT_THAT(r.candidates(0).potential_victims(), ElementsAre("uid-b1", "uid-a1"));
  EXPECT_EQ(r.num_candidates(), 100u);
  EXPECT_EQ(r.nominated_pods_size(), 1);
  EXPECT_FALSE(r.no_reprieve());
  ASSERT_EQ(out->candidates.size(), 2u);
  EXPECT_EQ(out->candidates[0].node_name, "node-1");
  EXPECT_EQ(out->candidates[0].victims[0]->uid(), "uid-b1");
  EXPECT_EQ(out->candidates[1].node_name, "node-3");
  ASSERT_EQ(out->rejected.size(), 1u);
  EXPECT_EQ(out->rejected[0].first, "node-2");
  EXPECT_EQ(out->rejected[0].second->Message(), "Insufficient cpu");
}

TEST_F(DryRunTest, SeveralProcessesTakeTheUnionAndConfirmIt) {
  NiceMock<MockPluginProcess> host("host"), other("other");
  std::vector<v1::SchedulerToPlugin> to_other;
  EXPECT_CALL(host, Call(_, _))
      .WillOnce(Invoke([&](v1::SchedulerToPlugin m, auto) {
        EXPECT_EQ(m.preemption_dry_run().num_candidates(), 0u);  // No early stop with several.
        return Answered(DryRunAnswer({{1, {{"uid-a1"}, ""}}, {2, {{"uid-a2"}, ""}}, {3, {{"uid-a3"}, ""}}}));
      }))
      .WillOnce(Invoke([&](v1::SchedulerToPlugin m, auto) {
        EXPECT_TRUE(m.preemption_dry_run().no_reprieve());
        return Answered(DryRunAnswer({{1, {{"uid-b1", "uid-a1"}, ""}}, {2, {{"uid-a2"}, ""}}}));
      }));
  EXPECT_CALL(other, Call(_, _))
      .WillOnce(Invoke([&](v1::SchedulerToPlugin m, auto) {
        return Answered(DryRunAnswer({{1, {{"uid-b1"}, ""}}, {2, {{"uid-a2"}, ""}}, {3, {{}, "zone is full"}}}));
      }))
      .WillOnce(Invoke([&](v1::SchedulerToPlugin m, auto) {
        to_other.push_back(m);
        // Node 2's union fails here after all (the confirmation is what counts).
        return Answered(DryRunAnswer({{1, {{"uid-b1", "uid-a1"}, ""}}, {2, {{}, "zone is full"}}}));
      }));
  auto out = RunDryRuns(Spec({{"NodeResourcesFit", &host}, {"Zone", &other}}), pod_, 1, snapshot_.delta_seq(),
                        nodes_, nominated_, 100);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_EQ(to_other.size(), 1u);
  const auto& confirm = to_other[0].preemption_dry_run();
  ASSERT_EQ(confirm.candidates_size(), 2);  // Node 3 failed in the first round.
  EXPECT_THAT(confirm.candidates(0).potential_victims(), ElementsAre("uid-b1", "uid-a1"));
  ASSERT_EQ(out->candidates.size(), 1u);
  EXPECT_EQ(out->candidates[0].node_name, "node-1");
  EXPECT_EQ(out->candidates[0].victims.size(), 2u);
}

TEST_F(DryRunTest, AVictimThatWasNotAPotentialVictimFailsTheAnswer) {
  NiceMock<MockPluginProcess> host("host");
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin, auto) {
    return Answered(DryRunAnswer({{1, {{"uid-b2"}, ""}}}));
  }));
  auto out = RunDryRuns(Spec({{"NodeResourcesFit", &host}}), pod_, 1, 0, nodes_, nominated_, 100);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(std::string(out.status().message()),
              ::testing::HasSubstr("plugin endpoint host: preemption dry run: preemption_dry_run.nodes[0].victims[0]: "
                                   "pod uid-b2 is not a potential victim on that node"));
  EXPECT_EQ(host.invalid_answers, 1);
}

TEST_F(DryRunTest, AnIgnorableProcessThatFailsIsLeftOut) {
  NiceMock<MockPluginProcess> host("host"), flaky("flaky", FailurePolicy::kIgnore);
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin, auto) {
    return Answered(DryRunAnswer({{1, {{"uid-a1"}, ""}}, {2, {{"uid-a2"}, ""}}, {3, {{"uid-a3"}, ""}}}));
  }));
  EXPECT_CALL(flaky, Call(_, _)).WillOnce(Invoke([&](v1::SchedulerToPlugin, auto) {
    return Answered(absl::DeadlineExceededError("timed out"));
  }));
  auto out = RunDryRuns(Spec({{"NodeResourcesFit", &host}, {"Flaky", &flaky}}), pod_, 1, 0, nodes_, nominated_, 100);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->candidates.size(), 3u);
  EXPECT_EQ(flaky.ignored_failures, 1);
}

TEST_F(DryRunTest, TheStopRuleLimitsCandidatesAfterTheUnion) {
  NiceMock<MockPluginProcess> host("host"), other("other");
  auto all = [&](v1::SchedulerToPlugin m, auto) {
    std::map<uint32_t, testing::ScriptedNode> nodes;
    for (const auto& c : m.preemption_dry_run().candidates()) nodes[c.node_id()] = {{c.potential_victims(0)}, ""};
    return Answered(DryRunAnswer(nodes));
  };
  EXPECT_CALL(host, Call(_, _)).WillRepeatedly(Invoke(all));
  EXPECT_CALL(other, Call(_, _)).WillRepeatedly(Invoke(all));
  auto out = RunDryRuns(Spec({{"A", &host}, {"B", &other}}), pod_, 1, 0, nodes_, nominated_, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->candidates.size(), 2u);
}

}  // namespace
}  // namespace podium::scheduler::preemption
