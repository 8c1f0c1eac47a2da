#include "framework/queueing_hints.h"

#include <map>
#include <string>

#include "absl/strings/str_cat.h"

#include "framework/mock_plugin_process.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

using ::testing::_;
using ::testing::Invoke;

v1::Pod PodNamed(const std::string& name) {
  v1::Pod pod;
  pod.mutable_meta()->set_name(name);
  return pod;
}

v1::ClusterEvent NodeAdded() {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(v1::ADD);
  return e;
}

TEST(RemoteQueueingHintEvaluator, OneRequestPerProcessCarryingEveryCandidate) {
  MockPluginProcess host("host");
  MockPluginProcess py("python");
  RemoteQueueingHintEvaluator evaluator({{"Fit", &host}, {"Affinity", &host}, {"Zone", &py}});
  const v1::Pod a = PodNamed("a"), b = PodNamed("b"), c = PodNamed("c");
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, std::optional<uint64_t> seq) {
    EXPECT_FALSE(seq.has_value());  // Hints carry no state delta.
    EXPECT_EQ(req.queueing_hint().event().resource(), v1::NODE);
    v1::PluginToScheduler answer;
    for (const auto& q : req.queueing_hint().queries()) {
      auto* h = answer.mutable_queueing_hint()->add_answers();
      h->set_plugin(q.plugin());
      // Fit says Queue only for pod "b"; Affinity never.
      for (const auto& pod : q.pods()) h->add_queue(q.plugin() == "Fit" && pod.meta().name() == "b");
    }
    EXPECT_EQ(req.queueing_hint().queries_size(), 2);
    return Answered(answer);
  }));
  EXPECT_CALL(py, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    v1::PluginToScheduler answer;
    auto* h = answer.mutable_queueing_hint()->add_answers();
    h->set_plugin("Zone");
    EXPECT_EQ(req.queueing_hint().queries(0).pods_size(), 1);
    h->add_queue(true);
    return Answered(answer);
  }));
  const std::vector<bool> queue =
      evaluator.Evaluate(NodeAdded(), {{&a, {"Fit", "Affinity"}}, {&b, {"Fit"}}, {&c, {"Zone"}}});
  EXPECT_THAT(queue, testing::ElementsAre(false, true, true));
}

TEST(RemoteQueueingHintEvaluator, AFailedOrMalformedAnswerRequeues) {
  MockPluginProcess host("host");
  RemoteQueueingHintEvaluator evaluator({{"Fit", &host}});
  const v1::Pod a = PodNamed("a");
  EXPECT_CALL(host, Call(_, _))
      .WillOnce(Invoke([](auto, auto) { return Answered(absl::DeadlineExceededError("slow")); }))
      .WillOnce(Invoke([](auto, auto) {
        v1::PluginToScheduler answer;
        answer.mutable_queueing_hint()->add_answers()->set_plugin("Fit");  // No verdicts.
        return Answered(answer);
      }));
  EXPECT_THAT(evaluator.Evaluate(NodeAdded(), {{&a, {"Fit"}}}), testing::ElementsAre(true));
  EXPECT_THAT(evaluator.Evaluate(NodeAdded(), {{&a, {"Fit"}}}), testing::ElementsAre(true));
  EXPECT_EQ(host.invalid_answers, 1);
}

// scheduler_queueing_hint_execution_duration_seconds: every hint asked is
// observed once, by plugin and what it said (Error when it could not answer).
TEST(RemoteQueueingHintEvaluator, EveryHintIsObservedByPluginAndVerdict) {
  MockPluginProcess host("host");
  std::map<std::string, size_t> observed;
  RemoteQueueingHintEvaluator evaluator(
      {{"Fit", &host}, {"Affinity", &host}},
      [&](std::string_view plugin, const v1::ClusterEvent& event, std::string_view hint, absl::Duration per_hint,
          size_t count) {
        EXPECT_EQ(event.resource(), v1::NODE);
        EXPECT_GE(per_hint, absl::ZeroDuration());
        observed[std::string(plugin) + "/" + std::string(hint)] += count;
      });
  const v1::Pod a = PodNamed("a"), b = PodNamed("b"), c = PodNamed("c");
  EXPECT_CALL(host, Call(_, _)).WillOnce(Invoke([](v1::SchedulerToPlugin req, auto) {
    v1::PluginToScheduler answer;
    for (const auto& q : req.queueing_hint().queries()) {
      if (q.plugin() != "Fit") continue;  // Affinity's answer is missing.
      auto* h = answer.mutable_queueing_hint()->add_answers();
      h->set_plugin("Fit");
      for (const auto& pod : q.pods()) h->add_queue(pod.meta().name() != "a");
    }
    return Answered(answer);
  }));
  evaluator.Evaluate(NodeAdded(), {{&a, {"Fit", "Affinity"}}, {&b, {"Fit"}}, {&c, {"Fit"}}});
  EXPECT_EQ(observed, (std::map<std::string, size_t>{{"Fit/Queue", 2}, {"Fit/QueueSkip", 1}, {"Affinity/Error", 1}}));
}

}  // namespace
}  // namespace podium::scheduler
