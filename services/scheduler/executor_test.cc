#include "executor.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

TEST(BoundedExecutorTest, RunHereIfIdleRunsOnTheCallerWhenNothingIsQueued) {
  BoundedExecutor executor(1, 16);
  std::thread::id ran_on;
  EXPECT_TRUE(executor.RunHereIfIdle([&] { ran_on = std::this_thread::get_id(); }));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(BoundedExecutorTest, RunHereIfIdleRefusesWhileEarlierWorkRunsOrWaits) {
  BoundedExecutor executor(1, 16);
  absl::Notification started, release;
  std::vector<int> order;
  ASSERT_TRUE(executor.Post([&] {
    started.Notify();
    release.WaitForNotification();
    order.push_back(1);
  }));
  started.WaitForNotification();
  bool ran = false;
  EXPECT_FALSE(executor.RunHereIfIdle([&] { ran = true; }));  // Running.
  ASSERT_TRUE(executor.Post([&] { order.push_back(2); }));
  release.Notify();
  EXPECT_FALSE(ran);
  executor.Drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // Queued work keeps its place too: nothing runs here ahead of it.
  absl::Notification blocked;
  ASSERT_TRUE(executor.Post([&] { blocked.WaitForNotification(); }));
  ASSERT_TRUE(executor.Post([&] { order.push_back(3); }));
  EXPECT_FALSE(executor.RunHereIfIdle([&] { order.push_back(4); }));
  blocked.Notify();
  executor.Drain();
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(BoundedExecutorTest, WorkPostedWhileRunningHereWaitsForIt) {
  BoundedExecutor executor(1, 16);
  std::atomic<bool> here_done{false};
  std::atomic<bool> saw_here_done{false};
  absl::Notification posted;
  std::thread other;
  EXPECT_TRUE(executor.RunHereIfIdle([&] {
    // Another thread posts meanwhile: the worker must not start it before
    // this work ends (posting order, one at a time).
    other = std::thread([&] {
      ASSERT_TRUE(executor.Post([&] { saw_here_done = here_done.load(); }));
      posted.Notify();
    });
    posted.WaitForNotification();
    absl::SleepFor(absl::Milliseconds(20));
    here_done = true;
  }));
  other.join();
  executor.Drain();
  EXPECT_TRUE(saw_here_done);
}

TEST(BoundedExecutorTest, RunHereIfIdleRefusesOnceStopped) {
  BoundedExecutor executor(1, 16);
  executor.Stop();
  bool ran = false;
  EXPECT_FALSE(executor.RunHereIfIdle([&] { ran = true; }));
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace podium::scheduler
