#include "client/rate_limiter.h"

#include <gtest/gtest.h>

namespace podium::kube {
namespace {

struct FakeClock {
  absl::Time now = absl::FromUnixSeconds(1000);
  RateLimiter::Clock fn() {
    return [this] { return now; };
  }
};

TEST(RateLimiterTest, BurstIsFreeThenRequestsArePacedAtQps) {
  FakeClock clock;
  RateLimiter limiter(50, 100, clock.fn());
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limiter.Reserve(), absl::ZeroDuration()) << i;
  // The bucket is empty: each next request waits one more 1/50 s.
  EXPECT_EQ(limiter.Reserve(), absl::Milliseconds(20));
  EXPECT_EQ(limiter.Reserve(), absl::Milliseconds(40));
}

TEST(RateLimiterTest, TokensRefillWithTimeUpToTheBurst) {
  FakeClock clock;
  RateLimiter limiter(10, 5, clock.fn());
  for (int i = 0; i < 5; ++i) limiter.Reserve();
  clock.now += absl::Milliseconds(300);  // 3 tokens back.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(limiter.Reserve(), absl::ZeroDuration());
  EXPECT_GT(limiter.Reserve(), absl::ZeroDuration());
  clock.now += absl::Hours(1);  // Never more than the burst.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(limiter.Reserve(), absl::ZeroDuration());
  EXPECT_GT(limiter.Reserve(), absl::ZeroDuration());
}

TEST(RateLimiterTest, ZeroQpsTurnsItOff) {
  FakeClock clock;
  RateLimiter limiter(0, 1, clock.fn());
  EXPECT_FALSE(limiter.enabled());
  for (int i = 0; i < 10000; ++i) ASSERT_EQ(limiter.Reserve(), absl::ZeroDuration());
}

}  // namespace
}  // namespace podium::kube
