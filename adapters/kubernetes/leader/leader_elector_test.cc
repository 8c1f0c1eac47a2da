#include "leader/leader_elector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "absl/strings/match.h"

namespace podium::kube {
namespace {

namespace json = boost::json;

// A Lease endpoint with the API's optimistic concurrency, shared by the
// electors of a test; `down` makes it answer 500 to one identity's calls.
class LeaseServer {
 public:
  class Client : public Transport {
   public:
    Client(LeaseServer& server, std::string identity) : server_(server), identity_(std::move(identity)) {}
    ApiAnswer Do(const HttpRequest& r) override { return server_.Handle(identity_, r); }
    StreamAnswer Stream(const HttpRequest&) override { return {}; }

   private:
    LeaseServer& server_;
    std::string identity_;
  };

  ApiAnswer Handle(const std::string& who, const HttpRequest& r) {
    ++calls;
    if (down.contains(who)) return {.status = 500};
    if (r.method == "GET") {
      if (lease.is_null()) return {.status = 404};
      return {.status = 200, .body = json::serialize(lease)};
    }
    json::value body = json::parse(r.body);
    if (r.method == "POST") {
      if (!lease.is_null()) return {.status = 409};
    } else if (r.method == "PUT") {
      if (lease.is_null()) return {.status = 404};
      if (body.at("metadata").at("resourceVersion") != lease.at("metadata").at("resourceVersion")) return {.status = 409};
    }
    body.as_object()["metadata"].as_object()["resourceVersion"] = std::to_string(++rv);
    lease = body;
    return {.status = r.method == "POST" ? 201 : 200, .body = json::serialize(lease)};
  }
  std::string holder() const { return lease.is_null() ? "" : std::string(lease.at("spec").at("holderIdentity").as_string()); }
  int64_t transitions() const { return lease.at("spec").at("leaseTransitions").as_int64(); }

  json::value lease;
  int rv = 0;
  int calls = 0;
  std::set<std::string> down;
};

class LeaderElectorTest : public ::testing::Test {
 protected:
  LeaderElector::Options Opts(const std::string& id) {
    return {.lease_namespace = "kube-system", .lease_name = "podium", .identity = id};
  }
  absl::Time now_ = absl::FromUnixSeconds(1000);
  LeaseServer server_;
  LeaseServer::Client ta_{server_, "a"}, tb_{server_, "b"};
  LeaderElector a_{ta_, Opts("a"), [this] { return now_; }};
  LeaderElector b_{tb_, Opts("b"), [this] { return now_; }};
};

TEST_F(LeaderElectorTest, FirstCreatesTheLeaseOthersWaitWhileItRenews) {
  EXPECT_TRUE(a_.TryAcquireOrRenew());
  EXPECT_EQ(server_.holder(), "a");
  EXPECT_TRUE(a_.IsLeader());
  for (int i = 0; i < 20; ++i) {  // 40 s of renewals every 2 s.
    now_ += absl::Seconds(2);
    EXPECT_FALSE(b_.TryAcquireOrRenew());
    EXPECT_TRUE(a_.TryAcquireOrRenew());
  }
  EXPECT_FALSE(b_.IsLeader());
  EXPECT_EQ(server_.transitions(), 0);
}

TEST_F(LeaderElectorTest, TakesOverAnExpiredLease) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  EXPECT_FALSE(b_.TryAcquireOrRenew());  // b sees a's record now.
  now_ += absl::Seconds(14);
  EXPECT_FALSE(b_.TryAcquireOrRenew());
  now_ += absl::Seconds(1);  // 15 s since b saw it change.
  EXPECT_TRUE(b_.TryAcquireOrRenew());
  EXPECT_EQ(server_.holder(), "b");
  EXPECT_EQ(server_.transitions(), 1);
  EXPECT_FALSE(a_.TryAcquireOrRenew());  // a learns it lost.
  EXPECT_FALSE(a_.IsLeader());
}

TEST_F(LeaderElectorTest, ALeaderThatCannotRenewStopsBeforeItsLeaseExpires) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  EXPECT_FALSE(b_.TryAcquireOrRenew());
  server_.down.insert("a");  // a's renewals fail from now on.
  absl::Time a_stopped = absl::InfiniteFuture(), b_started = absl::InfiniteFuture();
  for (int i = 0; i < 100; ++i) {
    now_ += absl::Milliseconds(500);
    a_.TryAcquireOrRenew();
    b_.TryAcquireOrRenew();
    ASSERT_FALSE(a_.IsLeader() && b_.IsLeader()) << "two leaders at " << now_;
    if (!a_.IsLeader() && a_stopped == absl::InfiniteFuture()) a_stopped = now_;
    if (b_.IsLeader() && b_started == absl::InfiniteFuture()) b_started = now_;
  }
  EXPECT_EQ(a_stopped, absl::FromUnixSeconds(1010));  // renew deadline: 10 s.
  EXPECT_EQ(b_started, absl::FromUnixSeconds(1015));  // lease duration: 15 s.
}

TEST_F(LeaderElectorTest, ConcurrentWritesOfOneVersionConflict) {
  ASSERT_TRUE(a_.TryAcquireOrRenew());
  const std::string stale = json::serialize(server_.lease);
  ASSERT_TRUE(a_.TryAcquireOrRenew());  // Moves the resourceVersion on.
  json::value v = json::parse(stale);
  ApiAnswer put = server_.Handle("b", {.method = "PUT", .target = "/x", .body = json::serialize(v)});
  EXPECT_EQ(put.status, 409);
}

// Another holder's Lease, as last written by it.
json::value OthersLease(json::value transitions, json::value duration_seconds = 15) {
  return json::value{{"apiVersion", "coordination.k8s.io/v1"},
                     {"kind", "Lease"},
                     {"metadata", {{"name", "podium"}, {"namespace", "kube-system"}, {"resourceVersion", "5"}}},
                     {"spec",
                      {{"holderIdentity", "other"},
                       {"leaseDurationSeconds", duration_seconds},
                       {"renewTime", "2020-01-01T00:00:00.000000Z"},
                       {"leaseTransitions", transitions}}}};
}

TEST_F(LeaderElectorTest, AMalformedLeaseIsAFailedAttemptNotACrash) {
  for (json::value transitions : {json::value("abc"), json::value(99999999999), json::value(1.5),
                                  json::value(json::array{1})}) {
    SCOPED_TRACE(json::serialize(transitions));
    server_.lease = OthersLease(transitions);
    const int rv = server_.rv;
    for (int i = 0; i < 10; ++i) {  // Well past its expiry.
      EXPECT_FALSE(a_.TryAcquireOrRenew());
      now_ += absl::Seconds(5);
    }
    EXPECT_FALSE(a_.IsLeader());
    EXPECT_EQ(server_.rv, rv) << "wrote a Lease it could not read";
  }
  server_.lease = OthersLease(3, "fifteen");
  EXPECT_FALSE(a_.TryAcquireOrRenew());
  // Readable again: taken over once expired, transitions counted on.
  server_.lease = OthersLease(3);
  EXPECT_FALSE(a_.TryAcquireOrRenew());
  now_ += absl::Seconds(15);
  EXPECT_TRUE(a_.TryAcquireOrRenew());
  EXPECT_EQ(server_.transitions(), 4);
}

TEST_F(LeaderElectorTest, ExpiryFollowsTheRecordsLeaseDuration) {
  // The holder's record says 60 s; our own flag (15 s) does not shorten it.
  server_.lease = OthersLease(0, 60);
  EXPECT_FALSE(a_.TryAcquireOrRenew());
  now_ += absl::Seconds(59);
  EXPECT_FALSE(a_.TryAcquireOrRenew());
  now_ += absl::Seconds(1);
  EXPECT_TRUE(a_.TryAcquireOrRenew());
  // A record of 5 s expires 5 s after it was last seen to change.
  server_.lease = OthersLease(1, 5);
  EXPECT_FALSE(b_.TryAcquireOrRenew());
  now_ += absl::Seconds(5);
  EXPECT_TRUE(b_.TryAcquireOrRenew());
}

}  // namespace
}  // namespace podium::kube
