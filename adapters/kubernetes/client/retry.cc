#include "client/retry.h"

#include <algorithm>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/synchronization/mutex.h"
#include "yaml-cpp/yaml.h"

namespace podium::kube {

Verdict Classify(const ApiAnswer& answer) {
  if (answer.status >= 200 && answer.status < 300) return Verdict::kDone;
  if (answer.status == 0 || answer.status == 429 || answer.status >= 500) return Verdict::kRetry;
  return Verdict::kGiveUp;
}

v1::ActionResult::Code ResultCode(const ApiAnswer& answer) {
  const int s = answer.status;
  if (s >= 200 && s < 300) return v1::ActionResult::OK;
  if (s == 409 || s == 412) return v1::ActionResult::CONFLICT;
  if (s == 404 || s == 410) return v1::ActionResult::NOT_FOUND;
  if (s == 400 || s == 422) return v1::ActionResult::INVALID;
  if (s == 0 || s == 429 || s >= 500) return v1::ActionResult::UNAVAILABLE;
  return v1::ActionResult::INTERNAL;
}

std::string AnswerMessage(const ApiAnswer& answer) {
  if (answer.status == 0) return answer.error;
  try {
    YAML::Node status = YAML::Load(answer.body);
    if (status.IsMap() && status["message"] && status["message"].IsScalar()) {
      return "HTTP " + std::to_string(answer.status) + ": " + status["message"].Scalar();
    }
  } catch (const YAML::Exception&) {
  }
  return "HTTP " + std::to_string(answer.status) + ": " + answer.body.substr(0, 200);
}

std::optional<absl::Duration> ParseRetryAfter(std::string_view value) {
  absl::string_view v = absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  int64_t seconds;
  if (v.empty() || !absl::SimpleAtoi(v, &seconds) || seconds < 0) return std::nullopt;
  return absl::Seconds(seconds);
}

Backoff::Backoff(Options options, Random random) : options_(options), random_(std::move(random)) {}

absl::Duration Backoff::Next(std::optional<absl::Duration> retry_after) {
  if (retry_after.has_value()) {
    ++step_;
    return std::min(*retry_after, options_.max_retry_after);
  }
  absl::Duration d = options_.initial;
  for (int i = 0; i < step_ && d < options_.cap; ++i) d *= 2;
  d = std::min(d, options_.cap);
  ++step_;
  return d * (1.0 + options_.jitter * random_());
}

Backoff::Random DefaultRandom() {
  auto gen = std::make_shared<std::mt19937_64>(std::random_device{}());
  auto mu = std::make_shared<absl::Mutex>();
  return [gen, mu] {
    absl::MutexLock lock(mu.get());
    return std::uniform_real_distribution<double>(0, 1)(*gen);
  };
}

}  // namespace podium::kube
