#include "client/rate_limiter.h"

#include <algorithm>

namespace podium::kube {

RateLimiter::RateLimiter(double qps, int burst, Clock now)
    : qps_(qps), burst_(std::max(1, burst)), now_(std::move(now)), tokens_(burst_), last_(now_()) {}

absl::Duration RateLimiter::Reserve() {
  if (qps_ <= 0) return absl::ZeroDuration();
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  if (now > last_) {
    tokens_ = std::min(burst_, tokens_ + absl::ToDoubleSeconds(now - last_) * qps_);
    last_ = now;
  }
  tokens_ -= 1;
  if (tokens_ >= 0) return absl::ZeroDuration();
  // The deficit is paid back at qps; later callers wait behind this one.
  return absl::Seconds(-tokens_ / qps_);
}

void RateLimiter::Wait() {
  absl::Duration d = Reserve();
  if (d > absl::ZeroDuration()) absl::SleepFor(d);
}

}  // namespace podium::kube
