#pragma once

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace podium::kube {

// client-go's client-side rate limit: a token bucket of `burst` tokens
// refilled at `qps` per second (kube-scheduler: 50 QPS, burst 100). qps <= 0
// turns it off. Thread-safe.
class RateLimiter {
 public:
  using Clock = std::function<absl::Time()>;
  RateLimiter(double qps, int burst, Clock now = absl::Now);

  // Takes a token now and returns how long its user must wait before the
  // request (zero when a token was there). Waiting callers queue in order.
  absl::Duration Reserve();
  // Reserve() then sleep.
  void Wait();

  bool enabled() const { return qps_ > 0; }

 private:
  const double qps_;
  const double burst_;
  const Clock now_;
  absl::Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  absl::Time last_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::kube
