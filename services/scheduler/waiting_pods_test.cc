#include "waiting_pods.h"

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

BindingPod Pod(const std::string& uid) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(uid);
  auto info = std::make_shared<QueuedPodInfo>();
  info->pod_info = sdk::PodInfo::Create(std::move(pod));
  BindingPod b;
  b.pod = info;
  b.node = "node-1";
  return b;
}

v1::PermitDecision Decision(const std::string& uid, const std::string& plugin, bool allow) {
  v1::PermitDecision d;
  d.set_pod_uid(uid);
  d.set_plugin(plugin);
  d.set_allow(allow);
  return d;
}

const absl::Time kNow = absl::FromUnixSeconds(1000);

TEST(WaitingPodsTest, EveryPluginMustAllow) {
  WaitingPods w;
  w.Add(Pod("a"), {{"Gang", kNow + absl::Seconds(10)}, {"Quota", kNow + absl::Seconds(10)}}, {});
  EXPECT_EQ(w.Decide(Decision("a", "Gang", true)).verdict, WaitingPods::Verdict::kStillWaiting);
  auto done = w.Decide(Decision("a", "Quota", true));
  EXPECT_EQ(done.verdict, WaitingPods::Verdict::kAllowed);
  ASSERT_TRUE(done.done);
  EXPECT_FALSE(w.Contains("a"));
}

TEST(WaitingPodsTest, ListShowsWhatEachPodStillWaitsOnInWaitOrder) {
  WaitingPods w;
  BindingPod later = Pod("b");
  later.wait_start = kNow + absl::Seconds(1);
  BindingPod first = Pod("c");
  first.wait_start = kNow;
  w.Add(std::move(later), {{"Gang", kNow + absl::Seconds(30)}, {"Quota", kNow + absl::Seconds(20)}}, {});
  w.Add(std::move(first), {{"Gang", kNow + absl::Seconds(10)}}, {});
  EXPECT_EQ(w.Decide(Decision("b", "Quota", true)).verdict, WaitingPods::Verdict::kStillWaiting);
  std::vector<WaitingPodSummary> list = w.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].pod->uid(), "c");
  EXPECT_EQ(list[0].waiting_since, kNow);
  EXPECT_EQ(list[1].pod->uid(), "b");
  EXPECT_EQ(list[1].node, "node-1");
  // Quota allowed it: only Gang is left, with its own deadline.
  EXPECT_EQ(list[1].pending, (std::map<std::string, absl::Time>{{"Gang", kNow + absl::Seconds(30)}}));
}

TEST(WaitingPodsTest, APluginThePodDoesNotWaitOnCannotDecide) {
  WaitingPods w;
  w.Add(Pod("a"), {{"Gang", kNow + absl::Seconds(10)}}, {});
  EXPECT_EQ(w.Decide(Decision("a", "Other", false)).verdict, WaitingPods::Verdict::kUnknownPlugin);
  EXPECT_TRUE(w.Contains("a"));
  EXPECT_EQ(w.Decide(Decision("a", "Gang", false)).verdict, WaitingPods::Verdict::kRejected);
}

TEST(WaitingPodsTest, EarlyDecisionsAreBoundedAndAppliedWhenThePodWaits) {
  WaitingPods w;
  w.BeginPermit("a", nullptr);
  for (size_t i = 0; i < kMaxEarlyPermitDecisions; ++i) {
    EXPECT_EQ(w.Decide(Decision("a", "Gang", true)).verdict, WaitingPods::Verdict::kKeptEarly);
  }
  EXPECT_EQ(w.Decide(Decision("a", "Gang", true)).verdict, WaitingPods::Verdict::kDroppedEarly);
  EXPECT_EQ(w.Decide(Decision("b", "Gang", true)).verdict, WaitingPods::Verdict::kNotWaiting);
  auto early = w.EndPermit();
  EXPECT_EQ(early.size(), kMaxEarlyPermitDecisions);
  auto outcome = w.Add(Pod("a"), {{"Gang", kNow + absl::Seconds(10)}}, early);
  EXPECT_EQ(outcome.verdict, WaitingPods::Verdict::kAllowed);
}

TEST(WaitingPodsTest, ExpireNamesThePluginThatTimedOutAndRemoveReleases) {
  WaitingPods w;
  w.Add(Pod("a"), {{"Gang", kNow + absl::Seconds(1)}}, {});
  w.Add(Pod("b"), {{"Gang", kNow + absl::Seconds(5)}}, {});
  EXPECT_TRUE(w.Expire(kNow).empty());
  auto expired = w.Expire(kNow + absl::Seconds(2));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].first.pod->uid(), "a");
  EXPECT_EQ(expired[0].second, "Gang");
  EXPECT_TRUE(w.Remove("b").has_value());
  EXPECT_FALSE(w.Remove("b").has_value());
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace podium::scheduler
