// What the SDK and the stream cost per pod: a real in-process PluginServer,
// one stream, 5000 mirrored nodes, a filter and a score plugin as cheap as the
// default ones. `Roundtrip` is a request with no work (the transport alone).
#include <chrono>
#include <memory>
#include <string>

#include "benchmark/benchmark.h"
#include "grpcpp/grpcpp.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"
#include "session.h"

namespace podium::sdk {
namespace {

constexpr int kNodes = 5000;

class Fits final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Fits"; }
  Status Filter(CycleState&, const PodInfo& pod, const NodeInfo& node) override {
    if (node.requested().milli_cpu + pod.requests.milli_cpu > node.allocatable().milli_cpu) {
      return Status(Code::kUnschedulable, "Insufficient cpu");
    }
    return Status::Success();
  }
};

class LeastAllocated final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "LeastAllocated"; }
  std::pair<int64_t, Status> Score(CycleState&, const PodInfo& pod, const NodeInfo& node) override {
    const int64_t alloc = node.allocatable().milli_cpu;
    const int64_t used = node.non_zero_requested_milli_cpu() + pod.non_zero_milli_cpu;
    return {alloc == 0 ? 0 : (alloc - used) * kMaxNodeScore / alloc, Status::Success()};
  }
};

std::vector<PluginDefinition> BenchPlugins() {
  return {{"Fits",
           [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
             return std::make_unique<Fits>();
           }},
          {"LeastAllocated",
           [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
             return std::make_unique<LeastAllocated>();
           }}};
}

// 5000 nodes, a third of them too small for the pod, 10 pods each.
v1::SchedulerToPlugin ResetMessage(uint64_t id) {
  v1::SchedulerToPlugin reset;
  reset.set_id(id);
  v1::StateDelta* delta = reset.mutable_delta();
  delta->set_reset(true);
  for (int i = 1; i <= kNodes; ++i) {
    v1::MirroredNode* node = delta->add_node_upserts();
    node->set_id(i);
    node->mutable_node()->mutable_meta()->set_name("node-" + std::to_string(i));
    node->mutable_node()->mutable_allocatable()->set_milli_cpu(i % 3 == 0 ? 100 : 4000);
    node->mutable_node()->mutable_allocatable()->set_pods(110);
    for (int p = 0; p < 10; ++p) {
      v1::MirroredPod* pod = delta->add_pod_upserts();
      pod->set_node_id(i);
      pod->mutable_pod()->mutable_meta()->set_uid("pod-" + std::to_string(i) + "-" + std::to_string(p));
      pod->mutable_pod()->add_containers()->mutable_requests()->set_milli_cpu(100);
    }
  }
  return reset;
}

v1::SchedulerToPlugin OpenMessage(uint64_t id) {
  v1::SchedulerToPlugin open;
  open.set_id(id);
  open.mutable_open()->set_protocol_version(1);
  open.mutable_open()->add_plugins()->set_name("Fits");
  open.mutable_open()->add_plugins()->set_name("LeastAllocated");
  return open;
}

v1::SchedulerToPlugin CycleMessage(int to_find) {
  v1::SchedulerToPlugin message;
  v1::CycleRequest* cycle = message.mutable_cycle();
  cycle->mutable_pod()->mutable_meta()->set_uid("pending");
  cycle->mutable_pod()->add_containers()->mutable_requests()->set_milli_cpu(500);
  cycle->add_filter_plugins("Fits");
  cycle->add_score_plugins("LeastAllocated");
  cycle->mutable_nodes()->set_all_nodes(true);
  cycle->set_num_feasible_to_find(to_find);
  return message;
}

class Stream {
 public:
  Stream() {
    server_ = std::make_unique<PluginServer>(
        ServeOptions{.address = "127.0.0.1:0", .process_name = "bench", .plugins = BenchPlugins()});
    if (!server_->Start().ok()) std::abort();
    stub_ = v1::Plugin::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
    stream_ = stub_->Run(&context_);
    Call(OpenMessage(NextId()));
    Call(ResetMessage(NextId()));
  }
  ~Stream() {
    context_.TryCancel();
    stream_->Finish();
    server_->Shutdown();
  }

  uint64_t NextId() { return ++id_; }
  v1::PluginToScheduler Call(const v1::SchedulerToPlugin& message) {
    v1::PluginToScheduler answer;
    if (!stream_->Write(message) || !stream_->Read(&answer) || answer.id() != message.id()) {
      std::abort();
    }
    return answer;
  }

 private:
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<v1::Plugin::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> stream_;
  uint64_t id_ = 0;
};

Stream& SharedStream() {
  static Stream* stream = new Stream();
  return *stream;
}

void BM_Roundtrip(benchmark::State& state) {
  Stream& stream = SharedStream();
  v1::SchedulerToPlugin message;
  for (auto _ : state) {
    message.set_id(stream.NextId());
    benchmark::DoNotOptimize(stream.Call(message));
  }
}
BENCHMARK(BM_Roundtrip)->UseRealTime();

// One pod: filter until num_feasible_to_find nodes pass, score them.
void BM_Cycle5000Nodes(benchmark::State& state) {
  Stream& stream = SharedStream();
  v1::SchedulerToPlugin message = CycleMessage(static_cast<int>(state.range(0)));
  v1::CycleRequest* cycle = message.mutable_cycle();
  uint64_t cycle_id = 0;
  int64_t feasible = 0;
  for (auto _ : state) {
    message.set_id(stream.NextId());
    message.clear_finished_cycles();
    if (cycle_id > 0) message.add_finished_cycles(cycle_id);
    cycle->set_cycle_id(++cycle_id);
    cycle->mutable_nodes()->set_start_index(static_cast<uint32_t>(cycle_id * 97 % kNodes));
    v1::PluginToScheduler answer = stream.Call(message);
    feasible += answer.cycle().feasible_size();
  }
  state.counters["feasible/pod"] = benchmark::Counter(
      static_cast<double>(feasible) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_Cycle5000Nodes)->Arg(500)->Arg(0)->UseRealTime()->Unit(benchmark::kMicrosecond);

// The same cycle without the transport: the session's own cost.
using internal::ResponsePtr;
class CountingSink final : public internal::ResponseSink {
 public:
  ResponsePtr NewResponse() override {
    if (free_ == nullptr) return std::make_unique<internal::Response>();
    return std::move(free_);
  }
  bool Send(ResponsePtr response) override {
    feasible += response->message().cycle().feasible_size();
    response->Reset();
    free_ = std::move(response);
    return true;
  }
  ResponsePtr free_;
  int64_t feasible = 0;
};

void BM_SessionCycle5000Nodes(benchmark::State& state) {
  static const std::vector<PluginDefinition>* definitions =
      new std::vector<PluginDefinition>(BenchPlugins());
  auto sink = std::make_shared<CountingSink>();
  internal::Session session(*definitions, "bench", sink);
  v1::SchedulerToPlugin open = OpenMessage(1);
  session.Handle(open);
  v1::SchedulerToPlugin reset = ResetMessage(2);
  session.Handle(reset);
  sink->feasible = 0;
  const v1::SchedulerToPlugin prototype = CycleMessage(static_cast<int>(state.range(0)));
  uint64_t cycle_id = 0;
  for (auto _ : state) {
    state.PauseTiming();
    v1::SchedulerToPlugin message = prototype;  // Handle moves the pod out.
    message.set_id(cycle_id + 3);
    if (cycle_id > 0) message.add_finished_cycles(cycle_id);
    message.mutable_cycle()->set_cycle_id(++cycle_id);
    message.mutable_cycle()->mutable_nodes()->set_start_index(
        static_cast<uint32_t>(cycle_id * 97 % kNodes));
    state.ResumeTiming();
    session.Handle(message);
  }
  state.counters["feasible/pod"] = benchmark::Counter(
      static_cast<double>(sink->feasible) / static_cast<double>(state.iterations()));
}
BENCHMARK(BM_SessionCycle5000Nodes)->Arg(500)->Arg(0)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace podium::sdk

BENCHMARK_MAIN();
