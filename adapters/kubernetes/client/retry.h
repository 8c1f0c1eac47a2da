#pragma once

// How an API answer is classified: done, worth another try (429 with its
// Retry-After, 5xx, the connection failed), or final (other 4xx); and the
// ActionResult code the scheduler gets.

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "absl/time/time.h"
#include "podium/v1/cluster.pb.h"

namespace podium::kube {

// status 0 means the request got no answer (connection refused, reset, timeout).
struct ApiAnswer {
  int status = 0;
  std::string body;
  std::string retry_after;  // The Retry-After header, if any.
  std::string error;        // Transport error when status is 0.
};

enum class Verdict { kDone, kRetry, kGiveUp };
Verdict Classify(const ApiAnswer& answer);

// OK for 2xx; CONFLICT for 409/412; NOT_FOUND for 404/410; INVALID for
// 400/422; UNAVAILABLE for 429, 5xx and no answer; INTERNAL otherwise
// (401, 403, ...).
v1::ActionResult::Code ResultCode(const ApiAnswer& answer);

// The message of a Kubernetes Status body, or the body's start.
std::string AnswerMessage(const ApiAnswer& answer);

// Retry-After in seconds (the API server sends integers); nullopt when absent
// or not a number.
std::optional<absl::Duration> ParseRetryAfter(std::string_view value);

// Exponential backoff with jitter: initial * 2^n capped, times [1, 1+jitter).
// A Retry-After, when given, is honoured as the wait (capped by max_retry_after).
class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(200);
    absl::Duration cap = absl::Seconds(10);
    double jitter = 0.5;
    absl::Duration max_retry_after = absl::Seconds(60);
  };
  using Random = std::function<double()>;  // Uniform in [0, 1).
  Backoff(Options options, Random random);

  absl::Duration Next(std::optional<absl::Duration> retry_after = std::nullopt);
  void Reset() { step_ = 0; }

 private:
  const Options options_;
  const Random random_;
  int step_ = 0;
};

// A uniform [0, 1) source, seeded per instance.
Backoff::Random DefaultRandom();

}  // namespace podium::kube
