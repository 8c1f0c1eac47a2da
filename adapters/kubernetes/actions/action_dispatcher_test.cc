#include "actions/action_dispatcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/fake_transport.h"

namespace podium::kube {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Action Bind(uint64_t id, const std::string& name, const std::string& node) {
  v1::Action a;
  a.set_id(id);
  auto* b = a.mutable_bind();
  b->mutable_pod()->set_namespace_("ns");
  b->mutable_pod()->set_name(name);
  b->mutable_pod()->set_uid("uid-" + name);
  b->set_node_name(node);
  return a;
}

v1::Action Event(uint64_t id, const std::string& pod, const std::string& note) {
  v1::Action a;
  a.set_id(id);
  auto* e = a.mutable_record_event();
  e->mutable_regarding()->set_kind("Pod");
  e->mutable_regarding()->set_namespace_("ns");
  e->mutable_regarding()->set_name(pod);
  e->mutable_regarding()->set_uid("uid-" + pod);
  e->set_type("Warning");
  e->set_reason("FailedScheduling");
  e->set_action("Scheduling");
  e->set_note(note);
  return a;
}

class ActionDispatcherTest : public ::testing::Test {
 protected:
  // No workers: tests call Execute, or inspect the queued event lane.
  std::unique_ptr<ActionDispatcher> Make(ActionDispatcher::Options o = {}) {
    o.concurrency = 0;
    o.event_workers = 0;
    o.backoff = {.initial = absl::Milliseconds(100), .cap = absl::Seconds(1), .jitter = 0};
    return std::make_unique<ActionDispatcher>(transport_, transport_, o, [this] { return now_; }, [this](absl::Duration d) {
      slept_.push_back(d);
      return true;
    });
  }
  FakeTransport transport_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  std::vector<absl::Duration> slept_;
};

TEST_F(ActionDispatcherTest, BindRetriesOn5xxAnd429HonouringRetryAfter) {
  transport_.answers = {{.status = 500, .body = "{}"}, {.status = 429, .retry_after = "2"}, {.status = 0, .error = "reset"},
                        {.status = 201, .body = "{}"}};
  auto d = Make();
  v1::ActionResult r = d->Execute(Bind(7, "web", "node-1"));
  EXPECT_EQ(r.action_id(), 7u);
  EXPECT_EQ(r.code(), v1::ActionResult::OK) << r.message();
  EXPECT_THAT(slept_, ElementsAre(absl::Milliseconds(100), absl::Seconds(2), absl::Milliseconds(400)));
  ASSERT_EQ(transport_.requests.size(), 4u);
  EXPECT_EQ(transport_.requests[0].method, "POST");
  EXPECT_EQ(transport_.requests[0].target, "/api/v1/namespaces/ns/pods/web/binding");
  EXPECT_THAT(transport_.requests[0].body, HasSubstr(R"("target":{"apiVersion":"v1","kind":"Node","name":"node-1"})"));
  EXPECT_THAT(transport_.requests[0].body, HasSubstr(R"("uid":"uid-web")"));
  EXPECT_EQ(d->counters().retries, 3u);
}

TEST_F(ActionDispatcherTest, ConflictIsFinalAndReportedAsConflict) {
  transport_.answers = {{.status = 409, .body = R"({"kind":"Status","message":"pod web is already assigned to node n2"})"}};
  auto d = Make();
  v1::ActionResult r = d->Execute(Bind(1, "web", "node-1"));
  EXPECT_EQ(r.code(), v1::ActionResult::CONFLICT);
  EXPECT_THAT(r.message(), HasSubstr("already assigned to node n2"));
  EXPECT_EQ(transport_.requests.size(), 1u);
}

TEST_F(ActionDispatcherTest, ConflictAfterARetryIsSuccessWhenThePodIsBoundHere) {
  transport_.answers = {{.status = 503}, {.status = 409, .body = "{}"},
                        {.status = 200, .body = R"({"metadata":{"uid":"uid-web"},"spec":{"nodeName":"node-1"}})"},
                        {.status = 503}, {.status = 409, .body = "{}"},
                        {.status = 200, .body = R"({"metadata":{"uid":"uid-db"},"spec":{"nodeName":"node-9"}})"}};
  auto d = Make();
  EXPECT_EQ(d->Execute(Bind(1, "web", "node-1")).code(), v1::ActionResult::OK);
  EXPECT_EQ(transport_.requests[2].method, "GET");
  EXPECT_EQ(transport_.requests[2].target, "/api/v1/namespaces/ns/pods/web");
  EXPECT_EQ(d->Execute(Bind(2, "db", "node-1")).code(), v1::ActionResult::CONFLICT);
}

TEST_F(ActionDispatcherTest, Other4xxAreFinalAndRetriesRunOut) {
  transport_.answers = {{.status = 403, .body = R"({"message":"forbidden"})"}};
  auto d = Make({.max_attempts = 3});
  v1::ActionResult r = d->Execute(Bind(1, "web", "n"));
  EXPECT_EQ(r.code(), v1::ActionResult::INTERNAL);
  EXPECT_TRUE(slept_.empty());
  transport_.answers = {{.status = 500}, {.status = 500}, {.status = 500}, {.status = 201}};
  r = d->Execute(Bind(2, "web", "n"));
  EXPECT_EQ(r.code(), v1::ActionResult::UNAVAILABLE);
  EXPECT_THAT(r.message(), HasSubstr("after 3 attempts"));
}

TEST_F(ActionDispatcherTest, DeleteCarriesTheUidPreconditionAndPatchIsAStrategicMerge) {
  transport_.answers = {{.status = 409, .body = "{}"}, {.status = 200, .body = "{}"}};
  auto d = Make();
  v1::Action del;
  del.set_id(3);
  del.mutable_delete_pod()->mutable_pod()->set_name("victim");
  del.mutable_delete_pod()->mutable_pod()->set_namespace_("ns");
  del.mutable_delete_pod()->mutable_pod()->set_uid("u-1");
  EXPECT_EQ(d->Execute(del).code(), v1::ActionResult::CONFLICT);
  EXPECT_EQ(transport_.requests[0].method, "DELETE");
  EXPECT_THAT(transport_.requests[0].body, HasSubstr(R"("preconditions":{"uid":"u-1"})"));

  v1::Action patch;
  patch.set_id(4);
  auto* p = patch.mutable_patch_pod_status();
  p->mutable_pod()->set_name("web");
  p->mutable_pod()->set_namespace_("ns");
  p->set_nominated_node_name("");
  auto* c = p->add_conditions();
  c->set_type("PodScheduled");
  c->set_status("False");
  c->set_reason("Unschedulable");
  EXPECT_EQ(d->Execute(patch).code(), v1::ActionResult::OK);
  EXPECT_EQ(transport_.requests[1].method, "PATCH");
  EXPECT_EQ(transport_.requests[1].target, "/api/v1/namespaces/ns/pods/web/status");
  EXPECT_EQ(transport_.requests[1].content_type, "application/strategic-merge-patch+json");
  EXPECT_THAT(transport_.requests[1].body, HasSubstr(R"("nominatedNodeName":null)"));
  EXPECT_THAT(transport_.requests[1].body,
              HasSubstr(R"("conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable"}])"));
}

// Protocol 2: a DeletePod with disruption_target is kube-scheduler's
// PreemptPod: the condition's status patch, then (only if it succeeded) the
// delete with the uid precondition; one result.
TEST_F(ActionDispatcherTest, DeleteWithDisruptionTargetPatchesFirstAndDeletesOnlyAfterIt) {
  auto victim = [](uint64_t id) {
    v1::Action del;
    del.set_id(id);
    del.mutable_delete_pod()->mutable_pod()->set_name("victim");
    del.mutable_delete_pod()->mutable_pod()->set_namespace_("ns");
    del.mutable_delete_pod()->mutable_pod()->set_uid("u-1");
    auto* c = del.mutable_delete_pod()->mutable_disruption_target();
    c->set_type("DisruptionTarget");
    c->set_status("True");
    c->set_reason("PreemptionByScheduler");
    return del;
  };
  transport_.answers = {{.status = 200, .body = "{}"}, {.status = 200, .body = "{}"}};
  auto d = Make();
  v1::ActionResult r = d->Execute(victim(5));
  EXPECT_EQ(r.action_id(), 5u);
  EXPECT_EQ(r.code(), v1::ActionResult::OK) << r.message();
  ASSERT_EQ(transport_.requests.size(), 2u);
  EXPECT_EQ(transport_.requests[0].method, "PATCH");
  EXPECT_EQ(transport_.requests[0].target, "/api/v1/namespaces/ns/pods/victim/status");
  EXPECT_THAT(transport_.requests[0].body,
              HasSubstr(R"("conditions":[{"type":"DisruptionTarget","status":"True","reason":"PreemptionByScheduler"}])"));
  EXPECT_EQ(transport_.requests[1].method, "DELETE");
  EXPECT_EQ(transport_.requests[1].target, "/api/v1/namespaces/ns/pods/victim");
  EXPECT_THAT(transport_.requests[1].body, HasSubstr(R"("preconditions":{"uid":"u-1"})"));

  // The patch finds no pod: NOT_FOUND, and no delete is issued.
  transport_.requests.clear();
  transport_.answers = {{.status = 404, .body = R"({"message":"pods \"victim\" not found"})"}};
  r = d->Execute(victim(6));
  EXPECT_EQ(r.code(), v1::ActionResult::NOT_FOUND);
  EXPECT_THAT(r.message(), HasSubstr("DisruptionTarget patch"));
  ASSERT_EQ(transport_.requests.size(), 1u);
  EXPECT_EQ(transport_.requests[0].method, "PATCH");

  // The delete's precondition fails: CONFLICT.
  transport_.requests.clear();
  transport_.answers = {{.status = 200, .body = "{}"}, {.status = 409, .body = "{}"}};
  EXPECT_EQ(d->Execute(victim(7)).code(), v1::ActionResult::CONFLICT);
  EXPECT_EQ(transport_.requests.size(), 2u);
}

TEST_F(ActionDispatcherTest, RepeatsAreCountedIntoTheSeriesAndEventsDroppedWhenTheLaneIsFull) {
  auto d = Make({.event_queue_capacity = 2});
  std::vector<std::pair<uint64_t, v1::ActionResult::Code>> results;
  auto done = [&](v1::ActionResult r) { results.emplace_back(r.action_id(), r.code()); };
  d->Submit(Event(1, "a", "0/3 nodes are available"), done);
  d->Submit(Event(2, "b", "0/3 nodes are available"), done);
  d->Submit(Event(3, "a", "0/3 nodes are available"), done);  // Same as 1 (queued): into its series.
  d->Submit(Event(4, "c", "0/3 nodes are available"), done);  // Lane full: dropped.
  now_ += absl::Minutes(11);
  d->Submit(Event(5, "a", "0/3 nodes are available"), done);  // 1 is still queued: into its series.
  EXPECT_THAT(results, ElementsAre(std::pair<uint64_t, v1::ActionResult::Code>{3, v1::ActionResult::OK},
                                   std::pair<uint64_t, v1::ActionResult::Code>{4, v1::ActionResult::UNAVAILABLE},
                                   std::pair<uint64_t, v1::ActionResult::Code>{5, v1::ActionResult::OK}));
  auto c = d->counters();
  EXPECT_EQ(c.events_aggregated, 2u);
  EXPECT_EQ(c.events_dropped, 1u);
  d->Stop();  // The two queued events are reported too.
  EXPECT_EQ(results.size(), 5u);
  EXPECT_EQ(d->counters().events_dropped, 3u);
  EXPECT_TRUE(transport_.requests.empty());
}

// Holds every call until the test releases it.
class GatedTransport : public Transport {
 public:
  ApiAnswer Do(const HttpRequest& request) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(request);
    const size_t n = requests_.size();
    auto released = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return released_ >= n; };
    mu_.Await(absl::Condition(&released));
    return {.status = request.method == "POST" ? 201 : 200, .body = "{}"};
  }
  StreamAnswer Stream(const HttpRequest&) override { return {}; }
  void Release(size_t n) {
    absl::MutexLock lock(&mu_);
    released_ += n;
  }
  std::vector<HttpRequest> WaitForRequests(size_t n) {
    absl::MutexLock lock(&mu_);
    auto arrived = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return requests_.size() >= n; };
    mu_.Await(absl::Condition(&arrived));
    return requests_;
  }

 private:
  absl::Mutex mu_;
  std::vector<HttpRequest> requests_ ABSL_GUARDED_BY(mu_);
  size_t released_ ABSL_GUARDED_BY(mu_) = 0;
};

TEST_F(ActionDispatcherTest, ARepeatedEventIsPostedOnceThenItsSeriesPatched) {
  GatedTransport events;
  ActionDispatcher d(transport_, events, {.concurrency = 0, .event_workers = 1}, [this] { return now_; });
  std::vector<v1::ActionResult::Code> results;
  absl::Mutex results_mu;
  auto done = [&](v1::ActionResult r) {
    absl::MutexLock lock(&results_mu);
    results.push_back(r.code());
  };
  d.Submit(Event(1, "web", "0/3 nodes are available: 3 Insufficient cpu."), done);
  auto requests = events.WaitForRequests(1);  // The POST is in flight.
  d.Submit(Event(2, "web", "0/3 nodes are available: 3 Insufficient cpu."), done);
  d.Submit(Event(3, "web", "0/4 nodes are available: 4 Insufficient cpu."), done);  // The note is not in the key.
  events.Release(1);
  requests = events.WaitForRequests(2);  // The PATCH of both repeats.
  events.Release(1);
  d.Stop();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].method, "POST");
  EXPECT_EQ(requests[0].target, "/apis/events.k8s.io/v1/namespaces/ns/events");
  const std::string::size_type at = requests[0].body.find(R"("name":"web.)");
  ASSERT_NE(at, std::string::npos) << requests[0].body;
  const std::string name = requests[0].body.substr(at + 8, requests[0].body.find('"', at + 8) - (at + 8));
  EXPECT_EQ(requests[1].method, "PATCH");
  EXPECT_EQ(requests[1].target, "/apis/events.k8s.io/v1/namespaces/ns/events/" + name);
  EXPECT_EQ(requests[1].content_type, "application/merge-patch+json");
  EXPECT_EQ(requests[1].body, R"({"series":{"count":3,"lastObservedTime":"1970-01-01T00:16:40.000000Z"}})");
  auto c = d.counters();
  EXPECT_EQ(c.events_posted, 1u);
  EXPECT_EQ(c.events_aggregated, 2u);
  EXPECT_EQ(c.events_series_patches, 1u);
  EXPECT_EQ(c.events_dropped, 0u);
  EXPECT_EQ(c.events_failed, 0u);
  absl::MutexLock lock(&results_mu);
  EXPECT_EQ(results, std::vector<v1::ActionResult::Code>(3, v1::ActionResult::OK));
}

TEST_F(ActionDispatcherTest, EventsOfOneObjectAreRateLimitedAndNeverDelayBinds) {
  GatedTransport events;  // Never released before Stop: every event call hangs.
  transport_.answers = {{.status = 201}};
  ActionDispatcher d(transport_, events, {.concurrency = 1, .event_workers = 1, .event_series = {.per_object_burst = 2}},
                     [this] { return now_; });
  std::vector<std::pair<uint64_t, v1::ActionResult::Code>> results;
  absl::Mutex results_mu;
  auto done = [&](v1::ActionResult r) {
    absl::MutexLock lock(&results_mu);
    results.emplace_back(r.action_id(), r.code());
  };
  for (uint64_t i = 1; i <= 4; ++i) d.Submit(Event(i, "web", "note"), done);
  events.WaitForRequests(1);
  absl::Notification bound;
  d.Submit(Bind(10, "other", "n"), [&](v1::ActionResult r) {
    EXPECT_EQ(r.code(), v1::ActionResult::OK);
    bound.Notify();
  });
  EXPECT_TRUE(bound.WaitForNotificationWithTimeout(absl::Seconds(30)));  // While the event call hangs.
  auto c = d.counters();
  EXPECT_EQ(c.events_rate_limited, 2u);
  EXPECT_EQ(c.events_aggregated, 1u);
  {
    absl::MutexLock lock(&results_mu);
    EXPECT_THAT(results, ElementsAre(std::pair<uint64_t, v1::ActionResult::Code>{2, v1::ActionResult::OK},
                                     std::pair<uint64_t, v1::ActionResult::Code>{3, v1::ActionResult::UNAVAILABLE},
                                     std::pair<uint64_t, v1::ActionResult::Code>{4, v1::ActionResult::UNAVAILABLE}));
  }
  events.Release(100);
  d.Stop();
}

TEST_F(ActionDispatcherTest, EventIsAnEventsK8sIoV1Object) {
  transport_.answers = {{.status = 201}};
  auto d = Make();
  EXPECT_EQ(d->Execute(Event(1, "web", "0/3 nodes are available")).code(), v1::ActionResult::OK);
  const HttpRequest& r = transport_.requests[0];
  EXPECT_EQ(r.target, "/apis/events.k8s.io/v1/namespaces/ns/events");
  EXPECT_THAT(r.body, HasSubstr(R"("apiVersion":"events.k8s.io/v1")"));
  EXPECT_THAT(r.body, HasSubstr(R"("reason":"FailedScheduling")"));
  EXPECT_THAT(r.body, HasSubstr(R"("regarding":{"apiVersion":"v1","kind":"Pod","namespace":"ns","name":"web","uid":"uid-web"})"));
  EXPECT_THAT(r.body, HasSubstr(R"("eventTime":"1970-01-01T00:16:40.000000Z")"));
}

TEST_F(ActionDispatcherTest, NothingIsIssuedWithoutLeadership) {
  bool leader = false;
  transport_.answers = {{.status = 500}, {.status = 201}};
  auto d = Make({.may_act = [&leader] { return leader; }});
  v1::ActionResult r = d->Execute(Bind(1, "web", "n"));
  EXPECT_EQ(r.code(), v1::ActionResult::UNAVAILABLE);
  EXPECT_THAT(r.message(), HasSubstr("not the leader"));
  EXPECT_TRUE(transport_.requests.empty());
  leader = true;
  EXPECT_EQ(d->Execute(Bind(2, "web", "n")).code(), v1::ActionResult::OK);
  EXPECT_EQ(transport_.requests.size(), 2u);
}

}  // namespace
}  // namespace podium::kube
