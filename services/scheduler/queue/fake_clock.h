#pragma once

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "queue/clock.h"

namespace podium::scheduler {

// A clock tests move by hand.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}

  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock lock(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock lock(&mu_);
    now_ = t;
  }

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::scheduler
