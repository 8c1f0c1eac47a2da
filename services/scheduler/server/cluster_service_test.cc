// ClusterService over a real gRPC server on a temp unix socket.
#include "server/cluster_service.h"

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/listener.h"

namespace podium::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class RecordingHandler : public ClusterEventHandler {
 public:
  void OnListBegin() override {}
  void OnObjectEvent(const v1::ObjectEvent&) override {}
  void OnListEnd() override {}
  void OnAdapterDisconnected() override {
    absl::MutexLock lock(&mu_);
    ++disconnects_;
  }
  int disconnects() const {
    absl::MutexLock lock(&mu_);
    return disconnects_;
  }
  // Whether `n` disconnects were reported within 10 s (a bound on a hang,
  // not a timing assertion).
  bool WaitForDisconnects(int n) const {
    absl::MutexLock lock(&mu_);
    std::pair<const int*, int> arg(&disconnects_, n);
    return mu_.AwaitWithTimeout(absl::Condition(
                                    +[](std::pair<const int*, int>* p) { return *p->first >= p->second; }, &arg),
                                absl::Seconds(10));
  }

 private:
  mutable absl::Mutex mu_;
  int disconnects_ ABSL_GUARDED_BY(mu_) = 0;
};

// Waits for one action result.
struct ResultWaiter {
  absl::Notification done;
  v1::ActionResult result;
  ActionSink::ResultCallback Callback() {
    return [this](const v1::ActionResult& r, absl::Time) {
      result = r;
      done.Notify();
    };
  }
  bool Wait() { return done.WaitForNotificationWithTimeout(absl::Seconds(10)); }
};

std::string TempSocketPath() {
  char dir[] = "/tmp/podium-cluster-test-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return std::string(dir) + "/scheduler.sock";
}

// Counts list_begin messages; the first one blocks the event thread until
// Open (when gated).
class GatedHandler : public RecordingHandler {
 public:
  void OnListBegin() override {
    bool first = false;
    {
      absl::MutexLock lock(&mu_);
      first = list_begins_ == 0;
    }
    if (first) gate_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    ++list_begins_;
  }
  int list_begins() const {
    absl::MutexLock lock(&mu_);
    return list_begins_;
  }
  void Open() {
    if (!gate_.HasBeenNotified()) gate_.Notify();
  }

 private:
  mutable absl::Mutex mu_;
  int list_begins_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Notification gate_;
};

// Records the object events it is given (by node name) and what a test
// adds (result callbacks), in one order.
class OrderHandler : public RecordingHandler {
 public:
  void OnObjectEvent(const v1::ObjectEvent& e) override { Record("event " + e.node().meta().name()); }
  void Record(std::string what) {
    absl::MutexLock lock(&mu_);
    order_.push_back(std::move(what));
  }
  // The order once it holds `n` entries (or what it holds after 10 s: a
  // bound on a hang, not a timing assertion).
  std::vector<std::string> WaitFor(size_t n) const {
    absl::MutexLock lock(&mu_);
    std::pair<const std::vector<std::string>*, size_t> arg(&order_, n);
    mu_.AwaitWithTimeout(
        absl::Condition(+[](std::pair<const std::vector<std::string>*, size_t>* p) { return p->first->size() >= p->second; },
                        &arg),
        absl::Seconds(10));
    return order_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> order_ ABSL_GUARDED_BY(mu_);
};

class ClusterServiceTest : public ::testing::Test {
 protected:
  void Start(ClusterService::Options options = {}, ClusterEventHandler* handler = nullptr) {
    options.scheduler_names = {"default-scheduler"};
    service_ = std::make_unique<ClusterService>(options, handler != nullptr ? *handler : handler_, nullptr);
    path_ = TempSocketPath();
    grpc::ServerBuilder builder;
    builder.RegisterService(service_->service());
    driver_ = std::make_unique<grpc_support::AsyncDriver>(builder.AddCompletionQueue(true));
    driver_->Start();
    auto server = StartServer(builder, "unix://" + path_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    service_->Start(*driver_);
    channel_ = grpc::CreateChannel("unix://" + path_, grpc::InsecureChannelCredentials());
    stub_ = v1::Cluster::NewStub(channel_);
  }

  void TearDown() override {
    gated_.Open();  // A test that failed early must not leave the event thread waiting.
    service_->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    service_->StopCalls();
    driver_->Stop();  // Every call ended: the streams' last completions ran.
    server_.reset();
    ::unlink(path_.c_str());
    ::rmdir(path_.substr(0, path_.rfind('/')).c_str());
  }

  struct Stream {
    std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
    std::unique_ptr<grpc::ClientReaderWriter<v1::ClusterMessage, v1::SchedulerMessage>> rw;
  };

  // `version`: the adapter's lowest protocol version; `max_version` its
  // highest (0: unset, as a version 1 adapter sends it).
  Stream Open(const std::string& adapter, uint32_t version = 1, bool takeover = false, uint32_t max_version = 0) {
    Stream s;
    s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    s.rw = stub_->Sync(s.ctx.get());
    v1::ClusterMessage hello;
    hello.mutable_hello()->set_protocol_version(version);
    hello.mutable_hello()->set_max_protocol_version(max_version);
    hello.mutable_hello()->set_adapter(adapter);
    hello.mutable_hello()->set_takeover(takeover);
    s.rw->Write(hello);
    return s;
  }

  // Reads the SchedulerHello of an accepted stream, which names the
  // version the stream speaks.
  static void ExpectAccepted(Stream& s, uint32_t version = 1) {
    v1::SchedulerMessage m;
    ASSERT_TRUE(s.rw->Read(&m));
    ASSERT_TRUE(m.has_hello());
    EXPECT_EQ(m.hello().protocol_version(), version);
  }

  static grpc::Status Refusal(Stream& s) {
    v1::SchedulerMessage m;
    EXPECT_FALSE(s.rw->Read(&m)) << "a refused stream got " << m.ShortDebugString();
    return s.rw->Finish();
  }

  // The ids of the next `n` actions the adapter on `s` reads.
  static std::vector<uint64_t> ReadActionIds(Stream& s, size_t n) {
    std::vector<uint64_t> ids;
    while (ids.size() < n) {
      v1::SchedulerMessage m;
      if (!s.rw->Read(&m)) {
        ADD_FAILURE() << "the stream ended after " << ids.size() << " of " << n << " actions";
        break;
      }
      for (const auto& a : m.actions().actions()) ids.push_back(a.id());
    }
    return ids;
  }

  // Sends a bind and waits until the adapter on `s` reads it.
  static uint64_t ExpectAction(Stream& s) {
    v1::SchedulerMessage m;
    EXPECT_TRUE(s.rw->Read(&m));
    EXPECT_TRUE(m.has_actions());
    return m.has_actions() ? m.actions().actions(0).id() : 0;
  }

  static v1::Action Bind(const std::string& name) {
    v1::Action action;
    action.mutable_bind()->mutable_pod()->set_name(name);
    action.mutable_bind()->set_node_name("node-1");
    return action;
  }

  // `action`, sent on `s` as it is, waits (an alarm holds it); the adapter
  // then ends the stream: the action fails with UNAVAILABLE, and the next
  // adapter is served at once (the alarm does not keep the call alive).
  void ExpectAWaitingActionFailsWhenTheStreamEnds(Stream s, v1::Action action) {
    {
      Stream ending = std::move(s);
      ResultWaiter& waiting = NewWaiter();
      service_->Send(std::move(action), waiting.Callback());
      ending.ctx->TryCancel();
      ASSERT_TRUE(waiting.Wait());
      EXPECT_EQ(waiting.result.code(), v1::ActionResult::UNAVAILABLE);
    }
    Stream again = Open("adapter-b");
    ExpectAccepted(again);
  }

  // Outlive the service: a callback may still run while it shuts down.
  ResultWaiter& NewWaiter() { return waiters_.emplace_back(); }
  std::deque<ResultWaiter> waiters_;
  RecordingHandler handler_;
  GatedHandler gated_;  // For the tests that stop the event thread.
  OrderHandler ordered_;  // For the tests that check what is applied when.
  std::unique_ptr<ClusterService> service_;
  std::string path_;
  std::unique_ptr<grpc_support::AsyncDriver> driver_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Cluster::Stub> stub_;
};

TEST_F(ClusterServiceTest, SocketIsOwnerOnly) {
  Start();
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600);
}

TEST_F(ClusterServiceTest, AbstractSocketIsRefused) {
  Start();
  grpc::ServerBuilder builder;
  auto server = StartServer(builder, "unix-abstract:podium-test");
  EXPECT_FALSE(server.ok());
}

TEST_F(ClusterServiceTest, SecondStreamIsRefusedAndTheFirstKeepsItsBinds) {
  Start();
  Stream first = Open("adapter-a");
  ExpectAccepted(first);
  Stream second = Open("adapter-b");
  const grpc::Status refused = Refusal(second);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(refused.error_message(), HasSubstr("adapter-a"));

  ResultWaiter& waiter = NewWaiter();
  service_->Send(Bind("web-1"), waiter.Callback());
  const uint64_t id = ExpectAction(first);
  v1::ClusterMessage results;
  auto* r = results.mutable_results()->add_results();
  r->set_action_id(id);
  r->set_code(v1::ActionResult::OK);
  ASSERT_TRUE(first.rw->Write(results));
  ASSERT_TRUE(waiter.Wait());
  EXPECT_EQ(waiter.result.code(), v1::ActionResult::OK);
  EXPECT_EQ(service_->stats().refused_streams, 1u);
  EXPECT_EQ(service_->stats().adapter, "adapter-a");
}

TEST_F(ClusterServiceTest, TakeoverClosesTheFirstStreamAndFailsItsActions) {
  Start();
  Stream first = Open("adapter-a");
  ExpectAccepted(first);
  ResultWaiter& pending = NewWaiter();
  service_->Send(Bind("web-1"), pending.Callback());
  ExpectAction(first);

  Stream second = Open("adapter-b", 1, /*takeover=*/true);
  ExpectAccepted(second);
  v1::SchedulerMessage m;
  EXPECT_FALSE(first.rw->Read(&m));
  const grpc::Status closed = first.rw->Finish();
  EXPECT_EQ(closed.error_code(), grpc::StatusCode::ABORTED);
  EXPECT_THAT(closed.error_message(), HasSubstr("adapter-b"));
  ASSERT_TRUE(pending.Wait());
  EXPECT_EQ(pending.result.code(), v1::ActionResult::UNAVAILABLE);

  ResultWaiter& next = NewWaiter();
  service_->Send(Bind("web-2"), next.Callback());
  ExpectAction(second);
  EXPECT_EQ(service_->stats().taken_over_streams, 1u);
}

TEST_F(ClusterServiceTest, UnknownProtocolVersionIsRefused) {
  Start();
  Stream s = Open("future-adapter", ClusterService::kProtocolVersion + 1);
  const grpc::Status refused = Refusal(s);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(refused.error_message(), HasSubstr("protocol_version"));
  EXPECT_FALSE(service_->adapter_connected());
}

// The stream speaks the highest version both sides do; an action that needs
// version 2 is failed on a version 1 stream instead of being half understood
// (an older adapter would delete the victim without its DisruptionTarget).
TEST_F(ClusterServiceTest, TheStreamSpeaksTheHighestCommonVersion) {
  Start();
  {
    Stream s = Open("new-adapter", 1, false, ClusterService::kProtocolVersion + 3);
    ExpectAccepted(s, ClusterService::kProtocolVersion);
    EXPECT_EQ(service_->ProtocolVersion(), ClusterService::kProtocolVersion);
    s.ctx->TryCancel();
    ASSERT_TRUE(handler_.WaitForDisconnects(1));
  }
  Stream old = Open("old-adapter");
  ExpectAccepted(old, 1);
  EXPECT_EQ(service_->ProtocolVersion(), 1u);
  ResultWaiter& refused = NewWaiter();
  v1::Action del;
  del.mutable_delete_pod()->mutable_pod()->set_name("victim");
  del.mutable_delete_pod()->mutable_disruption_target()->set_type("DisruptionTarget");
  service_->Send(del, refused.Callback());
  ASSERT_TRUE(refused.Wait());
  EXPECT_EQ(refused.result.code(), v1::ActionResult::UNAVAILABLE);
  EXPECT_THAT(refused.result.message(), HasSubstr("DeletePod.disruption_target needs 2"));
  // A plain delete goes out.
  del.mutable_delete_pod()->clear_disruption_target();
  service_->Send(del, nullptr);
  ExpectAction(old);
}

TEST_F(ClusterServiceTest, FirstMessageMustBeHello) {
  Start();
  Stream s;
  s.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  s.rw = stub_->Sync(s.ctx.get());
  v1::ClusterMessage begin;
  begin.mutable_list_begin();
  s.rw->Write(begin);
  EXPECT_EQ(Refusal(s).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ClusterServiceTest, FullOutboxFailsTheActionWithUnavailable) {
  ClusterService::Options options;
  options.max_pending_actions = 2;
  Start(options);
  Stream s = Open("slow-adapter");
  ExpectAccepted(s);
  ResultWaiter& a = NewWaiter();
  ResultWaiter& b = NewWaiter();
  ResultWaiter& c = NewWaiter();
  service_->Send(Bind("web-1"), a.Callback());
  service_->Send(Bind("web-2"), b.Callback());
  service_->Send(Bind("web-3"), c.Callback());
  ASSERT_TRUE(c.Wait());
  EXPECT_EQ(c.result.code(), v1::ActionResult::UNAVAILABLE);
  EXPECT_THAT(c.result.message(), HasSubstr("outbox is full"));
  EXPECT_FALSE(a.done.HasBeenNotified());
  EXPECT_EQ(service_->stats().refused_actions, 1u);
  EXPECT_EQ(service_->stats().pending_actions, 2u);
}

TEST_F(ClusterServiceTest, ResultsForUnknownActionsAreCounted) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  ResultWaiter& known = NewWaiter();
  service_->Send(Bind("web-1"), known.Callback());
  const uint64_t id = ExpectAction(s);
  v1::ClusterMessage results;
  for (uint64_t bogus : {id + 100, id + 101}) {
    auto* r = results.mutable_results()->add_results();
    r->set_action_id(bogus);
  }
  auto* r = results.mutable_results()->add_results();
  r->set_action_id(id);  // Processed after the bogus ones, in order.
  ASSERT_TRUE(s.rw->Write(results));
  ASSERT_TRUE(known.Wait());
  EXPECT_EQ(service_->stats().unknown_results, 2u);
}

// Results go to their callbacks as they are read, in stream order, each with
// the time its message arrived; a callback may send the next action (the
// scheduler's bind callback sends the Scheduled event).
TEST_F(ClusterServiceTest, ResultCallbacksRunInStreamOrderWithTheirArrivalAndMaySendActions) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  absl::Mutex mu;
  std::vector<std::string> order;
  std::vector<absl::Time> received;
  absl::Notification sent;
  auto record = [&](const std::string& name, bool send) {
    return [&, name, send](const v1::ActionResult& r, absl::Time at) {
      {
        absl::MutexLock lock(&mu);
        order.push_back(name);
        received.push_back(at);
        EXPECT_LE(at, absl::Now()) << name;
      }
      if (send) {
        service_->Send(Bind("follow-up"), nullptr);
        sent.Notify();
      }
    };
  };
  service_->Send(Bind("web-1"), record("web-1", false));
  service_->Send(Bind("web-2"), record("web-2", true));
  service_->Send(Bind("web-3"), record("web-3", false));
  const std::vector<uint64_t> ids = ReadActionIds(s, 3);
  ASSERT_EQ(ids.size(), 3u);
  v1::ClusterMessage results;
  for (int i : {2, 0, 1}) {  // The adapter's order, not the sending order.
    auto* r = results.mutable_results()->add_results();
    r->set_action_id(ids[i]);
    r->set_code(v1::ActionResult::OK);
  }
  const absl::Time before_write = absl::Now();
  ASSERT_TRUE(s.rw->Write(results));
  ASSERT_TRUE(sent.WaitForNotificationWithTimeout(absl::Seconds(10)));
  v1::SchedulerMessage follow_up;
  ASSERT_TRUE(s.rw->Read(&follow_up));
  ASSERT_EQ(follow_up.actions().actions_size(), 1);
  EXPECT_EQ(follow_up.actions().actions(0).bind().pod().name(), "follow-up");
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<std::string>{"web-3", "web-1", "web-2"}));
  ASSERT_EQ(received.size(), 3u);
  EXPECT_GE(received[0], before_write);
  // One message: one arrival, whatever the callbacks before cost.
  EXPECT_EQ(received[1], received[0]);
  EXPECT_EQ(received[2], received[0]);
  EXPECT_EQ(service_->stats().pending_actions, 1u);  // The follow-up.
}

// Actions sent by result callbacks (which run on the driver) are written
// once all the callbacks of that results message ran: a preemption's two
// deletes, each sent when its victim's DisruptionTarget patch succeeded, go
// in one message (they went one per message).
TEST_F(ClusterServiceTest, ActionsSentByResultCallbacksOfOneMessageShareOneWrite) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  auto patch = [](const std::string& name) {
    v1::Action a;
    a.mutable_patch_pod_status()->mutable_pod()->set_name(name);
    return a;
  };
  auto del = [](const std::string& name) {
    v1::Action a;
    a.mutable_delete_pod()->mutable_pod()->set_name(name);
    return a;
  };
  for (const char* victim : {"victim-1", "victim-2"}) {
    service_->Send(patch(victim), [this, del, victim](const v1::ActionResult& r, absl::Time) {
      if (r.code() == v1::ActionResult::OK) service_->Send(del(victim), nullptr);
    });
  }
  const std::vector<uint64_t> ids = ReadActionIds(s, 2);
  ASSERT_EQ(ids.size(), 2u);
  v1::ClusterMessage results;
  for (uint64_t id : ids) {
    auto* r = results.mutable_results()->add_results();
    r->set_action_id(id);
    r->set_code(v1::ActionResult::OK);
  }
  ASSERT_TRUE(s.rw->Write(results));
  v1::SchedulerMessage deletes;
  ASSERT_TRUE(s.rw->Read(&deletes));
  ASSERT_EQ(deletes.actions().actions_size(), 2) << deletes.ShortDebugString();
  EXPECT_EQ(deletes.actions().actions(0).delete_pod().pod().name(), "victim-1");
  EXPECT_EQ(deletes.actions().actions(1).delete_pod().pod().name(), "victim-2");
}

// Protocol 2: a results message may carry the object events that follow the
// results (podium-sim's and the Kubernetes adapter's outcomes of one batch of
// actions); they are applied as a next ObjectEvents message would be, after
// the results' callbacks ran, and in their order.
TEST_F(ClusterServiceTest, EventsRidingWithResultsAreAppliedAfterTheirCallbacks) {
  OrderHandler& ordered = ordered_;
  Start({}, &ordered);
  Stream s = Open("adapter-a", 1, false, 2);
  ExpectAccepted(s, 2);
  service_->Send(Bind("web-1"), [&ordered](const v1::ActionResult& r, absl::Time) {
    // Room for the events to overtake this callback, were they queued first.
    absl::SleepFor(absl::Milliseconds(20));
    ordered.Record("result web-1 " + v1::ActionResult::Code_Name(r.code()));
  });
  const uint64_t id = ExpectAction(s);
  v1::ClusterMessage m;
  auto* r = m.mutable_results()->add_results();
  r->set_action_id(id);
  r->set_code(v1::ActionResult::OK);
  for (const char* name : {"n-1", "n-2"}) {
    v1::ObjectEvent* e = m.mutable_results()->mutable_events()->add_events();
    e->set_type(v1::ObjectEvent::UPSERT);
    e->mutable_node()->mutable_meta()->set_name(name);
    e->mutable_node()->mutable_meta()->set_uid(std::string("uid-") + name);
  }
  ASSERT_TRUE(s.rw->Write(m));
  EXPECT_THAT(ordered.WaitFor(3), ElementsAre("result web-1 OK", "event n-1", "event n-2"));
  EXPECT_EQ(service_->stats().pending_actions, 0u);
}

// The service with `flush_delay` for events, and an accepted stream.
class EventFlushTest : public ClusterServiceTest {
 protected:
  Stream StartAndOpen(absl::Duration flush_delay, const std::string& adapter = "adapter-a") {
    ClusterService::Options options;
    options.event_flush_delay = flush_delay;
    Start(options);
    Stream s = Open(adapter);
    ExpectAccepted(s);
    return s;
  }
};

v1::Action Scheduled(const std::string& name) {
  v1::Action action;
  action.mutable_record_event()->mutable_regarding()->set_name(name);
  action.mutable_record_event()->set_reason("Scheduled");
  return action;
}

// An event rides with the next write (a bind's), after it, and does not cost
// a write of its own.
TEST_F(EventFlushTest, AnEventRidesWithTheNextBind) {
  Stream s = StartAndOpen(absl::Seconds(30));  // Only a bind carries it.
  ResultWaiter& event = NewWaiter();
  service_->Send(Scheduled("web-1"), event.Callback());
  service_->Send(Bind("web-2"), nullptr);
  v1::SchedulerMessage m;
  ASSERT_TRUE(s.rw->Read(&m));
  ASSERT_EQ(m.actions().actions_size(), 2) << m.ShortDebugString();
  EXPECT_EQ(m.actions().actions(0).bind().pod().name(), "web-2");
  EXPECT_EQ(m.actions().actions(1).record_event().regarding().name(), "web-1");
  // Its result comes back as any action's.
  v1::ClusterMessage results;
  results.mutable_results()->add_results()->set_action_id(m.actions().actions(1).id());
  ASSERT_TRUE(s.rw->Write(results));
  ASSERT_TRUE(event.Wait());
  EXPECT_EQ(event.result.code(), v1::ActionResult::OK);
}

// With nothing else to write, the event goes on its own after the delay.
TEST_F(EventFlushTest, AnEventAloneIsWrittenAfterTheFlushDelay) {
  Stream s = StartAndOpen(absl::Milliseconds(50));
  const absl::Time sent = absl::Now();
  service_->Send(Scheduled("web-1"), nullptr);
  service_->Send(Scheduled("web-2"), nullptr);
  v1::SchedulerMessage m;
  ASSERT_TRUE(s.rw->Read(&m));
  EXPECT_GE(absl::Now() - sent, absl::Milliseconds(40));
  ASSERT_EQ(m.actions().actions_size(), 2) << m.ShortDebugString();
  EXPECT_EQ(m.actions().actions(0).record_event().regarding().name(), "web-1");
  EXPECT_EQ(m.actions().actions(1).record_event().regarding().name(), "web-2");
}

// A stream that ends with events still waiting fails them, as any action
// without a result; the alarm does not keep the call alive.
TEST_F(EventFlushTest, EventsWaitingWhenTheStreamEndsAreFailed) {
  ExpectAWaitingActionFailsWhenTheStreamEnds(StartAndOpen(absl::Seconds(30)), Scheduled("web-1"));
}

TEST_F(ClusterServiceTest, DisconnectFailsPendingActionsAndTellsTheHandler) {
  Start();
  {
    Stream s = Open("adapter-a");
    ExpectAccepted(s);
    ResultWaiter& pending = NewWaiter();
    service_->Send(Bind("web-1"), pending.Callback());
    ExpectAction(s);
    s.rw->WritesDone();
    s.ctx->TryCancel();
    ASSERT_TRUE(pending.Wait());
    EXPECT_EQ(pending.result.code(), v1::ActionResult::UNAVAILABLE);
  }
  // A new adapter is accepted once the old stream is gone.
  Stream again = Open("adapter-a");
  ExpectAccepted(again);
}

// The adapter cancels its stream while actions are queued for it and one
// awaits its result: every action fails, the event thread hears of the
// disconnect, and the next adapter is accepted.
TEST_F(ClusterServiceTest, AStreamCancelledByTheAdapterMidFlightFailsItsActions) {
  Start();
  {
    Stream s = Open("adapter-a");
    ExpectAccepted(s);
    std::vector<ResultWaiter*> waiters;
    for (int i = 0; i < 200; ++i) {
      waiters.push_back(&NewWaiter());
      service_->Send(Bind("web-" + std::to_string(i)), waiters.back()->Callback());
    }
    ExpectAction(s);  // Some are on the wire, the rest queued or in flight.
    s.ctx->TryCancel();
    for (ResultWaiter* w : waiters) {
      ASSERT_TRUE(w->Wait());
      EXPECT_EQ(w->result.code(), v1::ActionResult::UNAVAILABLE) << w->result.ShortDebugString();
    }
    ASSERT_TRUE(handler_.WaitForDisconnects(1));
  }
  EXPECT_EQ(service_->stats().pending_actions, 0u);
  Stream again = Open("adapter-b");
  ExpectAccepted(again);
  EXPECT_EQ(service_->stats().adapter, "adapter-b");
}

// Shutdown with an adapter connected and actions pending: the actions have
// failed when it returns, and the adapter's stream ends with UNAVAILABLE.
TEST_F(ClusterServiceTest, ShutdownFailsPendingActionsBeforeItReturnsAndEndsTheStream) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  ResultWaiter& sent = NewWaiter();
  ResultWaiter& queued = NewWaiter();
  service_->Send(Bind("web-1"), sent.Callback());
  ExpectAction(s);
  service_->Send(Bind("web-2"), queued.Callback());
  service_->Shutdown();
  ASSERT_TRUE(sent.done.HasBeenNotified());
  ASSERT_TRUE(queued.done.HasBeenNotified());
  EXPECT_EQ(sent.result.code(), v1::ActionResult::UNAVAILABLE);
  EXPECT_THAT(sent.result.message(), HasSubstr("shutting down"));
  EXPECT_EQ(queued.result.code(), v1::ActionResult::UNAVAILABLE);
  v1::SchedulerMessage m;
  while (s.rw->Read(&m)) {
  }
  const grpc::Status status = s.rw->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(status.error_message(), HasSubstr("shutting down"));
  // A stream that comes after Shutdown is refused, not left waiting.
  Stream late = Open("adapter-b");
  EXPECT_EQ(Refusal(late).error_code(), grpc::StatusCode::UNAVAILABLE);
}

// A status patch (not a bind) from a thread other than the driver is
// written by the driver (a kick alarm), in its place among the actions.
TEST_F(ClusterServiceTest, AnActionFromAnotherThreadIsWrittenByTheDriverInOrder) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  v1::Action patch;
  patch.mutable_patch_pod_status()->mutable_pod()->set_name("web-1");
  patch.mutable_patch_pod_status()->set_nominated_node_name("node-2");
  service_->Send(patch, NewWaiter().Callback());
  service_->Send(Bind("web-2"), NewWaiter().Callback());  // Queued behind the patch.
  std::vector<std::string> seen;
  while (seen.size() < 2) {
    v1::SchedulerMessage m;
    ASSERT_TRUE(s.rw->Read(&m));
    ASSERT_TRUE(m.has_actions());
    for (const v1::Action& a : m.actions().actions()) {
      seen.push_back(a.has_bind() ? "bind " + a.bind().pod().name()
                                  : "patch " + a.patch_pod_status().pod().name());
    }
  }
  EXPECT_THAT(seen, ElementsAre("patch web-1", "bind web-2"));
  // Many at once from another thread: every one arrives, in order.
  for (int i = 0; i < 50; ++i) {
    v1::Action p = patch;
    p.mutable_patch_pod_status()->mutable_pod()->set_name("p-" + std::to_string(i));
    service_->Send(p, NewWaiter().Callback());
  }
  std::vector<std::string> names;
  while (names.size() < 50) {
    v1::SchedulerMessage m;
    ASSERT_TRUE(s.rw->Read(&m));
    for (const v1::Action& a : m.actions().actions()) names.push_back(a.patch_pod_status().pod().name());
  }
  for (int i = 0; i < 50; ++i) EXPECT_EQ(names[i], "p-" + std::to_string(i));
}

// While the scheduler is busy, patches and deletes from another thread wait
// (up to the coalescing delay) and share one message; a bind takes them with
// it at once, and the loop going idle writes what waits.
class CoalescingTest : public ClusterServiceTest {
 protected:
  Stream StartAndOpen(absl::Duration delay) {
    ClusterService::Options options;
    options.action_coalesce_delay = delay;
    Start(options);
    Stream s = Open("adapter-a");
    ExpectAccepted(s);
    return s;
  }
  static v1::Action Patch(const std::string& name) {
    v1::Action patch;
    patch.mutable_patch_pod_status()->mutable_pod()->set_name(name);
    patch.mutable_patch_pod_status()->set_nominated_node_name("node-2");
    return patch;
  }
  static v1::Action Delete(const std::string& name) {
    v1::Action del;
    del.mutable_delete_pod()->mutable_pod()->set_name(name);
    return del;
  }
  // Every action of the next message, as "kind name".
  static std::vector<std::string> ReadMessage(Stream& s) {
    std::vector<std::string> out;
    v1::SchedulerMessage m;
    if (!s.rw->Read(&m)) {
      ADD_FAILURE() << "the stream ended";
      return out;
    }
    for (const v1::Action& a : m.actions().actions()) {
      out.push_back(a.has_bind()          ? "bind " + a.bind().pod().name()
                    : a.has_delete_pod()  ? "delete " + a.delete_pod().pod().name()
                                          : "patch " + a.patch_pod_status().pod().name());
    }
    return out;
  }
};

TEST_F(CoalescingTest, BusyActionsShareOneMessageWrittenAfterTheDelay) {
  Stream s = StartAndOpen(absl::Milliseconds(100));
  service_->SetSchedulerBusy(true);
  const absl::Time sent = absl::Now();
  service_->Send(Patch("pre-1"), NewWaiter().Callback());
  service_->Send(Delete("victim-1"), NewWaiter().Callback());
  service_->Send(Patch("pre-2"), NewWaiter().Callback());
  EXPECT_THAT(ReadMessage(s), ElementsAre("patch pre-1", "delete victim-1", "patch pre-2"));
  EXPECT_GE(absl::Now() - sent, absl::Milliseconds(90));  // The delay bounds the wait.
}

TEST_F(CoalescingTest, ABindTakesWhatWaitsAtOnce) {
  Stream s = StartAndOpen(absl::Seconds(30));  // Only the bind can write them in time.
  service_->SetSchedulerBusy(true);
  service_->Send(Patch("pre-1"), NewWaiter().Callback());
  service_->Send(Delete("victim-1"), NewWaiter().Callback());
  service_->Send(Bind("web-1"), NewWaiter().Callback());
  EXPECT_THAT(ReadMessage(s), ElementsAre("patch pre-1", "delete victim-1", "bind web-1"));
}

TEST_F(CoalescingTest, GoingIdleWritesWhatWaitsAtOnce) {
  Stream s = StartAndOpen(absl::Seconds(30));
  service_->SetSchedulerBusy(true);
  const absl::Time sent = absl::Now();
  service_->Send(Patch("pre-1"), NewWaiter().Callback());
  service_->Send(Delete("victim-1"), NewWaiter().Callback());
  service_->SetSchedulerBusy(false);
  EXPECT_THAT(ReadMessage(s), ElementsAre("patch pre-1", "delete victim-1"));
  EXPECT_LT(absl::Now() - sent, absl::Seconds(10));
  // Idle: the next one is written at once, as without coalescing.
  service_->Send(Patch("pre-2"), NewWaiter().Callback());
  EXPECT_THAT(ReadMessage(s), ElementsAre("patch pre-2"));
}

// A stream that ends while actions wait fails them (UNAVAILABLE), and the
// next adapter is served: the held kick does not keep the call alive.
TEST_F(CoalescingTest, ActionsWaitingWhenTheStreamEndsAreFailed) {
  Stream s = StartAndOpen(absl::Seconds(30));
  service_->SetSchedulerBusy(true);
  ExpectAWaitingActionFailsWhenTheStreamEnds(std::move(s), Patch("pre-1"));
}

// A kick still pending when the service shuts down: the action fails or was
// written, and the call ends (TearDown stops the driver after it).
TEST_F(ClusterServiceTest, ShutdownWithADriverWriteStillToStartEndsTheCall) {
  Start();
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  ResultWaiter& patched = NewWaiter();
  v1::Action patch;
  patch.mutable_patch_pod_status()->mutable_pod()->set_name("web-1");
  service_->Send(patch, patched.Callback());
  service_->Shutdown();
  ASSERT_TRUE(patched.done.HasBeenNotified());
  EXPECT_EQ(patched.result.code(), v1::ActionResult::UNAVAILABLE);
  v1::SchedulerMessage m;
  while (s.rw->Read(&m)) {
  }
  EXPECT_EQ(s.rw->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

// Streams without their hello are bounded; one refused for that does not
// count as awaiting its hello (the count once went below zero, and every
// later stream was refused as one too many).
TEST_F(ClusterServiceTest, StreamsAwaitingTheirHelloAreBounded) {
  ClusterService::Options options;
  options.max_unaccepted_streams = 1;
  Start(options);
  Stream silent;
  silent.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  silent.rw = stub_->Sync(silent.ctx.get());
  for (int i = 0; i < 10000 && service_->stats().unaccepted_streams == 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(service_->stats().unaccepted_streams, 1u);
  Stream refused = Open("adapter-b");
  const grpc::Status status = Refusal(refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(service_->stats().unaccepted_streams, 1u);

  v1::ClusterMessage hello;
  hello.mutable_hello()->set_protocol_version(1);
  hello.mutable_hello()->set_adapter("adapter-a");
  ASSERT_TRUE(silent.rw->Write(hello));
  ExpectAccepted(silent);
  EXPECT_EQ(service_->stats().unaccepted_streams, 0u);
  Stream second = Open("adapter-c");
  EXPECT_EQ(Refusal(second).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_EQ(service_->stats().refused_streams, 2u);
}

// Back-pressure: with the event thread stuck, reading stops once
// max_buffered_messages are buffered, so a result sent after them stays
// unread (its action pending); once the event thread caught up, reading
// resumes (started from the event thread) and the result is delivered.
TEST_F(ClusterServiceTest, ReadingPausesAboveTheBufferedBoundUntilTheEventThreadCatchesUp) {
  GatedHandler& gated = gated_;
  ClusterService::Options options;
  options.max_buffered_messages = 4;
  Start(options, &gated);
  Stream s = Open("adapter-a");
  ExpectAccepted(s);
  ResultWaiter& bind = NewWaiter();
  int handled_at_result = -1;
  service_->Send(Bind("web-1"), [&](const v1::ActionResult& r, absl::Time at) {
    handled_at_result = gated.list_begins();
    bind.Callback()(r, at);
  });
  const uint64_t id = ExpectAction(s);
  // The hello is logged on the event thread: let it go first, so that the
  // buffer below holds list_begins only (on a loaded machine the hello's work
  // was still queued when they came, and reading paused with two of them).
  for (int i = 0; i < 10000 && service_->stats().buffered_messages > 0; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(service_->stats().buffered_messages, 0u);
  v1::ClusterMessage begin;
  begin.mutable_list_begin();
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(s.rw->Write(begin));  // The first blocks the event thread.
  v1::ClusterMessage results;
  auto* r = results.mutable_results()->add_results();
  r->set_action_id(id);
  r->set_code(v1::ActionResult::OK);
  ASSERT_TRUE(s.rw->Write(results));
  // Reading pauses at 4 buffered; the event thread may have taken the first
  // before or after that, so 3 or 4 stay buffered, and the result is unread.
  for (int i = 0; i < 10000 && service_->stats().buffered_messages < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_GE(service_->stats().buffered_messages, 3u);
  EXPECT_EQ(service_->stats().pending_actions, 1u);
  EXPECT_FALSE(bind.done.HasBeenNotified());
  gated.Open();
  ASSERT_TRUE(bind.Wait());
  EXPECT_EQ(bind.result.code(), v1::ActionResult::OK);
  // Read only after the event thread emptied the buffer (it resumes below a
  // quarter of the bound): at least the first four list_begins were taken,
  // three of them handled (without the pause: none, the first one blocks).
  EXPECT_GE(handled_at_result, 3);
}

v1::ObjectEvent PodEvent(v1::ObjectEvent::Type type, const std::string& uid) {
  v1::ObjectEvent e;
  e.set_type(type);
  e.mutable_pod()->mutable_meta()->set_name("pod-" + uid);
  e.mutable_pod()->mutable_meta()->set_uid(uid);
  return e;
}

// A preemption victim's DisruptionTarget patch and its deletion come back in
// one batch: the update is not applied, the deletion (with the last state) is.
TEST(SupersededPodUpsertsTest, AnUpdateThatTheSamePodsDeletionFollowsIsSkipped) {
  google::protobuf::RepeatedPtrField<v1::ObjectEvent> events;
  *events.Add() = PodEvent(v1::ObjectEvent::UPSERT, "victim");
  *events.Add() = PodEvent(v1::ObjectEvent::UPSERT, "other");
  *events.Add() = PodEvent(v1::ObjectEvent::DELETE, "victim");
  v1::ObjectEvent* node = events.Add();
  node->set_type(v1::ObjectEvent::UPSERT);
  node->mutable_node()->mutable_meta()->set_uid("victim");  // Not a pod: never skipped.
  EXPECT_THAT(SupersededPodUpserts(events, std::vector<bool>(4, true)), ElementsAre(true, false, false, false));
}

TEST(SupersededPodUpsertsTest, AnUpdateAfterTheDeletionOrBeforeARefusedOneIsApplied) {
  google::protobuf::RepeatedPtrField<v1::ObjectEvent> events;
  *events.Add() = PodEvent(v1::ObjectEvent::DELETE, "a");
  *events.Add() = PodEvent(v1::ObjectEvent::UPSERT, "a");  // A new incarnation under the same uid: kept.
  *events.Add() = PodEvent(v1::ObjectEvent::UPSERT, "b");
  *events.Add() = PodEvent(v1::ObjectEvent::DELETE, "b");  // Refused by validation.
  EXPECT_THAT(SupersededPodUpserts(events, {true, true, true, false}), ElementsAre(false, false, false, false));
  // Two updates before the deletion: both skipped.
  google::protobuf::RepeatedPtrField<v1::ObjectEvent> twice;
  *twice.Add() = PodEvent(v1::ObjectEvent::UPSERT, "c");
  *twice.Add() = PodEvent(v1::ObjectEvent::UPSERT, "c");
  *twice.Add() = PodEvent(v1::ObjectEvent::DELETE, "c");
  EXPECT_THAT(SupersededPodUpserts(twice, std::vector<bool>(3, true)), ElementsAre(true, true, false));
}

}  // namespace
}  // namespace podium::scheduler
