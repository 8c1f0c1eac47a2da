// DefaultPreemption as the scheduler runs it: PostFilter on a real snapshot,
// dry runs scripted at the PluginProcess seam, and the asynchronous actions
// seen through a fake adapter (ActionSink) whose results the test gives.
#include "preemption/default_preemption.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
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

class FakeSink : public ActionSink {
 public:
  void Send(v1::Action action, ResultCallback on_result) override {
    action.set_id(actions.size() + 1);
    actions.push_back(action);
    callbacks.push_back(std::move(on_result));
  }
  void Reply(size_t i, v1::ActionResult::Code code) {
    v1::ActionResult r;
    r.set_action_id(actions[i].id());
    r.set_code(code);
    callbacks[i](r, absl::Now());
  }
  std::vector<size_t> Of(v1::Action::KindCase kind) const {
    std::vector<size_t> out;
    for (size_t i = 0; i < actions.size(); ++i) {
      if (actions[i].kind_case() == kind) out.push_back(i);
    }
    return out;
  }
  uint32_t ProtocolVersion() const override { return version; }
  std::vector<v1::Action> actions;
  std::vector<ResultCallback> callbacks;
  uint32_t version = 1;
};

class RecordingHandler : public ClusterEventHandler {
 public:
  void OnListBegin() override {}
  void OnObjectEvent(const v1::ObjectEvent& event) override { events.push_back(event); }
  void OnListEnd() override {}
  void OnAdapterDisconnected() override {}
  std::vector<v1::ObjectEvent> events;
};

class DefaultPreemptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // node-1: a low-priority pod; node-2: a mid-priority one; node-3: only a
    // pod of higher priority than the preemptor.
    cache_.AddOrUpdateNode(MakeNode("node-1", 4000));
    cache_.AddOrUpdateNode(MakeNode("node-2", 4000));
    cache_.AddOrUpdateNode(MakeNode("node-3", 4000));
    Bind(MakePod("low", 10, 3000, "node-1"));
    Bind(MakePod("mid", 50, 3000, "node-2"));
    Bind(MakePod("top", 1000, 3000, "node-3"));
    ProfileSpec spec;
    spec.plugins[v1::FILTER].push_back(PluginRef{"NodeResourcesFit", 1});
    spec.processes["NodeResourcesFit"] = &host_;
    spec.recorder = &recorder_;
    framework_ = std::make_unique<Framework>(std::move(spec));
    controller_.SetActionSink(&sink_);
    controller_.SetActivator([this](const std::vector<std::string>& uids) {
      activated_.insert(activated_.end(), uids.begin(), uids.end());
    });
    plugin_ = std::make_unique<DefaultPreemption>(DefaultPreemption::Options{.seed = 1}, *framework_, snapshot_,
                                                  cache_, controller_);
    // Every candidate fits with all its potential victims gone.
    ON_CALL(host_, Call(_, _)).WillByDefault(Invoke([this](v1::SchedulerToPlugin m, auto) {
      ++dry_runs_;
      candidates_per_request_.push_back(m.preemption_dry_run().candidates_size());
      std::map<uint32_t, testing::ScriptedNode> nodes;
      for (const auto& c : m.preemption_dry_run().candidates()) {
        nodes[c.node_id()].victims.assign(c.potential_victims().begin(), c.potential_victims().end());
      }
      return Answered(DryRunAnswer(nodes));
    }));
  }
  void Bind(const v1::Pod& pod) { ASSERT_TRUE(cache_.AddOrUpdatePod(pod).ok()); }
  // The preemptor's PostFilter succeeds and its decision is carried out
  // (the actions go to sink_).
  void PreemptAndCarryOut() {
    auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
    ASSERT_TRUE(status.IsSuccess()) << status.Message();
    result.after_requeue();
  }
  Diagnosis Failed() {
    cache_.UpdateSnapshot(snapshot_);
    Diagnosis d;
    d.num_all_nodes = 3;
    for (const char* n : {"node-1", "node-2", "node-3"}) {
      d.node_statuses.emplace_back(n, MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulable, "Insufficient cpu")));
    }
    return d;
  }
  void Delivered(const v1::Pod& pod) {
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::DELETE);
    *e.mutable_pod() = pod;
    controller_.OnObjectEvent(e);
  }

  Cache cache_;
  Snapshot snapshot_;
  NiceMock<MockPluginProcess> host_{"host"};
  // kube-scheduler's preemption metrics, as DefaultPreemption records them.
  struct PreemptionRecorder final : ExtensionPointRecorder {
    void Observe(std::string_view, std::string_view, absl::Duration) override {}
    void CountPreemptionAttempt() override { ++attempts; }
    void ObservePreemptionVictims(int victims) override { this->victims.push_back(victims); }
    int attempts = 0;
    std::vector<int> victims;
  } recorder_;
  std::unique_ptr<Framework> framework_;
  RecordingHandler scheduler_;
  Nominator nominator_;
  PreemptionController controller_{scheduler_, nominator_};
  FakeSink sink_;
  std::vector<std::string> activated_;
  std::unique_ptr<DefaultPreemption> plugin_;
  int dry_runs_ = 0;
  std::vector<int> candidates_per_request_;
  v1::Pod preemptor_ = MakePod("preemptor", 100, 2000);
};

// The dry run that rode in the cycle request (PredictDryRun, answered with
// the cycle) stands for the first dry run: the same decision, no round trip.
TEST_F(DefaultPreemptionTest, APredictedDryRunAnsweredWithTheCycleSavesTheRoundTrip) {
  Diagnosis failed = Failed();  // Takes the snapshot.
  failed.cycle_id = 7;
  std::optional<v1::PreemptionDryRunRequest> predicted = plugin_->PredictDryRun(preemptor_, 7);
  ASSERT_TRUE(predicted.has_value());
  EXPECT_EQ(predicted->cycle_id(), 7u);
  EXPECT_FALSE(predicted->has_pod());  // The cycle's pod.
  EXPECT_THAT(predicted->filter_plugins(), ElementsAre("NodeResourcesFit"));
  // node-3 has no lower-priority pod.
  ASSERT_EQ(predicted->candidates_size(), 2);
  std::map<uint32_t, testing::ScriptedNode> nodes;
  for (const auto& c : predicted->candidates()) {
    nodes[c.node_id()].victims.assign(c.potential_victims().begin(), c.potential_victims().end());
  }
  failed.dry_run_answer = std::make_shared<const v1::PreemptionDryRunResponse>(
      DryRunAnswer(nodes).preemption_dry_run());
  auto [result, status] = plugin_->PostFilter(preemptor_, failed);
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(result.nominated_node_name, "node-1");
  EXPECT_EQ(dry_runs_, 0);
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "node-1");
}

// A prediction that no longer holds (a node turned out unresolvable, so the
// candidates are others) is dropped, and PostFilter asks on its own.
TEST_F(DefaultPreemptionTest, APredictionThatNoLongerHoldsIsNotUsed) {
  Diagnosis failed = Failed();
  failed.cycle_id = 7;
  std::optional<v1::PreemptionDryRunRequest> predicted = plugin_->PredictDryRun(preemptor_, 7);
  ASSERT_TRUE(predicted.has_value());
  // A scripted answer that would pick node-2, were it used.
  std::map<uint32_t, testing::ScriptedNode> nodes;
  for (const auto& c : predicted->candidates()) {
    if (c.potential_victims(0) == "uid-mid") nodes[c.node_id()].victims = {"uid-mid"};
  }
  failed.dry_run_answer = std::make_shared<const v1::PreemptionDryRunResponse>(
      DryRunAnswer(nodes).preemption_dry_run());
  failed.node_statuses[1].second = MakeSharedStatus(
      sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, "node(s) had untolerated taint"));
  auto [result, status] = plugin_->PostFilter(preemptor_, failed);
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(result.nominated_node_name, "node-1");
  EXPECT_EQ(dry_runs_, 1);

  // Nor is one made for another cycle.
  Diagnosis other = Failed();
  other.cycle_id = 8;
  ASSERT_TRUE(plugin_->PredictDryRun(MakePod("another", 100, 2000), 7).has_value());
  other.dry_run_answer = failed.dry_run_answer;
  plugin_->PostFilter(MakePod("another", 100, 2000), other);
  EXPECT_EQ(dry_runs_, 2);
}

TEST_F(DefaultPreemptionTest, NoDryRunIsPredictedForAPodThatWouldNotPreempt) {
  cache_.UpdateSnapshot(snapshot_);
  v1::Pod never = preemptor_;
  never.set_preemption_policy(v1::NEVER);
  EXPECT_FALSE(plugin_->PredictDryRun(never, 7).has_value());
  v1::Pod nominated = preemptor_;
  nominated.set_nominated_node_name("node-2");
  EXPECT_FALSE(plugin_->PredictDryRun(nominated, 7).has_value());
  // Nobody of lower priority anywhere: nothing to predict.
  EXPECT_FALSE(plugin_->PredictDryRun(MakePod("humble", 5, 2000), 7).has_value());
}

TEST_F(DefaultPreemptionTest, PreemptionPolicyNeverIsNotEligibleAndSaysSo) {
  preemptor_.set_preemption_policy(v1::NEVER);
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  EXPECT_EQ(status.code(), sdk::Code::kUnschedulable);
  EXPECT_EQ(status.Message(), "preemption: not eligible due to preemptionPolicy=Never.");
  EXPECT_EQ(result.nominated_node_name, "");
  EXPECT_EQ(dry_runs_, 0);
  EXPECT_TRUE(sink_.actions.empty());
}

TEST_F(DefaultPreemptionTest, ChoosesTheNodeWithTheLeastImportantVictimAndEvictsAsynchronously) {
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(result.nominated_node_name, "node-1");
  EXPECT_EQ(dry_runs_, 1);
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "node-1");
  // Nothing is sent before the scheduler has requeued the preemptor.
  EXPECT_TRUE(sink_.actions.empty());
  ASSERT_TRUE(result.after_requeue);
  result.after_requeue();
  ASSERT_EQ(sink_.Of(v1::Action::kPatchPodStatus).size(), 1u);
  const v1::Action& patch = sink_.actions[sink_.Of(v1::Action::kPatchPodStatus)[0]];
  EXPECT_EQ(patch.patch_pod_status().pod().uid(), "uid-low");
  ASSERT_EQ(patch.patch_pod_status().conditions_size(), 1);
  EXPECT_EQ(patch.patch_pod_status().conditions(0).type(), "DisruptionTarget");
  EXPECT_EQ(patch.patch_pod_status().conditions(0).reason(), "PreemptionByScheduler");
  EXPECT_EQ(patch.patch_pod_status().conditions(0).message(),
            "default-scheduler: preempting to accommodate a higher priority pod");
  ASSERT_EQ(sink_.Of(v1::Action::kRecordEvent).size(), 1u);
  EXPECT_EQ(sink_.actions[sink_.Of(v1::Action::kRecordEvent)[0]].record_event().reason(), "Preempted");
  EXPECT_TRUE(sink_.Of(v1::Action::kDeletePod).empty());  // After the condition is in place.
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  ASSERT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
  const v1::Action& del = sink_.actions[sink_.Of(v1::Action::kDeletePod)[0]];
  EXPECT_EQ(del.delete_pod().pod().uid(), "uid-low");  // The uid precondition.
  EXPECT_EQ(del.delete_pod().pod().name(), "low");

  // Held while the victim is on its way out.
  EXPECT_TRUE(controller_.InFlight("uid-preemptor"));
  auto [again, held] = plugin_->PostFilter(preemptor_, Failed());
  EXPECT_EQ(held.Message(), "preemption: not eligible due to a terminating pod on the nominated node.");
  EXPECT_TRUE(again.awaiting_victims);  // Its room is on its way (a gang counts it).
  EXPECT_EQ(dry_runs_, 1);

  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::OK);
  EXPECT_TRUE(activated_.empty());  // The deletion event is what counts.
  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_EQ(scheduler_.events.size(), 1u);  // Forwarded to the scheduler.
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
  // Exactly one delete and one condition patch per victim; nothing twice.
  EXPECT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
  EXPECT_EQ(sink_.Of(v1::Action::kPatchPodStatus).size(), 1u);
}

// scheduler_preemption_attempts_total counts every PostFilter call, eligible
// or not; scheduler_preemption_victims the victims of the chosen candidate.
TEST_F(DefaultPreemptionTest, EveryAttemptIsCountedAndTheChosenVictimsObserved) {
  v1::Pod never = preemptor_;
  never.set_preemption_policy(v1::NEVER);
  (void)plugin_->PostFilter(never, Failed());
  EXPECT_EQ(recorder_.attempts, 1);
  EXPECT_TRUE(recorder_.victims.empty());
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(recorder_.attempts, 2);
  EXPECT_TRUE(recorder_.victims.empty());  // Not carried out yet (a gang's may be withdrawn).
  result.after_requeue();
  EXPECT_THAT(recorder_.victims, ElementsAre(1));  // "low" on node-1.
}

// The nodes go to the dry run num_candidates at a time: once a chunk meets
// kube-scheduler's stop rule, the other nodes are neither built nor sent.
TEST_F(DefaultPreemptionTest, NodesGoToTheDryRunOneChunkOfNumCandidatesAtATime) {
  for (int i = 0; i < 20; ++i) {
    const std::string node = absl::StrCat("extra-", i);
    cache_.AddOrUpdateNode(MakeNode(node, 4000));
    Bind(MakePod(absl::StrCat("low-", i), 10, 3000, node));
  }
  DefaultPreemption plugin(DefaultPreemption::Options{.min_candidate_nodes_percentage = 0,
                                                      .min_candidate_nodes_absolute = 5,
                                                      .seed = 1},
                           *framework_, snapshot_, cache_, controller_);
  Diagnosis failed = Failed();
  auto [result, status] = plugin.PostFilter(preemptor_, failed);
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  // 23 nodes, node-3 has no victim; every other one fits: the first chunk of 5
  // nodes with victims is enough.
  EXPECT_EQ(dry_runs_, 1);
  EXPECT_THAT(candidates_per_request_, ElementsAre(5));
}

// A chunk whose nodes all fail leads to the next one; the pod still gets the
// same answer as with every node at once.
TEST_F(DefaultPreemptionTest, AChunkWithoutEnoughCandidatesLeadsToTheNext) {
  ON_CALL(host_, Call(_, _)).WillByDefault(Invoke([this](v1::SchedulerToPlugin m, auto) {
    ++dry_runs_;
    candidates_per_request_.push_back(m.preemption_dry_run().candidates_size());
    std::map<uint32_t, testing::ScriptedNode> nodes;
    for (const auto& c : m.preemption_dry_run().candidates()) {
      // Only node-2 fits (its "mid" pod must go).
      if (c.node_id() == snapshot_.Get("node-2")->id()) {
        nodes[c.node_id()].victims.assign(c.potential_victims().begin(), c.potential_victims().end());
      } else {
        nodes[c.node_id()].rejection = "Insufficient cpu";
      }
    }
    return Answered(DryRunAnswer(nodes));
  }));
  DefaultPreemption plugin(DefaultPreemption::Options{.min_candidate_nodes_percentage = 0,
                                                      .min_candidate_nodes_absolute = 1,
                                                      .seed = 1},
                           *framework_, snapshot_, cache_, controller_);
  auto [result, status] = plugin.PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(result.nominated_node_name, "node-2");
  // One node per request until node-2: node-1 may come first (random offset).
  EXPECT_GE(dry_runs_, 1);
  EXPECT_LE(dry_runs_, 2);
  for (int n : candidates_per_request_) EXPECT_EQ(n, 1);
}

// On a stream of Cluster protocol 2 a victim costs one action: the delete
// carries the DisruptionTarget condition the adapter patches first (and only
// after which it deletes); its result ends the eviction as the delete's did.
TEST_F(DefaultPreemptionTest, WithProtocol2TheDeleteCarriesTheDisruptionTargetInOneAction) {
  sink_.version = 2;
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  result.after_requeue();
  EXPECT_TRUE(sink_.Of(v1::Action::kPatchPodStatus).empty());
  ASSERT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
  const v1::DeletePod& del = sink_.actions[sink_.Of(v1::Action::kDeletePod)[0]].delete_pod();
  EXPECT_EQ(del.pod().uid(), "uid-low");
  ASSERT_TRUE(del.has_disruption_target());
  EXPECT_EQ(del.disruption_target().type(), "DisruptionTarget");
  EXPECT_EQ(del.disruption_target().status(), "True");
  EXPECT_EQ(del.disruption_target().reason(), "PreemptionByScheduler");
  EXPECT_EQ(del.disruption_target().message(), "default-scheduler: preempting to accommodate a higher priority pod");
  ASSERT_EQ(sink_.Of(v1::Action::kRecordEvent).size(), 1u);
  // The victim already gone (the patch found no pod): it counts as deleted.
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::NOT_FOUND);
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_EQ(sink_.actions.size(), 2u);  // Nothing more: no second delete, no patch.
}

TEST_F(DefaultPreemptionTest, WithProtocol2AFailedEvictionClearsTheNomination) {
  sink_.version = 2;
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  result.after_requeue();
  ASSERT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::CONFLICT);
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "");
}

// kube-scheduler's preemption goroutine metrics: one observation per
// preemption once its victims' API calls all returned, "success" (a victim
// found gone counts as deleted), or "error" at the first that failed.
TEST_F(DefaultPreemptionTest, APreemptionsApiCallsAreObservedOnceWhenTheyAllReturned) {
  std::vector<std::string> observed;
  controller_.SetApiCallsObserver([&observed](std::string_view result, absl::Duration took) {
    EXPECT_GE(took, absl::ZeroDuration());
    observed.emplace_back(result);
  });
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  result.after_requeue();
  EXPECT_TRUE(observed.empty());
  // Cluster protocol 1: the DisruptionTarget patch, then the delete.
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  EXPECT_TRUE(observed.empty()) << "the delete is still out";
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::OK);
  EXPECT_THAT(observed, ElementsAre("success"));
  // The deletion event only releases the preemptor: nothing more observed.
  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_THAT(observed, ElementsAre("success"));
}

TEST_F(DefaultPreemptionTest, AFailedEvictionIsObservedAsAnError) {
  std::vector<std::string> observed;
  controller_.SetApiCallsObserver(
      [&observed](std::string_view result, absl::Duration) { observed.emplace_back(result); });
  sink_.version = 2;
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  result.after_requeue();
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::CONFLICT);
  EXPECT_THAT(observed, ElementsAre("error"));
}

TEST_F(DefaultPreemptionTest, AVictimAlreadyGoneCountsAsDeleted) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::NOT_FOUND);
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "node-1");  // The nomination stands.
}

// KEP-4832: the preemptor is held out of the cycles (in the queue, gated by
// DefaultPreemption) before its first action goes out, until its API calls
// returned: then left in the pool ungated while its victims terminate, and
// moved to activeQ when its last victim is gone; released as after a failed
// attempt when an action fails.
class HeldPreemptorTest : public DefaultPreemptionTest {
 protected:
  void SetUp() override {
    DefaultPreemptionTest::SetUp();
    // As SchedulingQueue: Release and Unhold end a hold, and only a hold.
    controller_.SetQueueControl(PreemptionController::QueueControl{
        [this](const std::string& uid, const std::string& message) {
          held_.insert(uid);
          calls_.push_back(absl::StrCat("hold ", uid, " after ", sink_.actions.size(), " actions: ", message));
        },
        [this](const std::string& uid, bool to_active) {
          if (held_.erase(uid) == 0) return false;
          calls_.push_back(absl::StrCat("release ", uid, to_active ? " to activeQ" : " to backoff"));
          return true;
        },
        [this](const std::string& uid) {
          if (held_.erase(uid) > 0) calls_.push_back(absl::StrCat("unhold ", uid));
        }});
    controller_.SetPodLookup([this](std::string_view uid) { return cache_.GetPod(uid) != nullptr; });
  }
  // The preemptor's PostFilter chooses victim "low" on node-1; then a second
  // preemption ("second"), whose cycle ran before it saw the first one's
  // eviction, chooses the same victim.
  void TwoPreemptionsOfTheSameVictim() {
    auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
    ASSERT_TRUE(status.IsSuccess());
    result.after_requeue();
    const std::vector<sdk::PodInfoPtr> victims = {sdk::PodInfo::Create(*cache_.GetPod("uid-low")->pod)};
    controller_.Execute(MakePod("second", 100, 2000), "node-1", victims, {});
  }
  absl::flat_hash_set<std::string> held_;
  std::vector<std::string> calls_;
};

// kube-scheduler holds a preemptor only while its preemption goroutine's API
// calls run: during the victims' grace period an event (room freed on
// another node) may schedule it elsewhere. Podium held it until the last
// victim was gone, so such room went unused for the grace period.
TEST_F(HeldPreemptorTest, HeldUntilItsCallsReturnedThenActivatedWhenTheLastVictimIsGone) {
  PreemptAndCarryOut();
  EXPECT_THAT(calls_, ElementsAre("hold uid-preemptor after 0 actions: "
                                  "waiting for the preemption for this pod to be finished"));
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  EXPECT_EQ(calls_.size(), 1u);  // The delete is still out.
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::OK);
  EXPECT_THAT(calls_, ElementsAre(::testing::StartsWith("hold"), "unhold uid-preemptor"));
  // Its victim still terminating: a cycle now is not eligible to preempt again.
  EXPECT_TRUE(controller_.InFlight("uid-preemptor"));
  auto [again, why] = plugin_->PostFilter(preemptor_, Failed());
  EXPECT_EQ(why.Message(), "preemption: not eligible due to a terminating pod on the nominated node.");
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "node-1");
  EXPECT_TRUE(again.awaiting_victims);
  // Once its nomination is gone (a higher-priority pod took the room), its
  // victims no longer make room for it: a gang would not count it placed.
  const std::string node = nominator_.Clear("uid-preemptor");
  EXPECT_FALSE(plugin_->PostFilter(preemptor_, Failed()).first.awaiting_victims);
  nominator_.Nominate(sdk::PodInfo::Create(preemptor_), node);
  EXPECT_TRUE(activated_.empty());
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));  // Not held: activated.
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
}

// The deletion is seen before the delete's answer: released from its hold
// straight to activeQ, and the answer then changes nothing.
TEST_F(HeldPreemptorTest, AVictimSeenGoneBeforeItsDeleteReturnedReleasesToActiveQ) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_THAT(calls_, ElementsAre(::testing::StartsWith("hold"), "release uid-preemptor to activeQ"));
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::OK);
  EXPECT_EQ(calls_.size(), 2u);
  EXPECT_TRUE(activated_.empty());
}

TEST_F(HeldPreemptorTest, AFailedActionReleasesThePreemptorToBackoff) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::CONFLICT);
  EXPECT_THAT(calls_, ElementsAre(::testing::StartsWith("hold"), "release uid-preemptor to backoff"));
}

// The victim's deletion reached the cache between the cycle and the
// preemption's start: nothing is sent for it, and the preemptor is not left
// held forever waiting for a deletion already seen.
TEST_F(HeldPreemptorTest, AVictimGoneBeforeThePreemptionStartsIsNotWaitedFor) {
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess());
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  Delivered(MakePod("low", 10, 3000, "node-1"));  // Before Execute registered it.
  result.after_requeue();
  EXPECT_TRUE(sink_.Of(v1::Action::kDeletePod).empty());
  EXPECT_TRUE(sink_.Of(v1::Action::kPatchPodStatus).empty());
  EXPECT_THAT(calls_, ElementsAre(::testing::StartsWith("hold"), "release uid-preemptor to activeQ"));
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
}

// Two preemptors chose the same victim (the second one's cycle ran before it
// saw the first one's eviction): both wait for its deletion, which releases
// both; only the first one evicts it (preempt-500 left the first one held
// forever when the second one's claim replaced its own).
TEST_F(HeldPreemptorTest, TwoPreemptionsOfTheSameVictimAreBothReleasedByItsDeletion) {
  ASSERT_NO_FATAL_FAILURE(TwoPreemptionsOfTheSameVictim());
  // As the adapter answers: the first delete removes the victim, any later
  // one finds nothing.
  for (size_t i : sink_.Of(v1::Action::kPatchPodStatus)) sink_.Reply(i, v1::ActionResult::OK);
  const std::vector<size_t> deletes = sink_.Of(v1::Action::kDeletePod);
  for (size_t i = 0; i < deletes.size(); ++i) {
    sink_.Reply(deletes[i], i == 0 ? v1::ActionResult::OK : v1::ActionResult::NOT_FOUND);
  }
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  Delivered(MakePod("low", 10, 3000, "node-1"));
  // The first one's calls returned before the deletion: unheld, then
  // activated. The second one sent none for the victim, whose eviction could
  // still have failed: held until it is gone.
  EXPECT_THAT(calls_, ::testing::UnorderedElementsAre(::testing::StartsWith("hold uid-preemptor"),
                                                      ::testing::StartsWith("hold uid-second"),
                                                      "unhold uid-preemptor",
                                                      "release uid-second to activeQ"));
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_EQ(controller_.NumInFlight(), 0u);
  // One eviction: a patch and a delete, from the first preemption only.
  EXPECT_EQ(sink_.Of(v1::Action::kPatchPodStatus).size(), 1u);
  EXPECT_EQ(deletes.size(), 1u);
}

// The shared victim's eviction fails: the preemption waiting for it without
// having sent anything fails too, instead of waiting forever.
TEST_F(HeldPreemptorTest, AFailedEvictionFailsEveryPreemptionWaitingForThatVictim) {
  ASSERT_NO_FATAL_FAILURE(TwoPreemptionsOfTheSameVictim());
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::CONFLICT);
  EXPECT_THAT(calls_, ::testing::UnorderedElementsAre(::testing::StartsWith("hold uid-preemptor"),
                                                      ::testing::StartsWith("hold uid-second"),
                                                      "release uid-preemptor to backoff",
                                                      "release uid-second to backoff"));
  EXPECT_EQ(controller_.NumInFlight(), 0u);
}

TEST_F(DefaultPreemptionTest, AVictimWhoseUidChangedIsNotDeletedAndTheNominationIsCleared) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::CONFLICT);
  EXPECT_TRUE(sink_.Of(v1::Action::kDeletePod).empty());
  EXPECT_TRUE(activated_.empty());
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "");
  const auto patches = sink_.Of(v1::Action::kPatchPodStatus);
  ASSERT_EQ(patches.size(), 2u);
  const v1::PatchPodStatus& clear = sink_.actions[patches[1]].patch_pod_status();
  EXPECT_EQ(clear.pod().uid(), "uid-preemptor");
  EXPECT_TRUE(clear.has_nominated_node_name());
  EXPECT_EQ(clear.nominated_node_name(), "");
}

// The preemptor's retry after a failed eviction can come before the cache
// has seen the victim go (backoffQ is popped at once when activeQ is empty;
// podium-sim sends the replacement's events with the failed call's answer,
// on another thread). Before, that retry chose the same stale victim and sent
// a second patch, refused again (integration.preemption.a_victim_whose_uid_
// changed_is_not_deleted failed so under load). Now it sends nothing, is not
// reported, and waits for the deletion event; once seen, the victim is no
// longer marked.
TEST_F(DefaultPreemptionTest, AVictimTheApiNoLongerHasIsNotChosenAgainBeforeTheCacheSeesItGo) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::CONFLICT);
  EXPECT_TRUE(controller_.GoneFromApi("uid-low"));
  const size_t sent = sink_.actions.size();
  {
    auto [retry, status] = plugin_->PostFilter(preemptor_, Failed());  // The cache still has "low".
    EXPECT_TRUE(status.IsRejected());
    EXPECT_THAT(status.Message(), ::testing::HasSubstr(kVictimsGoneFromApi));
    EXPECT_TRUE(retry.retry_unreported);
    EXPECT_FALSE(retry.after_requeue);  // No activation: the deletion event moves it.
    EXPECT_EQ(retry.nominated_node_name, "");
  }
  EXPECT_EQ(sink_.actions.size(), sent);
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "");
  EXPECT_TRUE(activated_.empty());

  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_FALSE(controller_.GoneFromApi("uid-low"));
}

// A delete that finds no pod counts the victim as deleted (the preemptor is
// activated, its nomination stands); while the cache still shows it, the
// retry waits for its deletion event rather than deleting it again.
TEST_F(DefaultPreemptionTest, AVictimDeleteThatFindsNothingIsNotSentAgainBeforeTheCacheSeesItGo) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::NOT_FOUND);
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  const size_t sent = sink_.actions.size();
  auto [retry, status] = plugin_->PostFilter(preemptor_, Failed());
  EXPECT_THAT(status.Message(), ::testing::HasSubstr(kVictimsGoneFromApi));
  EXPECT_FALSE(retry.after_requeue);
  EXPECT_EQ(sink_.actions.size(), sent);
}

TEST_F(DefaultPreemptionTest, AnAdapterThatGoesAwayClearsTheNominationAndNothingIsSentTwice) {
  PreemptAndCarryOut();
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  sink_.Reply(sink_.Of(v1::Action::kDeletePod)[0], v1::ActionResult::UNAVAILABLE);
  EXPECT_TRUE(activated_.empty());
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "");
  // The victim's deletion seen after the relist changes nothing more.
  const size_t sent = sink_.actions.size();
  Delivered(MakePod("low", 10, 3000, "node-1"));
  EXPECT_TRUE(activated_.empty());
  EXPECT_EQ(sink_.actions.size(), sent);
  EXPECT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
}

// kube-scheduler: "If the victim is a WaitingPod, send a reject message to the
// PermitPlugin. Otherwise we should delete the victim."
TEST_F(DefaultPreemptionTest, AVictimWaitingAtPermitIsRejectedThereNotDeletedThroughTheApi) {
  // node-1's low pod goes away; an assumed pod waits at Permit there instead,
  // and another assumed pod on node-2, past Permit (binding), is left be.
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  ASSERT_TRUE(cache_.RemovePod("uid-mid").ok());
  ASSERT_TRUE(cache_.AssumePod(sdk::PodInfo::Create(MakePod("waiting", 10, 3000)), "node-1").ok());
  ASSERT_TRUE(cache_.AssumePod(sdk::PodInfo::Create(MakePod("binding", 10, 3000)), "node-2").ok());
  std::vector<std::string> rejected;
  std::vector<std::function<void()>> releases;
  controller_.SetWaitingPods(PreemptionController::WaitingPods{
      [](std::string_view uid) { return uid == "uid-waiting"; },
      [&](std::string_view uid, const std::string& plugin, const std::string& message, std::function<void()> released) {
        if (uid != "uid-waiting") return false;
        rejected.push_back(absl::StrCat(std::string(uid), " by ", plugin, ": ", message));
        releases.push_back(std::move(released));
        return true;
      }});
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  EXPECT_EQ(result.nominated_node_name, "node-1");  // node-2's assumed pod is no victim.
  result.after_requeue();
  EXPECT_THAT(rejected, ElementsAre("uid-waiting by DefaultPreemption: preempted"));
  // No condition patch, no delete: the pod is not bound, the API has nothing to do.
  EXPECT_TRUE(sink_.Of(v1::Action::kDeletePod).empty());
  EXPECT_TRUE(sink_.Of(v1::Action::kPatchPodStatus).empty());
  ASSERT_EQ(sink_.Of(v1::Action::kRecordEvent).size(), 1u);
  EXPECT_EQ(sink_.actions[sink_.Of(v1::Action::kRecordEvent)[0]].record_event().regarding().uid(), "uid-waiting");
  // Held until the rejected pod is released (unreserved, forgotten).
  EXPECT_TRUE(controller_.InFlight("uid-preemptor"));
  EXPECT_TRUE(activated_.empty());
  ASSERT_EQ(releases.size(), 1u);
  releases[0]();
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "node-1");
}

TEST_F(DefaultPreemptionTest, AVictimThatStoppedWaitingMeanwhileIsDeletedThroughTheApi) {
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  ASSERT_TRUE(cache_.AssumePod(sdk::PodInfo::Create(MakePod("waiting", 10, 3000)), "node-1").ok());
  bool asked = false;
  controller_.SetWaitingPods(PreemptionController::WaitingPods{
      [](std::string_view uid) { return uid == "uid-waiting"; },
      // Allowed between the choice and the rejection: no longer waiting.
      [&](std::string_view, const std::string&, const std::string&, std::function<void()>) {
        asked = true;
        return false;
      }});
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  ASSERT_EQ(result.nominated_node_name, "node-1");
  result.after_requeue();
  EXPECT_TRUE(asked);
  ASSERT_EQ(sink_.Of(v1::Action::kPatchPodStatus).size(), 1u);
  sink_.Reply(sink_.Of(v1::Action::kPatchPodStatus)[0], v1::ActionResult::OK);
  ASSERT_EQ(sink_.Of(v1::Action::kDeletePod).size(), 1u);
  EXPECT_EQ(sink_.actions[sink_.Of(v1::Action::kDeletePod)[0]].delete_pod().pod().uid(), "uid-waiting");
}

// After the adapter came back, a victim of the earlier attempt may already be
// terminating: it is chosen again but not deleted twice; its deletion counts.
TEST_F(DefaultPreemptionTest, AVictimAlreadyTerminatingIsNotDeletedAgain) {
  v1::Pod low = MakePod("low", 10, 3000, "node-1");
  low.mutable_meta()->set_deletion_timestamp_us(1);
  Bind(low);
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess()) << status.Message();
  ASSERT_EQ(result.nominated_node_name, "node-1");
  result.after_requeue();
  EXPECT_TRUE(sink_.Of(v1::Action::kDeletePod).empty());
  EXPECT_TRUE(sink_.Of(v1::Action::kPatchPodStatus).empty());
  EXPECT_TRUE(sink_.Of(v1::Action::kRecordEvent).empty());
  EXPECT_TRUE(controller_.InFlight("uid-preemptor"));
  Delivered(low);
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
}

// The cycle's snapshot predates the deletion of the victims of this pod's
// earlier preemption (it finished while the filters ran): they must not be
// chosen and patched again; the pod is retried at once on the current state.
TEST_F(DefaultPreemptionTest, VictimsAlreadyGoneFromTheCacheAreNotPreemptedAgain) {
  Diagnosis stale = Failed();  // The snapshot still has "low" on node-1.
  ASSERT_TRUE(cache_.RemovePod("uid-low").ok());
  auto [result, status] = plugin_->PostFilter(preemptor_, stale);
  EXPECT_EQ(status.code(), sdk::Code::kUnschedulable);
  EXPECT_EQ(status.Message(), "preemption: victims already gone; trying again on the current state.");
  EXPECT_EQ(result.nominated_node_name, "");
  EXPECT_EQ(nominator_.NominatedNode("uid-preemptor"), "");
  EXPECT_TRUE(result.retry_unreported);  // The scheduler patches no PodScheduled for it.
  ASSERT_TRUE(result.after_requeue);
  result.after_requeue();
  EXPECT_TRUE(sink_.actions.empty());  // No patch, no delete, no event.
  EXPECT_THAT(activated_, ElementsAre("uid-preemptor"));
  EXPECT_FALSE(controller_.InFlight("uid-preemptor"));
}

TEST_F(DefaultPreemptionTest, NoVictimAnywhereGivesKubeSchedulersMessage) {
  ON_CALL(host_, Call(_, _)).WillByDefault(Invoke([this](v1::SchedulerToPlugin m, auto) {
    ++dry_runs_;
    std::map<uint32_t, testing::ScriptedNode> nodes;
    for (const auto& c : m.preemption_dry_run().candidates()) nodes[c.node_id()].rejection = "Insufficient cpu";
    return Answered(DryRunAnswer(nodes));
  }));
  Diagnosis d = Failed();
  d.node_statuses[1].second =
      MakeSharedStatus(sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, "node(s) had untolerated taint"));
  auto [result, status] = plugin_->PostFilter(preemptor_, d);
  EXPECT_EQ(status.code(), sdk::Code::kUnschedulable);
  // node-1 fails the dry run, node-2 cannot be helped, node-3 has nothing lower.
  EXPECT_EQ(status.Message(),
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 1 No preemption victims found for incoming "
            "pod, 1 Preemption is not helpful for scheduling.");
  EXPECT_EQ(result.nominated_node_name, "");
  EXPECT_TRUE(sink_.actions.empty());
}

TEST_F(DefaultPreemptionTest, AHigherPriorityPodTakesTheRoomOfALowerNominatedOne) {
  v1::Pod first = MakePod("first", 60, 2000);
  nominator_.Nominate(sdk::PodInfo::Create(first), "node-1");
  auto [result, status] = plugin_->PostFilter(preemptor_, Failed());
  ASSERT_TRUE(status.IsSuccess());
  ASSERT_EQ(result.nominated_node_name, "node-1");
  result.after_requeue();
  EXPECT_EQ(nominator_.NominatedNode("uid-first"), "");
  bool cleared = false;
  for (size_t i : sink_.Of(v1::Action::kPatchPodStatus)) {
    const auto& p = sink_.actions[i].patch_pod_status();
    cleared |= p.pod().uid() == "uid-first" && p.has_nominated_node_name() && p.nominated_node_name().empty();
  }
  EXPECT_TRUE(cleared);
}

TEST_F(DefaultPreemptionTest, NominationsFollowThePodsEvents) {
  v1::Pod pending = MakePod("pending", 60, 1000);
  pending.set_nominated_node_name("node-2");
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  *e.mutable_pod() = pending;
  controller_.OnObjectEvent(e);
  EXPECT_EQ(nominator_.NominatedNode("uid-pending"), "node-2");
  // Counted for pods of equal or lower priority only.
  EXPECT_EQ(nominator_.NominatedPodsFor(MakePod("lower", 10, 1), "node-2").size(), 1u);
  EXPECT_EQ(nominator_.NominatedPodsFor(MakePod("higher", 100, 1), "node-2").size(), 0u);
  pending.set_node_name("node-3");  // Bound elsewhere.
  *e.mutable_pod() = pending;
  controller_.OnObjectEvent(e);
  EXPECT_EQ(nominator_.NominatedNode("uid-pending"), "");
}

TEST(PreemptionOptionsTest, OnByDefaultDisabledByConfigArgsChecked) {
  ProfileConfig profile;
  auto on = PreemptionOptionsFor(profile, 0);
  ASSERT_TRUE(on.ok());
  ASSERT_TRUE(on->has_value());
  EXPECT_EQ((*on)->min_candidate_nodes_percentage, 10);
  EXPECT_EQ((*on)->min_candidate_nodes_absolute, 100);

  ProfileConfig off;
  off.per_point["postFilter"].disabled = {"DefaultPreemption"};
  EXPECT_FALSE(PreemptionOptionsFor(off, 0)->has_value());
  ProfileConfig all_off;
  all_off.multi_point.disabled = {"*"};
  EXPECT_FALSE(PreemptionOptionsFor(all_off, 0)->has_value());

  ProfileConfig args;
  args.plugin_args["DefaultPreemption"] = boost::json::object{{"minCandidateNodesPercentage", 40},
                                                              {"minCandidateNodesAbsolute", 5}};
  auto with_args = PreemptionOptionsFor(args, 1);
  ASSERT_TRUE(with_args.ok());
  EXPECT_EQ((*with_args)->min_candidate_nodes_percentage, 40);
  EXPECT_EQ((*with_args)->min_candidate_nodes_absolute, 5);

  args.plugin_args["DefaultPreemption"] = boost::json::object{{"minCandidateNodesPercentage", 0},
                                                              {"minCandidateNodesAbsolute", 0}};
  EXPECT_EQ(PreemptionOptionsFor(args, 1).status().message(),
            "profiles[1].pluginConfig[DefaultPreemption].args.minCandidateNodesAbsolute: cannot be zero at the "
            "same time as minCandidateNodesPercentage");
  args.plugin_args["DefaultPreemption"] = boost::json::object{{"minCandidates", 1}};
  EXPECT_EQ(PreemptionOptionsFor(args, 1).status().message(),
            "profiles[1].pluginConfig[DefaultPreemption].args.minCandidates: unknown field");
}


// kube-scheduler's assume drops a pod's nomination and ignores updates of
// assumed pods: an assumed pod counts on its node once. Before, the event of
// the nomination patch, arriving after the assume, nominated it again, and a
// pod of equal priority saw the node full twice over (preempt-500's last
// preemptors, sharing a node, ended unschedulable).
TEST(NominatorTest, AnAssumedPodIsNotNominatedAgainByALateEvent) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("node-1", 4000));
  Nominator nominator(&cache);
  v1::Pod preemptor = MakePod("preemptor", 1000, 2000);
  preemptor.set_nominated_node_name("node-1");
  nominator.OnPodEvent(preemptor, /*deleted=*/false);
  ASSERT_EQ(nominator.NominatedNode("uid-preemptor"), "node-1");
  v1::Pod other = MakePod("other", 1000, 2000);
  ASSERT_EQ(nominator.NominatedPodsFor(other, "node-1").size(), 1u);

  // The scheduler assumes it (its assumed hook clears the nomination) ...
  v1::Pod assumed = preemptor;
  assumed.set_node_name("node-1");
  ASSERT_TRUE(cache.AssumePod(sdk::PodInfo::Create(assumed), "node-1").ok());
  (void)nominator.Clear("uid-preemptor");
  // ... and then the nomination patch's event arrives, still unassigned.
  nominator.OnPodEvent(preemptor, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-preemptor"), "");
  EXPECT_TRUE(nominator.NominatedPodsFor(other, "node-1").empty());

  // Forgotten (its binding failed), a later event nominates it again.
  ASSERT_TRUE(cache.ForgetPod("uid-preemptor").ok());
  nominator.OnPodEvent(preemptor, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-preemptor"), "node-1");
}

// kube-scheduler's nominator, on an update: the scheduler's own nomination is
// kept while events still lack the field (its patch not seen yet), but a
// nomination an event carried is dropped when a later event no longer has it
// (another component removed status.nominatedNodeName). Before, Podium kept
// counting the pod on the node after the field was gone.
TEST(NominatorTest, ANominatedNodeNameRemovedFromThePodDropsTheNomination) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("node-1", 4000));
  Nominator nominator(&cache);
  v1::Pod pod = MakePod("hinted", 1000, 2000);
  const v1::Pod other = MakePod("other", 1000, 2000);

  // The scheduler nominates it; an unrelated update arrives before the patch.
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-1");
  nominator.OnPodEvent(pod, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-hinted"), "node-1");

  // The patch is seen, then the field is removed.
  pod.set_nominated_node_name("node-1");
  nominator.OnPodEvent(pod, /*deleted=*/false);
  ASSERT_EQ(nominator.NominatedPodsFor(other, "node-1").size(), 1u);
  pod.clear_nominated_node_name();
  const uint64_t before = nominator.generation();
  nominator.OnPodEvent(pod, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-hinted"), "");
  EXPECT_TRUE(nominator.NominatedPodsFor(other, "node-1").empty());
  EXPECT_GT(nominator.generation(), before);

  // An external hint, then the scheduler moves the nomination: the API still
  // has the old node, so an event without the field keeps the new one.
  pod.set_nominated_node_name("node-1");
  nominator.OnPodEvent(pod, /*deleted=*/false);
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-2");
  pod.clear_nominated_node_name();
  nominator.OnPodEvent(pod, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-hinted"), "node-2");
}


// A gang member's tentative nomination (its preemption carried out only if
// the whole gang can be placed) is undone to what the pod had before: none,
// or an earlier node; but an event that changed the nomination meanwhile has
// the newer word.
TEST(NominatorTest, ATentativeNominationIsRestoredUnlessAnEventChangedIt) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("node-1", 4000));
  cache.AddOrUpdateNode(MakeNode("node-2", 4000));
  Nominator nominator(&cache);
  v1::Pod pod = MakePod("member", 1000, 2000);
  const v1::Pod other = MakePod("other", 1000, 2000);

  // None before: none after, and the node no longer counts it.
  Nominator::Saved none = nominator.Save("uid-member");
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-1");
  ASSERT_EQ(nominator.NominatedPodsFor(other, "node-1").size(), 1u);
  const uint64_t before = nominator.generation();
  nominator.Restore(none, "node-1");
  EXPECT_EQ(nominator.NominatedNode("uid-member"), "");
  EXPECT_TRUE(nominator.NominatedPodsFor(other, "node-1").empty());
  EXPECT_GT(nominator.generation(), before);

  // An external hint to node-2 before: back to node-2, still from the API.
  pod.set_nominated_node_name("node-2");
  nominator.OnPodEvent(pod, /*deleted=*/false);
  Nominator::Saved hinted = nominator.Save("uid-member");
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-1");
  nominator.Restore(hinted, "node-1");
  EXPECT_EQ(nominator.NominatedNode("uid-member"), "node-2");
  EXPECT_EQ(nominator.NominatedPodsFor(other, "node-2").size(), 1u);
  EXPECT_TRUE(nominator.NominatedPodsFor(other, "node-1").empty());
  pod.clear_nominated_node_name();
  nominator.OnPodEvent(pod, /*deleted=*/false);  // The hint removed: dropped, as it came from the API.
  EXPECT_EQ(nominator.NominatedNode("uid-member"), "");

  // Deleted between the tentative nomination and its undoing: not put back.
  Nominator::Saved again = nominator.Save("uid-member");
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-1");
  nominator.OnPodEvent(pod, /*deleted=*/true);
  nominator.Restore(again, "node-1");
  EXPECT_EQ(nominator.NominatedNode("uid-member"), "");
  // Moved by another decision meanwhile: left where it is.
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-1");
  nominator.Nominate(sdk::PodInfo::Create(pod), "node-2");
  nominator.Restore(none, "node-1");
  EXPECT_EQ(nominator.NominatedNode("uid-member"), "node-2");
}

// The per-node sums batching fingerprints nominations with (ForEachKey) and
// the per-node lists (LowerPriorityNominated, NominatedPodsFor) follow every
// change: a nomination added, moved to another node, updated in place (a new
// resourceVersion), cleared; the pod asking is never counted, nor a pod of
// lower priority. The sums are kept with the nominations instead of read from
// each pod on every walk (preempt-500 walked every nomination per cycle).
TEST(NominatorTest, PerNodeKeySumsFollowEveryChange) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("node-1", 4000));
  cache.AddOrUpdateNode(MakeNode("node-2", 4000));
  Snapshot snapshot;
  cache.UpdateSnapshot(snapshot);
  const uint32_t id1 = snapshot.Get("node-1")->id();
  const uint32_t id2 = snapshot.Get("node-2")->id();
  Nominator nominator;
  auto nominated = [](const std::string& name, int32_t priority, const std::string& node, const std::string& rv) {
    v1::Pod pod = MakePod(name, priority, 1000);
    pod.mutable_meta()->set_resource_version(rv);
    pod.set_nominated_node_name(node);
    return pod;
  };
  auto key = [](const std::string& name, const std::string& rv) { return NominationKey("uid-" + name, rv); };
  auto sums = [&](const v1::Pod& asking) {
    std::map<uint32_t, uint64_t> out;
    int visits = 0;
    nominator.ForEachKey(asking, snapshot, [&](uint32_t node, uint64_t sum) {
      out[node] += sum;
      ++visits;
    });
    EXPECT_EQ(visits, static_cast<int>(out.size())) << "one visit per node";
    return out;
  };
  v1::Pod a = nominated("a", 1000, "node-1", "1");
  v1::Pod b = nominated("b", 1000, "node-1", "1");
  v1::Pod low = nominated("low", 10, "node-1", "1");
  v1::Pod d = nominated("d", 1000, "node-2", "1");
  v1::Pod gone = nominated("gone", 1000, "node-9", "1");  // A node the snapshot lacks.
  nominator.Nominate(sdk::PodInfo::Create(a), "node-1");  // The scheduler's own; its patch not seen.
  for (const v1::Pod* p : {&b, &low, &d, &gone}) nominator.OnPodEvent(*p, /*deleted=*/false);
  const v1::Pod asking = MakePod("asking", 500, 1000);
  EXPECT_EQ(sums(asking), (std::map<uint32_t, uint64_t>{{id1, key("a", "1") + key("b", "1")}, {id2, key("d", "1")}}));
  // The pod itself is not counted; a higher-priority pod counts nothing here.
  EXPECT_EQ(sums(a), (std::map<uint32_t, uint64_t>{{id1, key("b", "1")}, {id2, key("d", "1")}}));
  EXPECT_TRUE(sums(MakePod("top", 2000, 1000)).empty());
  // Lower priority pods count for a pod at their priority or below.
  EXPECT_EQ(sums(MakePod("lowest", 1, 1000)),
            (std::map<uint32_t, uint64_t>{{id1, key("a", "1") + key("b", "1") + key("low", "1")},
                                          {id2, key("d", "1")}}));

  // b moves to node-2; a is updated in place (the scheduler's own
  // nomination, an event without nominatedNodeName from before its patch,
  // a new label); d is cleared.
  nominator.OnPodEvent(nominated("b", 1000, "node-2", "2"), /*deleted=*/false);
  v1::Pod a2 = a;
  a2.mutable_meta()->set_resource_version("3");
  (*a2.mutable_meta()->mutable_labels())["tier"] = "front";
  a2.clear_nominated_node_name();
  nominator.OnPodEvent(a2, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-a"), "node-1");
  nominator.OnPodEvent(d, /*deleted=*/true);
  EXPECT_EQ(sums(asking), (std::map<uint32_t, uint64_t>{{id1, key("a", "3")}, {id2, key("b", "2")}}));

  // The per-node lists moved with them.
  auto uids = [](const std::vector<sdk::PodInfoPtr>& pods) {
    std::vector<std::string> out;
    for (const auto& p : pods) out.push_back(p->uid());
    std::sort(out.begin(), out.end());
    return out;
  };
  EXPECT_THAT(uids(nominator.NominatedPodsFor(asking, "node-1")), ElementsAre("uid-a"));
  EXPECT_THAT(uids(nominator.NominatedPodsFor(asking, "node-2")), ElementsAre("uid-b"));
  EXPECT_THAT(uids(nominator.NominatedPodsFor(asking, "")), ElementsAre("uid-a", "uid-b", "uid-gone"));
  EXPECT_THAT(uids(nominator.LowerPriorityNominated(MakePod("top", 2000, 1000), "node-1")),
              ElementsAre("uid-a", "uid-low"));
  EXPECT_THAT(uids(nominator.LowerPriorityNominated(MakePod("top", 2000, 1000), "node-2")), ElementsAre("uid-b"));
  (void)nominator.Clear("uid-a");
  (void)nominator.Clear("uid-low");
  EXPECT_TRUE(nominator.LowerPriorityNominated(MakePod("top", 2000, 1000), "node-1").empty());
  EXPECT_EQ(sums(asking), (std::map<uint32_t, uint64_t>{{id2, key("b", "2")}}));
  EXPECT_EQ(nominator.size(), 2u);
  // What Admin DumpCache lists: every nomination by node, whatever its
  // priority; a cleared one is gone, node-1 with it.
  nominator.OnPodEvent(low, /*deleted=*/false);
  std::map<std::string, std::vector<std::string>> by_node;
  for (const auto& [node, refs] : nominator.ByNode()) {
    for (const v1::ObjectRef& r : refs) by_node[node].push_back(r.kind() + " " + r.namespace_() + "/" + r.name());
  }
  EXPECT_EQ(by_node, (std::map<std::string, std::vector<std::string>>{
                         {"node-1", {"Pod default/low"}}, {"node-2", {"Pod default/b"}}, {"node-9", {"Pod default/gone"}}}));
}


// The event of the scheduler's own nomination patch brings the nominated pod
// back with a new resourceVersion, the PodScheduled condition and
// status.nominatedNodeName: it counts the same on its node, so nothing
// changes (no generation bump, no new key for batching's fingerprints, no
// mirror delta). Before, each such event bumped the generation on the event
// thread and dropped the kept failure of a cycle it overlapped. A change that
// counts (the requests) or another node still does.
TEST(NominatorTest, ItsOwnStatusPatchLeavesANominationAsItIs) {
  Cache cache;
  cache.AddOrUpdateNode(MakeNode("node-1", 4000));
  cache.AddOrUpdateNode(MakeNode("node-2", 4000));
  Snapshot snapshot;
  cache.UpdateSnapshot(snapshot);
  Nominator nominator(&cache);
  auto sums = [&] {
    std::map<uint32_t, uint64_t> out;
    nominator.ForEachKey(MakePod("asking", 1, 100), snapshot,
                         [&](uint32_t node, uint64_t sum) { out[node] += sum; });
    return out;
  };
  v1::Pod preemptor = MakePod("preemptor", 1000, 2000);
  preemptor.mutable_meta()->set_resource_version("7");
  // PostFilter's nomination, from the pod as the cycle saw it.
  nominator.Nominate(sdk::PodInfo::Create(preemptor), "node-1");
  const uint64_t generation = nominator.generation();
  const auto before = sums();

  // An event from before the nomination patch (the condition patch's):
  // without status.nominatedNodeName.
  v1::Pod patched = preemptor;
  patched.mutable_meta()->set_resource_version("8");
  auto* c = patched.add_conditions();
  c->set_type("PodScheduled");
  c->set_status("False");
  c->set_reason("Unschedulable");
  nominator.OnPodEvent(patched, /*deleted=*/false);
  EXPECT_EQ(nominator.generation(), generation);
  EXPECT_EQ(sums(), before);
  EXPECT_EQ(nominator.NominatedNode("uid-preemptor"), "node-1");
  // The nomination patch's event.
  patched.set_nominated_node_name("node-1");
  patched.mutable_meta()->set_resource_version("9");
  nominator.OnPodEvent(patched, /*deleted=*/false);
  EXPECT_EQ(nominator.generation(), generation);
  EXPECT_EQ(sums(), before);
  EXPECT_EQ(nominator.NominatedNode("uid-preemptor"), "node-1");

  // Its requests changed: it counts differently on the same node.
  v1::Pod resized = patched;
  resized.mutable_meta()->set_resource_version("10");
  resized.mutable_containers(0)->mutable_requests()->set_milli_cpu(3000);
  nominator.OnPodEvent(resized, /*deleted=*/false);
  EXPECT_GT(nominator.generation(), generation);
  EXPECT_NE(sums(), before);
  ASSERT_EQ(nominator.NominatedPodsFor(MakePod("asking", 1, 100), "node-1").size(), 1u);
  EXPECT_EQ(nominator.NominatedPodsFor(MakePod("asking", 1, 100), "node-1")[0]->pod->containers(0).requests().milli_cpu(),
            3000);
  // Another node: moved.
  const uint64_t resized_generation = nominator.generation();
  resized.set_nominated_node_name("node-2");
  nominator.OnPodEvent(resized, /*deleted=*/false);
  EXPECT_GT(nominator.generation(), resized_generation);
  EXPECT_EQ(nominator.NominatedNode("uid-preemptor"), "node-2");
}

TEST(NominatorTest, ItsChangeLogNamesTheNodesEveryChangeTouched) {
  Nominator nominator;
  auto changed_since = [&](uint64_t since, int32_t priority = 0) -> std::optional<std::set<std::string>> {
    std::set<std::string> nodes;
    std::optional<uint64_t> upto =
        nominator.ChangedNodesSince(since, priority, [&](std::string_view node) { nodes.emplace(node); });
    if (!upto) return std::nullopt;
    EXPECT_EQ(*upto, nominator.generation());
    return nodes;
  };
  const uint64_t start = nominator.generation();
  EXPECT_EQ(changed_since(start), std::set<std::string>{});
  v1::Pod a = MakePod("a", 1000, 2000);
  nominator.Nominate(sdk::PodInfo::Create(a), "node-1");
  const uint64_t after_a = nominator.generation();
  EXPECT_EQ(changed_since(start), std::set<std::string>{"node-1"});
  EXPECT_EQ(changed_since(after_a), std::set<std::string>{});
  // Moved: both nodes.
  nominator.Nominate(sdk::PodInfo::Create(a), "node-2");
  EXPECT_EQ(changed_since(after_a), (std::set<std::string>{"node-1", "node-2"}));
  const uint64_t moved = nominator.generation();
  // The same pod to the same node, counting the same: no change at all.
  nominator.Nominate(sdk::PodInfo::Create(a), "node-2");
  EXPECT_EQ(nominator.generation(), moved);
  // Updated in place (it counts differently), then cleared by its binding.
  v1::Pod bigger = a;
  bigger.mutable_containers(0)->mutable_requests()->set_milli_cpu(3000);
  nominator.OnPodEvent(bigger, /*deleted=*/false);
  EXPECT_EQ(changed_since(moved), std::set<std::string>{"node-2"});
  const uint64_t updated = nominator.generation();
  v1::Pod bound = bigger;
  bound.set_node_name("node-5");
  nominator.OnPodEvent(bound, /*deleted=*/false);
  EXPECT_EQ(nominator.NominatedNode("uid-a"), "");
  EXPECT_EQ(changed_since(updated), std::set<std::string>{"node-2"});
  // Only what a pod of a given priority counts: a lower-priority nomination
  // is no change to a higher-priority pod.
  const uint64_t cleared = nominator.generation();
  nominator.Nominate(sdk::PodInfo::Create(MakePod("low", 10, 100)), "node-3");
  EXPECT_EQ(changed_since(cleared, /*priority=*/1000), std::set<std::string>{});
  EXPECT_EQ(changed_since(cleared, /*priority=*/10), std::set<std::string>{"node-3"});
  // A generation from the future, and one the bounded log no longer
  // reaches back to: unknown, never an empty answer.
  EXPECT_EQ(changed_since(nominator.generation() + 1), std::nullopt);
  const uint64_t old = nominator.generation();
  for (size_t i = 0; i <= Nominator::kMaxChangeLog; ++i) {
    nominator.Nominate(sdk::PodInfo::Create(MakePod(absl::StrCat("p", i), 1000, 100)), absl::StrCat("node-", i % 7));
  }
  EXPECT_EQ(changed_since(old), std::nullopt);
  EXPECT_EQ(changed_since(nominator.generation() - 1)->size(), 1u);
}

}  // namespace
}  // namespace podium::scheduler::preemption
