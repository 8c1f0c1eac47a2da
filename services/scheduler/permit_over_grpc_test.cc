// A plugin-initiated Permit reject over real gRPC: an in-process plugin built
// with the SDK on a temp unix socket, driven through GrpcPluginProcess. The
// reject arrives on the stream's reader thread; the Unreserve it causes must
// not run there, or every answer behind it on that stream waits for it.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"
#include "queue/fake_clock.h"
#include "remote/grpc_plugin_process.h"
#include "cache/mirror_state_source.h"
#include "scheduler.h"

namespace podium::scheduler {
namespace {

// Pods wait at Permit; the pod named "breaker" breaks the gang: it rejects
// every waiting pod (the decision goes out before its own Permit answer).
class GangPlugin final : public sdk::ReservePlugin, public sdk::PermitPlugin {
 public:
  explicit GangPlugin(sdk::Handle& handle) : handle_(handle) {}
  std::string_view Name() const override { return "Gang"; }
  sdk::Status Reserve(sdk::CycleState&, const sdk::PodInfo&, const std::string&) override {
    return sdk::Status::Success();
  }
  void Unreserve(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) override {
    if (pod.pod->meta().name() == "member") ++member_unreserves;
  }
  sdk::PermitResult Permit(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) override {
    if (pod.pod->meta().name() != "breaker") {
      waiting_.push_back(pod.uid());
      return sdk::PermitResult{sdk::Status(sdk::Code::kWait), 60000};
    }
    for (const auto& uid : waiting_) handle_.RejectWaitingPod(uid, "Gang", "gang broken");
    waiting_.clear();
    return sdk::PermitResult{sdk::Status::Success(), 0};
  }

  static inline std::atomic<int> member_unreserves{0};

 private:
  sdk::Handle& handle_;
  std::vector<std::string> waiting_;
};

class RecordingSink : public ActionSink {
 public:
  void Send(v1::Action action, ResultCallback on_result) override {
    absl::MutexLock lock(&mu_);
    if (action.has_bind()) bound_.push_back(action.bind().pod().name());
  }
  std::vector<std::string> bound() {
    absl::MutexLock lock(&mu_);
    return bound_;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> bound_ ABSL_GUARDED_BY(mu_);
};

v1::ObjectEvent PodEvent(const std::string& name, int32_t priority) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* p = e.mutable_pod();
  p->mutable_meta()->set_name(name);
  p->mutable_meta()->set_namespace_("default");
  p->mutable_meta()->set_uid("uid-" + name);
  p->set_priority(priority);
  return e;
}

TEST(PermitOverGrpcTest, APluginRejectDoesNotStallTheAnswersBehindIt) {
  GangPlugin::member_unreserves = 0;
  const std::string socket = "/tmp/podium-permit-test-" + std::to_string(::getpid()) + ".sock";
  sdk::PluginServer server({.address = "unix://" + socket,
                            .process_name = "gang",
                            .plugins = {{"Gang", [](const boost::json::object&, sdk::Handle& handle)
                                                      -> absl::StatusOr<sdk::PluginPtr> {
                                           return std::make_unique<GangPlugin>(handle);
                                         }}}});
  ASSERT_TRUE(server.Start().ok());

  FakeClock clock;
  Cache cache;
  Snapshot snapshot;
  CacheStateSource state(cache, snapshot);
  std::atomic<Scheduler*> scheduler_ptr{nullptr};
  PluginEndpointOptions options;
  options.name = "gang";
  options.address = "unix://" + socket;
  options.timeout = absl::Seconds(5);
  v1::PluginArgs args;
  args.set_name("Gang");
  options.plugins.push_back(args);
  GrpcPluginProcess process(options, state, [&](const v1::PermitDecision& d) {
    if (Scheduler* s = scheduler_ptr.load()) s->OnPermitDecision(d);
  });
  ASSERT_TRUE(process.Start().ok());

  ProfileSpec spec;
  spec.plugins[v1::RESERVE] = {{"Gang", 0}};
  spec.plugins[v1::PERMIT] = {{"Gang", 0}};
  spec.plugins[v1::BIND] = {{"DefaultBinder", 0}};
  spec.processes["Gang"] = &process;
  std::vector<FrameworkPtr> profiles;
  profiles.push_back(std::make_unique<Framework>(spec, 1));
  SchedulingQueue::Options qo;
  qo.clock = &clock;
  SchedulingQueue queue(qo);
  SchedulerMetrics metrics(std::make_shared<prometheus::Registry>());
  Scheduler::Options so;
  so.run_scheduling_thread = false;
  so.run_housekeeping_thread = false;
  Scheduler scheduler(so, cache, snapshot, queue, std::move(profiles), metrics, clock);
  RecordingSink sink;
  scheduler.SetActionSink(&sink);
  scheduler_ptr.store(&scheduler);

  v1::ObjectEvent node;
  node.set_type(v1::ObjectEvent::UPSERT);
  node.mutable_node()->mutable_meta()->set_name("node-1");
  node.mutable_node()->mutable_meta()->set_uid("uid-node-1");
  node.mutable_node()->mutable_allocatable()->set_milli_cpu(4000);
  node.mutable_node()->mutable_allocatable()->set_pods(110);
  scheduler.OnListBegin();
  scheduler.OnObjectEvent(node);
  scheduler.OnObjectEvent(PodEvent("member", 10));
  scheduler.OnObjectEvent(PodEvent("breaker", 0));
  scheduler.OnListEnd();
  scheduler.Start();
  scheduler.WaitForBackgroundWork();

  ASSERT_TRUE(scheduler.ScheduleNext());  // member waits at Permit.
  ASSERT_TRUE(scheduler.WaitingAtPermit("uid-member"));
  // breaker's Permit: the plugin rejects member first, on the same stream.
  // Its answer must be read, not time out behind a blocked reader.
  ASSERT_TRUE(scheduler.ScheduleNext());
  scheduler.WaitForBackgroundWork();
  EXPECT_EQ(sink.bound(), std::vector<std::string>{"breaker"});
  EXPECT_FALSE(scheduler.WaitingAtPermit("uid-member"));
  EXPECT_EQ(GangPlugin::member_unreserves.load(), 1);
  EXPECT_EQ(process.stats().timeouts, 0u);
  EXPECT_FALSE(cache.IsAssumed("uid-member"));

  scheduler.Stop();
  process.Shutdown();
  server.Shutdown();
}

}  // namespace
}  // namespace podium::scheduler
