// The scheduler with its plugin processes mocked at the PluginProcess seam and
// the adapter replaced by a fake ActionSink: what a user of the adapter sees.
// Tests drive scheduling cycles (ScheduleNext), time (FakeClock) and
// Housekeeping themselves: no scheduling or housekeeping thread runs, and
// background work (queue worker, binding pool) is awaited, never polled.
#include "scheduler.h"

#include <algorithm>
#include <future>
#include <map>
#include <thread>

#include "framework/mock_plugin_process.h"
#include "framework/queueing_hints.h"
#include "preemption/default_preemption.h"
#include "preemption/nominator.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "queue/fake_clock.h"

namespace podium::scheduler {
namespace {

using ::testing::_;
using ::testing::Invoke;
using ::testing::NiceMock;

// Records actions; results are given by the test.
class FakeSink : public ActionSink {
 public:
  explicit FakeSink(const Clock& clock) : clock_(clock) {}
  void Send(v1::Action action, ResultCallback on_result) override {
    if (on_send) on_send(action);
    absl::MutexLock lock(&mu_);
    action.set_id(next_id_++);
    actions_.push_back({action, std::move(on_result)});
  }
  void SetSchedulerBusy(bool busy) override {
    absl::MutexLock lock(&mu_);
    busy_calls_.push_back(busy);
  }
  // What the scheduling loop said, in order (SetSchedulerBusy).
  std::vector<bool> busy_calls() {
    absl::MutexLock lock(&mu_);
    return busy_calls_;
  }
  // Runs on the sending thread before the action is recorded (set before use).
  std::function<void(const v1::Action&)> on_send;
  // The index of the first action of the kind at or after `from`.
  std::optional<size_t> Find(v1::Action::KindCase kind, size_t from = 0) {
    absl::MutexLock lock(&mu_);
    for (size_t i = from; i < actions_.size(); ++i) {
      if (actions_[i].first.kind_case() == kind) return i;
    }
    return std::nullopt;
  }
  // Every action of the kind, in the order sent.
  std::vector<v1::Action> All(v1::Action::KindCase kind) {
    absl::MutexLock lock(&mu_);
    std::vector<v1::Action> out;
    for (const auto& a : actions_) {
      if (a.first.kind_case() == kind) out.push_back(a.first);
    }
    return out;
  }
  size_t Count(v1::Action::KindCase kind) {
    absl::MutexLock lock(&mu_);
    size_t n = 0;
    for (const auto& a : actions_) n += a.first.kind_case() == kind;
    return n;
  }
  v1::Action action(size_t i) {
    absl::MutexLock lock(&mu_);
    return actions_[i].first;
  }
  // The result of action i, read off the stream at `received` (default: now).
  void Reply(size_t i, v1::ActionResult::Code code, std::optional<absl::Time> received = std::nullopt) {
    ResultCallback cb;
    v1::ActionResult result;
    {
      absl::MutexLock lock(&mu_);
      cb = actions_[i].second;
      result.set_action_id(actions_[i].first.id());
    }
    result.set_code(code);
    cb(result, received.value_or(clock_.Now()));
  }

 private:
  const Clock& clock_;
  absl::Mutex mu_;
  uint64_t next_id_ = 1;
  std::vector<std::pair<v1::Action, ResultCallback>> actions_ ABSL_GUARDED_BY(mu_);
  std::vector<bool> busy_calls_ ABSL_GUARDED_BY(mu_);
};

v1::ObjectEvent NodeEvent(const std::string& name) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* n = e.mutable_node();
  n->mutable_meta()->set_name(name);
  n->mutable_meta()->set_uid("uid-" + name);
  n->mutable_allocatable()->set_milli_cpu(4000);
  n->mutable_allocatable()->set_pods(110);
  return e;
}

v1::ObjectEvent PodEvent(const std::string& name, const std::string& node = "",
                         const std::string& scheduler_name = "") {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* p = e.mutable_pod();
  p->mutable_meta()->set_name(name);
  p->mutable_meta()->set_namespace_("default");
  p->mutable_meta()->set_uid("uid-" + name);
  p->set_node_name(node);
  p->set_scheduler_name(scheduler_name);
  return e;
}

v1::ObjectEvent Deleted(v1::ObjectEvent e) {
  e.set_type(v1::ObjectEvent::DELETE);
  return e;
}

// A cycle answer that finds node 1 feasible, or nothing.
v1::PluginToScheduler CycleAnswer(bool fits) {
  v1::PluginToScheduler a;
  auto* c = a.mutable_cycle();
  if (fits) {
    c->add_feasible(1);
  } else {
    auto* r = c->add_rejected();
    r->set_node_id(1);
    r->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
    r->mutable_status()->add_reasons("Insufficient cpu");
    r->mutable_status()->set_plugin("Fit");
  }
  c->set_nodes_evaluated(1);
  return a;
}

// Gang's Permit answer: WAIT, 60 s.
v1::PluginToScheduler GangWaits() {
  v1::PluginToScheduler a;
  auto* r = a.mutable_permit()->add_results();
  r->set_plugin("Gang");
  r->mutable_status()->set_code(v1::Status::WAIT);
  r->set_timeout_ms(60000);
  return a;
}

v1::PluginToScheduler StatusAnswer() {
  v1::PluginToScheduler a;
  a.mutable_status();
  return a;
}

// The host as a gang test wants it: only "member" fits, and Gang makes it
// wait at Permit.
auto OnlyMemberFitsAndWaitsAtPermit() {
  return [](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(req.cycle().pod().meta().name() == "member"));
    if (req.has_permit()) return Answered(GangWaits());
    return Answered(StatusAnswer());
  };
}

v1::PermitDecision Decision(const std::string& pod, const std::string& plugin, bool allow) {
  v1::PermitDecision d;
  d.set_pod_uid("uid-" + pod);
  d.set_plugin(plugin);
  d.set_allow(allow);
  d.set_reason(allow ? "" : "gang broken");
  return d;
}

// Runs `f` on its own thread, as a gRPC reader, an action result callback or
// the event thread would. Returned() waits a generous bound: a call that
// blocks on a hung plugin never returns while the plugin hangs. The
// destructor joins (release the plugin first).
class Caller {
 public:
  explicit Caller(std::function<void()> f)
      : thread_([this, f = std::move(f)] {
          f();
          absl::MutexLock lock(&mu_);
          done_ = true;
        }) {}
  ~Caller() { thread_.join(); }
  bool Returned() {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&done_), absl::Seconds(10));
    return done_;
  }

 private:
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Stops the scheduler when it goes out of scope: declared after the locals
// the scheduling thread writes to, it runs before they are destroyed.
class StopsFirst {
 public:
  explicit StopsFirst(Scheduler& scheduler) : scheduler_(scheduler) {}
  ~StopsFirst() { scheduler_.Stop(); }

 private:
  Scheduler& scheduler_;
};

class SchedulerTest : public testing::Test {
 protected:
  // The host finds node-1 feasible and its Gang plugin answers Permit with
  // WAIT for timeout_ms; Unreserve requests are counted.
  void ExpectGangWaits(int64_t timeout_ms) {
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this, timeout_ms](v1::SchedulerToPlugin req, auto) {
      v1::PluginToScheduler a;
      if (req.has_cycle()) return Answered(CycleAnswer(true));
      if (req.has_unreserve()) ++unreserves_;
      if (req.has_permit()) {
        auto* r = a.mutable_permit()->add_results();
        r->set_plugin("Gang");
        r->mutable_status()->set_code(v1::Status::WAIT);
        r->set_timeout_ms(timeout_ms);
        return Answered(a);
      }
      return Answered(StatusAnswer());
    }));
  }
  std::atomic<int> unreserves_{0};

  // Fit signs pods by their resources (batching on).
  void SignByResources() {
    v1::Registration registration;
    v1::PluginRegistration* fit = registration.add_plugins();
    fit->set_name("Fit");
    fit->mutable_signature()->add_parts(v1::POD_PART_RESOURCES);
    ON_CALL(host_, registration()).WillByDefault(testing::Return(registration));
  }
  // A full cycle finds node-1..3 feasible, a re-evaluation every node it
  // lists; the cycle requests are kept (CycleRequests()).
  void FindEveryNodeFeasible() {
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
      if (!req.has_cycle()) return Answered(StatusAnswer());
      v1::PluginToScheduler a;
      auto* c = a.mutable_cycle();
      if (req.cycle().nodes().all_nodes()) {
        for (const char* n : {"node-1", "node-2", "node-3"}) c->add_feasible(*cache_.NodeId(n));
      } else {
        for (uint32_t id : req.cycle().nodes().node_ids()) c->add_feasible(id);
      }
      c->set_nodes_evaluated(c->feasible_size());
      absl::MutexLock lock(&requests_mu_);
      cycle_requests_.push_back(req.cycle());
      return Answered(a);
    }));
  }
  std::vector<v1::CycleRequest> CycleRequests() {
    absl::MutexLock lock(&requests_mu_);
    return cycle_requests_;
  }
  absl::Mutex requests_mu_;
  std::vector<v1::CycleRequest> cycle_requests_ ABSL_GUARDED_BY(requests_mu_);

  struct BuildOptions {
    bool with_permit = false;
    PostFilterPluginPtr post_filter;
    bool hinted = false;  // Fit has a queueing hint for Node/Add.
    bool pre_enqueue = false;  // The queue runs the scheduler's PreEnqueue (scheduling gates).
    // "Gang" is the profile's gang plugin (pod_group_members_only), registered
    // for PodGroup add/update only, as Coscheduling is (and more).
    bool gang_plugin = false;
    bool fit_on_pod_delete = false;  // Fit is registered for Pod/Delete too (no hint).
    bool gang_pre_enqueue = false;  // "Gang" is a remote PreEnqueue plugin too (implies pre_enqueue).
    std::vector<FrameworkPtr> extra_profiles;
  };

  void Build(bool with_permit, PostFilterPluginPtr post_filter = nullptr) {
    BuildOptions o;
    o.with_permit = with_permit;
    o.post_filter = std::move(post_filter);
    Build(std::move(o));
  }

  void Build(BuildOptions o) {
    ProfileSpec spec;
    spec.plugins[v1::FILTER] = {{"Fit", 0}};
    spec.plugins[v1::BIND] = {{"DefaultBinder", 0}};
    spec.processes["Fit"] = &host_;
    if (o.with_permit) {
      spec.plugins[v1::PERMIT] = {{"Gang", 0}};
      spec.plugins[v1::RESERVE] = {{"Gang", 0}};
      spec.processes["Gang"] = &host_;
    }
    if (o.gang_pre_enqueue) {
      spec.plugins[v1::PRE_ENQUEUE] = {{"Gang", 0}};
      spec.processes["Gang"] = &host_;
      o.pre_enqueue = true;
    }
    if (o.gang_plugin) spec.pod_group_members_only.insert("Gang");
    std::vector<FrameworkPtr> profiles;
    profiles.push_back(std::make_unique<Framework>(spec, 1));
    if (o.post_filter) profiles.back()->AddPostFilterPlugin(std::move(o.post_filter));
    for (auto& p : o.extra_profiles) profiles.push_back(std::move(p));
    hints_ = std::make_unique<RemoteQueueingHintEvaluator>(
        absl::flat_hash_map<std::string, PluginProcess*>{{"Fit", &host_}});
    SchedulingQueue::Options qo;
    qo.clock = &clock_;
    qo.hint_evaluator = hints_.get();
    if (o.pre_enqueue) qo.pre_enqueue = [this](const sdk::PodInfo& pod) { return scheduler_->PreEnqueue(pod); };
    queue_ = std::make_unique<SchedulingQueue>(qo);
    EventRegistry registry{{"Fit", {[&] {
                              v1::ClusterEventInterest i;
                              i.set_resource(v1::NODE);
                              i.set_action_mask(v1::ADD);
                              i.set_has_queueing_hint(o.hinted);
                              return i;
                            }()}}};
    if (o.fit_on_pod_delete) {
      v1::ClusterEventInterest i;
      i.set_resource(v1::POD);
      i.set_action_mask(v1::DELETE);
      registry["Fit"].push_back(i);
    }
    if (o.gang_plugin) {
      v1::ClusterEventInterest i;
      i.set_resource(v1::POD_GROUP);
      i.set_action_mask(v1::ADD | v1::UPDATE);
      registry["Gang"] = {i};
    }
    queue_->SetEventRegistry(std::move(registry));
    Scheduler::Options so;
    so.run_scheduling_thread = run_scheduling_thread_;
    so.run_housekeeping_thread = false;
    so.diagnoses = diagnosis_options_;
    so.max_binds_in_flight = max_binds_in_flight_;
    so.list_sync_every = list_sync_every_;
    so.gated_status_delay = gated_status_delay_;
    scheduler_ = std::make_unique<Scheduler>(so, cache_, snapshot_, *queue_, std::move(profiles), metrics_,
                                             clock_);
    scheduler_->SetActionSink(&sink_);
    scheduler_->OnListBegin();
    scheduler_->OnObjectEvent(NodeEvent("node-1"));
  }
  void TearDown() override {
    if (scheduler_) scheduler_->Stop();
  }
  // Lists the pods (the first complete list) and starts the scheduler.
  void StartWithPods(const std::vector<std::string>& names) {
    for (const auto& name : names) scheduler_->OnObjectEvent(PodEvent(name));
    scheduler_->OnListEnd();
    // Every pod in the queue before the scheduling thread starts: the queue
    // worker adds them, and a loop that started first could find the queue
    // empty between two of them.
    scheduler_->WaitForBackgroundWork();
    scheduler_->Start();
    scheduler_->WaitForBackgroundWork();
  }
  void StartWithPod(const std::string& name) { StartWithPods({name}); }
  std::optional<QueueKind> QueueOf(const std::string& name) {
    scheduler_->WaitForBackgroundWork();
    auto s = queue_->Find("uid-" + name);
    if (!s) return std::nullopt;
    return s->queue;
  }
  // scheduler_permit_wait_duration_seconds: result -> (count, sum in seconds),
  // for the results observed (both series are exported at 0 from the start).
  std::map<std::string, std::pair<uint64_t, double>> PermitWaits() {
    std::map<std::string, std::pair<uint64_t, double>> out;
    for (const auto& family : metrics_.registry()->Collect()) {
      if (family.name != "scheduler_permit_wait_duration_seconds") continue;
      for (const auto& m : family.metric) {
        if (m.histogram.sample_count == 0) continue;
        out[m.label.at(0).value] = {m.histogram.sample_count, m.histogram.sample_sum};
      }
    }
    return out;
  }
  size_t Queued() {
    const PendingPodCounts c = queue_->PendingPods();
    return c.active + c.backoff + c.unschedulable + c.gated;
  }

  NiceMock<MockPluginProcess> host_{"host"};
  FakeClock clock_;
  Cache cache_;
  Snapshot snapshot_;
  SchedulerMetrics metrics_{std::make_shared<prometheus::Registry>()};
  FakeSink sink_{clock_};
  DiagnosisStore::Options diagnosis_options_;
  size_t max_binds_in_flight_ = Scheduler::Options{}.max_binds_in_flight;
  size_t list_sync_every_ = Scheduler::Options{}.list_sync_every;
  absl::Duration gated_status_delay_ = Scheduler::Options{}.gated_status_delay;
  bool run_scheduling_thread_ = false;
  std::unique_ptr<RemoteQueueingHintEvaluator> hints_;
  std::unique_ptr<SchedulingQueue> queue_;
  std::unique_ptr<Scheduler> scheduler_;
};

TEST_F(SchedulerTest, BindsThenTheAdapterConfirmsTheAssumedPod) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  EXPECT_EQ(sink_.action(*bind).bind().node_name(), "node-1");
  EXPECT_EQ(sink_.action(*bind).bind().pod().name(), "web");
  EXPECT_TRUE(cache_.IsAssumed("uid-web"));
  sink_.Reply(*bind, v1::ActionResult::OK);
  EXPECT_TRUE(sink_.Find(v1::Action::kRecordEvent));  // Scheduled.
  scheduler_->OnObjectEvent(PodEvent("web", "node-1"));
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 1u);
}

// kube-scheduler observes the attempt when its Bind call returned; here that
// is when the bind's result was read off the adapter's stream, not when the
// callback got to run.
TEST_F(SchedulerTest, AnAttemptEndsWhenItsBindResultArrivedNotWhenTheCallbackRan) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  auto watch = scheduler_->decisions().Subscribe(nullptr);
  ASSERT_TRUE(watch.ok());
  StartWithPod("web");
  const absl::Time popped = clock_.Now();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  clock_.Advance(absl::Milliseconds(3));
  const absl::Time arrived = clock_.Now();
  clock_.Advance(absl::Milliseconds(40));  // A slow hand-off before the callback.
  sink_.Reply(*bind, v1::ActionResult::OK, arrived);
  auto decision = watch->queue->Pop();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->result, SchedulingDecision::Result::kScheduled);
  EXPECT_EQ(decision->attempt, arrived - popped);
  uint64_t count = 0;
  double sum = 0;
  for (const auto& family : metrics_.registry()->Collect()) {
    if (family.name != "scheduler_scheduling_attempt_duration_seconds") continue;
    for (const auto& m : family.metric) {
      for (const auto& label : m.label) {
        if (label.name == "result" && label.value == "scheduled") {
          count += m.histogram.sample_count;
          sum += m.histogram.sample_sum;
        }
      }
    }
  }
  EXPECT_EQ(count, 1u);
  EXPECT_DOUBLE_EQ(sum, 0.003);
}

TEST_F(SchedulerTest, PodsOfOneSignatureReuseTheFirstPodsRankingAndAreCounted) {
  SignByResources();
  Build(false);
  scheduler_->OnObjectEvent(NodeEvent("node-2"));
  scheduler_->OnObjectEvent(NodeEvent("node-3"));
  FindEveryNodeFeasible();
  StartWithPods({"a", "b", "c"});
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(scheduler_->ScheduleNext());
  const std::vector<v1::CycleRequest> requests = CycleRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests[0].nodes().all_nodes());
  for (int i = 1; i < 3; ++i) {
    // Only the node the previous pod was assumed on is evaluated again.
    ASSERT_EQ(requests[i].nodes().node_ids_size(), 1) << i;
    EXPECT_FALSE(requests[i].nodes().all_nodes()) << i;
  }
  const batching::BatchStats stats = scheduler_->batch_stats();
  EXPECT_EQ(stats.hits, 2u);
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.by_outcome.at("hit"), 2u);
  EXPECT_EQ(stats.by_outcome.at("miss_new"), 1u);
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 3u);
}

// A PostFilter that never finds victims (a deferred resize that no eviction helps).
class NoVictimsPostFilter : public PostFilterPlugin {
 public:
  std::string_view Name() const override { return "FakePreemption"; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod&, const Diagnosis&) override {
    return {PostFilterResult{}, sdk::Status(sdk::Code::kUnschedulable, "preemption: no victims")};
  }
};

// A deferred resize's cycle refreshes the scheduling snapshot too. What that
// refresh took in (here another scheduler's pod on node-3) must still reach
// the batches: the next hit re-evaluates node-3, or it would pick a node on a
// verdict from before the change.
TEST_F(SchedulerTest, ANodeChangeTakenInByAResizeCycleIsReevaluatedByTheNextBatchHit) {
  SignByResources();
  Build(false, std::make_unique<NoVictimsPostFilter>());
  scheduler_->OnObjectEvent(NodeEvent("node-2"));
  scheduler_->OnObjectEvent(NodeEvent("node-3"));
  FindEveryNodeFeasible();
  StartWithPods({"a", "b"});
  ASSERT_TRUE(scheduler_->ScheduleNext());  // a: the full cycle that ranks the nodes.
  ASSERT_EQ(scheduler_->batch_stats().by_outcome.at("miss_new"), 1u);

  scheduler_->OnObjectEvent(PodEvent("elsewhere", "node-3", "other-scheduler"));
  v1::ObjectEvent resized = PodEvent("resized", "node-2");
  resized.mutable_pod()->set_priority(100);  // Ahead of b in the queue.
  resized.mutable_pod()->set_resize_status(kDeferredResize);
  scheduler_->OnObjectEvent(resized);
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());  // The resize's cycle: no victims.
  ASSERT_TRUE(sink_.Find(v1::Action::kPatchPodStatus));  // It did run (PodResizePreemption=False).

  ASSERT_TRUE(scheduler_->ScheduleNext());  // b, from a's ranking.
  EXPECT_EQ(scheduler_->batch_stats().hits, 1u);
  const std::vector<v1::CycleRequest> requests = CycleRequests();
  ASSERT_EQ(requests.size(), 2u);
  const std::vector<uint32_t> ids(requests[1].nodes().node_ids().begin(), requests[1].nodes().node_ids().end());
  EXPECT_THAT(ids, testing::Contains(*cache_.NodeId("node-3")))
      << "node-3 changed before the resize cycle's snapshot update but was not evaluated again";
}

TEST_F(SchedulerTest, FailedBindForgetsTheAssumedPodAndRequeuesIt) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  sink_.Reply(*bind, v1::ActionResult::CONFLICT);
  scheduler_->WaitForBackgroundWork();
  auto patch = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  const v1::Action patch_action = sink_.action(*patch);
  const auto& condition = patch_action.patch_pod_status().conditions(0);
  EXPECT_EQ(condition.reason(), "SchedulerError");
  EXPECT_THAT(condition.message(), testing::HasSubstr("CONFLICT"));
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 0u);
  EXPECT_EQ(QueueOf("web"), QueueKind::kBackoff);  // An error backs off.
}

TEST_F(SchedulerTest, UnschedulablePodGetsPodScheduledFalseAndAFailedSchedulingEvent) {
  BuildOptions o;
  o.hinted = false;
  Build(std::move(o));
  int cycles = 0;
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](auto, auto) {
    ++cycles;
    return Answered(CycleAnswer(false));
  }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto patch = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  const v1::Action patch_action = sink_.action(*patch);
  const auto& status = patch_action.patch_pod_status();
  EXPECT_EQ(status.pod().name(), "big");
  EXPECT_EQ(status.conditions(0).type(), "PodScheduled");
  EXPECT_EQ(status.conditions(0).status(), "False");
  EXPECT_EQ(status.conditions(0).reason(), "Unschedulable");
  EXPECT_EQ(status.conditions(0).message(), "0/1 nodes are available: 1 Insufficient cpu.");
  auto event = sink_.Find(v1::Action::kRecordEvent);
  ASSERT_TRUE(event);
  EXPECT_EQ(sink_.action(*event).record_event().reason(), "FailedScheduling");
  EXPECT_EQ(QueueOf("big"), QueueKind::kUnschedulable);
  EXPECT_EQ(cycles, 1);
  // A new node is an event Fit registered for: the pod leaves the pool for
  // backoffQ. activeQ is empty, so it is tried again at once rather than
  // after its backoff (KEP-5142, kube's SchedulerPopFromBackoffQ).
  scheduler_->OnObjectEvent(NodeEvent("node-2"));
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(queue_->PendingPods().unschedulable, 0u);
  EXPECT_EQ(queue_->PendingPods().backoff, 1u);
  EXPECT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles, 2);
  EXPECT_EQ(QueueOf("big"), QueueKind::kUnschedulable);
}

// A PostFilter that nominates node-1 and says so, as preemption will.
class NominatingPostFilter : public PostFilterPlugin {
 public:
  std::string_view Name() const override { return "FakePreemption"; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod, const Diagnosis& d) override {
    seen_nodes = d.num_all_nodes;
    return {PostFilterResult{"node-1"}, sdk::Status(sdk::Code::kSuccess, "preemption: 1 victim on node-1")};
  }
  static inline uint32_t seen_nodes = 0;
};

TEST_F(SchedulerTest, PostFilterSeesTheDiagnosisAndNominatesANode) {
  Build(false, std::make_unique<NominatingPostFilter>());
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(false)); }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  // One patch carries the nomination and PodScheduled=False, as kube-scheduler's updatePod.
  auto failed = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(failed);
  const v1::Action failed_action = sink_.action(*failed);
  EXPECT_EQ(failed_action.patch_pod_status().nominated_node_name(), "node-1");
  EXPECT_EQ(failed_action.patch_pod_status().conditions(0).message(),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 1 victim on node-1.");
  ASSERT_TRUE(sink_.Find(v1::Action::kRecordEvent, *failed + 1));  // Sent after the patch.
  EXPECT_EQ(sink_.Count(v1::Action::kPatchPodStatus), 1u);
  EXPECT_EQ(NominatingPostFilter::seen_nodes, 1u);
}

// A PostFilter whose chosen victims were gone by the time it looked (the
// cycle's snapshot predated their deletion), as DefaultPreemption reports it.
class StaleSnapshotPostFilter : public PostFilterPlugin {
 public:
  explicit StaleSnapshotPostFilter(SchedulingQueue** queue) : queue_(queue) {}
  std::string_view Name() const override { return "FakePreemption"; }
  // The first attempt finds its victims gone; later ones find none at all.
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod, const Diagnosis&) override {
    if (calls_++ > 0) return {PostFilterResult{}, sdk::Status(sdk::Code::kUnschedulable, "preemption: no victims")};
    PostFilterResult r;
    r.retry_unreported = true;
    r.after_requeue = [queue = queue_, uid = pod.meta().uid()] { (*queue)->Activate({uid}); };
    return {std::move(r), sdk::Status(sdk::Code::kUnschedulable, "preemption: victims already gone")};
  }

 private:
  SchedulingQueue** queue_;
  int calls_ = 0;
};

// preempt-500 sent a second PodScheduled patch (and FailedScheduling event)
// for a preemptor whose first cycle chose another preemptor's victims just
// deleted: the attempt retried at once is not reported, so the budget of
// 2 x victims + 2 API calls per preemption holds.
TEST_F(SchedulerTest, AnAttemptRetriedAtOnceOnAStaleSnapshotSendsNoPatchAndNoEvent) {
  SchedulingQueue* queue = nullptr;
  Build(false, std::make_unique<StaleSnapshotPostFilter>(&queue));
  queue = queue_.get();
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(false)); }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(sink_.Count(v1::Action::kPatchPodStatus), 0u);
  EXPECT_EQ(sink_.Count(v1::Action::kRecordEvent), 0u);
  EXPECT_EQ(QueueOf("big"), QueueKind::kActive);  // Tried again at once, not after backoff.
  // The next attempt is an ordinary failure: reported, once.
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(QueueOf("big"), QueueKind::kUnschedulable);
  ASSERT_EQ(sink_.Count(v1::Action::kPatchPodStatus), 1u);
  EXPECT_EQ(sink_.action(*sink_.Find(v1::Action::kPatchPodStatus)).patch_pod_status().conditions(0).message(),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: no victims.");
  EXPECT_EQ(sink_.Count(v1::Action::kRecordEvent), 1u);
}

// Each cluster event is timed under kube-scheduler's label for it
// (scheduler_event_handling_duration_seconds{event}).
TEST_F(SchedulerTest, ClusterEventsAreTimedByKubeSchedulersEventLabel) {
  Build(false);  // node-1 added.
  scheduler_->OnObjectEvent(NodeEvent("node-1"));
  scheduler_->OnObjectEvent(PodEvent("web"));
  scheduler_->OnObjectEvent(PodEvent("web"));
  scheduler_->OnObjectEvent(PodEvent("web", "node-1"));
  scheduler_->OnObjectEvent(PodEvent("web", "node-1"));
  scheduler_->OnObjectEvent(Deleted(PodEvent("web", "node-1")));
  scheduler_->OnObjectEvent(PodEvent("db"));
  scheduler_->OnObjectEvent(Deleted(PodEvent("db")));
  scheduler_->OnObjectEvent(Deleted(NodeEvent("node-1")));
  std::map<std::string, uint64_t> counts;
  for (const auto& family : metrics_.registry()->Collect()) {
    if (family.name != "scheduler_event_handling_duration_seconds") continue;
    for (const auto& m : family.metric) counts[m.label.at(0).value] = m.histogram.sample_count;
  }
  EXPECT_EQ(counts, (std::map<std::string, uint64_t>{{"NodeAdd", 1},
                                                      {"NodeUpdate", 1},
                                                      {"NodeDelete", 1},
                                                      {"UnscheduledPodAdd", 2},
                                                      {"UnscheduledPodUpdate", 1},
                                                      {"UnscheduledPodDelete", 1},
                                                      {"AssignedPodAdd", 1},
                                                      {"AssignedPodUpdate", 1},
                                                      {"AssignedPodDelete", 1}}));
}

TEST_F(SchedulerTest, PermitWaitThenAllowBinds) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  ASSERT_TRUE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);  // No bind while it waits.
  EXPECT_TRUE(PermitWaits().empty());
  // What the Admin API lists under WAITING_ON_PERMIT.
  const std::vector<WaitingPodSummary> waiting = scheduler_->PodsWaitingAtPermit();
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].pod->uid(), "uid-member");
  EXPECT_EQ(waiting[0].waiting_since, clock_.Now());
  ASSERT_EQ(waiting[0].pending.size(), 1u);
  EXPECT_EQ(waiting[0].pending.begin()->first, "Gang");
  EXPECT_EQ(waiting[0].pending.begin()->second, clock_.Now() + absl::Seconds(60));
  clock_.Advance(absl::Seconds(3));
  scheduler_->OnPermitDecision(Decision("member", "Gang", true));
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
  // The wait, as kube-scheduler's WaitOnPermit observes it.
  EXPECT_EQ(PermitWaits(), (std::map<std::string, std::pair<uint64_t, double>>{{"Success", {1, 3.0}}}));
}

TEST_F(SchedulerTest, AllowSentBeforeTheWaitAnswerIsNotLost) {
  Build(true);
  // The plugin allows the pod before its WAIT answer is even returned, as a
  // gang plugin does when the pod completes its gang at that moment.
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    if (req.has_permit()) {
      scheduler_->OnPermitDecision(Decision("member", "Gang", true));
      return Answered(GangWaits());
    }
    return Answered(StatusAnswer());
  }));
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
}

// A pod refused a node while another pod held it, assumed and waiting at
// Permit, is told when that assumption is undone by a binding-cycle failure
// (here a Permit rejection): as kube-scheduler does, an AssignedPodDelete
// moves the pool's other pods, not the rejected pod itself.
TEST_F(SchedulerTest, ABindingCycleFailureRequeuesThePodsRefusedTheRoomItHeld) {
  BuildOptions o;
  o.with_permit = true;
  o.fit_on_pod_delete = true;
  Build(std::move(o));
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke(OnlyMemberFitsAndWaitsAtPermit()));
  StartWithPods({"member", "other"});
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  ASSERT_TRUE(scheduler_->ScheduleNext());  // "other": no room while member holds it.
  ASSERT_EQ(QueueOf("other"), QueueKind::kUnschedulable);
  scheduler_->OnPermitDecision(Decision("member", "Gang", false));
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_NE(QueueOf("other"), QueueKind::kUnschedulable) << "the room it was refused is free again";
  EXPECT_EQ(QueueOf("member"), QueueKind::kUnschedulable) << "the rejected pod waits in the pool";
}

// The plugin process that made the pod wait at Permit restarted (its stream
// broke and was dialed again): its decision will never come. Before, the pod
// waited for its whole timeout (up to 15 minutes) holding its node; now the
// next housekeeping rejects it (failurePolicy Fail) ...
TEST_F(SchedulerTest, APermitWaitWhoseProcessRestartedIsRejectedAtOnce) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  scheduler_->Housekeeping();  // The same stream: it waits on.
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  host_.generation = 1;
  scheduler_->Housekeeping();
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
  auto patch = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  EXPECT_THAT(sink_.action(*patch).patch_pod_status().conditions(0).message(),
              testing::HasSubstr("the stream of plugin endpoint host broke while the pod waited"));
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);
  EXPECT_TRUE(QueueOf("member").has_value());
}

// ... or lets that plugin's wait go (failurePolicy Ignore), counted as an
// ignored failure.
TEST_F(SchedulerTest, APermitWaitWhoseIgnoredProcessRestartedIsAllowed) {
  Build(true);
  host_.set_failure_policy(FailurePolicy::kIgnore);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  host_.generation = 3;
  scheduler_->Housekeeping();
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
  EXPECT_EQ(host_.ignored_failures, 1);
}

TEST_F(SchedulerTest, PermitTimeoutUnreservesAndRequeues) {
  Build(true);
  ExpectGangWaits(1000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(cache_.IsAssumed("uid-member"));
  clock_.Advance(absl::Seconds(2));
  scheduler_->Housekeeping();
  scheduler_->WaitForBackgroundWork();
  auto patch = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  EXPECT_THAT(sink_.action(*patch).patch_pod_status().conditions(0).message(),
              testing::HasSubstr("rejected due to timeout after waiting at plugin Gang"));
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);
  EXPECT_TRUE(QueueOf("member").has_value());
  EXPECT_EQ(PermitWaits(), (std::map<std::string, std::pair<uint64_t, double>>{{"Unschedulable", {1, 2.0}}}));
}

// ------------------------------------------------ defect 1: no blocking callers

TEST_F(SchedulerTest, APluginRejectDoesNotWaitForUnreserveOnTheCallersThread) {
  Build(true);
  std::promise<PluginAnswer> release;
  std::shared_future<PluginAnswer> unreserve_answer = release.get_future().share();
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    if (req.has_permit()) {
      return Answered(GangWaits());
    }
    if (req.has_unreserve()) {
      ++unreserves_;
      // Answered only when the test releases it, like a stream whose reader
      // is the thread that called.
      return std::async(std::launch::async, [unreserve_answer] { return unreserve_answer.get(); });
    }
    return Answered(StatusAnswer());
  }));
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  {
    // The gRPC reader thread delivers the reject: it returns while Unreserve hangs.
    Caller reader([&] { scheduler_->OnPermitDecision(Decision("member", "Gang", false)); });
    EXPECT_TRUE(reader.Returned());
    release.set_value(StatusAnswer());
  }
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_TRUE(QueueOf("member").has_value());
}

// No remote PreBind or Bind plugin and Permit allows at once: the scheduling
// thread queues the Bind action itself, after Reserve and Permit, as
// kube-scheduler's binding cycle runs Reserve, Permit, PreBind, Bind in order.
TEST_F(SchedulerTest, ABindWithNoRemotePreBindOrBindPluginIsSentByTheSchedulingThreadAfterReserveAndPermit) {
  Build(true);
  absl::Mutex mu;
  std::vector<std::string> order;
  std::optional<std::thread::id> bind_sender;
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    {
      absl::MutexLock lock(&mu);
      if (req.has_reserve()) order.push_back("reserve");
      if (req.has_permit()) order.push_back("permit");
      if (req.has_unreserve()) order.push_back("unreserve");
    }
    v1::PluginToScheduler a;
    if (req.has_permit()) {
      a.mutable_permit()->add_results()->set_plugin("Gang");
      return Answered(a);
    }
    return Answered(StatusAnswer());
  }));
  sink_.on_send = [&](const v1::Action& action) {
    if (!action.has_bind()) return;
    absl::MutexLock lock(&mu);
    order.push_back("bind");
    bind_sender = std::this_thread::get_id();
  };
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(order, (std::vector<std::string>{"reserve", "permit", "bind"}));
    EXPECT_EQ(bind_sender, std::this_thread::get_id());
  }
  // Its failure is still released on the binding pool: Unreserve, forget, requeue.
  sink_.Reply(*sink_.Find(v1::Action::kBind), v1::ActionResult::CONFLICT);
  scheduler_->WaitForBackgroundWork();
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(order, (std::vector<std::string>{"reserve", "permit", "bind", "unreserve"}));
  }
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(QueueOf("web"), QueueKind::kBackoff);
}

TEST_F(SchedulerTest, AFailedBindResultDoesNotWaitForUnreserveOnTheResultThread) {
  Build(true);
  std::promise<PluginAnswer> release;
  std::shared_future<PluginAnswer> unreserve_answer = release.get_future().share();
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    if (req.has_unreserve()) {
      ++unreserves_;
      return std::async(std::launch::async, [unreserve_answer] { return unreserve_answer.get(); });
    }
    v1::PluginToScheduler a;
    if (req.has_permit()) {
      a.mutable_permit()->add_results()->set_plugin("Gang");
      return Answered(a);
    }
    return Answered(StatusAnswer());
  }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  {
    Caller result_thread([&] { sink_.Reply(*bind, v1::ActionResult::CONFLICT); });
    EXPECT_TRUE(result_thread.Returned());
    release.set_value(StatusAnswer());
  }
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
}

TEST_F(SchedulerTest, AHungQueueingHintDoesNotDelayClusterEvents) {
  BuildOptions o;
  o.hinted = true;
  Build(std::move(o));
  std::promise<PluginAnswer> release;
  std::shared_future<PluginAnswer> hint_answer = release.get_future().share();
  std::atomic<int> hint_requests{0};
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, auto) {
    if (req.has_queueing_hint()) {
      ++hint_requests;
      return std::async(std::launch::async, [hint_answer] { return hint_answer.get(); });
    }
    return Answered(CycleAnswer(false));
  }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_EQ(QueueOf("big"), QueueKind::kUnschedulable);
  // The event thread: a node event that asks Fit's hint, then more events.
  {
    Caller event_thread([&] {
      scheduler_->OnObjectEvent(NodeEvent("node-2"));
      scheduler_->OnObjectEvent(NodeEvent("node-3"));
      scheduler_->OnObjectEvent(PodEvent("other"));
    });
    EXPECT_TRUE(event_thread.Returned());
    // The cache is current although the hint still hangs.
    EXPECT_EQ(cache_.NumNodes(), 3u);
    release.set_value(absl::UnavailableError("hung up"));
  }
  scheduler_->WaitForBackgroundWork();
  EXPECT_GE(hint_requests.load(), 1);
  // A hint that failed counts as Queue: the pod left the pool.
  EXPECT_NE(QueueOf("big"), QueueKind::kUnschedulable);
  EXPECT_TRUE(queue_->Find("uid-other").has_value());
}

// ------------------------------------------------ defect 3: assumed pods leak

TEST_F(SchedulerTest, APodDeletedWhileWaitingAtPermitReleasesItsNode) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(cache_.IsAssumed("uid-member"));
  scheduler_->OnObjectEvent(Deleted(PodEvent("member")));
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(cache_.NumPods(), 0u);
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_EQ(Queued(), 0u);
  // Its attempt is over: a pod of the same name is scheduled again.
  scheduler_->OnObjectEvent(PodEvent("member"));
  scheduler_->WaitForBackgroundWork();
  EXPECT_TRUE(scheduler_->ScheduleNext());
}

// DefaultPreemption chose a pod waiting at Permit as a victim: its wait ends
// with a rejection (kube-scheduler's waitingPod.Reject), it is unreserved,
// forgotten and requeued; it is never deleted through the API.
TEST_F(SchedulerTest, AWaitingPodRejectedByPreemptionIsUnreservedAndRequeuedNotDeleted) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  std::atomic<bool> released{false};
  ASSERT_TRUE(scheduler_->RejectWaitingPod("uid-member", "DefaultPreemption", "preempted",
                                           [&] { released = true; }));
  scheduler_->WaitForBackgroundWork();
  EXPECT_TRUE(released.load());
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
  EXPECT_EQ(cache_.NumPods(), 0u);
  EXPECT_EQ(unreserves_.load(), 1);
  EXPECT_EQ(sink_.Count(v1::Action::kDeletePod), 0u);
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);
  auto patch = sink_.Find(v1::Action::kPatchPodStatus);
  ASSERT_TRUE(patch);
  EXPECT_THAT(sink_.action(*patch).patch_pod_status().conditions(0).message(),
              testing::HasSubstr("rejected while waiting on permit: preempted"));
  EXPECT_TRUE(QueueOf("member").has_value());
  // Not waiting any more: a second rejection does nothing.
  EXPECT_FALSE(scheduler_->RejectWaitingPod("uid-member", "DefaultPreemption", "preempted"));
}

TEST_F(SchedulerTest, ADeleteRightAfterAConfirmedBindForgetsTheAssumption) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  sink_.Reply(*bind, v1::ActionResult::OK);
  // The next event is the deletion (carrying the pending copy we knew).
  scheduler_->OnObjectEvent(Deleted(PodEvent("web")));
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 0u);
}

TEST_F(SchedulerTest, ARelistWithoutTheAssumedPodForgetsIt) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  sink_.Reply(*bind, v1::ActionResult::OK);
  scheduler_->OnAdapterDisconnected();
  scheduler_->OnListBegin();
  scheduler_->OnObjectEvent(NodeEvent("node-1"));
  scheduler_->OnListEnd();
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(cache_.NumPods(), 0u);
}

// A pod deleted while the adapter was away (the relist no longer carries it)
// reaches the handler in front of the scheduler, the preemption controller,
// as a watched deletion does: its nomination goes, and no node keeps room
// for a pod that no longer exists.
TEST_F(SchedulerTest, ARelistsInferredDeletionsGoThroughTheHandlerInFront) {
  Build(false);
  preemption::Nominator nominator;
  preemption::PreemptionController front(*scheduler_, nominator);
  scheduler_->SetEventFront(&front);
  v1::ObjectEvent nominated = PodEvent("gone");
  nominated.mutable_pod()->set_nominated_node_name("node-1");
  front.OnObjectEvent(nominated);
  front.OnObjectEvent(PodEvent("kept"));
  front.OnListEnd();
  scheduler_->WaitForBackgroundWork();
  ASSERT_EQ(nominator.NominatedNode("uid-gone"), "node-1");
  scheduler_->OnAdapterDisconnected();
  front.OnListBegin();
  front.OnObjectEvent(NodeEvent("node-1"));
  front.OnObjectEvent(PodEvent("kept"));
  front.OnListEnd();
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(nominator.NominatedNode("uid-gone"), "");
  EXPECT_EQ(QueueOf("gone"), std::nullopt);
  EXPECT_NE(QueueOf("kept"), std::nullopt);
}

TEST_F(SchedulerTest, AConfirmedBindWhoseBoundPodNeverComesExpires) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto bind = sink_.Find(v1::Action::kBind);
  ASSERT_TRUE(bind);
  sink_.Reply(*bind, v1::ActionResult::OK);
  clock_.Advance(absl::Minutes(14));
  scheduler_->Housekeeping();
  EXPECT_TRUE(cache_.IsAssumed("uid-web"));
  clock_.Advance(absl::Minutes(2));
  scheduler_->Housekeeping();
  EXPECT_FALSE(cache_.IsAssumed("uid-web"));
  EXPECT_EQ(scheduler_->counters().assumed_pods_expired, 1u);
}

// ------------------------------------------------ defect 8: the pod's own cycle

TEST_F(SchedulerTest, ARejectedPermitWaitRequeuesWithThePodsOwnCycle) {
  Build(true);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke(OnlyMemberFitsAndWaitsAtPermit()));
  v1::ObjectEvent member = PodEvent("member");
  member.mutable_pod()->set_priority(10);  // Popped first.
  scheduler_->OnObjectEvent(member);
  StartWithPod("other");
  ASSERT_TRUE(scheduler_->ScheduleNext());  // member: cycle 1, waits at Permit.
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  scheduler_->OnObjectEvent(NodeEvent("node-2"));  // A move request during its wait.
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());  // other: cycle 2, unschedulable.
  scheduler_->OnPermitDecision(Decision("member", "Gang", false));
  // An event came after member's cycle began: it may help, so backoff, not the pool.
  EXPECT_EQ(QueueOf("member"), QueueKind::kBackoff);
}

// ------------------------------------------------ defect 9: adapter disconnected

TEST_F(SchedulerTest, NoPodIsPoppedWhileTheAdapterIsAway) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPod("web");
  EXPECT_TRUE(scheduler_->adapter_connected());
  scheduler_->OnAdapterDisconnected();
  EXPECT_FALSE(scheduler_->adapter_connected());
  EXPECT_FALSE(scheduler_->ScheduleNext());
  EXPECT_EQ(queue_->PendingPods().active, 1u);
  // Back with a complete list: scheduling resumes.
  scheduler_->OnListBegin();
  scheduler_->OnObjectEvent(NodeEvent("node-1"));
  scheduler_->OnObjectEvent(PodEvent("web"));
  scheduler_->OnListEnd();
  scheduler_->WaitForBackgroundWork();
  EXPECT_TRUE(scheduler_->adapter_connected());
  EXPECT_TRUE(scheduler_->ScheduleNext());
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
}

// ------------------------------------------------ binds in flight (issue 9)

TEST_F(SchedulerTest, NoPodIsPoppedWhileMaxBindsAwaitTheirResultUntilHalfCameBack) {
  max_binds_in_flight_ = 4;
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPods({"a", "b", "c", "d", "e", "f", "g"});
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 4u);
  EXPECT_EQ(scheduler_->binds_in_flight(), 4u);
  // Four binds unconfirmed: the other pods stay in activeQ.
  EXPECT_FALSE(scheduler_->ScheduleNext());
  EXPECT_EQ(queue_->PendingPods().active, 3u);

  std::vector<size_t> binds;
  for (std::optional<size_t> b = sink_.Find(v1::Action::kBind); b; b = sink_.Find(v1::Action::kBind, *b + 1)) {
    binds.push_back(*b);
  }
  ASSERT_EQ(binds.size(), 4u);
  // A confirmed bind frees a slot, but popping resumes at half (2).
  sink_.Reply(binds[0], v1::ActionResult::OK);
  EXPECT_EQ(scheduler_->binds_in_flight(), 3u);
  EXPECT_FALSE(scheduler_->ScheduleNext());
  // A failed bind frees its slot as well (its pod is requeued).
  sink_.Reply(binds[1], v1::ActionResult::CONFLICT);
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(scheduler_->binds_in_flight(), 2u);
  // Half came back: pods are popped again up to the bound.
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 6u);
  EXPECT_EQ(scheduler_->binds_in_flight(), 4u);
  EXPECT_FALSE(scheduler_->ScheduleNext());
}

TEST_F(SchedulerTest, BindsFailedByADisconnectFreeTheirSlots) {
  max_binds_in_flight_ = 1;
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPods({"a", "b"});
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_FALSE(scheduler_->ScheduleNext());
  // The adapter goes away; the service fails every action awaiting a result.
  scheduler_->OnAdapterDisconnected();
  sink_.Reply(*sink_.Find(v1::Action::kBind), v1::ActionResult::UNAVAILABLE);
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(scheduler_->binds_in_flight(), 0u);
  EXPECT_FALSE(cache_.IsAssumed("uid-a"));
  // Back with a complete list: the slot is free, scheduling resumes.
  scheduler_->OnListBegin();
  scheduler_->OnObjectEvent(NodeEvent("node-1"));
  scheduler_->OnObjectEvent(PodEvent("a"));
  scheduler_->OnObjectEvent(PodEvent("b"));
  scheduler_->OnListEnd();
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 2u);
}

TEST_F(SchedulerTest, APodWaitingAtPermitTakesNoBindSlot) {
  max_binds_in_flight_ = 1;
  Build(true);
  ExpectGangWaits(60000);
  StartWithPods({"a", "b"});
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-a"));
  EXPECT_EQ(scheduler_->binds_in_flight(), 0u);
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->WaitingAtPermit("uid-b"));
  // Both allowed: both binds go out (the bound never holds a Permit decision back).
  for (const char* uid : {"uid-a", "uid-b"}) {
    v1::PermitDecision allow;
    allow.set_pod_uid(uid);
    allow.set_plugin("Gang");
    allow.set_allow(true);
    scheduler_->OnPermitDecision(allow);
  }
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 2u);
  EXPECT_EQ(scheduler_->binds_in_flight(), 2u);
  sink_.Reply(*sink_.Find(v1::Action::kBind), v1::ActionResult::OK);
  EXPECT_EQ(scheduler_->binds_in_flight(), 1u);
}

TEST_F(SchedulerTest, StopEndsTheSchedulingThreadsWaitForABindSlot) {
  max_binds_in_flight_ = 1;
  run_scheduling_thread_ = true;
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPods({"a", "b"});
  // The thread binds one pod, then waits for its result.
  while (sink_.Count(v1::Action::kBind) == 0) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(scheduler_->binds_in_flight(), 1u);
  // Stop returns (it joins the scheduling thread) with the wait unfulfilled.
  scheduler_->Stop();
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 1u);
  EXPECT_EQ(queue_->PendingPods().active, 1u);
}

// The loop says it is busy once it pops a pod with more to come, and idle
// before it waits for the next one: actions that wait to share a message
// (ClusterService's coalescing) are written then, never left waiting.
TEST_F(SchedulerTest, TheSchedulingLoopSaysItIsIdleBeforeItWaits) {
  run_scheduling_thread_ = true;
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  StartWithPods({"a", "b", "c"});
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while ((sink_.Count(v1::Action::kBind) < 3 || sink_.busy_calls().size() < 2) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 3u);
  // Busy from the first pop to the empty queue: one change each way.
  EXPECT_THAT(sink_.busy_calls(), ::testing::ElementsAre(true, false));
  // A pod that comes later: busy for its cycle, idle again after it.
  scheduler_->OnObjectEvent(PodEvent("d"));
  while ((sink_.Count(v1::Action::kBind) < 4 || sink_.busy_calls().size() < 4) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_THAT(sink_.busy_calls(), ::testing::ElementsAre(true, false, true, false));
}

// With no pod to pop, the scheduling loop brings the plugin processes'
// mirrors up to the cluster (a state-only message, waited on by nothing), so
// that the next pod's request carries only what changed since: after the
// initial list, the whole cluster would otherwise ride with the first pod.
TEST_F(SchedulerTest, AnIdleSchedulingLoopBringsTheMirrorsUpToTheCluster) {
  run_scheduling_thread_ = true;
  Build(false);
  absl::Mutex mu;
  std::vector<uint64_t> synced;      // SendState, in order.
  std::vector<uint64_t> cycle_seqs;  // The cycles' state_seq.
  const StopsFirst stop_first(*scheduler_);  // The scheduling thread writes to these.
  EXPECT_CALL(host_, SendState(_)).WillRepeatedly(Invoke([&](uint64_t seq) {
    absl::MutexLock lock(&mu);
    synced.push_back(seq);
  }));
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, std::optional<uint64_t> seq) {
    if (req.has_cycle()) {
      absl::MutexLock lock(&mu);
      cycle_seqs.push_back(seq.value_or(0));
    }
    return Answered(CycleAnswer(true));
  }));
  auto await_synced = [&] {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(+[](std::vector<uint64_t>* v) { return !v->empty(); }, &synced),
                               absl::Seconds(10));
  };
  StartWithPods({});
  ASSERT_TRUE(await_synced());
  // The cluster as listed: node-1.
  Snapshot listed;
  cache_.UpdateSnapshot(listed);
  EXPECT_NE(listed.Get("node-1"), nullptr);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(synced, std::vector<uint64_t>{listed.delta_seq()});
    synced.clear();
  }
  // A pod: its cycle starts from there; the loop, idle again once the pod is
  // assumed on node-1 and its bind sent, brings the mirror to that.
  scheduler_->OnObjectEvent(PodEvent("a"));
  ASSERT_TRUE(await_synced());
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 1u);
  Snapshot assumed;
  cache_.UpdateSnapshot(assumed);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(cycle_seqs, std::vector<uint64_t>{listed.delta_seq()});
    EXPECT_EQ(synced, std::vector<uint64_t>{assumed.delta_seq()});
  }
  EXPECT_GT(assumed.delta_seq(), listed.delta_seq());
  EXPECT_EQ(assumed.Get("node-1")->pods().size(), 1u);
}

// While the first list arrives, no pod is popped, but every list_sync_every
// listed objects the scheduling thread brings the mirrors up to the cache:
// the plugin host takes the cluster in as it is listed, not all at once with
// the first pod's request.
TEST_F(SchedulerTest, TheMirrorsTakeTheClusterInWhileItIsListed) {
  run_scheduling_thread_ = true;
  list_sync_every_ = 3;
  Build(false);  // Lists node-1.
  absl::Mutex mu;
  std::vector<uint64_t> synced;
  const StopsFirst stop_first(*scheduler_);  // The scheduling thread writes to these.
  EXPECT_CALL(host_, SendState(_)).WillRepeatedly(Invoke([&](uint64_t seq) {
    absl::MutexLock lock(&mu);
    synced.push_back(seq);
  }));
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(true)); }));
  scheduler_->Start();
  scheduler_->OnObjectEvent(PodEvent("a"));  // Pending: not popped while the list lasts.
  scheduler_->OnObjectEvent(NodeEvent("node-2"));  // The third object listed.
  {
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(mu.AwaitWithTimeout(
        absl::Condition(+[](std::vector<uint64_t>* v) { return !v->empty(); }, &synced), absl::Seconds(10)));
  }
  Snapshot listed;
  cache_.UpdateSnapshot(listed);
  EXPECT_NE(listed.Get("node-2"), nullptr);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(synced, std::vector<uint64_t>{listed.delta_seq()});
  }
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 0u);  // Still listing.
  // The list ends: the pod is scheduled.
  scheduler_->OnListEnd();
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (sink_.Count(v1::Action::kBind) < 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(sink_.Count(v1::Action::kBind), 1u);
}

// ------------------------------------------------ defects 7 and 12: Permit bounds

TEST_F(SchedulerTest, APermitWaitIsCappedAtFifteenMinutes) {
  Build(true);
  ExpectGangWaits(absl::ToInt64Milliseconds(absl::Hours(2)));
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  clock_.Advance(absl::Minutes(15) + absl::Seconds(1));
  scheduler_->Housekeeping();
  scheduler_->WaitForBackgroundWork();
  EXPECT_FALSE(scheduler_->WaitingAtPermit("uid-member"));
  EXPECT_FALSE(cache_.IsAssumed("uid-member"));
}

TEST_F(SchedulerTest, ADecisionForAPluginThePodDoesNotWaitOnIsRefused) {
  Build(true);
  ExpectGangWaits(60000);
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  scheduler_->OnPermitDecision(Decision("member", "SomeoneElse", false));
  scheduler_->WaitForBackgroundWork();
  EXPECT_TRUE(scheduler_->WaitingAtPermit("uid-member"));
  EXPECT_EQ(scheduler_->counters().permit_decisions_unknown_plugin, 1u);
  // The plugin it waits on decides (the endpoint is checked where the
  // decision enters: GrpcPluginProcessTest).
  scheduler_->OnPermitDecision(Decision("member", "Gang", true));
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
}

TEST_F(SchedulerTest, EarlyDecisionsBeyondTheBoundAreCounted) {
  Build(true);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
    if (req.has_cycle()) return Answered(CycleAnswer(true));
    if (req.has_permit()) {
      for (size_t i = 0; i < kMaxEarlyPermitDecisions + 3; ++i) {
        scheduler_->OnPermitDecision(Decision("member", "Gang", true));
      }
      return Answered(GangWaits());
    }
    return Answered(StatusAnswer());
  }));
  StartWithPod("member");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(scheduler_->counters().permit_decisions_early_dropped, 3u);
  EXPECT_TRUE(sink_.Find(v1::Action::kBind));
}

// ------------------------------------------------ defects 4 and 18: ExplainPod

TEST_F(SchedulerTest, ExplainKeepsACompactDiagnosisUntilThePodIsDeleted) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(false)); }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto d = scheduler_->LastDiagnosis("default", "big");
  ASSERT_TRUE(d);
  EXPECT_FALSE(d->error);
  EXPECT_EQ(d->message, "0/1 nodes are available: 1 Insufficient cpu.");
  ASSERT_EQ(d->reason_counts.size(), 1u);
  EXPECT_EQ(d->reason_counts[0], std::make_pair(std::string("Insufficient cpu"), 1u));
  ASSERT_EQ(d->sample.size(), 1u);
  EXPECT_EQ(d->sample[0].first, "node-1");
  scheduler_->OnObjectEvent(Deleted(PodEvent("big")));
  EXPECT_FALSE(scheduler_->LastDiagnosis("default", "big"));
  EXPECT_EQ(scheduler_->diagnoses().size(), 0u);
}

TEST_F(SchedulerTest, ABoundPodHasNoDiagnosisLeft) {
  Build(false);
  bool fits = false;
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([&](auto, auto) { return Answered(CycleAnswer(fits)); }));
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->LastDiagnosis("default", "web"));
  scheduler_->OnObjectEvent(PodEvent("web", "node-1"));
  EXPECT_FALSE(scheduler_->LastDiagnosis("default", "web"));
}

TEST_F(SchedulerTest, AnAttemptThatFailedWithAnErrorIsExplainedAsAnError) {
  Build(false);
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(
      Invoke([](auto, auto) { return Answered(absl::DeadlineExceededError("plugin endpoint host timed out")); }));
  auto watch = scheduler_->decisions().Subscribe(nullptr);
  ASSERT_TRUE(watch.ok());
  StartWithPod("web");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  auto d = scheduler_->LastDiagnosis("default", "web");
  ASSERT_TRUE(d);
  EXPECT_TRUE(d->error);
  EXPECT_THAT(d->message, testing::HasSubstr("timed out"));
  auto decision = watch->queue->Pop();
  ASSERT_TRUE(decision);
  EXPECT_EQ(decision->result, SchedulingDecision::Result::kError);
  EXPECT_EQ(QueueOf("web"), QueueKind::kBackoff);
}


// ---- Gangs: one pass (schedule_gang.cc)

v1::ObjectEvent GroupEvent(const std::string& name, int32_t min_member) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* g = e.mutable_pod_group();
  g->mutable_meta()->set_name(name);
  g->mutable_meta()->set_namespace_("default");
  g->mutable_meta()->set_uid("uid-group-" + name);
  g->set_min_member(min_member);
  return e;
}

v1::ObjectEvent MemberEvent(const std::string& name, const std::string& group) {
  v1::ObjectEvent e = PodEvent(name);
  e.mutable_pod()->set_pod_group(group);
  return e;
}

class GangSchedulerTest : public SchedulerTest {
 protected:
  // node-1 has room for `room` pods: a cycle finds it feasible while fewer
  // pods are bound or assumed in the cache. Counts the cycles.
  void RoomFor(size_t room) {
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this, room](v1::SchedulerToPlugin req, auto) {
      if (!req.has_cycle()) return Answered(StatusAnswer());
      ++cycles_;
      return Answered(CycleAnswer(cache_.NumPods() < room));
    }));
  }
  void AddGang(const std::string& group, int32_t min_member, int members) {
    scheduler_->OnObjectEvent(GroupEvent(group, min_member));
    for (int i = 0; i < members; ++i) scheduler_->OnObjectEvent(MemberEvent(Name(group, i), group));
  }
  void Start() {
    scheduler_->OnListEnd();
    scheduler_->Start();
    scheduler_->WaitForBackgroundWork();
  }
  static std::string Name(const std::string& group, int i) { return group + "-" + std::to_string(i); }
  // The message of the pod's last PodScheduled=False patch; empty if none.
  std::string PatchedMessage(const std::string& name) {
    std::string message;
    for (const v1::Action& a : sink_.All(v1::Action::kPatchPodStatus)) {
      if (a.patch_pod_status().pod().name() == name && a.patch_pod_status().conditions_size() > 0) {
        message = a.patch_pod_status().conditions(0).message();
      }
    }
    return message;
  }
  std::vector<std::string> BoundPods() {
    std::vector<std::string> out;
    for (const v1::Action& a : sink_.All(v1::Action::kBind)) out.push_back(a.bind().pod().name());
    return out;
  }
  std::atomic<int> cycles_{0};
};

// One pop takes the whole gang; it binds whole or not at all, and every member
// of a gang that cannot be placed is told why.
struct OnePassCase {
  std::string name;
  int32_t min_member;
  int members;
  size_t room;
  int want_cycles;
  std::vector<std::string> want_bound;
  // Per member, its PodScheduled=False message ("": none, it was placed).
  std::vector<std::string> want_messages;
};
// ctest lists the case by its name, not as a dump of its bytes.
void PrintTo(const OnePassCase& c, std::ostream* os) { *os << c.name; }

class GangOnePassTest : public GangSchedulerTest, public testing::WithParamInterface<OnePassCase> {};

const std::string kOnlyTwoOfThree =
    "pod group default/train (minMember 3): only 2 of 3 members can be placed together, so none is bound; "
    "default/train-2: 0/1 nodes are available: 1 Insufficient cpu.";
const std::string kOnlyOneOfThree =
    "pod group default/train (minMember 3): only 1 of 3 members can be placed together, so none is bound; "
    "default/train-1: 0/1 nodes are available: 1 Insufficient cpu.";
const std::string kThreeOfFour =
    "pod group default/train (minMember 4): only 3 of 4 members are pending or placed, so none is bound";

INSTANTIATE_TEST_SUITE_P(
    Gangs, GangOnePassTest,
    testing::Values(
        OnePassCase{"FitsWhole", 3, 3, 100, 3, {"train-0", "train-1", "train-2"}, {"", "", ""}},
        OnePassCase{"DoesNotFitNoneAssumed", 3, 3, 2, 3, {}, {kOnlyTwoOfThree, kOnlyTwoOfThree, kOnlyTwoOfThree}},
        // The minimum binds; the member beyond it that does not fit retries alone.
        OnePassCase{"MinMemberBelowSize", 2, 3, 2, 3, {"train-0", "train-1"},
                    {"", "", "0/1 nodes are available: 1 Insufficient cpu."}},
        // Two failures of four with minMember 3: the pass stops there.
        OnePassCase{"MinimumOutOfReachStopsEarly", 3, 4, 1, 3, {}, std::vector<std::string>(4, kOnlyOneOfThree)},
        OnePassCase{"FewerMembersThanMinMember", 4, 3, 100, 0, {}, std::vector<std::string>(3, kThreeOfFour)}),
    [](const testing::TestParamInfo<OnePassCase>& info) { return info.param.name; });

TEST_P(GangOnePassTest, PlacesTheGangWholeOrNotAtAll) {
  const OnePassCase& tc = GetParam();
  BuildOptions o;
  o.gang_plugin = true;
  Build(std::move(o));
  RoomFor(tc.room);
  AddGang("train", tc.min_member, tc.members);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());  // One pop.
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(cycles_.load(), tc.want_cycles);
  EXPECT_EQ(BoundPods(), tc.want_bound);
  EXPECT_EQ(cache_.NumPods(), tc.want_bound.size());  // Every other assumption undone.
  for (int i = 0; i < tc.members; ++i) {
    const std::string name = Name("train", i);
    EXPECT_EQ(PatchedMessage(name), tc.want_messages[i]) << name;
    if (tc.want_messages[i].empty()) {
      EXPECT_EQ(QueueOf(name), std::nullopt) << name;
      continue;
    }
    // Waiting for an event that may help: a plugin's, or a new member or
    // a change to the group when the members were too few.
    EXPECT_EQ(QueueOf(name), QueueKind::kUnschedulable) << name;
    std::optional<PodDiagnosis> d = scheduler_->LastDiagnosis("default", name);
    ASSERT_TRUE(d) << name;
    EXPECT_EQ(d->message, tc.want_messages[i]) << name;
  }
  EXPECT_FALSE(scheduler_->ScheduleNext());  // Nobody left in activeQ.
}

// Each member's Permit travels with the state in which every member the pass
// placed is assumed (the last one's cycle ran before it was): a gang plugin
// counting assigned members in its mirror sees the minimum at once, and no
// member waits at Permit for the others.
TEST_F(GangSchedulerTest, EveryMembersPermitSeesTheWholeGangAssumed) {
  BuildOptions o;
  o.with_permit = true;
  o.gang_plugin = true;
  Build(std::move(o));
  std::vector<std::pair<std::string, uint64_t>> permits;  // Pod, the state it came with.
  uint64_t all_assumed_seq = 0;
  EXPECT_CALL(host_, Call(_, _))
      .WillRepeatedly(Invoke([&](v1::SchedulerToPlugin req, std::optional<uint64_t> state_seq) {
        if (req.has_cycle()) return Answered(CycleAnswer(true));
        if (req.has_permit()) {
          if (cache_.NumPods() == 3) all_assumed_seq = cache_.delta_seq();
          permits.emplace_back(req.permit().pod().meta().name(), state_seq.value_or(0));
          v1::PluginToScheduler a;
          a.mutable_permit();
          return Answered(a);
        }
        return Answered(StatusAnswer());
      }));
  AddGang("train", 3, 3);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"train-0", "train-1", "train-2"}));
  ASSERT_NE(all_assumed_seq, 0u);
  EXPECT_EQ(permits, (std::vector<std::pair<std::string, uint64_t>>{
                         {"train-0", all_assumed_seq}, {"train-1", all_assumed_seq}, {"train-2", all_assumed_seq}}));
}

// Gang members with signatures (batching on): one pod per node, as a fake
// whose verdicts are per node: a node is feasible while no pod is assumed or
// bound on it. Cycle requests are kept (CycleRequests()).
class BatchedGangTest : public GangSchedulerTest {
 protected:
  void SetUp() override {
    SignByResources();
    BuildOptions o;
    o.gang_plugin = true;
    Build(std::move(o));
    scheduler_->OnObjectEvent(NodeEvent("node-2"));
    scheduler_->OnObjectEvent(NodeEvent("node-3"));
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
      if (!req.has_cycle()) return Answered(StatusAnswer());
      absl::flat_hash_set<uint32_t> taken;
      for (const std::string& uid : cache_.AssumedUids()) {
        if (sdk::PodInfoPtr p = cache_.GetPod(uid)) taken.insert(*cache_.NodeId(p->pod->node_name()));
      }
      std::vector<uint32_t> nodes;
      if (req.cycle().nodes().all_nodes()) {
        for (const char* n : {"node-1", "node-2", "node-3"}) nodes.push_back(*cache_.NodeId(n));
      } else {
        nodes.assign(req.cycle().nodes().node_ids().begin(), req.cycle().nodes().node_ids().end());
      }
      v1::PluginToScheduler a;
      auto* c = a.mutable_cycle();
      for (uint32_t id : nodes) {
        if (!taken.contains(id)) {
          c->add_feasible(id);
          continue;
        }
        auto* r = c->add_rejected();
        r->set_node_id(id);
        r->mutable_status()->set_code(v1::Status::UNSCHEDULABLE);
        r->mutable_status()->add_reasons("Too many pods");
        r->mutable_status()->set_plugin("Fit");
      }
      c->set_nodes_evaluated(static_cast<uint32_t>(nodes.size()));
      absl::MutexLock lock(&requests_mu_);
      cycle_requests_.push_back(req.cycle());
      return Answered(a);
    }));
  }
};

// The members after the first reuse its ranking: only the node the member
// before was assumed on is evaluated again, not every node per member.
TEST_F(BatchedGangTest, MembersAfterTheFirstReuseItsRanking) {
  AddGang("train", 3, 3);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());  // One pop, the whole gang.
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"train-0", "train-1", "train-2"}));
  absl::flat_hash_set<std::string> nodes;
  for (const v1::Action& a : sink_.All(v1::Action::kBind)) nodes.insert(a.bind().node_name());
  EXPECT_EQ(nodes.size(), 3u);  // One per node, as the verdicts require.
  const std::vector<v1::CycleRequest> requests = CycleRequests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests[0].nodes().all_nodes());
  for (int i = 1; i < 3; ++i) {
    EXPECT_FALSE(requests[i].nodes().all_nodes()) << i;
    EXPECT_EQ(requests[i].nodes().node_ids_size(), 1) << i;
  }
  const batching::BatchStats stats = scheduler_->batch_stats();
  EXPECT_EQ(stats.by_outcome.at("miss_new"), 1u);
  EXPECT_EQ(stats.hits, 2u);
}

// A gang that cannot fit is undone (its assumed members forgotten); the
// nodes it had taken are evaluated again for the next pods of the signature,
// which must not inherit "taken" from the undone pass.
TEST_F(BatchedGangTest, AnUndonePassLeavesItsNodesToBeEvaluatedAgain) {
  AddGang("big", 4, 4);  // Four members, three nodes.
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  scheduler_->WaitForBackgroundWork();
  EXPECT_TRUE(BoundPods().empty());
  EXPECT_EQ(cache_.NumPods(), 0u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(QueueOf(Name("big", i)), QueueKind::kUnschedulable);
  // Pods of the same signature, no event between: served from what the pass
  // left, which must count its three nodes free again.
  const size_t first_pass_requests = CycleRequests().size();
  for (const char* name : {"p-0", "p-1", "p-2"}) scheduler_->OnObjectEvent(PodEvent(name));
  scheduler_->WaitForBackgroundWork();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(scheduler_->ScheduleNext()) << i;
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"p-0", "p-1", "p-2"}));
  const std::vector<v1::CycleRequest> requests = CycleRequests();
  ASSERT_GT(requests.size(), first_pass_requests);
  // p-0: the three nodes the undone pass had taken, asked again, and no more.
  const v1::CycleRequest& again = requests[first_pass_requests];
  EXPECT_FALSE(again.nodes().all_nodes());
  EXPECT_EQ(again.nodes().node_ids_size(), 3);
}

// Only the popped pod's gang is taken: a pod outside it stays queued.
TEST_F(GangSchedulerTest, OnlyTheGangIsTakenFromTheQueue) {
  Build(false);
  RoomFor(100);
  AddGang("train", 2, 2);
  scheduler_->WaitForBackgroundWork();
  clock_.Advance(absl::Seconds(1));  // Queued later: popped after the gang.
  scheduler_->OnObjectEvent(PodEvent("loner"));
  AddGang("other", 2, 2);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"train-0", "train-1"}));
  EXPECT_EQ(QueueOf("loner"), QueueKind::kActive);
  EXPECT_EQ(QueueOf("other-0"), QueueKind::kActive);
}

// Two gangs that do not fit together: the first binds whole, the second
// binds none and holds no room (no deadlock at Permit).
TEST_F(GangSchedulerTest, TwoCompetingGangsOneBindsWholeTheOtherNone) {
  Build(false);
  RoomFor(4);
  AddGang("a", 3, 3);
  AddGang("b", 3, 3);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_FALSE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"a-0", "a-1", "a-2"}));
  EXPECT_EQ(cache_.NumPods(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(QueueOf(Name("b", i)), QueueKind::kUnschedulable);
    EXPECT_EQ(PatchedMessage(Name("b", i)),
              "pod group default/b (minMember 3): only 1 of 3 members can be placed together, so none is bound; "
              "default/b-1: 0/1 nodes are available: 1 Insufficient cpu.");
  }
}

// A gang whose last member arrives after the others were found too few: the
// newcomer's pop takes the waiting members out of the pool, all in one pass.
TEST_F(GangSchedulerTest, AMemberArrivingLateBringsTheWaitingMembersAlong) {
  BuildOptions o;
  o.gang_plugin = true;
  Build(std::move(o));
  RoomFor(100);
  AddGang("train", 3, 2);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 0);
  EXPECT_EQ(QueueOf("train-0"), QueueKind::kUnschedulable);
  EXPECT_EQ(QueueOf("train-1"), QueueKind::kUnschedulable);
  EXPECT_THAT(PatchedMessage("train-0"), testing::HasSubstr("only 2 of 3 members are pending or placed"));
  scheduler_->OnObjectEvent(MemberEvent("train-2", "train"));
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 3);
  EXPECT_EQ(BoundPods().size(), 3u);
  EXPECT_EQ(Queued(), 0u);
}

// A gang with fewer pods than its minimum is not retried on a timer nor by
// events that cannot add members: it waits in the unschedulable pool until
// its PodGroup changes (here minMember lowered to what exists).
TEST_F(GangSchedulerTest, TooFewMembersWaitInThePoolUntilTheirGroupChanges) {
  BuildOptions o;
  o.gang_plugin = true;
  Build(std::move(o));
  RoomFor(100);
  AddGang("train", 4, 3);
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 0);
  // A new node cannot add a member; backoff's longest wait passing does not
  // retry them either.
  scheduler_->OnObjectEvent(NodeEvent("node-2"));
  clock_.Advance(absl::Seconds(11));
  queue_->FlushBackoffQCompleted();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(QueueOf(Name("train", i)), QueueKind::kUnschedulable) << i;
  EXPECT_FALSE(scheduler_->ScheduleNext());
  // Their group's minMember lowered to the three that exist.
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(QueueOf("train-0"), QueueKind::kActive);
  ASSERT_TRUE(scheduler_->ScheduleNext());  // One pass for all three.
  EXPECT_EQ(cycles_.load(), 3);
  EXPECT_EQ(BoundPods().size(), 3u);
  EXPECT_EQ(Queued(), 0u);
}

// Members already bound count toward the minimum: found among the gang's own
// pods, so the one pending member binds alone.
TEST_F(GangSchedulerTest, BoundMembersCountTowardTheMinimum) {
  Build(false);
  RoomFor(100);
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  for (int i = 0; i < 2; ++i) {
    v1::ObjectEvent bound = MemberEvent(Name("train", i), "train");
    bound.mutable_pod()->set_node_name("node-1");
    scheduler_->OnObjectEvent(bound);
  }
  scheduler_->OnObjectEvent(PodEvent("outsider", "node-1"));  // Not a member: does not count.
  scheduler_->OnObjectEvent(MemberEvent("train-2", "train"));
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 1);
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"train-2"}));
}

// With one bound member of minMember 3 and one pending, the gang is too few:
// the bound one counts, the outsider on the node does not.
TEST_F(GangSchedulerTest, AssignedMembersAreCountedInTheMessage) {
  BuildOptions o;
  o.gang_plugin = true;
  Build(std::move(o));
  RoomFor(100);
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  v1::ObjectEvent bound = MemberEvent("train-0", "train");
  bound.mutable_pod()->set_node_name("node-1");
  scheduler_->OnObjectEvent(bound);
  scheduler_->OnObjectEvent(PodEvent("outsider", "node-1"));
  scheduler_->OnObjectEvent(MemberEvent("train-1", "train"));
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 0);
  EXPECT_EQ(PatchedMessage("train-1"),
            "pod group default/train (minMember 3): only 2 of 3 members are pending or placed, so none is bound");
  EXPECT_EQ(QueueOf("train-1"), QueueKind::kUnschedulable);
}

// Enough members exist but one is still held at PreEnqueue (a scheduling
// gate): the others back off without a FailedScheduling message, and come
// along once the gate is lifted.
TEST_F(GangSchedulerTest, AMemberStillGatedHoldsTheGangBackQuietly) {
  BuildOptions o;
  o.pre_enqueue = true;
  Build(std::move(o));
  RoomFor(100);
  AddGang("train", 3, 2);
  v1::ObjectEvent gated = MemberEvent("train-2", "train");
  gated.mutable_pod()->add_scheduling_gates("example.com/wait");
  scheduler_->OnObjectEvent(gated);
  Start();
  EXPECT_EQ(QueueOf("train-2"), QueueKind::kGated);
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 0);
  EXPECT_EQ(PatchedMessage("train-0"), "");
  EXPECT_EQ(PatchedMessage("train-1"), "");
  EXPECT_EQ(QueueOf("train-0"), QueueKind::kBackoff);
  gated.mutable_pod()->clear_scheduling_gates();
  scheduler_->OnObjectEvent(gated);
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(cycles_.load(), 3);
  EXPECT_EQ(BoundPods().size(), 3u);
}

// Coscheduling's PreEnqueue holds a member until minMember pods exist. While
// the first list arrives, what the scheduler has seen of a gang is partial:
// no member is told "fewer than minMember pods exist" because its siblings
// were further down the list. Those still held once the list is in are told,
// once each, when they have been held for gated_status_delay (1 s); members
// created one by one within it are told nothing.
class GangListTest : public GangSchedulerTest {
 protected:
  void BuildWithGangPreEnqueue() {
    BuildOptions o;
    o.gang_pre_enqueue = true;
    Build(std::move(o));
    EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([this](v1::SchedulerToPlugin req, auto) {
      if (req.has_cycle()) {
        ++cycles_;
        return Answered(CycleAnswer(true));
      }
      v1::PluginToScheduler a = StatusAnswer();
      if (req.has_pre_enqueue() && req.pre_enqueue().pod_group_pods() <
                                       static_cast<uint32_t>(req.pre_enqueue().pod_group().min_member())) {
        sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, "fewer than minMember pods exist")
            .WithPlugin("Gang")
            .ToProto(a.mutable_status()->add_statuses());
      }
      return Answered(a);
    }));
  }
  size_t GatedPatches() {
    size_t n = 0;
    for (const v1::Action& a : sink_.All(v1::Action::kPatchPodStatus)) {
      n += a.patch_pod_status().conditions_size() > 0 &&
           a.patch_pod_status().conditions(0).reason() == "SchedulingGated";
    }
    return n;
  }
};

TEST_F(GangListTest, MembersListedBeforeTheirSiblingsAreNotToldTheyAreFew) {
  BuildWithGangPreEnqueue();
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  for (int i = 0; i < 3; ++i) {
    scheduler_->OnObjectEvent(MemberEvent(Name("train", i), "train"));
    scheduler_->WaitForBackgroundWork();  // Its PreEnqueue ran before the next member was listed.
  }
  Start();
  EXPECT_EQ(GatedPatches(), 0u);
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods().size(), 3u);
}

TEST_F(GangListTest, MembersStillFewWhenTheListIsInAreToldOnce) {
  BuildWithGangPreEnqueue();
  AddGang("train", 3, 2);
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(GatedPatches(), 0u);
  Start();
  clock_.Advance(absl::Milliseconds(999));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 0u);
  clock_.Advance(absl::Milliseconds(1));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 2u);
  EXPECT_EQ(PatchedMessage("train-0"), "Gang: fewer than minMember pods exist");
  EXPECT_EQ(PatchedMessage("train-1"), "Gang: fewer than minMember pods exist");
  EXPECT_EQ(QueueOf("train-0"), QueueKind::kGated);
  // The third member, watched after the list: all three go.
  scheduler_->OnObjectEvent(MemberEvent("train-2", "train"));
  scheduler_->WaitForBackgroundWork();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods().size(), 3u);
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 2u);
}

// A job controller creates a gang's pods one by one after the list: the
// early members are held until the last arrives, within the delay, and no
// member is told anything.
TEST_F(GangListTest, MembersCreatedOneByOneWithinTheDelayAreNotTold) {
  BuildWithGangPreEnqueue();
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  Start();
  for (int i = 0; i < 3; ++i) {
    scheduler_->OnObjectEvent(MemberEvent(Name("train", i), "train"));
    scheduler_->WaitForBackgroundWork();
    clock_.Advance(absl::Milliseconds(400));
    scheduler_->Housekeeping();
  }
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods().size(), 3u);
  clock_.Advance(absl::Seconds(2));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 0u);
}

// An update asks a held member again (so do its group's changes); it keeps
// the due time of its first rejection, so that updates do not put its
// reason off.
TEST_F(GangListTest, AHeldMemberIsToldOnceAtItsFirstRejectionsDueTime) {
  BuildWithGangPreEnqueue();
  scheduler_->OnObjectEvent(GroupEvent("train", 4));
  Start();
  v1::ObjectEvent first = MemberEvent("train-0", "train");
  scheduler_->OnObjectEvent(first);
  scheduler_->WaitForBackgroundWork();
  clock_.Advance(absl::Milliseconds(600));
  (*first.mutable_pod()->mutable_meta()->mutable_labels())["touched"] = "yes";
  scheduler_->OnObjectEvent(first);  // Asks train-0 again.
  scheduler_->OnObjectEvent(MemberEvent("train-1", "train"));
  scheduler_->WaitForBackgroundWork();
  clock_.Advance(absl::Milliseconds(400));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 1u);
  EXPECT_EQ(PatchedMessage("train-0"), "Gang: fewer than minMember pods exist");
  EXPECT_EQ(PatchedMessage("train-1"), "");
  clock_.Advance(absl::Milliseconds(600));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 2u);
  EXPECT_EQ(PatchedMessage("train-1"), "Gang: fewer than minMember pods exist");
  clock_.Advance(absl::Seconds(5));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 2u);
}

// A held member deleted before its delay ran out is not patched (the
// adapter's patch of a gone pod would fail anyway).
TEST_F(GangListTest, AMemberDeletedWhileHeldIsNotTold) {
  BuildWithGangPreEnqueue();
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  Start();
  const v1::ObjectEvent member = MemberEvent("train-0", "train");
  scheduler_->OnObjectEvent(member);
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(QueueOf("train-0"), QueueKind::kGated);
  scheduler_->OnObjectEvent(Deleted(member));
  scheduler_->WaitForBackgroundWork();
  clock_.Advance(absl::Seconds(2));
  scheduler_->Housekeeping();
  EXPECT_EQ(GatedPatches(), 0u);
}

// gated_status_delay 0: the reason goes with the rejection, as before.
TEST_F(GangListTest, NoDelayTellsAtOnce) {
  gated_status_delay_ = absl::ZeroDuration();
  BuildWithGangPreEnqueue();
  scheduler_->OnObjectEvent(GroupEvent("train", 3));
  Start();
  scheduler_->OnObjectEvent(MemberEvent("train-0", "train"));
  scheduler_->WaitForBackgroundWork();
  EXPECT_EQ(GatedPatches(), 1u);
}

// A pod naming a group that does not exist is scheduled as an ordinary pod
// here (Coscheduling's PreEnqueue holds it in a real profile).
TEST_F(GangSchedulerTest, APodNamingNoExistingGroupIsAnOrdinaryPod) {
  Build(false);
  RoomFor(100);
  scheduler_->OnObjectEvent(MemberEvent("stray-0", "nowhere"));
  scheduler_->OnObjectEvent(MemberEvent("stray-1", "nowhere"));
  Start();
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_EQ(BoundPods().size(), 1u);  // One pod per pop.
}

// ---- Gangs and PostFilter: members whose room is on its way, or deleted mid-pass

// A PostFilter scripted per pod, that records what was carried out or
// withdrawn. `on_call` runs first (a test's event arriving mid-cycle).
class ScriptedPostFilter : public PostFilterPlugin {
 public:
  enum class Answer { kPreempt, kAwaitingVictims, kNoVictims };
  struct Log {
    std::vector<std::string> carried_out, withdrawn;
  };
  ScriptedPostFilter(std::map<std::string, Answer> answers, Log* log, std::function<void(const std::string&)> on_call = nullptr)
      : answers_(std::move(answers)), log_(log), on_call_(std::move(on_call)) {}
  std::string_view Name() const override { return "FakePreemption"; }
  std::pair<PostFilterResult, sdk::Status> PostFilter(const v1::Pod& pod, const Diagnosis&) override {
    const std::string name = pod.meta().name();
    if (on_call_) on_call_(name);
    auto it = answers_.find(name);
    const Answer answer = it == answers_.end() ? Answer::kNoVictims : it->second;
    PostFilterResult r;
    if (answer == Answer::kAwaitingVictims) {
      r.awaiting_victims = true;
      return {std::move(r), sdk::Status(sdk::Code::kUnschedulable, "preemption: not eligible due to a terminating pod on the nominated node")};
    }
    if (answer == Answer::kNoVictims) return {std::move(r), sdk::Status(sdk::Code::kUnschedulable, "no victims")};
    r.nominated_node_name = "node-1";
    r.after_requeue = [log = log_, name] { log->carried_out.push_back(name); };
    r.withdraw = [log = log_, name] { log->withdrawn.push_back(name); };
    return {std::move(r), sdk::Status::Success()};
  }

 private:
  std::map<std::string, Answer> answers_;
  Log* log_;
  std::function<void(const std::string&)> on_call_;
};

// The gang "train" of three members, each answered by a ScriptedPostFilter;
// node-1 takes `room` pods. Runs one pass.
class GangPreemptionTest : public GangSchedulerTest {
 protected:
  using A = ScriptedPostFilter::Answer;
  void Pass(int32_t min_member, size_t room, std::map<std::string, A> answers,
            std::function<void(const std::string&)> on_call = nullptr) {
    BuildOptions o;
    o.gang_plugin = true;
    o.post_filter = std::make_unique<ScriptedPostFilter>(std::move(answers), &log_, std::move(on_call));
    Build(std::move(o));
    RoomFor(room);
    AddGang("train", min_member, 3);
    Start();
    ASSERT_TRUE(scheduler_->ScheduleNext());
    scheduler_->WaitForBackgroundWork();
  }
  // Every member preempts; train-0 is deleted when `member`'s PostFilter runs.
  void PassDeletingTrain0At(int32_t min_member, const std::string& member) {
    Pass(min_member, 0, {{"train-0", A::kPreempt}, {"train-1", A::kPreempt}, {"train-2", A::kPreempt}},
         [this, member](const std::string& name) {
           if (name == member) scheduler_->OnObjectEvent(Deleted(MemberEvent("train-0", "train")));
         });
  }
  ScriptedPostFilter::Log log_;
};

// A member whose victims are still terminating (popped with a sibling whose
// victims went first) has its room on the way: it counts towards the
// minimum, so the members that fit are placed rather than the pass undone
// and the gang's room given up (the Permit waiters rejected, in a real profile).
TEST_F(GangPreemptionTest, AMemberWhoseVictimsAreTerminatingCountsTowardsTheMinimum) {
  Pass(3, 2, {{"train-2", A::kAwaitingVictims}});
  EXPECT_EQ(BoundPods(), (std::vector<std::string>{"train-0", "train-1"}));
  EXPECT_EQ(PatchedMessage("train-2"),
            "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to a terminating pod on the "
            "nominated node.");
  EXPECT_EQ(QueueOf("train-2"), QueueKind::kUnschedulable);
  EXPECT_TRUE(log_.carried_out.empty());
  EXPECT_TRUE(log_.withdrawn.empty());
}

// A member no node takes and with nothing on the way still fails the gang,
// as before: the awaiting one is not the cause named.
TEST_F(GangPreemptionTest, AnAwaitingMemberDoesNotMakeUpForOneThatFitsNowhere) {
  Pass(3, 1, {{"train-1", A::kAwaitingVictims}});
  EXPECT_TRUE(BoundPods().empty());
  EXPECT_EQ(PatchedMessage("train-0"),
            "pod group default/train (minMember 3): only 2 of 3 members can be placed together, so none is bound; "
            "default/train-2: 0/1 nodes are available: 1 Insufficient cpu. no victims.");
}

// A member deleted while the pass runs counts for nothing: with minMember 2
// the two left are enough, their preemptions are carried out, and the
// deleted one's is withdrawn, its victims never evicted.
TEST_F(GangPreemptionTest, AMemberDeletedDuringThePassIsNotCountedNorPreemptedFor) {
  PassDeletingTrain0At(2, "train-1");
  EXPECT_EQ(log_.carried_out, (std::vector<std::string>{"train-1", "train-2"}));
  EXPECT_EQ(log_.withdrawn, (std::vector<std::string>{"train-0"}));
  EXPECT_EQ(QueueOf("train-0"), std::nullopt);
  EXPECT_EQ(PatchedMessage("train-0"), "");
}

// With minMember 3, the deletion leaves the gang short: nothing is carried
// out, every preemption of the pass is withdrawn, and the deleted member is
// told nothing.
TEST_F(GangPreemptionTest, AMemberDeletedDuringThePassLeavingTooFewEvictsNothing) {
  PassDeletingTrain0At(3, "train-2");
  EXPECT_TRUE(log_.carried_out.empty());
  std::vector<std::string> withdrawn = log_.withdrawn;
  std::sort(withdrawn.begin(), withdrawn.end());
  EXPECT_EQ(withdrawn, (std::vector<std::string>{"train-0", "train-1", "train-2"}));
  EXPECT_EQ(PatchedMessage("train-0"), "");
  EXPECT_NE(PatchedMessage("train-1"), "");
}

// The same for a lone pod: deleted while its PostFilter chose victims, it
// evicts nobody and keeps no nomination.
TEST_F(SchedulerTest, APodDeletedWhileItsPostFilterPreemptsEvictsNobody) {
  ScriptedPostFilter::Log log;
  Build(false, std::make_unique<ScriptedPostFilter>(
                   std::map<std::string, ScriptedPostFilter::Answer>{{"big", ScriptedPostFilter::Answer::kPreempt}},
                   &log, [this](const std::string&) { scheduler_->OnObjectEvent(Deleted(PodEvent("big"))); }));
  EXPECT_CALL(host_, Call(_, _)).WillRepeatedly(Invoke([](auto, auto) { return Answered(CycleAnswer(false)); }));
  StartWithPod("big");
  ASSERT_TRUE(scheduler_->ScheduleNext());
  EXPECT_TRUE(log.carried_out.empty());
  EXPECT_EQ(log.withdrawn, (std::vector<std::string>{"big"}));
  EXPECT_EQ(QueueOf("big"), std::nullopt);
}

}  // namespace
}  // namespace podium::scheduler
