#include "decision_broadcaster.h"

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

SchedulingDecision Decision(int i) {
  SchedulingDecision d;
  d.pod_name = "pod-" + std::to_string(i);
  return d;
}

TEST(DecisionBroadcasterTest, AStalledSubscriberKeepsABoundedBacklogAndCountsDrops) {
  DecisionBroadcaster b({.max_subscribers = 4, .max_backlog = 10});
  int notified = 0;
  auto slow = b.Subscribe([&] { ++notified; });
  ASSERT_TRUE(slow.ok());
  for (int i = 0; i < 25; ++i) b.Publish(Decision(i));
  EXPECT_EQ(notified, 25);
  EXPECT_EQ(slow->queue->size(), 10u);
  EXPECT_EQ(slow->queue->dropped(), 15u);
  // The newest are kept, oldest first.
  auto first = slow->queue->Pop();
  ASSERT_TRUE(first);
  EXPECT_EQ(first->pod_name, "pod-15");
}

TEST(DecisionBroadcasterTest, SubscribersBeyondTheCapAreRefused) {
  DecisionBroadcaster b({.max_subscribers = 2, .max_backlog = 10});
  auto one = b.Subscribe(nullptr);
  auto two = b.Subscribe(nullptr);
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(two.ok());
  auto three = b.Subscribe(nullptr);
  EXPECT_EQ(three.status().code(), absl::StatusCode::kResourceExhausted);
  b.Unsubscribe(one->id);
  EXPECT_TRUE(b.Subscribe(nullptr).ok());
  EXPECT_EQ(b.num_subscribers(), 2u);
}

TEST(DecisionBroadcasterTest, AnUnsubscribedQueueGetsNothingMore) {
  DecisionBroadcaster b;
  auto s = b.Subscribe(nullptr);
  ASSERT_TRUE(s.ok());
  b.Publish(Decision(1));
  b.Unsubscribe(s->id);
  b.Publish(Decision(2));
  EXPECT_EQ(s->queue->size(), 1u);
}

}  // namespace
}  // namespace podium::scheduler
