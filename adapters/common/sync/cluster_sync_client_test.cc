#include "common/sync/cluster_sync_client.h"

#include <gtest/gtest.h>

#include "absl/synchronization/notification.h"

namespace podium::adapter {
namespace {

// A scheduler that takes the list, binds pod default/a, and records what it got.
class FakeScheduler final : public v1::Cluster::Service {
 public:
  grpc::Status Sync(grpc::ServerContext*, grpc::ServerReaderWriter<v1::SchedulerMessage, v1::ClusterMessage>* stream) override {
    v1::ClusterMessage m;
    std::vector<v1::ClusterMessage> list, after;
    while (stream->Read(&m)) {
      list.push_back(m);
      if (m.has_list_end()) break;
    }
    v1::SchedulerMessage hello;
    hello.mutable_hello()->set_protocol_version(1);
    hello.mutable_hello()->add_scheduler_names("default-scheduler");
    stream->Write(hello);
    v1::SchedulerMessage actions;
    v1::Action* bind = actions.mutable_actions()->add_actions();
    bind->set_id(42);
    bind->mutable_bind()->mutable_pod()->set_namespace_("default");
    bind->mutable_bind()->mutable_pod()->set_name("a");
    bind->mutable_bind()->mutable_pod()->set_uid("uid-a");
    bind->mutable_bind()->set_node_name("n1");
    stream->Write(actions);
    while (stream->Read(&m)) {  // Until the adapter half-closes.
      after.push_back(m);
      if (m.has_results()) got_result_.Notify();
    }
    absl::MutexLock lock(&mu_);
    list_ = std::move(list);
    after_ = std::move(after);
    return grpc::Status::OK;
  }

  absl::Notification got_result_;
  absl::Mutex mu_;
  std::vector<v1::ClusterMessage> list_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::ClusterMessage> after_ ABSL_GUARDED_BY(mu_);
};

v1::Pod MakePod(const std::string& name) {
  v1::Pod p;
  p.mutable_meta()->set_namespace_("default");
  p.mutable_meta()->set_name(name);
  p.mutable_meta()->set_uid("uid-" + name);
  return p;
}

TEST(ClusterSyncClientTest, SendsListThenExecutesBindAndReportsOkWithUpsert) {
  FakeScheduler scheduler;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&scheduler);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);

  std::vector<v1::ObjectEvent> list(1);
  list[0].set_type(v1::ObjectEvent::UPSERT);
  list[0].mutable_node()->mutable_meta()->set_name("n1");
  for (const char* name : {"a", "b", "c"}) {
    v1::ObjectEvent& e = list.emplace_back();
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_pod() = MakePod(name);
  }

  // The adapter's executor, reduced to what this test needs: bind, then
  // report the pod's new state and the result (inline: both only queue).
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  ClusterSyncClient* client_ptr = nullptr;
  ClusterSyncClient::Options options;
  options.batch_size = 2;
  ClusterSyncClient client(channel, options, [&](v1::Action&& a) {
    v1::ObjectEvent bound;
    bound.set_type(v1::ObjectEvent::UPSERT);
    *bound.mutable_pod() = MakePod(a.bind().pod().name());
    bound.mutable_pod()->set_node_name(a.bind().node_name());
    v1::ActionResult result;
    result.set_action_id(a.id());
    result.set_code(v1::ActionResult::OK);
    client_ptr->SendEvents({bound});
    client_ptr->SendResult(result);
  });
  client_ptr = &client;
  client.Start(std::move(list));

  ASSERT_TRUE(scheduler.got_result_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(client.Close(absl::Seconds(10)).ok());
  ASSERT_TRUE(client.hello().has_value());
  EXPECT_EQ(client.hello()->scheduler_names(0), "default-scheduler");
  server->Shutdown();

  absl::MutexLock lock(&scheduler.mu_);
  // hello, list begin, 4 events in batches of 2, list end.
  ASSERT_EQ(scheduler.list_.size(), 5u);
  EXPECT_EQ(scheduler.list_[0].hello().adapter(), "podium-sim");
  EXPECT_TRUE(scheduler.list_[1].has_list_begin());
  EXPECT_EQ(scheduler.list_[2].events().events_size(), 2);
  EXPECT_EQ(scheduler.list_[3].events().events_size(), 2);
  EXPECT_TRUE(scheduler.list_[2].events().events(0).has_node());
  EXPECT_TRUE(scheduler.list_[4].has_list_end());

  // The pod's UPSERT (bound) and the OK result. Results have their own lane
  // (as a bind's response and the watch event are independent in Kubernetes),
  // so either may come first.
  ASSERT_EQ(scheduler.after_.size(), 2u);
  const bool result_first = scheduler.after_[0].has_results();
  const v1::ClusterMessage& upsert = scheduler.after_[result_first ? 1 : 0];
  const v1::ClusterMessage& result = scheduler.after_[result_first ? 0 : 1];
  ASSERT_EQ(upsert.events().events_size(), 1);
  const v1::ObjectEvent& e = upsert.events().events(0);
  EXPECT_EQ(e.type(), v1::ObjectEvent::UPSERT);
  EXPECT_EQ(e.pod().meta().name(), "a");
  EXPECT_EQ(e.pod().node_name(), "n1");
  ASSERT_EQ(result.results().results_size(), 1);
  EXPECT_EQ(result.results().results(0).action_id(), 42u);
  EXPECT_EQ(result.results().results(0).code(), v1::ActionResult::OK);
}

// Sends two binds in one Actions message, then, once their outcomes are in,
// ends the stream after the adapter half-closes; records what came after the list.
class TwoBindScheduler final : public v1::Cluster::Service {
 public:
  explicit TwoBindScheduler(uint32_t hello_version = 0) : hello_version_(hello_version) {}
  grpc::Status Sync(grpc::ServerContext*, grpc::ServerReaderWriter<v1::SchedulerMessage, v1::ClusterMessage>* stream) override {
    v1::ClusterMessage m;
    while (stream->Read(&m)) {
      if (m.has_list_end()) break;
    }
    if (hello_version_ > 0) {  // Read by the client before the actions.
      v1::SchedulerMessage hello;
      hello.mutable_hello()->set_protocol_version(hello_version_);
      stream->Write(hello);
    }
    v1::SchedulerMessage actions;
    for (const char* name : {"a", "b"}) {
      v1::Action* bind = actions.mutable_actions()->add_actions();
      bind->set_id(name[0] == 'a' ? 1 : 2);
      bind->mutable_bind()->mutable_pod()->set_namespace_("default");
      bind->mutable_bind()->mutable_pod()->set_name(name);
      bind->mutable_bind()->set_node_name("n1");
    }
    stream->Write(actions);
    int events = 0, results = 0;
    while (stream->Read(&m)) {
      absl::MutexLock lock(&mu_);
      after_.push_back(m);
      events += m.events().events_size() + m.results().events().events_size();
      results += m.results().results_size();
      outcomes_ = events + results;
      if (events == 3 && results == 2) got_all_.Notify();
    }
    return grpc::Status::OK;
  }
  const uint32_t hello_version_;
  absl::Notification got_all_;
  absl::Mutex mu_;
  std::vector<v1::ClusterMessage> after_ ABSL_GUARDED_BY(mu_);
  int outcomes_ ABSL_GUARDED_BY(mu_) = 0;  // Results and events received.
};

// Runs TwoBindScheduler's exchange with write_after_actions and a third
// event sent from this thread once both outcomes went out; returns what the
// scheduler got after the list.
std::vector<v1::ClusterMessage> RunTwoBinds(uint32_t hello_version) {
  TwoBindScheduler scheduler(hello_version);
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&scheduler);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  EXPECT_NE(port, 0);

  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  ClusterSyncClient* client_ptr = nullptr;
  ClusterSyncClient::Options options;
  options.write_after_actions = true;
  ClusterSyncClient client(channel, options, [&](v1::Action&& a) {
    v1::ObjectEvent bound;
    bound.set_type(v1::ObjectEvent::UPSERT);
    *bound.mutable_pod() = MakePod(a.bind().pod().name());
    bound.mutable_pod()->set_node_name(a.bind().node_name());
    v1::ActionResult result;
    result.set_action_id(a.id());
    result.set_code(v1::ActionResult::OK);
    EXPECT_TRUE(client_ptr->SendEvents({bound}));
    EXPECT_TRUE(client_ptr->SendResult(result));
    // Room for a woken writer thread to send the first outcome alone (what
    // happens without write_after_actions); no outcome waits on this.
    if (a.id() == 1) absl::SleepFor(absl::Milliseconds(20));
  });
  client_ptr = &client;
  std::vector<v1::ObjectEvent> list(2);
  for (int i = 0; i < 2; ++i) {
    list[i].set_type(v1::ObjectEvent::UPSERT);
    *list[i].mutable_pod() = MakePod(i == 0 ? "a" : "b");
  }
  client.Start(std::move(list));
  // Until both outcomes went out (results and events); then one event from this thread.
  for (;;) {
    {
      absl::MutexLock lock(&scheduler.mu_);
      if (scheduler.outcomes_ >= 4) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  v1::ObjectEvent later;
  later.set_type(v1::ObjectEvent::UPSERT);
  *later.mutable_pod() = MakePod("c");
  EXPECT_TRUE(client.SendEvents({later}));
  EXPECT_TRUE(scheduler.got_all_.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(client.Close(absl::Seconds(10)).ok());
  server->Shutdown();

  absl::MutexLock lock(&scheduler.mu_);
  return scheduler.after_;
}

// write_after_actions: the outcomes of one Actions message leave together
// once all its actions ran, results first, written by the reader thread (the
// writer thread is not woken per outcome); events queued by another thread
// still go out through the writer thread. A scheduler of protocol 1 (here:
// no hello at all) gets the results and the events in two messages.
TEST(ClusterSyncClientTest, WriteAfterActionsSendsAMessagesOutcomesTogether) {
  const std::vector<v1::ClusterMessage> after = RunTwoBinds(0);
  ASSERT_EQ(after.size(), 3u);
  ASSERT_EQ(after[0].results().results_size(), 2);
  EXPECT_EQ(after[0].results().results(0).action_id(), 1u);
  EXPECT_EQ(after[0].results().results(1).action_id(), 2u);
  EXPECT_EQ(after[0].results().events().events_size(), 0);
  ASSERT_EQ(after[1].events().events_size(), 2);
  EXPECT_EQ(after[1].events().events(0).pod().meta().name(), "a");
  EXPECT_EQ(after[1].events().events(1).pod().meta().name(), "b");
  ASSERT_EQ(after[2].events().events_size(), 1);
  EXPECT_EQ(after[2].events().events(0).pod().meta().name(), "c");
}

// A scheduler of protocol 2: the outcomes of one Actions message are one
// message, the results and then the events they caused; a later event from
// another thread goes on its own.
TEST(ClusterSyncClientTest, WithAProtocol2SchedulerAMessagesEventsRideWithItsResults) {
  const std::vector<v1::ClusterMessage> after = RunTwoBinds(2);
  ASSERT_EQ(after.size(), 2u);
  ASSERT_EQ(after[0].results().results_size(), 2);
  EXPECT_EQ(after[0].results().results(0).action_id(), 1u);
  EXPECT_EQ(after[0].results().results(1).action_id(), 2u);
  ASSERT_EQ(after[0].results().events().events_size(), 2);
  EXPECT_EQ(after[0].results().events().events(0).pod().meta().name(), "a");
  EXPECT_EQ(after[0].results().events().events(1).pod().meta().name(), "b");
  ASSERT_EQ(after[1].events().events_size(), 1);
  EXPECT_EQ(after[1].events().events(0).pod().meta().name(), "c");
}

// A scheduler that records the list and keeps the stream until the adapter closes it.
class ListRecorder final : public v1::Cluster::Service {
 public:
  grpc::Status Sync(grpc::ServerContext*, grpc::ServerReaderWriter<v1::SchedulerMessage, v1::ClusterMessage>* stream) override {
    v1::ClusterMessage m;
    while (stream->Read(&m)) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(m);
      if (m.has_list_end()) list_end_.Notify();
    }
    return grpc::Status::OK;
  }
  absl::Notification list_end_;
  absl::Mutex mu_;
  std::vector<v1::ClusterMessage> messages_ ABSL_GUARDED_BY(mu_);
};

// Defect 16: 500 events per message regardless of size; a valid cluster with
// large annotations failed with RESOURCE_EXHAUSTED (the scheduler's 4 MiB limit).
TEST(ClusterSyncClientTest, BatchesByBytesSoLargeObjectsStayUnderTheMessageLimit) {
  ListRecorder scheduler;
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&scheduler);
  builder.SetMaxReceiveMessageSize(4 << 20);  // gRPC's default, said out loud.
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);

  // 40 pods with 256 KiB of annotations each: 10 MiB in one 500-event message.
  std::vector<v1::ObjectEvent> list;
  for (int i = 0; i < 40; ++i) {
    v1::ObjectEvent& e = list.emplace_back();
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_pod() = MakePod("p" + std::to_string(i));
    (*e.mutable_pod()->mutable_meta()->mutable_annotations())["example.com/blob"] = std::string(256 << 10, 'x');
  }
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  ClusterSyncClient client(channel, {}, [](v1::Action&&) {});
  client.Start(std::move(list));
  ASSERT_TRUE(scheduler.list_end_.WaitForNotificationWithTimeout(absl::Seconds(20))) << client.status();
  EXPECT_TRUE(client.Close(absl::Seconds(10)).ok());
  server->Shutdown();

  absl::MutexLock lock(&scheduler.mu_);
  int events = 0;
  for (const v1::ClusterMessage& m : scheduler.messages_) {
    EXPECT_LE(m.ByteSizeLong(), (1u << 20) + (1u << 10));
    events += m.events().events_size();
  }
  EXPECT_EQ(events, 40);
}

TEST(ClusterSyncClientTest, ReportsAnUnreachableScheduler) {
  auto channel = grpc::CreateChannel("unix:///nonexistent/podium.sock", grpc::InsecureChannelCredentials());
  ClusterSyncClient client(channel, {}, [](v1::Action&&) {});
  client.Start({});
  EXPECT_FALSE(client.Close(absl::Seconds(10)).ok());
  EXPECT_TRUE(client.ended());
}

}  // namespace
}  // namespace podium::adapter
