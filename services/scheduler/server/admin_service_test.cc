// AdminService over a real in-process gRPC server on a loopback port.
#include "server/admin_service.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache.h"
#include "cache/snapshot.h"
#include "decision_broadcaster.h"
#include "gmock/gmock.h"
#include "grpc_support/async_driver.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "logging/capturing_sink.h"
#include "logging/logger.h"
#include "metrics/metrics.h"
#include "queue/fake_clock.h"
#include "queue/scheduling_queue.h"
#include "scheduler.h"
#include "server/cluster_service.h"

namespace podium::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

sdk::PodInfoPtr MakePod(const std::string& ns, const std::string& name, int64_t created_us) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(ns + "-" + name + "-uid");
  pod.mutable_meta()->set_namespace_(ns);
  pod.mutable_meta()->set_name(name);
  pod.mutable_meta()->set_creation_timestamp_us(created_us);
  pod.add_containers()->set_name("c");
  return sdk::PodInfo::Create(pod);
}

class NullHandler : public ClusterEventHandler {
 public:
  void OnListBegin() override {}
  void OnObjectEvent(const v1::ObjectEvent&) override {}
  void OnListEnd() override {}
  void OnAdapterDisconnected() override {}
};

class AdminServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SchedulingQueue::Options qo;
    qo.clock = &clock_;
    qo.pre_enqueue = pre_enqueue_;
    queue_ = std::make_unique<SchedulingQueue>(qo);
    scheduler_ = std::make_unique<Scheduler>(Scheduler::Options{}, cache_, snapshot_, *queue_,
                                             std::vector<FrameworkPtr>{}, metrics_, clock_);
    cluster_ = std::make_unique<ClusterService>(ClusterService::Options{}, handler_, nullptr);
    admin_ = std::make_unique<AdminService>(*scheduler_, *queue_, cache_,
                                            std::vector<GrpcPluginProcess*>{}, cluster_.get());
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(admin_->service());
    driver_ = std::make_unique<grpc_support::AsyncDriver>(builder.AddCompletionQueue(true));
    driver_->Start();
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    admin_->Start(driver_->server_queue());
    stub_ = v1::Admin::NewStub(grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                                   grpc::InsecureChannelCredentials()));
  }

  void TearDown() override {
    ShutDownAsMainDoes();
    cluster_->Shutdown();
    scheduler_->Stop();
  }

  // The server's Shutdown, the admin service's Stop, then the driver's
  // (main's order). Again in TearDown: each is idempotent.
  void ShutDownAsMainDoes() {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    admin_->Stop();
    driver_->Stop();
  }

  std::unique_ptr<grpc::ClientContext> Ctx() {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return ctx;
  }

  // Pops `name` and returns it to the queue as failed: rejected by `plugin`,
  // or with an error when `plugin` is empty.
  void Fail(const std::string& uid, const std::string& plugin, const std::string& message) {
    auto info = queue_->TryPop();
    ASSERT_TRUE(info.has_value());
    ASSERT_EQ(info->uid(), uid);
    if (!plugin.empty()) info->unschedulable_plugins = {plugin};
    info->message = message;
    ASSERT_TRUE(queue_->AddUnschedulableIfNotPresent(*info, queue_->scheduling_cycle()).ok());
    queue_->Done(uid);
  }

  PreEnqueueFn pre_enqueue_;  // Set by a test's fixture before SetUp.
  FakeClock clock_;
  Cache cache_{Cache::Options{}};
  Snapshot snapshot_;
  SchedulerMetrics metrics_{std::make_shared<prometheus::Registry>()};
  std::unique_ptr<SchedulingQueue> queue_;
  std::unique_ptr<Scheduler> scheduler_;
  NullHandler handler_;
  std::unique_ptr<ClusterService> cluster_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<grpc_support::AsyncDriver> driver_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Admin::Stub> stub_;
};

TEST_F(AdminServiceTest, ListQueuedPodsPagesThroughEveryPodOnce) {
  for (int i = 0; i < 7; ++i) queue_->Add(MakePod("default", absl::StrCat("p", i), i));
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    v1::ListQueuedPodsRequest request;
    request.set_page_size(3);
    request.set_page_token(token);
    v1::ListQueuedPodsResponse response;
    ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &response).ok());
    EXPECT_EQ(response.total(), 7);
    EXPECT_LE(response.pods_size(), 3);
    EXPECT_FALSE(response.adapter_connected());
    for (const auto& p : response.pods()) seen.push_back(p.pod().name());
    token = response.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(pages, 3);
  EXPECT_THAT(seen, ElementsAre("p0", "p1", "p2", "p3", "p4", "p5", "p6"));
}

TEST_F(AdminServiceTest, ListQueuedPodsDefaultPageAndFilters) {
  for (int i = 0; i < AdminService::kDefaultPageSize + 1; ++i) {
    queue_->Add(MakePod(i == 0 ? "kube-system" : "default", absl::StrCat("p", i), i));
    clock_.Advance(absl::Milliseconds(1));  // PrioritySort: equal priorities by queue time.
  }
  v1::ListQueuedPodsResponse response;
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), {}, &response).ok());
  EXPECT_EQ(response.pods_size(), AdminService::kDefaultPageSize);
  EXPECT_FALSE(response.next_page_token().empty());

  Fail("kube-system-p0-uid", "NodeAffinity", "0/1 nodes are available");
  v1::ListQueuedPodsRequest request;
  request.set_plugin("NodeAffinity");
  response.Clear();
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &response).ok());
  ASSERT_EQ(response.pods_size(), 1);
  EXPECT_EQ(response.pods(0).pod().name(), "p0");
  EXPECT_EQ(response.pods(0).queue(), v1::UNSCHEDULABLE);
  EXPECT_TRUE(response.next_page_token().empty());

  request.Clear();
  request.set_namespace_("kube-system");
  request.set_queue(v1::ACTIVE);
  response.Clear();
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &response).ok());
  EXPECT_EQ(response.total(), 0);
}

// Gang members Coscheduling holds at PreEnqueue (issue 7's bad input: a pod
// naming a group that never appears, a group with fewer pods than its
// minimum) wait, listed as gated with the plugin's reason.
class GatedGangAdminTest : public AdminServiceTest {
 protected:
  GatedGangAdminTest() {
    pre_enqueue_ = [](const sdk::PodInfo& pod) {
      if (pod.pod->pod_group().empty()) return sdk::Status::Success();
      sdk::Status s(sdk::Code::kUnschedulableAndUnresolvable,
                    "waiting for pod group default/" + pod.pod->pod_group() + ": it does not exist");
      s.WithPlugin("Coscheduling");
      return s;
    };
  }
};

TEST_F(GatedGangAdminTest, AMemberOfAGroupThatNeverAppearsIsListedAsGatedWithTheReason) {
  v1::Pod lost = *MakePod("default", "lost-0", 1)->pod;
  lost.set_pod_group("nowhere");
  queue_->Add(sdk::PodInfo::Create(lost));
  queue_->Add(MakePod("default", "plain", 2));

  v1::ListQueuedPodsRequest request;
  request.set_plugin("Coscheduling");
  v1::ListQueuedPodsResponse response;
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &response).ok());
  ASSERT_EQ(response.pods_size(), 1);
  EXPECT_EQ(response.pods(0).pod().name(), "lost-0");
  EXPECT_EQ(response.pods(0).queue(), v1::GATED);
  EXPECT_EQ(response.pods(0).gated_by(), "Coscheduling");
  EXPECT_EQ(response.pods(0).message(), "waiting for pod group default/nowhere: it does not exist");

  v1::ExplainPodRequest explain;
  explain.set_namespace_("default");
  explain.set_name("lost-0");
  v1::ExplainPodResponse why;
  ASSERT_TRUE(stub_->ExplainPod(Ctx().get(), explain, &why).ok());
  EXPECT_EQ(why.pod().queue(), v1::GATED);
  EXPECT_EQ(why.message(), "waiting for pod group default/nowhere: it does not exist");
}

// podium-scheduler without --token-auth-file / --client-ca-file: nobody has
// an identity, so every call that changes the scheduler is refused, naming
// what would let it through; reads stay open.
TEST_F(AdminServiceTest, WithoutAccessControlChangesAreRefusedAndReadsServed) {
  admin_->RequireIdentityForChanges(true);
  v1::SetSchedulingPausedRequest pause;
  pause.set_paused(true);
  v1::SetSchedulingPausedResponse paused;
  grpc::Status s = stub_->SetSchedulingPaused(Ctx().get(), pause, &paused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_THAT(s.error_message(), ::testing::HasSubstr("--token-auth-file or --client-ca-file"));
  EXPECT_FALSE(scheduler_->paused());
  v1::MovePodsToActiveQueueResponse moved;
  EXPECT_EQ(stub_->MovePodsToActiveQueue(Ctx().get(), {}, &moved).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::SetLogVerbosityRequest verbosity;
  verbosity.set_verbosity(4);
  v1::SetLogVerbosityResponse set;
  EXPECT_EQ(stub_->SetLogVerbosity(Ctx().get(), verbosity, &set).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  v1::ListQueuedPodsResponse listed;
  EXPECT_TRUE(stub_->ListQueuedPods(Ctx().get(), {}, &listed).ok());
}

TEST_F(AdminServiceTest, BadPageTokenIsRefusedAndNotEchoedWhole) {
  v1::ListQueuedPodsRequest request;
  request.set_page_token(std::string(100000, 'x'));
  v1::ListQueuedPodsResponse response;
  grpc::Status s = stub_->ListQueuedPods(Ctx().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("page_token"));
  EXPECT_LT(s.error_message().size(), 512u);
}

TEST_F(AdminServiceTest, ExplainPodNotFoundDoesNotEchoUnboundedInput) {
  v1::ExplainPodRequest request;
  request.set_namespace_("default");
  request.set_name(std::string(64 << 10, 'n'));
  v1::ExplainPodResponse response;
  grpc::Status s = stub_->ExplainPod(Ctx().get(), request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_LT(s.error_message().size(), 1024u);
  EXPECT_THAT(s.error_message(), HasSubstr("bytes)"));
}

TEST_F(AdminServiceTest, ExplainPodReportsAnAttemptThatFailedWithAnError) {
  queue_->Add(MakePod("default", "web", 1));
  Fail("default-web-uid", "", "running PreFilter plugin \"Remote\": deadline exceeded");
  v1::ExplainPodRequest request;
  request.set_namespace_("default");
  request.set_name("web");
  v1::ExplainPodResponse response;
  grpc::Status s = stub_->ExplainPod(Ctx().get(), request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.attempts(), 1);
  EXPECT_THAT(response.last_error(), HasSubstr("deadline exceeded"));
  EXPECT_EQ(response.pod().pod().name(), "web");
}

TEST_F(AdminServiceTest, PodsBeingScheduledAreListedInFlightAfterTheQueues) {
  queue_->Add(MakePod("default", "popped", 0));
  clock_.Advance(absl::Seconds(5));
  ASSERT_EQ(queue_->TryPop()->uid(), "default-popped-uid");
  const absl::Time popped = clock_.Now();
  clock_.Advance(absl::Seconds(1));
  queue_->Add(MakePod("default", "queued", 1));
  v1::ListQueuedPodsRequest request;
  request.set_page_size(1);
  v1::ListQueuedPodsResponse first;
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &first).ok());
  EXPECT_EQ(first.total(), 2);
  ASSERT_EQ(first.pods_size(), 1);
  EXPECT_EQ(first.pods(0).queue(), v1::ACTIVE);
  request.set_page_token(first.next_page_token());
  v1::ListQueuedPodsResponse second;
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), request, &second).ok());
  ASSERT_EQ(second.pods_size(), 1);
  EXPECT_EQ(second.pods(0).pod().name(), "popped");
  EXPECT_EQ(second.pods(0).queue(), v1::IN_FLIGHT);
  EXPECT_EQ(second.pods(0).attempts(), 1);
  EXPECT_EQ(second.pods(0).enqueued_us(), absl::ToUnixMicros(popped));
  EXPECT_FALSE(second.pods(0).has_permit_wait());
  EXPECT_TRUE(second.next_page_token().empty());

  v1::ListQueuedPodsRequest waiting;
  waiting.set_queue(v1::WAITING_ON_PERMIT);
  v1::ListQueuedPodsResponse none;
  ASSERT_TRUE(stub_->ListQueuedPods(Ctx().get(), waiting, &none).ok());
  EXPECT_EQ(none.total(), 0);
  queue_->Done("default-popped-uid");
}

TEST_F(AdminServiceTest, MovePodsToActiveQueueByName) {
  for (int i = 0; i < 3; ++i) queue_->Add(MakePod("default", absl::StrCat("p", i), i));
  for (int i = 0; i < 3; ++i) Fail(absl::StrCat("default-p", i, "-uid"), "NodeAffinity", "no");
  EXPECT_EQ(queue_->PendingPods().unschedulable, 3u);
  v1::MovePodsToActiveQueueRequest request;
  auto* ref = request.add_pods();
  ref->set_namespace_("default");
  ref->set_name("p1");
  ref = request.add_pods();
  ref->set_namespace_("default");
  ref->set_name("not-there");
  v1::MovePodsToActiveQueueResponse response;
  ASSERT_TRUE(stub_->MovePodsToActiveQueue(Ctx().get(), request, &response).ok());
  EXPECT_EQ(response.moved(), 1);
  EXPECT_EQ(queue_->PendingPods().active, 1u);
  auto popped = queue_->TryPop();
  ASSERT_TRUE(popped.has_value());
  EXPECT_EQ(popped->pod().meta().name(), "p1");
}

TEST_F(AdminServiceTest, GetStatusSaysWhySchedulingIsHeld) {
  v1::SchedulerStatus status;
  ASSERT_TRUE(stub_->GetStatus(Ctx().get(), {}, &status).ok());
  EXPECT_FALSE(status.adapter_connected());
  EXPECT_EQ(status.scheduling_held_because(), "no adapter is connected");
  v1::SetSchedulingPausedRequest pause;
  pause.set_paused(true);
  v1::SetSchedulingPausedResponse paused;
  ASSERT_TRUE(stub_->SetSchedulingPaused(Ctx().get(), pause, &paused).ok());
  status.Clear();
  ASSERT_TRUE(stub_->GetStatus(Ctx().get(), {}, &status).ok());
  EXPECT_TRUE(status.paused());
  EXPECT_EQ(status.scheduling_held_because(), "paused by an operator");
}

// DumpCache lists, per node, the pods nominated there (the nominations hook
// main wires to preemption's nominator), only when pods are asked for.
TEST_F(AdminServiceTest, DumpCacheListsTheNominatedPodsOfEachNode) {
  v1::Node node;
  node.mutable_meta()->set_name("node-a");
  node.mutable_allocatable()->set_milli_cpu(2000);
  cache_.AddOrUpdateNode(node);
  admin_->SetNominations([] {
    v1::ObjectRef ref;
    ref.set_kind("Pod");
    ref.set_namespace_("default");
    ref.set_name("preemptor");
    std::map<std::string, std::vector<v1::ObjectRef>> out;
    out["node-a"].push_back(ref);
    out["node-gone"].push_back(ref);  // A node the cache no longer has: not listed.
    return out;
  }, [](std::string_view) { return std::string(); });
  v1::DumpCacheRequest request;
  request.set_include_pods(true);
  v1::DumpCacheResponse dump;
  ASSERT_TRUE(stub_->DumpCache(Ctx().get(), request, &dump).ok());
  ASSERT_EQ(dump.nodes_size(), 1);
  ASSERT_EQ(dump.nodes(0).nominated_pods_size(), 1);
  EXPECT_EQ(dump.nodes(0).nominated_pods(0).name(), "preemptor");
  request.set_include_pods(false);
  dump.Clear();
  ASSERT_TRUE(stub_->DumpCache(Ctx().get(), request, &dump).ok());
  EXPECT_EQ(dump.nodes(0).nominated_pods_size(), 0);
}

// A node's requested pods are its bound and assumed pods (a pod's own
// requests count none), as `podiumctl nodes` shows them against allocatable.
TEST_F(AdminServiceTest, DumpCacheCountsTheBoundAndAssumedPodsAsRequestedPods) {
  v1::Node node;
  node.mutable_meta()->set_name("node-a");
  node.mutable_allocatable()->set_milli_cpu(2000);
  node.mutable_allocatable()->set_pods(30);
  cache_.AddOrUpdateNode(node);
  v1::Pod bound = *MakePod("default", "bound", 1)->pod;
  bound.set_node_name("node-a");
  ASSERT_TRUE(cache_.AddOrUpdatePod(bound).ok());
  ASSERT_TRUE(cache_.AssumePod(MakePod("default", "assumed", 2), "node-a").ok());
  v1::DumpCacheRequest request;
  request.set_include_pods(true);
  v1::DumpCacheResponse dump;
  ASSERT_TRUE(stub_->DumpCache(Ctx().get(), request, &dump).ok());
  ASSERT_EQ(dump.nodes_size(), 1);
  EXPECT_EQ(dump.nodes(0).allocatable().pods(), 30);
  EXPECT_EQ(dump.nodes(0).requested().pods(), 2);
}

// Raising the verbosity through the Admin API makes the scheduler's V(4)
// lines appear; lowering it hides them again. Asserted on the logger's sink.
SchedulingDecision Decision(const std::string& name) {
  SchedulingDecision d;
  d.pod_namespace = "default";
  d.pod_name = name;
  d.result = SchedulingDecision::Result::kScheduled;
  d.node_name = "node-1";
  return d;
}

// Waits (bounded, 10 s) until the broadcaster has `n` subscribers.
bool WaitForSubscribers(DecisionBroadcaster& b, size_t n) {
  for (int i = 0; i < 10000; ++i) {
    if (b.num_subscribers() == n) return true;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return b.num_subscribers() == n;
}

// Reads a decision stream to its end; whether it ended OK.
template <typename Message, typename Reader>
bool DrainStream(Reader& reader) {
  Message m;
  while (reader->Read(&m)) {
  }
  return reader->Finish().ok();
}

// A watcher that goes away is unsubscribed; the next one gets only what is
// published after it came.
TEST_F(AdminServiceTest, WatchDecisionsStreamsAndForgetsAWatcherThatDisconnects) {
  DecisionBroadcaster& decisions = scheduler_->decisions();
  {
    auto ctx = Ctx();
    auto reader = stub_->WatchDecisions(ctx.get(), v1::WatchDecisionsRequest{});
    ASSERT_TRUE(WaitForSubscribers(decisions, 1));
    decisions.Publish(Decision("web-1"));
    decisions.Publish(Decision("web-2"));
    v1::SchedulingDecision d;
    ASSERT_TRUE(reader->Read(&d));
    EXPECT_EQ(d.pod().name(), "web-1");
    EXPECT_EQ(d.result(), v1::SchedulingDecision::SCHEDULED);
    ASSERT_TRUE(reader->Read(&d));
    EXPECT_EQ(d.pod().name(), "web-2");
    ctx->TryCancel();
    while (reader->Read(&d)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  ASSERT_TRUE(WaitForSubscribers(decisions, 0));
  decisions.Publish(Decision("nobody-watches"));

  auto ctx = Ctx();
  auto reader = stub_->WatchDecisions(ctx.get(), v1::WatchDecisionsRequest{});
  ASSERT_TRUE(WaitForSubscribers(decisions, 1));
  decisions.Publish(Decision("web-3"));
  v1::SchedulingDecision d;
  ASSERT_TRUE(reader->Read(&d));
  EXPECT_EQ(d.pod().name(), "web-3");
  ctx->TryCancel();
}

// WatchDecisionBatches: the decisions published within the gather delay go
// out together, every one of them, in order, and no message is empty or holds
// more than 1 000.
TEST_F(AdminServiceTest, WatchDecisionBatchesSendsWhatPiledUpDuringAWriteTogetherInOrder) {
  DecisionBroadcaster& decisions = scheduler_->decisions();
  auto ctx = Ctx();
  auto reader = stub_->WatchDecisionBatches(ctx.get(), v1::WatchDecisionsRequest{});
  ASSERT_TRUE(WaitForSubscribers(decisions, 1));
  constexpr int kDecisions = 2500;
  for (int i = 0; i < kDecisions; ++i) decisions.Publish(Decision(absl::StrCat("web-", i)));
  std::vector<std::string> got;
  int messages = 0;
  v1::DecisionBatch batch;
  while (got.size() < kDecisions && reader->Read(&batch)) {
    ++messages;
    EXPECT_GE(batch.decisions_size(), 1);
    EXPECT_LE(batch.decisions_size(), 1000);
    for (const auto& d : batch.decisions()) got.push_back(d.pod().name());
  }
  ASSERT_EQ(got.size(), static_cast<size_t>(kDecisions));
  for (int i = 0; i < kDecisions; ++i) ASSERT_EQ(got[i], absl::StrCat("web-", i));
  // 2 500 decisions published at once: three messages (1 000, 1 000, 500)
  // unless the publishing loop took longer than the gather delay.
  EXPECT_LT(messages, kDecisions / 10);
  ctx->TryCancel();
  while (reader->Read(&batch)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_TRUE(WaitForSubscribers(decisions, 0));
}

// Watchers still open when the server shuts down, one of each stream, the
// batch watcher with a decision gathered but not yet written (its alarm
// set): both streams end, the alarm is cancelled, and once the driver has
// drained the queue both writers are gone (unsubscribed).
TEST_F(AdminServiceTest, WatchersOfBothStreamsOpenAtShutdownEndAndAreUnsubscribed) {
  DecisionBroadcaster& decisions = scheduler_->decisions();
  auto ctx = Ctx();
  auto reader = stub_->WatchDecisions(ctx.get(), v1::WatchDecisionsRequest{});
  auto batch_ctx = Ctx();
  auto batch_reader = stub_->WatchDecisionBatches(batch_ctx.get(), v1::WatchDecisionsRequest{});
  ASSERT_TRUE(WaitForSubscribers(decisions, 2));
  decisions.Publish(Decision("web-1"));
  v1::SchedulingDecision d;
  ASSERT_TRUE(reader->Read(&d));
  v1::DecisionBatch batch;
  ASSERT_TRUE(batch_reader->Read(&batch));
  ASSERT_EQ(batch.decisions_size(), 1);
  decisions.Publish(Decision("web-2"));  // Gathered for 5 ms by the batch writer.
  ShutDownAsMainDoes();
  EXPECT_EQ(decisions.num_subscribers(), 0u);
  EXPECT_FALSE(DrainStream<v1::SchedulingDecision>(reader));
  EXPECT_FALSE(DrainStream<v1::DecisionBatch>(batch_reader));
}

TEST(AdminLogVerbosityTest, RaisingVerbosityShowsV4LinesAndLoweringHidesThem) {
  logging::CapturingSink sink;
  logging::Logger logger("podium-scheduler", &sink, /*verbosity=*/0);
  logging::SetDefault(&logger);
  struct RestoreDefaultLogger {
    ~RestoreDefaultLogger() { logging::SetDefault(nullptr); }
  } restore;  // Destroyed after everything below that may log.
  FakeClock clock;
  Cache cache{Cache::Options{}};
  Snapshot snapshot;
  SchedulerMetrics metrics{std::make_shared<prometheus::Registry>()};
  SchedulingQueue::Options qo;
  qo.clock = &clock;
  SchedulingQueue queue(qo);
  std::vector<FrameworkPtr> profiles;
  profiles.push_back(std::make_unique<Framework>(ProfileSpec{}, 1));
  Scheduler::Options so;
  so.run_scheduling_thread = false;
  so.run_housekeeping_thread = false;
  Scheduler scheduler(so, cache, snapshot, queue, std::move(profiles), metrics, clock);
  AdminService admin(scheduler, queue, cache, {}, nullptr, &logger);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(admin.service());
  grpc_support::AsyncDriver driver(builder.AddCompletionQueue(true));
  driver.Start();
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  admin.Start(driver.server_queue());
  auto stub = v1::Admin::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto ctx = [] {
    auto c = std::make_unique<grpc::ClientContext>();
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return c;
  };
  int version = 0;
  auto update_pod = [&] {
    v1::ObjectEvent e;
    e.set_type(v1::ObjectEvent::UPSERT);
    *e.mutable_pod() = *MakePod("default", "web", 1)->pod;
    e.mutable_pod()->mutable_meta()->set_resource_version(std::to_string(++version));
    scheduler.OnObjectEvent(e);
  };
  auto v4_lines = [&] {
    std::vector<logging::CapturingSink::Line> out;
    for (const auto& line : sink.lines()) {
      if (line.message == "Update event for unscheduled pod") out.push_back(line);
    }
    return out;
  };
  auto set = [&](int v, v1::SetLogVerbosityResponse* response) {
    v1::SetLogVerbosityRequest request;
    request.set_verbosity(v);
    return stub->SetLogVerbosity(ctx().get(), request, response);
  };

  update_pod();  // Added.
  update_pod();  // Updated: a V(4) line, hidden at 0.
  EXPECT_TRUE(v4_lines().empty());

  v1::SetLogVerbosityResponse response;
  ASSERT_TRUE(set(4, &response).ok());
  EXPECT_EQ(response.previous(), 0);
  EXPECT_EQ(response.verbosity(), 4);
  update_pod();
  const auto shown = v4_lines();
  ASSERT_EQ(shown.size(), 1u);
  EXPECT_EQ(shown[0].verbosity, 4);
  EXPECT_EQ(shown[0].fields, (std::vector<std::pair<std::string, std::string>>{{"pod", "default/web"}}));

  ASSERT_TRUE(set(2, &response).ok());
  EXPECT_EQ(response.previous(), 4);
  update_pod();
  EXPECT_EQ(v4_lines().size(), 1u);

  // Out of range: refused, nothing changed.
  grpc::Status refused = set(11, &response);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("verbosity: 11"));
  v1::SchedulerStatus status;
  ASSERT_TRUE(stub->GetStatus(ctx().get(), v1::GetStatusRequest{}, &status).ok());
  EXPECT_EQ(status.log_verbosity(), 2);

  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  admin.Stop();
  driver.Stop();
  scheduler.Stop();
}

}  // namespace
}  // namespace podium::scheduler
