#include "actions/event_series.h"

#include <gtest/gtest.h>

namespace podium::kube {
namespace {

using Decision = EventSeriesBook::Decision;

v1::RecordEvent Failed(const std::string& pod, const std::string& note = "0/3 nodes are available") {
  v1::RecordEvent e;
  e.mutable_regarding()->set_kind("Pod");
  e.mutable_regarding()->set_namespace_("ns");
  e.mutable_regarding()->set_name(pod);
  e.mutable_regarding()->set_uid("uid-" + pod);
  e.set_type("Warning");
  e.set_reason("FailedScheduling");
  e.set_action("Scheduling");
  e.set_note(note);
  return e;
}

class EventSeriesBookTest : public ::testing::Test {
 protected:
  // Posts a first event for `pod`, as sent and answered, then a second
  // passes; the series' key.
  auto PostedAndIdle(EventSeriesBook& book, const std::string& pod) {
    auto posted = book.Observe(Failed(pod), now_, pod + ".1");
    book.Finished(posted.key, true);
    now_ += absl::Seconds(1);
    return posted.key;
  }

  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(EventSeriesBookTest, ARepeatPatchesTheSeriesOfTheFirstEvent) {
  EventSeriesBook book({});
  auto first = book.Observe(Failed("web"), now_, "web.1");
  EXPECT_EQ(first.decision, Decision::kPost);
  EXPECT_EQ(first.name, "web.1");
  // A repeat while the POST is in flight waits for it.
  now_ += absl::Seconds(1);
  auto during = book.Observe(Failed("web", "another note: not part of the key"), now_, "web.2");
  EXPECT_EQ(during.decision, Decision::kCoalesced);
  EXPECT_EQ(during.name, "web.1");
  // The POST succeeded: the repeat goes as a PATCH now.
  EXPECT_TRUE(book.Finished(first.key, true));
  int32_t count = 0;
  absl::Time last;
  ASSERT_TRUE(book.Series(first.key, &count, &last));
  EXPECT_EQ(count, 2);
  EXPECT_EQ(last, now_);
  EXPECT_FALSE(book.Finished(first.key, true));  // The PATCH is done; nothing new.
  // A later repeat (nothing in flight) is a PATCH of its own.
  now_ += absl::Minutes(5);
  auto later = book.Observe(Failed("web"), now_, "web.3");
  EXPECT_EQ(later.decision, Decision::kPatch);
  EXPECT_EQ(later.name, "web.1");
  ASSERT_TRUE(book.Series(first.key, &count, &last));
  EXPECT_EQ(count, 3);
  EXPECT_EQ(last, now_);
  EXPECT_FALSE(book.Finished(later.key, true));
}

TEST_F(EventSeriesBookTest, ASeriesNotSeenForSixMinutesEndsAndOtherObjectsOrReasonsAreTheirOwn) {
  EventSeriesBook book({});
  auto a = book.Observe(Failed("web"), now_, "web.1");
  book.Finished(a.key, true);
  EXPECT_EQ(book.Observe(Failed("db"), now_, "db.1").decision, Decision::kPost);
  v1::RecordEvent scheduled = Failed("web");
  scheduled.set_reason("Scheduled");
  scheduled.set_action("Binding");
  EXPECT_EQ(book.Observe(scheduled, now_, "web.2").decision, Decision::kPost);
  now_ += absl::Minutes(6);
  auto again = book.Observe(Failed("web"), now_, "web.3");
  EXPECT_EQ(again.decision, Decision::kPost);
  EXPECT_EQ(again.name, "web.3");
}

TEST_F(EventSeriesBookTest, AFailedPostOrPatchStartsOverWithANewEvent) {
  EventSeriesBook book({});
  auto a = book.Observe(Failed("web"), now_, "web.1");
  EXPECT_FALSE(book.Finished(a.key, false));
  EXPECT_EQ(book.Observe(Failed("web"), now_, "web.2").decision, Decision::kPost);
  EXPECT_FALSE(book.Finished(a.key, true));
  EXPECT_EQ(book.Observe(Failed("web"), now_, "web.3").decision, Decision::kPatch);
  EXPECT_FALSE(book.Finished(a.key, false));  // The PATCH failed (say 404: the event expired).
  auto b = book.Observe(Failed("web"), now_, "web.4");
  EXPECT_EQ(b.decision, Decision::kPost);
  EXPECT_EQ(b.name, "web.4");
}

TEST_F(EventSeriesBookTest, EachObjectIsRateLimitedWithBurst25AndOneEveryFiveMinutes) {
  EventSeriesBook book({});
  for (int i = 0; i < 25; ++i) {
    auto o = book.Observe(Failed("web"), now_, "web.1");
    EXPECT_NE(o.decision, Decision::kRateLimited) << i;
    book.Finished(o.key, true);
  }
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kRateLimited);
  // Another object has its own bucket.
  EXPECT_EQ(book.Observe(Failed("db"), now_, "db.1").decision, Decision::kPost);
  now_ += absl::Minutes(4);
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kRateLimited);
  now_ += absl::Minutes(1);
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kPatch);
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kRateLimited);
}

TEST_F(EventSeriesBookTest, APatchThatCouldNotBeQueuedIsCarriedByTheNextRepeat) {
  EventSeriesBook book({});
  auto a = book.Observe(Failed("web"), now_, "web.1");
  book.Finished(a.key, true);
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kPatch);
  book.PatchNotIssued(a.key);
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kPatch);
  int32_t count = 0;
  absl::Time last;
  ASSERT_TRUE(book.Series(a.key, &count, &last));
  EXPECT_EQ(count, 3);
}

// A repeat that comes while the PATCH waits for its turn is in that PATCH
// (it reads the count when it is sent): no second PATCH with the same count.
TEST_F(EventSeriesBookTest, ARepeatBeforeThePatchIsSentRidesInIt) {
  EventSeriesBook book({});
  auto a = book.Observe(Failed("web"), now_, "web.1");
  EXPECT_FALSE(book.Finished(a.key, true));
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kPatch);      // Queued.
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kCoalesced);  // Before it is sent.
  int32_t count = 0;
  absl::Time last;
  ASSERT_TRUE(book.TakeForPatch(a.key, &count, &last));
  EXPECT_EQ(count, 3);
  EXPECT_FALSE(book.Finished(a.key, true));  // Nothing left for another PATCH.
  // A repeat while it is on the wire still gets its own.
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kPatch);
  ASSERT_TRUE(book.TakeForPatch(a.key, &count, &last));
  EXPECT_EQ(book.Observe(Failed("web"), now_, "x").decision, Decision::kCoalesced);
  EXPECT_TRUE(book.Finished(a.key, true));
}

TEST_F(EventSeriesBookTest, TheOldestSeriesIsForgottenBeyondTheLimit) {
  EventSeriesBook book({.max_series = 2});
  PostedAndIdle(book, "a");
  PostedAndIdle(book, "b");
  book.Observe(Failed("c"), now_, "c.1");
  EXPECT_EQ(book.size(), 2u);
  EXPECT_EQ(book.Observe(Failed("a"), now_, "a.2").decision, Decision::kPost);
  EXPECT_EQ(book.Observe(Failed("c"), now_, "c.2").decision, Decision::kCoalesced);
}

// Which series goes beyond the limit follows last_observed as repeats, PATCHes
// and failures move it: the one idle longest, never one in flight.
TEST_F(EventSeriesBookTest, TheSeriesForgottenIsTheOneIdleLongest) {
  EventSeriesBook book({.finish_after = absl::Hours(1), .per_object_burst = 100, .max_series = 3});
  const auto a = PostedAndIdle(book, "a");
  const auto b = PostedAndIdle(book, "b");
  auto c = book.Observe(Failed("c"), now_, "c.1");  // Stays in flight.
  now_ += absl::Seconds(1);
  // A repeat of a (a PATCH) makes b the oldest idle one.
  ASSERT_EQ(book.Observe(Failed("a"), now_, "a.2").decision, Decision::kPatch);
  book.Finished(a, true);
  now_ += absl::Seconds(1);
  book.Observe(Failed("d"), now_, "d.1");  // Forgets b.
  EXPECT_EQ(book.size(), 3u);
  int32_t count;
  absl::Time last;
  EXPECT_FALSE(book.Series(b, &count, &last));
  ASSERT_TRUE(book.Series(a, &count, &last));
  EXPECT_EQ(count, 2);
  // Only a is idle (c and d are in flight): the next new series forgets a,
  // even though c was seen before it.
  now_ += absl::Seconds(1);
  book.Observe(Failed("e"), now_, "e.1");
  EXPECT_FALSE(book.Series(a, &count, &last));
  EXPECT_TRUE(book.Series(c.key, &count, &last));
  // Nothing idle: the book grows rather than drop a series in flight.
  now_ += absl::Seconds(1);
  book.Observe(Failed("f"), now_, "f.1");
  EXPECT_EQ(book.size(), 4u);
  // A failed POST forgets its series; a PATCH not issued leaves it idle.
  book.Finished(c.key, false);
  EXPECT_FALSE(book.Series(c.key, &count, &last));
  auto e = book.Observe(Failed("e"), now_, "e.2");
  ASSERT_EQ(e.decision, Decision::kCoalesced);
  book.PatchNotIssued(e.key);
  now_ += absl::Seconds(1);
  book.Observe(Failed("g"), now_, "g.1");  // Forgets e, the only idle one.
  EXPECT_FALSE(book.Series(e.key, &count, &last));
  EXPECT_EQ(book.size(), 3u);
}

}  // namespace
}  // namespace podium::kube
