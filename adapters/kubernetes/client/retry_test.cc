#include "client/retry.h"

#include <gtest/gtest.h>

namespace podium::kube {
namespace {

TEST(RetryTest, ClassifiesAnswersAsClientGoDoes) {
  struct Case {
    int status;
    Verdict verdict;
    v1::ActionResult::Code code;
  } cases[] = {
      {200, Verdict::kDone, v1::ActionResult::OK},          {201, Verdict::kDone, v1::ActionResult::OK},
      {0, Verdict::kRetry, v1::ActionResult::UNAVAILABLE},  {429, Verdict::kRetry, v1::ActionResult::UNAVAILABLE},
      {500, Verdict::kRetry, v1::ActionResult::UNAVAILABLE}, {503, Verdict::kRetry, v1::ActionResult::UNAVAILABLE},
      {409, Verdict::kGiveUp, v1::ActionResult::CONFLICT},  {404, Verdict::kGiveUp, v1::ActionResult::NOT_FOUND},
      {400, Verdict::kGiveUp, v1::ActionResult::INVALID},   {422, Verdict::kGiveUp, v1::ActionResult::INVALID},
      {403, Verdict::kGiveUp, v1::ActionResult::INTERNAL},  {401, Verdict::kGiveUp, v1::ActionResult::INTERNAL},
  };
  for (const Case& c : cases) {
    ApiAnswer a{.status = c.status};
    EXPECT_EQ(Classify(a), c.verdict) << c.status;
    EXPECT_EQ(ResultCode(a), c.code) << c.status;
  }
}

TEST(RetryTest, MessageComesFromTheStatusBody) {
  ApiAnswer a{.status = 409, .body = R"({"kind":"Status","message":"pod p is already assigned to node n","code":409})"};
  EXPECT_EQ(AnswerMessage(a), "HTTP 409: pod p is already assigned to node n");
  EXPECT_EQ(AnswerMessage(ApiAnswer{.status = 0, .error = "connect: refused"}), "connect: refused");
}

TEST(RetryTest, RetryAfterSeconds) {
  EXPECT_EQ(ParseRetryAfter("3"), absl::Seconds(3));
  EXPECT_EQ(ParseRetryAfter(" 1 "), absl::Seconds(1));
  EXPECT_EQ(ParseRetryAfter(""), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("soon"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1"), std::nullopt);
}

TEST(RetryTest, BackoffDoublesToTheCapWithJitterAndHonoursRetryAfter) {
  double r = 0;
  Backoff b({.initial = absl::Milliseconds(100), .cap = absl::Milliseconds(450), .jitter = 0.5,
             .max_retry_after = absl::Seconds(5)},
            [&r] { return r; });
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(200));
  EXPECT_EQ(b.Next(), absl::Milliseconds(400));
  EXPECT_EQ(b.Next(), absl::Milliseconds(450));
  r = 0.999;  // Jitter stretches up to 1.5x.
  EXPECT_GT(b.Next(), absl::Milliseconds(670));
  EXPECT_EQ(b.Next(absl::Seconds(2)), absl::Seconds(2));
  EXPECT_EQ(b.Next(absl::Seconds(60)), absl::Seconds(5));
  b.Reset();
  r = 0;
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

}  // namespace
}  // namespace podium::kube
