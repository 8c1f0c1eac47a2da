#pragma once

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace podium::scheduler {

// Injected wherever time decides behaviour, so tests never sleep.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;

  // The process-wide real clock (stateless).
  static Clock& Real();
};

class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
};

inline Clock& Clock::Real() {
  static RealClock clock;
  return clock;
}

}  // namespace podium::scheduler
