// What-if verdicts (plugin protocol version 3) with every default plugin:
// the verdict for "j more copies of the pod on node X" must be what a cycle
// that re-evaluates X alone says once j pods of the same signature are
// assumed there (what the scheduler asks on a batch hit without what-if).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/default_plugins_stream_test.h"

namespace podium::plugins {
namespace {

using Verdict = v1::WhatIfVerdicts;
using stream_test::Cluster;
using stream_test::Node;
using stream_test::Nominee;
using stream_test::Pod;
using stream_test::Stream;

class WhatIfTest : public stream_test::DefaultPluginsOverStream {
 protected:
  void SetUp() override {
    OpenStream(3);
  }

  v1::SchedulerToPlugin Cycle(const v1::Pod& pod) {
    v1::SchedulerToPlugin message = CycleOf(pod);
    *message.mutable_cycle()->add_nominated_pods() = Nominee();
    return message;
  }

  // The full cycle with what-if, then, for every feasible node and j, the
  // re-evaluation of that node alone with j pods of the signature assumed
  // there: both must agree on feasibility and on every plugin's score.
  // Returns the verdicts by node id, j.
  std::map<std::pair<uint32_t, uint32_t>, Verdict::Verdict> CheckAgainstReevaluation(
      const v1::Pod& pod, uint32_t copies) {
    v1::SchedulerToPlugin full = Cycle(pod);
    *full.mutable_delta() = Cluster();
    full.mutable_cycle()->mutable_nodes()->set_all_nodes(true);
    full.mutable_cycle()->set_what_if_copies(copies);
    const v1::CycleResponse answer = stream_->Call(full).cycle();
    const v1::WhatIfVerdicts& what_if = answer.what_if();
    EXPECT_EQ(what_if.copies(), copies);
    EXPECT_EQ(what_if.verdicts_size(), answer.feasible_size() * static_cast<int>(copies));
    EXPECT_EQ(what_if.scores_size(), static_cast<int>(score_.size()));
    std::map<std::pair<uint32_t, uint32_t>, Verdict::Verdict> verdicts;
    uint64_t generation = 1;
    for (int i = 0; i < answer.feasible_size(); ++i) {
      const uint32_t node = answer.feasible(i);
      for (uint32_t j = 1; j <= copies; ++j) {
        const int entry = i * static_cast<int>(copies) + static_cast<int>(j - 1);
        verdicts[{node, j}] = what_if.verdicts(entry);
        // j real pods of the signature (own names and uids), assumed on the node.
        v1::SchedulerToPlugin again = Cycle(pod);
        v1::StateDelta& delta = *again.mutable_delta();
        delta.set_generation(++generation);
        std::vector<std::string> uids;
        for (uint32_t k = 1; k <= j; ++k) {
          v1::MirroredPod& assumed = *delta.add_pod_upserts();
          assumed.set_node_id(node);
          assumed.set_assumed(true);
          *assumed.mutable_pod() = pod;
          const std::string name = absl::StrCat(pod.meta().name(), "-twin-", k);
          assumed.mutable_pod()->mutable_meta()->set_name(name);
          assumed.mutable_pod()->mutable_meta()->set_uid("uid-" + name);
          uids.push_back("uid-" + name);
        }
        again.mutable_cycle()->mutable_nodes()->add_node_ids(node);
        const v1::CycleResponse real = stream_->Call(again).cycle();
        const bool feasible = real.feasible_size() == 1;
        EXPECT_EQ(what_if.verdicts(entry), feasible ? Verdict::FEASIBLE : Verdict::INFEASIBLE)
            << "node " << node << ", j " << j;
        if (feasible) {
          for (const v1::PluginScores& s : real.scores()) {
            bool found = false;
            for (const v1::PluginScores& w : what_if.scores()) {
              if (w.plugin() != s.plugin()) continue;
              found = true;
              EXPECT_EQ(w.scores(entry), s.scores(0)) << s.plugin() << " on node " << node << ", j " << j;
            }
            EXPECT_TRUE(found) << s.plugin();
          }
        }
        // Back to the cluster of the full cycle.
        v1::SchedulerToPlugin restore;
        v1::StateDelta& undo = *restore.mutable_delta();
        undo.set_generation(++generation);
        for (const std::string& uid : uids) undo.add_pod_removals(uid);
        *restore.mutable_cycle() = Cycle(pod).cycle();
        restore.mutable_cycle()->mutable_nodes()->add_node_ids(node);
        stream_->Call(restore);
      }
    }
    return verdicts;
  }
};

TEST_F(WhatIfTest, VerdictsEqualAReevaluationWithThePodsAssumed) {
  const auto verdicts = CheckAgainstReevaluation(Pod("web", 1500, int64_t{1} << 30), 2);
  // Every node but "guarded" passes with the pod alone; "tight" (id 2,
  // 4000m) holds the pod and one copy of 1500m, not two; nor does "plain"
  // (id 1) with the nominee's 5000m; "ssd" (id 3) holds both.
  ASSERT_EQ(verdicts.size(), 12u);
  EXPECT_FALSE(verdicts.contains({7, 1}));
  EXPECT_EQ(verdicts.at({2, 1}), Verdict::FEASIBLE);
  EXPECT_EQ(verdicts.at({2, 2}), Verdict::INFEASIBLE);
  EXPECT_EQ(verdicts.at({1, 1}), Verdict::FEASIBLE);
  EXPECT_EQ(verdicts.at({1, 2}), Verdict::INFEASIBLE);
  EXPECT_EQ(verdicts.at({3, 2}), Verdict::FEASIBLE);
}

TEST_F(WhatIfTest, AHostPortCopyMakesEveryNodeInfeasible) {
  const auto verdicts = CheckAgainstReevaluation(Pod("proxy", 100, int64_t{64} << 20, 8080), 2);
  ASSERT_EQ(verdicts.size(), 12u);
  for (const auto& [key, verdict] : verdicts) {
    EXPECT_EQ(verdict, Verdict::INFEASIBLE) << "node " << key.first << ", j " << key.second;
  }
}

TEST_F(WhatIfTest, NotAnsweredOnAStreamOfAnOlderProtocol) {
  // A fresh stream that speaks version 2: the field is ignored.
  std::unique_ptr<Stream> old = OpenFitOnlyStream(2);
  v1::SchedulerToPlugin cycle = FitOnlyCycle(Pod("web", 1500, 1 << 20));
  cycle.mutable_cycle()->set_what_if_copies(2);
  const v1::CycleResponse answer = old->Call(cycle).cycle();
  EXPECT_EQ(answer.feasible_size(), 7);
  EXPECT_FALSE(answer.has_what_if());
}

TEST_F(WhatIfTest, TooManyCopiesIsAnErrorNamingTheField) {
  // A stream of its own: Stream::Call expects answers without errors.
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  auto stub = v1::Plugin::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  auto rw = stub->Run(&context);
  v1::SchedulerToPlugin open;
  open.set_id(1);
  open.mutable_open()->set_protocol_version(1);
  open.mutable_open()->set_max_protocol_version(3);
  open.mutable_open()->set_scheduler_id("test");
  open.mutable_open()->add_plugins()->set_name("NodeResourcesFit");
  v1::PluginToScheduler answer;
  ASSERT_TRUE(rw->Write(open));
  ASSERT_TRUE(rw->Read(&answer));
  ASSERT_EQ(answer.registration().protocol_version(), 3u);
  v1::SchedulerToPlugin cycle;
  cycle.set_id(2);
  cycle.mutable_cycle()->set_cycle_id(1);
  *cycle.mutable_cycle()->mutable_pod() = Pod("web", 1500, 1 << 20);
  cycle.mutable_cycle()->add_filter_plugins("NodeResourcesFit");
  cycle.mutable_cycle()->mutable_nodes()->set_all_nodes(true);
  cycle.mutable_cycle()->set_what_if_copies(1000);
  *cycle.mutable_delta() = Cluster();
  ASSERT_TRUE(rw->Write(cycle));
  ASSERT_TRUE(rw->Read(&answer));
  EXPECT_THAT(answer.error(), ::testing::HasSubstr("cycle.what_if_copies: 1000 exceeds 8"));
  rw->WritesDone();
  v1::PluginToScheduler ignored;
  while (rw->Read(&ignored)) {
  }
  rw->Finish();
}

}  // namespace
}  // namespace podium::plugins
