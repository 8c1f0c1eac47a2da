#pragma once

// Deadlines for tests that wait on real threads and real sockets (gRPC round
// trips, reconnects, circuit breakers). Such a test picks the shortest
// deadline that is generous on a normal build; under ThreadSanitizer every
// instruction and every gRPC hop runs 5-20x slower, so `make tsan` sets
// PODIUM_TEST_TIME_SCALE and each such duration is multiplied by it. Only the
// durations scale: every assertion stays as it is, and the ratios between the
// durations of one test (a wait longer than a timeout, shorter than a backoff)
// are kept.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace podium::test_support {

// PODIUM_TEST_TIME_SCALE, a number >= 1 (unset: 1). Anything else aborts the
// test binary with a message: a silently ignored knob would make a slow build
// fail in ways that look like bugs.
inline double TimeScale() {
  static const double scale = [] {
    const char* value = std::getenv("PODIUM_TEST_TIME_SCALE");
    if (value == nullptr || *value == '\0') return 1.0;
    char* end = nullptr;
    const double parsed = std::strtod(value, &end);
    if (end == value || *end != '\0' || !(parsed >= 1.0) || parsed > 1000.0) {
      std::fprintf(stderr, "PODIUM_TEST_TIME_SCALE=\"%s\": want a number from 1 to 1000\n", value);
      std::abort();
    }
    return parsed;
  }();
  return scale;
}

// `d` stretched by TimeScale().
inline absl::Duration Scaled(absl::Duration d) { return d * TimeScale(); }

// A gRPC deadline (system_clock) `d` from now, stretched by TimeScale().
inline std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             absl::ToChronoNanoseconds(Scaled(d)));
}

}  // namespace podium::test_support
