// The SDK runtime end to end: a real PluginServer in process, a raw generated
// stub as the scheduler, toy plugins.
#include <unistd.h>

#include <chrono>
#include <thread>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/health_check_service_interface.h"
#include "gtest/gtest.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"
#include "test_support/generic_stream_call.h"

namespace podium::sdk {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::UnorderedElementsAre;

std::string Label(const google::protobuf::Map<std::string, std::string>& labels,
                  const std::string& key) {
  auto it = labels.find(key);
  return it == labels.end() ? "" : it->second;
}

// Rejects nodes labelled fit=no; fails on fit=error.
class FitPlugin final : public FilterPlugin {
 public:
  std::string_view Name() const override { return "Fit"; }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo& node) override {
    const std::string fit = Label(node.node().meta().labels(), "fit");
    if (fit == "no") return Status(Code::kUnschedulable, "node(s) didn't fit");
    if (fit == "error") return Status(Code::kError, "boom");
    return Status::Success();
  }
};

struct ExtraPods final : StateData {
  int extra = 0;
  std::unique_ptr<StateData> Clone() const override { return std::make_unique<ExtraPods>(*this); }
};

// At most `maxPods` (default: allocatable pods) pods per node. Its PreFilter
// extensions track pods added or removed during dry runs; Filter checks that
// the node it is given agrees with them.
class CapacityPlugin final : public PreFilterPlugin,
                             public FilterPlugin,
                             public ReservePlugin,
                             public PreFilterExtensions {
 public:
  CapacityPlugin(Handle& handle, int64_t max_pods) : handle_(handle), max_pods_(max_pods) {}
  std::string_view Name() const override { return "Capacity"; }
  std::pair<PreFilterResult, Status> PreFilter(CycleState& state, const PodInfo&,
                                               const Snapshot&) override {
    state.Write("Capacity", std::make_unique<ExtraPods>());
    return {PreFilterResult{}, Status::Success()};
  }
  PreFilterExtensions* Extensions() override { return this; }
  Status AddPod(CycleState& state, const PodInfo&, const PodInfo&, const NodeInfo&) override {
    state.ReadAs<ExtraPods>("Capacity")->extra++;
    return Status::Success();
  }
  Status RemovePod(CycleState& state, const PodInfo&, const PodInfo&, const NodeInfo&) override {
    state.ReadAs<ExtraPods>("Capacity")->extra--;
    return Status::Success();
  }
  Status Filter(CycleState& state, const PodInfo&, const NodeInfo& node) override {
    auto* extra = state.ReadAs<ExtraPods>("Capacity");
    if (extra == nullptr) return Status(Code::kError, "no PreFilter state");
    const NodeInfo* mirrored = handle_.snapshot().GetById(node.id());
    if (static_cast<int>(node.pods().size()) !=
        static_cast<int>(mirrored->pods().size()) + extra->extra) {
      return Status(Code::kError, "node and cycle state disagree");
    }
    const int64_t max = max_pods_ > 0 ? max_pods_ : node.allocatable().allowed_pod_number;
    if (static_cast<int64_t>(node.pods().size()) >= max) {
      return Status(Code::kUnschedulable, "too many pods");
    }
    return Status::Success();
  }
  Status Reserve(CycleState& state, const PodInfo&, const std::string&) override {
    if (state.Read("Capacity") == nullptr) return Status(Code::kError, "no cycle state");
    return Status::Success();
  }
  void Unreserve(CycleState&, const PodInfo&, const std::string&) override {}

 private:
  Handle& handle_;
  int64_t max_pods_;
};

// PreFilter says Skip; its Filter would reject everything.
class SkipperPlugin final : public PreFilterPlugin, public FilterPlugin {
 public:
  std::string_view Name() const override { return "Skipper"; }
  std::pair<PreFilterResult, Status> PreFilter(CycleState&, const PodInfo&,
                                               const Snapshot&) override {
    return {PreFilterResult{}, Status(Code::kSkip)};
  }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo&) override {
    return Status(Code::kUnschedulable, "Skipper's filter ran");
  }
};

// Only the nodes named in the pod's "only" label (PreFilterResult); "none":
// UnschedulableAndUnresolvable.
class OnlyPlugin final : public PreFilterPlugin {
 public:
  std::string_view Name() const override { return "Only"; }
  std::pair<PreFilterResult, Status> PreFilter(CycleState&, const PodInfo& pod,
                                               const Snapshot&) override {
    const std::string only = Label(pod.pod->meta().labels(), "only");
    if (only.empty()) return {PreFilterResult{}, Status::Success()};
    if (only == "none") return {PreFilterResult{}, Status(Code::kUnschedulableAndUnresolvable, "only none")};
    return {PreFilterResult{absl::flat_hash_set<std::string>{only}}, Status::Success()};
  }
};

// A PreFilter that says Unschedulable (preemption may help) for a pod
// labelled quota=full: a quota check ahead of the filters.
class QuotaPlugin final : public PreFilterPlugin {
 public:
  std::string_view Name() const override { return "Quota"; }
  std::pair<PreFilterResult, Status> PreFilter(CycleState&, const PodInfo& pod, const Snapshot&) override {
    if (Label(pod.pod->meta().labels(), "quota") == "full") {
      return {PreFilterResult{}, Status(Code::kUnschedulable, "quota used up")};
    }
    return {PreFilterResult{}, Status::Success()};
  }
};

// Score = the node's "score" label, normalized so that the best node gets 100.
class PreferPlugin final : public ScorePlugin {
 public:
  std::string_view Name() const override { return "Prefer"; }
  std::pair<int64_t, Status> Score(CycleState&, const PodInfo&, const NodeInfo& node) override {
    const std::string score = Label(node.node().meta().labels(), "score");
    return {score.empty() ? 0 : std::atoll(score.c_str()), Status::Success()};
  }
  bool HasNormalizeScore() const override { return true; }
  Status NormalizeScore(CycleState&, const PodInfo&, std::vector<NodeScore>& scores) override {
    int64_t max = 0;
    for (const NodeScore& s : scores) max = std::max(max, s.score);
    if (max == 0) return Status::Success();
    for (NodeScore& s : scores) s.score = s.score * kMaxNodeScore / max;
    return Status::Success();
  }
};

// Pods wait at Permit until a pod labelled gang-last arrives, which allows the
// others. Pod adds with the same "gang" label are worth a retry.
class GangPlugin final : public PermitPlugin, public EnqueueExtensions {
 public:
  explicit GangPlugin(Handle& handle) : handle_(handle) {}
  std::string_view Name() const override { return "Gang"; }
  PermitResult Permit(CycleState&, const PodInfo& pod, const std::string&) override {
    if (Label(pod.pod->meta().labels(), "gang-last").empty()) {
      waiting_.push_back(pod.uid());
      return PermitResult{Status(Code::kWait), 5000};
    }
    for (const std::string& uid : waiting_) allowed_.push_back(handle_.AllowWaitingPod(uid, "Gang"));
    waiting_.clear();
    return PermitResult{Status::Success(), 0};
  }
  std::vector<ClusterEventWithHint> EventsToRegister() const override {
    return {
        {v1::POD, v1::ADD,
         [](const v1::Pod& pod, const v1::ClusterEvent& event) {
           return Label(pod.meta().labels(), "gang") == Label(event.new_pod().meta().labels(), "gang")
                      ? QueueingHint::kQueue
                      : QueueingHint::kQueueSkip;
         }},
        {v1::NODE, v1::ADD | v1::UPDATE_NODE_LABEL, nullptr},
    };
  }

  std::vector<bool> allowed_;

 private:
  Handle& handle_;
  std::vector<std::string> waiting_;
};

std::vector<PluginDefinition> TestPlugins() {
  return {
      {"Fit", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<FitPlugin>();
       }},
      {"Capacity",
       [](const boost::json::object& args, Handle& handle) -> absl::StatusOr<PluginPtr> {
         int64_t max_pods = 0;
         if (const boost::json::value* v = args.if_contains("maxPods")) {
           if (!v->is_int64()) return absl::InvalidArgumentError("maxPods: must be an integer");
           max_pods = v->as_int64();
         }
         return std::make_unique<CapacityPlugin>(handle, max_pods);
       }},
      {"Skipper", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<SkipperPlugin>();
       }},
      {"Only", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<OnlyPlugin>();
       }},
      {"Quota", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<QuotaPlugin>();
       }},
      {"Prefer", [](const boost::json::object&, Handle&) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<PreferPlugin>();
       }},
      {"Gang", [](const boost::json::object&, Handle& handle) -> absl::StatusOr<PluginPtr> {
         return std::make_unique<GangPlugin>(handle);
       }},
  };
}

v1::Node MakeNode(const std::string& name, std::map<std::string, std::string> labels = {},
                  int64_t max_pods = 110) {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("uid-" + name);
  for (const auto& [k, v] : labels) (*node.mutable_meta()->mutable_labels())[k] = v;
  node.mutable_allocatable()->set_pods(max_pods);
  node.mutable_allocatable()->set_milli_cpu(4000);
  return node;
}

v1::Pod MakePod(const std::string& uid, int32_t priority = 0,
                std::map<std::string, std::string> labels = {}) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(uid);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(uid);
  pod.set_priority(priority);
  for (const auto& [k, v] : labels) (*pod.mutable_meta()->mutable_labels())[k] = v;
  return pod;
}

void AddNode(v1::StateDelta* delta, uint32_t id, v1::Node node) {
  v1::MirroredNode* upsert = delta->add_node_upserts();
  upsert->set_id(id);
  *upsert->mutable_node() = std::move(node);
}

void AddPod(v1::StateDelta* delta, uint32_t node_id, v1::Pod pod) {
  v1::MirroredPod* upsert = delta->add_pod_upserts();
  upsert->set_node_id(node_id);
  *upsert->mutable_pod() = std::move(pod);
}

// The scheduler's side of one stream, with a deadline on everything.
class SchedulerStream {
 public:
  explicit SchedulerStream(const std::string& address)
      : stub_(v1::Plugin::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    stream_ = stub_->Run(&context_);
  }
  ~SchedulerStream() {
    stream_->WritesDone();
    v1::PluginToScheduler ignored;
    while (stream_->Read(&ignored)) {
    }
    stream_->Finish();
  }

  bool Write(const v1::SchedulerToPlugin& message) { return stream_->Write(message); }
  v1::PluginToScheduler Read() {
    v1::PluginToScheduler message;
    EXPECT_TRUE(stream_->Read(&message)) << "stream ended";
    return message;
  }
  v1::PluginToScheduler Call(const v1::SchedulerToPlugin& message) {
    EXPECT_TRUE(Write(message));
    v1::PluginToScheduler answer = Read();
    EXPECT_EQ(answer.id(), message.id()) << answer.DebugString();
    return answer;
  }

  v1::Registration Open(std::vector<std::pair<std::string, std::string>> plugins) {
    std::vector<v1::PluginArgs> entries;
    for (const auto& [name, args] : plugins) {
      v1::PluginArgs& p = entries.emplace_back();
      p.set_name(name);
      p.set_args_json(args);
    }
    return OpenWith(std::move(entries));
  }
  v1::Registration OpenWith(std::vector<v1::PluginArgs> plugins, uint32_t version = 1,
                            uint32_t max_version = 0) {
    v1::SchedulerToPlugin message;
    message.set_id(1);
    message.mutable_open()->set_protocol_version(version);
    message.mutable_open()->set_max_protocol_version(max_version);
    message.mutable_open()->set_scheduler_id("test");
    for (v1::PluginArgs& p : plugins) *message.mutable_open()->add_plugins() = std::move(p);
    return Call(message).registration();
  }

 private:
  std::unique_ptr<v1::Plugin::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> stream_;
};

class PluginServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<PluginServer>(ServeOptions{
        .address = "127.0.0.1:0", .process_name = "test-plugins", .plugins = TestPlugins()});
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }
  void TearDown() override { server_->Shutdown(); }

  std::unique_ptr<SchedulerStream> Connect() {
    return std::make_unique<SchedulerStream>(server_->address());
  }

  // Six nodes, ids 1..6, named n1..n6; labels from `labels_of(id)`.
  static v1::StateDelta SixNodes(std::function<std::map<std::string, std::string>(int)> labels_of) {
    v1::StateDelta delta;
    delta.set_reset(true);
    for (int id = 1; id <= 6; ++id) {
      AddNode(&delta, id, MakeNode("n" + std::to_string(id), labels_of(id)));
    }
    return delta;
  }

  static v1::SchedulerToPlugin CycleMessage(uint64_t id, uint64_t cycle_id, v1::Pod pod,
                                            std::vector<std::string> pre_filter,
                                            std::vector<std::string> filter,
                                            std::vector<std::string> score) {
    v1::SchedulerToPlugin message;
    message.set_id(id);
    v1::CycleRequest* cycle = message.mutable_cycle();
    cycle->set_cycle_id(cycle_id);
    *cycle->mutable_pod() = std::move(pod);
    for (auto& p : pre_filter) cycle->add_pre_filter_plugins(p);
    for (auto& p : filter) cycle->add_filter_plugins(p);
    for (auto& p : score) cycle->add_score_plugins(p);
    cycle->mutable_nodes()->set_all_nodes(true);
    return message;
  }

  std::unique_ptr<PluginServer> server_;
};

TEST_F(PluginServerTest, RegistrationListsPluginsExtensionPointsEventsAndMirror) {
  auto stream = Connect();
  v1::Registration reg = stream->Open({{"Capacity", "{\"maxPods\": 3}"}, {"Gang", ""}});
  EXPECT_EQ(reg.error(), "");
  EXPECT_EQ(reg.protocol_version(), 1u);
  EXPECT_EQ(reg.process_name(), "test-plugins");
  EXPECT_TRUE(reg.mirror().nodes());
  EXPECT_TRUE(reg.mirror().assigned_pods());
  ASSERT_EQ(reg.plugins_size(), 2);
  EXPECT_EQ(reg.plugins(0).name(), "Capacity");
  EXPECT_THAT(reg.plugins(0).extension_points(),
              ElementsAre(v1::PRE_FILTER, v1::FILTER, v1::RESERVE));
  EXPECT_THAT(reg.plugins(0).events(), IsEmpty());
  EXPECT_EQ(reg.plugins(1).name(), "Gang");
  EXPECT_THAT(reg.plugins(1).extension_points(), ElementsAre(v1::PERMIT));
  ASSERT_EQ(reg.plugins(1).events_size(), 2);
  EXPECT_EQ(reg.plugins(1).events(0).resource(), v1::POD);
  EXPECT_EQ(reg.plugins(1).events(0).action_mask(), static_cast<uint32_t>(v1::ADD));
  EXPECT_TRUE(reg.plugins(1).events(0).has_queueing_hint());
  EXPECT_EQ(reg.plugins(1).events(1).resource(), v1::NODE);
  EXPECT_EQ(reg.plugins(1).events(1).action_mask(),
            static_cast<uint32_t>(v1::ADD | v1::UPDATE_NODE_LABEL));
  EXPECT_FALSE(reg.plugins(1).events(1).has_queueing_hint());
}

TEST_F(PluginServerTest, UnknownPluginIsARegistrationError) {
  auto stream = Connect();
  v1::Registration reg = stream->Open({{"Fit", ""}, {"NoSuchPlugin", ""}});
  EXPECT_THAT(reg.error(), HasSubstr("NoSuchPlugin"));
  EXPECT_THAT(reg.error(), HasSubstr("open.plugins[1].name"));
  EXPECT_THAT(reg.plugins(), IsEmpty());

  // The stream stays usable enough to say why nothing else works.
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p"), {}, {"Fit"}, {});
  EXPECT_THAT(stream->Call(request).error(), HasSubstr("refused"));
}

TEST_F(PluginServerTest, BadArgsNameThePluginAndTheField) {
  {
    auto stream = Connect();
    v1::Registration reg = stream->Open({{"Capacity", "{\"maxPods\": \"many\"}"}});
    EXPECT_THAT(reg.error(), HasSubstr("Capacity"));
    EXPECT_THAT(reg.error(), HasSubstr("maxPods"));
  }
  {
    auto stream = Connect();
    v1::Registration reg = stream->Open({{"Capacity", "{not json"}});
    EXPECT_THAT(reg.error(), HasSubstr("Capacity"));
    EXPECT_THAT(reg.error(), HasSubstr("args_json"));
  }
}

TEST_F(PluginServerTest, FirstMessageMustBeOpen) {
  auto stream = Connect();
  v1::SchedulerToPlugin request = CycleMessage(5, 1, MakePod("p"), {}, {"Fit"}, {});
  v1::PluginToScheduler answer = stream->Call(request);
  EXPECT_THAT(answer.error(), HasSubstr("must be open"));
  // Open still works afterwards.
  EXPECT_EQ(stream->Open({{"Fit", ""}}).error(), "");
}

TEST_F(PluginServerTest, BadDeltaIsAnsweredWithAnErrorAndServingGoesOn) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}}).error(), "");
  v1::SchedulerToPlugin bad = CycleMessage(2, 1, MakePod("p"), {}, {"Fit"}, {});
  bad.mutable_delta()->set_reset(true);
  AddNode(bad.mutable_delta(), 1, MakeNode("n1"));
  AddPod(bad.mutable_delta(), 77, MakePod("orphan"));
  v1::PluginToScheduler answer = stream->Call(bad);
  EXPECT_THAT(answer.error(), HasSubstr("delta.pod_upserts[0].node_id"));
  EXPECT_THAT(answer.error(), HasSubstr("77"));

  v1::SchedulerToPlugin good = CycleMessage(3, 2, MakePod("p"), {}, {"Fit"}, {});
  good.mutable_delta()->set_reset(true);
  AddNode(good.mutable_delta(), 1, MakeNode("n1"));
  answer = stream->Call(good);
  EXPECT_EQ(answer.error(), "");
  EXPECT_THAT(answer.cycle().feasible(), ElementsAre(1));

  // A request naming a node the mirror does not have.
  v1::SchedulerToPlugin unknown_node = CycleMessage(4, 3, MakePod("p"), {}, {"Fit"}, {});
  unknown_node.mutable_cycle()->mutable_nodes()->set_all_nodes(false);
  unknown_node.mutable_cycle()->mutable_nodes()->add_node_ids(9);
  EXPECT_THAT(stream->Call(unknown_node).error(), HasSubstr("cycle.nodes.node_ids[0]"));

  // A plugin this stream does not serve.
  v1::SchedulerToPlugin unknown_plugin = CycleMessage(5, 4, MakePod("p"), {}, {"Prefer"}, {});
  EXPECT_THAT(stream->Call(unknown_plugin).error(), HasSubstr("cycle.filter_plugins[0]"));
}

// Protocol version 2: a scheduler offering it gets it, and each distinct
// rejection travels once in the status table; version 1 keeps one status per
// node (the tests above).
TEST_F(PluginServerTest, ProtocolVersionTwoSendsEachDistinctRejectionOnce) {
  auto stream = Connect();
  std::vector<v1::PluginArgs> plugins(2);
  plugins[0].set_name("Fit");
  plugins[1].set_name("Capacity");
  v1::Registration reg = stream->OpenWith(plugins, /*version=*/1, /*max_version=*/2);
  ASSERT_EQ(reg.error(), "");
  EXPECT_EQ(reg.protocol_version(), 2u);
  // n2, n4 and n6 don't fit; n5 is full (one pod, maxPods 1).
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p"), {"Capacity"},
                                               {"Fit", "Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int id) -> std::map<std::string, std::string> {
    if (id % 2 == 0) return {{"fit", "no"}};
    return {};
  });
  request.mutable_delta()->mutable_node_upserts(4)->mutable_node()->mutable_allocatable()->set_pods(1);
  AddPod(request.mutable_delta(), 5, MakePod("resident"));

  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 3));
  ASSERT_EQ(cycle.status_table_size(), 2);
  EXPECT_EQ(cycle.status_table(0).code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(cycle.status_table(0).plugin(), "Fit");
  EXPECT_THAT(cycle.status_table(0).reasons(), ElementsAre("node(s) didn't fit"));
  EXPECT_EQ(cycle.status_table(1).plugin(), "Capacity");
  ASSERT_EQ(cycle.rejected_size(), 4);
  std::vector<std::pair<uint32_t, uint32_t>> rejected;
  for (const v1::NodeStatus& r : cycle.rejected()) {
    EXPECT_FALSE(r.has_status()) << r.node_id();
    rejected.emplace_back(r.node_id(), r.status_index());
  }
  EXPECT_THAT(rejected, ElementsAre(std::pair(2u, 1u), std::pair(4u, 1u), std::pair(5u, 2u),
                                    std::pair(6u, 1u)));
}

TEST_F(PluginServerTest, AnOpenOfANewerProtocolOnlyIsRefusedNamingTheField) {
  auto stream = Connect();
  std::vector<v1::PluginArgs> plugins(1);
  plugins[0].set_name("Fit");
  v1::Registration reg = stream->OpenWith(plugins, /*version=*/11, /*max_version=*/11);
  EXPECT_THAT(reg.error(), HasSubstr("open.protocol_version: 11 is not supported"));
}

TEST_F(PluginServerTest, FilterStopsEarlyFromTheRotatedStartAndNamesRejectingPlugins) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}, {"Capacity", ""}}).error(), "");
  // n2 and n4 don't fit; n5 is full (one pod, maxPods 1).
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p"), {"Capacity"},
                                               {"Fit", "Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int id) -> std::map<std::string, std::string> {
    if (id == 2 || id == 4) return {{"fit", "no"}};
    return {};
  });
  request.mutable_delta()->mutable_node_upserts(4)->mutable_node()->mutable_allocatable()->set_pods(1);
  AddPod(request.mutable_delta(), 5, MakePod("resident"));
  request.mutable_cycle()->mutable_nodes()->set_start_index(3);  // Starts at id 4.
  request.mutable_cycle()->set_num_feasible_to_find(2);

  v1::CycleResponse cycle = stream->Call(request).cycle();
  // Visits n4 (Fit), n5 (Capacity), n6, n1: two found, stop.
  EXPECT_THAT(cycle.feasible(), ElementsAre(6, 1));
  EXPECT_EQ(cycle.nodes_evaluated(), 4u);
  ASSERT_EQ(cycle.rejected_size(), 2);
  EXPECT_EQ(cycle.rejected(0).node_id(), 4u);
  EXPECT_EQ(cycle.rejected(0).status().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(cycle.rejected(0).status().plugin(), "Fit");
  EXPECT_THAT(cycle.rejected(0).status().reasons(), ElementsAre("node(s) didn't fit"));
  EXPECT_EQ(cycle.rejected(1).node_id(), 5u);
  EXPECT_EQ(cycle.rejected(1).status().plugin(), "Capacity");
  EXPECT_EQ(cycle.pre_filter_status().code(), v1::Status::SUCCESS);

  // 0 = find every feasible node; explicit node ids keep their order.
  v1::SchedulerToPlugin all = CycleMessage(3, 2, MakePod("p"), {"Capacity"}, {"Fit", "Capacity"}, {});
  all.mutable_cycle()->mutable_nodes()->set_all_nodes(false);
  for (uint32_t id : {6, 5, 3, 2}) all.mutable_cycle()->mutable_nodes()->add_node_ids(id);
  cycle = stream->Call(all).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(6, 3));
  EXPECT_EQ(cycle.nodes_evaluated(), 4u);
}

TEST_F(PluginServerTest, RejectionsAreLeftOutWhenAskedAndANodePasses) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}}).error(), "");
  // n2 and n4 don't fit, n3 fails with an error.
  auto cycle = [&](uint64_t id, uint64_t cycle_id, std::vector<uint32_t> nodes) {
    v1::SchedulerToPlugin request = CycleMessage(id, cycle_id, MakePod("p"), {}, {"Fit"}, {});
    if (id == 2) {
      *request.mutable_delta() = SixNodes([](int n) -> std::map<std::string, std::string> {
        if (n == 2 || n == 4) return {{"fit", "no"}};
        if (n == 3) return {{"fit", "error"}};
        return {};
      });
    }
    request.mutable_cycle()->set_rejections_only_when_none_feasible(true);
    request.mutable_cycle()->mutable_nodes()->set_all_nodes(false);
    for (uint32_t n : nodes) request.mutable_cycle()->mutable_nodes()->add_node_ids(n);
    return stream->Call(request).cycle();
  };
  // A node passes: the rejection of n2 and n4 is not sent.
  v1::CycleResponse passed = cycle(2, 1, {2, 4, 5});
  EXPECT_THAT(passed.feasible(), ElementsAre(5));
  EXPECT_EQ(passed.nodes_evaluated(), 3u);
  EXPECT_THAT(passed.rejected(), IsEmpty());
  // Nothing passes: every rejected node says why.
  v1::CycleResponse none = cycle(3, 2, {2, 4});
  EXPECT_THAT(none.feasible(), IsEmpty());
  ASSERT_EQ(none.rejected_size(), 2);
  EXPECT_EQ(none.rejected(0).node_id(), 2u);
  EXPECT_EQ(none.rejected(1).status().plugin(), "Fit");
  // An error is always sent, with what was rejected before it.
  v1::CycleResponse error = cycle(4, 3, {5, 2, 3, 6});
  EXPECT_THAT(error.feasible(), ElementsAre(5));
  ASSERT_EQ(error.rejected_size(), 2);
  EXPECT_EQ(error.rejected(1).node_id(), 3u);
  EXPECT_EQ(error.rejected(1).status().code(), v1::Status::ERROR);
}

TEST_F(PluginServerTest, ScoresAreNormalizedAndAlignedWithFeasible) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}, {"Prefer", ""}}).error(), "");
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p"), {}, {"Fit"}, {"Prefer"});
  *request.mutable_delta() = SixNodes([](int id) -> std::map<std::string, std::string> {
    if (id == 3) return {{"fit", "no"}, {"score", "50"}};
    return {{"score", std::to_string(id * 5)}};  // n6 is best: 30.
  });
  request.mutable_cycle()->mutable_nodes()->set_start_index(4);  // 5, 6, 1, 2, 3, 4.
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(5, 6, 1, 2, 4));
  ASSERT_EQ(cycle.scores_size(), 1);
  EXPECT_EQ(cycle.scores(0).plugin(), "Prefer");
  // 25, 30, 5, 10, 20 scaled so that 30 -> 100.
  EXPECT_THAT(cycle.scores(0).scores(), ElementsAre(83, 100, 16, 33, 66));

  // Score only (no filter plugins): scores align with the request's node ids.
  v1::SchedulerToPlugin score_only = CycleMessage(3, 1, MakePod("p"), {}, {}, {"Prefer"});
  score_only.mutable_cycle()->mutable_nodes()->set_all_nodes(false);
  for (uint32_t id : {2, 6}) score_only.mutable_cycle()->mutable_nodes()->add_node_ids(id);
  cycle = stream->Call(score_only).cycle();
  EXPECT_THAT(cycle.scores(0).scores(), ElementsAre(33, 100));
}

TEST_F(PluginServerTest, PreFilterSkipMeansItsFilterDoesNotRun) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Skipper", ""}, {"Fit", ""}}).error(), "");
  v1::SchedulerToPlugin request =
      CycleMessage(2, 1, MakePod("p"), {"Skipper"}, {"Skipper", "Fit"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.skipped_filter_plugins(), ElementsAre("Skipper"));
  EXPECT_THAT(cycle.rejected(), IsEmpty());
  EXPECT_EQ(cycle.feasible_size(), 6);
}

TEST_F(PluginServerTest, PreFilterResultNarrowsTheNodes) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Only", ""}, {"Fit", ""}}).error(), "");
  v1::SchedulerToPlugin request =
      CycleMessage(2, 1, MakePod("p", 0, {{"only", "n3"}}), {"Only"}, {"Fit"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(3));
  EXPECT_EQ(cycle.rejected_size(), 5);
  EXPECT_EQ(cycle.rejected(0).status().code(), v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
  EXPECT_EQ(cycle.rejected(0).status().plugin(), "Only");

  v1::SchedulerToPlugin nowhere =
      CycleMessage(3, 2, MakePod("p", 0, {{"only", "gone"}}), {"Only"}, {"Fit"}, {});
  cycle = stream->Call(nowhere).cycle();
  // The set names no mirrored node: nothing fits, every node says why.
  EXPECT_THAT(cycle.feasible(), IsEmpty());
  EXPECT_EQ(cycle.rejected_size(), 6);
}

TEST_F(PluginServerTest, FilterErrorEndsTheCycle) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}, {"Prefer", ""}}).error(), "");
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p"), {}, {"Fit"}, {"Prefer"});
  *request.mutable_delta() = SixNodes([](int id) -> std::map<std::string, std::string> {
    if (id == 2) return {{"fit", "error"}};
    return {};
  });
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_EQ(cycle.nodes_evaluated(), 2u);
  ASSERT_EQ(cycle.rejected_size(), 1);
  EXPECT_EQ(cycle.rejected(0).status().code(), v1::Status::ERROR);
  EXPECT_EQ(cycle.rejected(0).status().plugin(), "Fit");
  EXPECT_THAT(cycle.scores(), IsEmpty());
}

TEST_F(PluginServerTest, NominatedPodsCountOnTheirNodes) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Capacity", "{\"maxPods\": 1}"}}).error(), "");
  v1::SchedulerToPlugin request =
      CycleMessage(2, 1, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  v1::MirroredPod* nominated = request.mutable_cycle()->add_nominated_pods();
  nominated->set_node_id(2);
  *nominated->mutable_pod() = MakePod("preemptor", 100);
  v1::MirroredPod* lower = request.mutable_cycle()->add_nominated_pods();
  lower->set_node_id(3);
  *lower->mutable_pod() = MakePod("lower", 1);  // Lower priority: not counted.
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 3, 4, 5, 6));
  ASSERT_EQ(cycle.rejected_size(), 1);
  EXPECT_EQ(cycle.rejected(0).node_id(), 2u);
  EXPECT_EQ(cycle.rejected(0).status().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_THAT(cycle.rejected(0).status().reasons(), ElementsAre("too many pods"));
}

v1::PluginArgs ArgsFor(std::string name, std::string args, std::vector<std::string> profiles) {
  v1::PluginArgs a;
  a.set_name(std::move(name));
  a.set_args_json(std::move(args));
  for (auto& p : profiles) a.add_scheduler_names(std::move(p));
  return a;
}

// Issue 5 item 6: pluginConfig args per profile. One instance per entry; a
// pod runs the instance of its profile (spec.schedulerName).
TEST_F(PluginServerTest, PerProfileArgsOpenOneInstancePerProfile) {
  auto stream = Connect();
  v1::Registration reg = stream->OpenWith({
      ArgsFor("Capacity", "{\"maxPods\": 1}", {"tight", "default-scheduler"}),
      ArgsFor("Capacity", "{\"maxPods\": 2}", {"roomy"})});
  ASSERT_EQ(reg.error(), "");
  ASSERT_EQ(reg.plugins_size(), 1);  // Registered once.
  EXPECT_EQ(reg.plugins(0).name(), "Capacity");

  auto cycle = [&](uint64_t id, const std::string& profile) {
    v1::Pod pod = MakePod("p" + std::to_string(id), 10);
    pod.set_scheduler_name(profile);
    v1::SchedulerToPlugin request = CycleMessage(id, id, pod, {"Capacity"}, {"Capacity"}, {});
    if (id == 2) {
      request.mutable_delta()->set_reset(true);
      AddNode(request.mutable_delta(), 1, MakeNode("n1"));
      AddPod(request.mutable_delta(), 1, MakePod("running", 0));
    }
    return stream->Call(request).cycle();
  };
  EXPECT_EQ(cycle(2, "tight").feasible_size(), 0);   // maxPods 1: full.
  EXPECT_EQ(cycle(3, "roomy").feasible_size(), 1);   // maxPods 2: room.
  EXPECT_EQ(cycle(4, "").feasible_size(), 0);        // default-scheduler is "tight".
  EXPECT_EQ(cycle(5, "tight").feasible_size(), 0);   // Resolved lists are per profile.
}

TEST_F(PluginServerTest, PerProfileArgsForTheSameProfileTwiceAreRefused) {
  auto stream = Connect();
  v1::Registration reg = stream->OpenWith({
      ArgsFor("Capacity", "{\"maxPods\": 1}", {"a"}),
      ArgsFor("Capacity", "{\"maxPods\": 2}", {"b", "a"})});
  EXPECT_THAT(reg.error(), HasSubstr("open.plugins[1].scheduler_names"));
  EXPECT_THAT(reg.error(), HasSubstr("profile a"));
  auto again = Connect();
  reg = again->OpenWith({ArgsFor("Capacity", "", {}),
                                                 ArgsFor("Capacity", "", {})});
  EXPECT_THAT(reg.error(), HasSubstr("listed twice"));
}

// MirrorScope.nominated_pods: the nominations arrive as deltas, once, and
// every later cycle counts them as if they rode in the request.
TEST_F(PluginServerTest, MirroredNominatedPodsCountOnTheirNodes) {
  auto stream = Connect();
  v1::Registration reg = stream->Open({{"Capacity", "{\"maxPods\": 1}"}});
  ASSERT_EQ(reg.error(), "");
  EXPECT_TRUE(reg.mirror().nominated_pods());  // A filter plugin: the SDK keeps them.
  v1::SchedulerToPlugin request =
      CycleMessage(2, 1, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  v1::Pod preemptor = MakePod("preemptor", 100);
  preemptor.set_nominated_node_name("n2");
  *request.mutable_delta()->add_nominated_pod_upserts() = preemptor;
  v1::Pod lower = MakePod("lower", 1);  // Lower priority: not counted.
  lower.set_nominated_node_name("n3");
  *request.mutable_delta()->add_nominated_pod_upserts() = lower;
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 3, 4, 5, 6));
  ASSERT_EQ(cycle.rejected_size(), 1);
  EXPECT_EQ(cycle.rejected(0).node_id(), 2u);
  EXPECT_THAT(cycle.rejected(0).status().reasons(), ElementsAre("too many pods"));

  // The next cycle carries no nominations: the mirror still has them.
  v1::SchedulerToPlugin again =
      CycleMessage(3, 2, MakePod("q", 10), {"Capacity"}, {"Capacity"}, {});
  cycle = stream->Call(again).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 3, 4, 5, 6));
  // The nominated pod itself is not counted against itself.
  v1::SchedulerToPlugin itself =
      CycleMessage(4, 3, MakePod("preemptor", 100), {"Capacity"}, {"Capacity"}, {});
  cycle = stream->Call(itself).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 2, 3, 4, 5, 6));

  // A removal frees the node.
  v1::SchedulerToPlugin cleared =
      CycleMessage(5, 4, MakePod("q", 10), {"Capacity"}, {"Capacity"}, {});
  cleared.mutable_delta()->add_nominated_pod_removals(preemptor.meta().uid());
  cycle = stream->Call(cleared).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST_F(PluginServerTest, MirroredNominatedPodsCountOnTheNodesOfANarrowedRequest) {
  // A request listing fewer nodes than there are nominations (a nominated
  // node's cycle, a batch's changed nodes) looks only at its nodes'
  // nominations, with the same verdicts.
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Capacity", "{\"maxPods\": 1}"}}).error(), "");
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  for (int n : {2, 3, 4, 5}) {
    v1::Pod nominee = MakePod(absl::StrCat("nominee-", n), n == 5 ? 1 : 100);  // n5's: lower priority.
    nominee.set_nominated_node_name(absl::StrCat("n", n));
    *request.mutable_delta()->add_nominated_pod_upserts() = nominee;
  }
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1, 5, 6));

  auto narrowed = [&](uint64_t id, std::vector<uint32_t> nodes) {
    v1::SchedulerToPlugin m = CycleMessage(id, id, MakePod("q", 10), {"Capacity"}, {"Capacity"}, {});
    m.mutable_cycle()->mutable_nodes()->clear_all_nodes();
    for (uint32_t n : nodes) m.mutable_cycle()->mutable_nodes()->add_node_ids(n);
    return stream->Call(m).cycle();
  };
  cycle = narrowed(3, {3});
  EXPECT_EQ(cycle.feasible_size(), 0);
  ASSERT_EQ(cycle.rejected_size(), 1);
  EXPECT_EQ(cycle.rejected(0).node_id(), 3u);
  cycle = narrowed(4, {5});  // The lower-priority nominee is not counted.
  EXPECT_THAT(cycle.feasible(), ElementsAre(5));
  cycle = narrowed(5, {1, 4});
  EXPECT_THAT(cycle.feasible(), ElementsAre(1));
  ASSERT_EQ(cycle.rejected_size(), 1);
  EXPECT_EQ(cycle.rejected(0).node_id(), 4u);
}

// Protocol version 6: other nominated pods checked on their own nominated
// nodes in a request, as their fast path would check them (the nominations
// that count for each, not itself, not lower-priority ones).
TEST_F(PluginServerTest, NominatedChecksJudgeEachPodOnItsNodeWithTheNominationsThatCountForIt) {
  auto open = [this](uint32_t max_version) {
    auto stream = Connect();
    v1::PluginArgs args;
    args.set_name("Capacity");
    args.set_args_json("{\"maxPods\": 1}");
    EXPECT_EQ(stream->OpenWith({args}, 1, max_version).protocol_version(), std::min<uint32_t>(max_version, 10));
    return stream;
  };
  auto stream = open(6);
  v1::SchedulerToPlugin request = CycleMessage(2, 1, MakePod("p", 100), {"Capacity"}, {"Capacity"}, {});
  *request.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  // n2: two nominees of priority 100 (each counts for the other); n3: one of
  // priority 100; n4: one of priority 1; n5: one, and a pod bound there.
  auto nominee = [&](const std::string& name, int priority, const std::string& node) {
    v1::Pod pod = MakePod(name, priority);
    pod.set_nominated_node_name(node);
    *request.mutable_delta()->add_nominated_pod_upserts() = pod;
    return pod;
  };
  const v1::Pod a = nominee("a", 100, "n2");
  nominee("b", 100, "n2");
  const v1::Pod c = nominee("c", 100, "n3");
  const v1::Pod d = nominee("d", 100, "n4");
  nominee("low", 1, "n4");
  const v1::Pod e = nominee("e", 100, "n5");
  AddPod(request.mutable_delta(), 5, MakePod("bound", 0));
  // The request's own pod on n1 (its fast path), with the checks.
  request.mutable_cycle()->mutable_nodes()->clear_all_nodes();
  request.mutable_cycle()->mutable_nodes()->add_node_ids(1);
  for (const auto& [pod, node] : std::vector<std::pair<v1::Pod, uint32_t>>{{a, 2}, {c, 3}, {d, 4}, {e, 5}, {e, 99}}) {
    v1::NominatedCheck& check = *request.mutable_cycle()->add_nominated_checks();
    *check.mutable_pod() = pod;
    check.set_node_id(node);
  }
  v1::CycleResponse cycle = stream->Call(request).cycle();
  EXPECT_THAT(cycle.feasible(), ElementsAre(1));
  // a: b counts on n2 (equal priority); c alone on n3; d: the lower one does
  // not count; e: the bound pod fills n5; an unknown node is not evaluated.
  EXPECT_THAT(cycle.nominated_checks(),
              ElementsAre(v1::WhatIfVerdicts::INFEASIBLE, v1::WhatIfVerdicts::FEASIBLE,
                          v1::WhatIfVerdicts::FEASIBLE, v1::WhatIfVerdicts::INFEASIBLE,
                          v1::WhatIfVerdicts::UNKNOWN));

  // A process that speaks version 5 leaves them unanswered.
  auto older = open(5);
  request.set_id(3);
  v1::CycleResponse unanswered = older->Call(request).cycle();
  EXPECT_THAT(unanswered.feasible(), ElementsAre(1));
  EXPECT_EQ(unanswered.nominated_checks_size(), 0);
}

TEST_F(PluginServerTest, DryRunWithAVictimRemovedMakesTheNodeFit) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Capacity", "{\"maxPods\": 2}"}}).error(), "");
  v1::SchedulerToPlugin cycle = CycleMessage(2, 1, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
  cycle.mutable_delta()->set_reset(true);
  AddNode(cycle.mutable_delta(), 1, MakeNode("n1"));
  AddPod(cycle.mutable_delta(), 1, MakePod("victim-1", 0));
  AddPod(cycle.mutable_delta(), 1, MakePod("victim-2", 0));
  v1::PluginToScheduler answer = stream->Call(cycle);
  ASSERT_EQ(answer.cycle().rejected_size(), 1);

  auto dry_run = [](uint64_t id, uint64_t cycle_id, std::vector<std::string> remove,
                    std::vector<v1::Pod> add) {
    v1::SchedulerToPlugin message;
    message.set_id(id);
    v1::DryRunFilterRequest* request = message.mutable_dry_run_filter();
    request->set_cycle_id(cycle_id);
    *request->mutable_pod() = MakePod("p", 10);
    request->add_filter_plugins("Capacity");
    request->set_node_id(1);
    for (auto& uid : remove) request->add_remove_pod_uids(uid);
    for (auto& pod : add) *request->add_add_pods() = pod;
    return message;
  };
  v1::PluginToScheduler fits = stream->Call(dry_run(3, 1, {"victim-1"}, {}));
  EXPECT_EQ(fits.dry_run_filter().status().code(), v1::Status::SUCCESS)
      << fits.DebugString();
  // Removing one and adding another: full again.
  v1::PluginToScheduler full = stream->Call(dry_run(4, 1, {"victim-1"}, {MakePod("other")}));
  EXPECT_EQ(full.dry_run_filter().status().code(), v1::Status::UNSCHEDULABLE);
  EXPECT_EQ(full.dry_run_filter().status().plugin(), "Capacity");
  // A cycle whose state is gone: PreFilter runs first.
  v1::PluginToScheduler fresh = stream->Call(dry_run(5, 99, {"victim-2"}, {}));
  EXPECT_EQ(fresh.dry_run_filter().status().code(), v1::Status::SUCCESS)
      << fresh.DebugString();
  // The mirror itself is untouched by dry runs.
  v1::SchedulerToPlugin again = CycleMessage(6, 2, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
  EXPECT_EQ(stream->Call(again).cycle().rejected_size(), 1);
  // A victim that is not on the node.
  EXPECT_THAT(stream->Call(dry_run(7, 1, {"nobody"}, {})).error(),
              HasSubstr("dry_run_filter.remove_pod_uids[0]"));
}

// A dry run of cycle `cycle_id` on n1, whose potential victims are
// victim-1 and victim-2 (in that order).
v1::PreemptionDryRunRequest DryRunOfTwoVictimsOnN1(uint64_t cycle_id, std::vector<std::string> pre_filters,
                                                   std::vector<std::string> filters) {
  v1::PreemptionDryRunRequest dry;
  dry.set_cycle_id(cycle_id);
  for (const std::string& name : pre_filters) dry.add_pre_filter_plugins(name);
  for (const std::string& name : filters) dry.add_filter_plugins(name);
  v1::PreemptionDryRunRequest::Candidate* c = dry.add_candidates();
  c->set_node_id(1);
  c->add_potential_victims("victim-1");
  c->add_potential_victims("victim-2");
  dry.set_num_candidates(1);
  return dry;
}

// Protocol version 9 (kube-scheduler #119770): a PreFilter's plain
// Unschedulable does not stop the PreFilters after it, so that preemption's
// dry run filters with a whole cycle state; an UnschedulableAndUnresolvable
// after it still wins.
TEST_F(PluginServerTest, APreFilterUnschedulableLeavesTheOtherPreFiltersToRunForPreemption) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Quota", ""}, {"Capacity", "{\"maxPods\": 2}"}, {"Only", ""}}).error(), "");
  const v1::Pod pod = MakePod("p", 10, {{"quota", "full"}});
  v1::SchedulerToPlugin cycle = CycleMessage(2, 1, pod, {"Quota", "Capacity", "Only"}, {"Capacity"}, {});
  cycle.mutable_delta()->set_reset(true);
  AddNode(cycle.mutable_delta(), 1, MakeNode("n1"));
  AddPod(cycle.mutable_delta(), 1, MakePod("victim-1", 0));
  AddPod(cycle.mutable_delta(), 1, MakePod("victim-2", 0));
  const v1::CycleResponse answer = stream->Call(cycle).cycle();
  EXPECT_EQ(answer.pre_filter_status().code(), v1::Status::UNSCHEDULABLE) << answer.DebugString();
  EXPECT_EQ(answer.pre_filter_status().plugin(), "Quota");
  EXPECT_THAT(answer.pre_filter_status().reasons(), ElementsAre("quota used up"));
  EXPECT_THAT(answer.feasible(), IsEmpty());

  // The dry run of that cycle: Capacity's Filter reads the state its
  // PreFilter wrote after Quota's rejection (without it: ERROR "no PreFilter
  // state"). With a state made afresh (cycle 99), the same.
  auto dry_run = [&](uint64_t id, uint64_t cycle_id) {
    v1::SchedulerToPlugin message;
    message.set_id(id);
    *message.mutable_preemption_dry_run() =
        DryRunOfTwoVictimsOnN1(cycle_id, {"Quota", "Capacity", "Only"}, {"Capacity"});
    *message.mutable_preemption_dry_run()->mutable_pod() = pod;
    return message;
  };
  for (auto [id, cycle_id] : {std::pair<uint64_t, uint64_t>{3, 1}, {4, 99}}) {
    const v1::PluginToScheduler dry = stream->Call(dry_run(id, cycle_id));
    ASSERT_EQ(dry.preemption_dry_run().nodes_size(), 1) << dry.DebugString();
    EXPECT_EQ(dry.preemption_dry_run().nodes(0).status().code(), v1::Status::SUCCESS) << dry.DebugString();
    EXPECT_THAT(dry.preemption_dry_run().nodes(0).victims(), ElementsAre("victim-2"));
  }

  // A PreFilter after it that says UnschedulableAndUnresolvable: that is the
  // answer, not the earlier Unschedulable.
  v1::Pod nowhere = MakePod("q", 10, {{"quota", "full"}, {"only", "none"}});
  const v1::CycleResponse unresolvable =
      stream->Call(CycleMessage(5, 2, nowhere, {"Quota", "Capacity", "Only"}, {"Capacity"}, {})).cycle();
  EXPECT_EQ(unresolvable.pre_filter_status().code(), v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
  EXPECT_EQ(unresolvable.pre_filter_status().plugin(), "Only");
}

// Protocol version 2: preemption's first dry run rides in the cycle request
// and is answered with the cycle when no node fits (and only then).
TEST_F(PluginServerTest, ADryRunInTheCycleRequestIsAnsweredWhenNoNodeFits) {
  auto stream = Connect();
  std::vector<v1::PluginArgs> plugins(1);
  plugins[0].set_name("Capacity");
  plugins[0].set_args_json("{\"maxPods\": 2}");
  ASSERT_EQ(stream->OpenWith(plugins, 1, 2).error(), "");
  auto cycle = [](uint64_t id, uint64_t cycle_id) {
    v1::SchedulerToPlugin message = CycleMessage(id, cycle_id, MakePod("p", 10), {"Capacity"}, {"Capacity"}, {});
    *message.mutable_cycle()->mutable_preemption_dry_run() =
        DryRunOfTwoVictimsOnN1(cycle_id, {"Capacity"}, {"Capacity"});
    return message;
  };
  v1::SchedulerToPlugin full = cycle(2, 1);
  full.mutable_delta()->set_reset(true);
  AddNode(full.mutable_delta(), 1, MakeNode("n1"));
  AddPod(full.mutable_delta(), 1, MakePod("victim-1", 0));
  AddPod(full.mutable_delta(), 1, MakePod("victim-2", 0));
  v1::CycleResponse none_fits = stream->Call(full).cycle();
  ASSERT_EQ(none_fits.feasible_size(), 0);
  ASSERT_EQ(none_fits.preemption_dry_run().nodes_size(), 1) << none_fits.DebugString();
  const v1::NodeVictims& node = none_fits.preemption_dry_run().nodes(0);
  EXPECT_EQ(node.node_id(), 1u);
  EXPECT_EQ(node.status().code(), v1::Status::SUCCESS);
  // One victim makes room (maxPods 2); victim-1 comes back first.
  EXPECT_THAT(node.victims(), ElementsAre("victim-2"));

  // Room on the node: the cycle finds it and the dry run is not run.
  v1::SchedulerToPlugin room = cycle(3, 2);
  room.mutable_delta()->add_pod_removals("victim-2");
  v1::CycleResponse fits = stream->Call(room).cycle();
  EXPECT_THAT(fits.feasible(), ElementsAre(1));
  EXPECT_FALSE(fits.has_preemption_dry_run());
}

// A Permit request of `pod` on n1 for the Gang plugin.
v1::SchedulerToPlugin PermitMessage(uint64_t id, v1::Pod pod) {
  v1::SchedulerToPlugin message;
  message.set_id(id);
  message.mutable_permit()->set_cycle_id(id);
  *message.mutable_permit()->mutable_pod() = std::move(pod);
  message.mutable_permit()->set_node_name("n1");
  message.mutable_permit()->add_plugins("Gang");
  return message;
}

TEST_F(PluginServerTest, PermitDecisionSentByAPlugin) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Gang", ""}}).error(), "");
  v1::PermitResponse first = stream->Call(PermitMessage(2, MakePod("a"))).permit();
  ASSERT_EQ(first.results_size(), 1);
  EXPECT_EQ(first.results(0).plugin(), "Gang");
  EXPECT_EQ(first.results(0).status().code(), v1::Status::WAIT);
  EXPECT_EQ(first.results(0).timeout_ms(), 5000);

  ASSERT_TRUE(stream->Write(PermitMessage(3, MakePod("b", 0, {{"gang-last", "true"}}))));
  // The plugin speaks first while permitting b: allow a.
  v1::PluginToScheduler decision = stream->Read();
  EXPECT_EQ(decision.id(), 0u);
  EXPECT_EQ(decision.permit_decision().pod_uid(), "a");
  EXPECT_EQ(decision.permit_decision().plugin(), "Gang");
  EXPECT_TRUE(decision.permit_decision().allow());
  v1::PluginToScheduler second = stream->Read();
  EXPECT_EQ(second.id(), 3u);
  EXPECT_EQ(second.permit().results(0).status().code(), v1::Status::SUCCESS);
}

TEST_F(PluginServerTest, QueueingHintsRunPerPod) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Gang", ""}}).error(), "");
  v1::SchedulerToPlugin message;
  message.set_id(2);
  v1::QueueingHintRequest* request = message.mutable_queueing_hint();
  request->mutable_event()->set_resource(v1::POD);
  request->mutable_event()->set_action(v1::ADD);
  *request->mutable_event()->mutable_new_pod() = MakePod("new", 0, {{"gang", "g1"}});
  v1::HintQuery* query = request->add_queries();
  query->set_plugin("Gang");
  *query->add_pods() = MakePod("x", 0, {{"gang", "g1"}});
  *query->add_pods() = MakePod("y", 0, {{"gang", "g2"}});
  v1::QueueingHintResponse hints = stream->Call(message).queueing_hint();
  ASSERT_EQ(hints.answers_size(), 1);
  EXPECT_THAT(hints.answers(0).queue(), ElementsAre(true, false));

  // A registered event without a hint: always queue.
  request->mutable_event()->set_resource(v1::NODE);
  request->mutable_event()->set_action(v1::UPDATE_NODE_LABEL);
  message.set_id(3);
  hints = stream->Call(message).queueing_hint();
  EXPECT_THAT(hints.answers(0).queue(), ElementsAre(true, true));
}

TEST_F(PluginServerTest, FinishedCyclesDropTheirState) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Capacity", ""}}).error(), "");
  v1::SchedulerToPlugin cycle = CycleMessage(2, 7, MakePod("p"), {"Capacity"}, {"Capacity"}, {});
  cycle.mutable_delta()->set_reset(true);
  AddNode(cycle.mutable_delta(), 1, MakeNode("n1"));
  ASSERT_THAT(stream->Call(cycle).cycle().feasible(), ElementsAre(1));

  auto reserve = [](uint64_t id, uint64_t cycle_id) {
    v1::SchedulerToPlugin message;
    message.set_id(id);
    message.mutable_reserve()->set_cycle_id(cycle_id);
    *message.mutable_reserve()->mutable_pod() = MakePod("p");
    message.mutable_reserve()->set_node_name("n1");
    message.mutable_reserve()->add_plugins("Capacity");
    return message;
  };
  EXPECT_THAT(stream->Call(reserve(3, 7)).status().statuses(), IsEmpty());

  v1::SchedulerToPlugin finished = reserve(4, 7);
  finished.add_finished_cycles(7);
  v1::StatusResponse statuses = stream->Call(finished).status();
  ASSERT_EQ(statuses.statuses_size(), 1);
  EXPECT_EQ(statuses.statuses(0).code(), v1::Status::ERROR);
  EXPECT_EQ(statuses.statuses(0).plugin(), "Capacity");
}

TEST_F(PluginServerTest, RequestsArePipelinedAndUnknownKindsAnswered) {
  auto stream = Connect();
  ASSERT_EQ(stream->Open({{"Fit", ""}}).error(), "");
  v1::SchedulerToPlugin state_only;  // id 0: no answer expected.
  *state_only.mutable_delta() = SixNodes([](int) { return std::map<std::string, std::string>{}; });
  ASSERT_TRUE(stream->Write(state_only));
  v1::SchedulerToPlugin empty;
  empty.set_id(2);
  ASSERT_TRUE(stream->Write(empty));
  for (uint64_t id = 3; id < 53; ++id) {
    ASSERT_TRUE(stream->Write(CycleMessage(id, id, MakePod("p"), {}, {"Fit"}, {})));
  }
  v1::PluginToScheduler answer = stream->Read();
  EXPECT_EQ(answer.id(), 2u);
  EXPECT_THAT(answer.error(), HasSubstr("unknown or missing request kind"));
  for (uint64_t id = 3; id < 53; ++id) {
    answer = stream->Read();
    EXPECT_EQ(answer.id(), id);
    EXPECT_EQ(answer.cycle().feasible_size(), 6);
  }
}

TEST(PluginServerUnixTest, ServesOnAUnixSocketWithHealthAndRemovesItOnShutdown) {
  const std::string dir = ::testing::TempDir() + "/podium-sdk-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/plugins.sock";
  PluginServer server(
      ServeOptions{.address = "unix://" + path, .process_name = "unix", .plugins = TestPlugins()});
  ASSERT_TRUE(server.Start().ok());
  EXPECT_TRUE(std::filesystem::exists(path));
  EXPECT_EQ(server.port(), 0);
  {
    SchedulerStream stream("unix://" + path);
    EXPECT_EQ(stream.Open({}).plugins_size(), 7);  // No plugins named: all of them.
    // grpc.health.v1.Health/Check with an empty HealthCheckRequest.
    test_support::GenericStreamCall check("unix://" + path, "/grpc.health.v1.Health/Check", std::chrono::seconds(10));
    ASSERT_TRUE(check.started());
    ASSERT_TRUE(check.WriteLast(""));
    EXPECT_TRUE(check.Read().has_value());
    const grpc::Status status = check.Finish();
    EXPECT_TRUE(status.ok()) << status.error_message();
  }
  // Shutdown with a stream still open ends it.
  SchedulerStream open_stream("unix://" + path);
  EXPECT_EQ(open_stream.Open({{"Fit", ""}}).error(), "");
  server.Shutdown();
  EXPECT_FALSE(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace podium::sdk

namespace podium::sdk {
namespace {

// TLS settings are checked at Start (the end-to-end handshakes, with
// certificates made by openssl, are in integration/tests/test_authn.py).
TEST(PluginServerTlsTest, BadTlsSettingsFailStartNamingTheField) {
  const std::string dir = ::testing::TempDir() + "/podium-sdk-tls-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string pem = dir + "/x.pem", text = dir + "/x.txt";
  std::ofstream(pem) << "-----BEGIN CERTIFICATE-----\n";
  std::ofstream(text) << "hello\n";
  struct Case {
    std::string address;
    ServeTls tls;
    absl::StatusCode code;
    std::string message;
  } cases[] = {
      {"unix://" + dir + "/p.sock", {.cert_file = pem, .key_file = pem}, absl::StatusCode::kInvalidArgument,
       "is a unix socket"},
      {"127.0.0.1:0", {.cert_file = dir + "/none.pem", .key_file = pem}, absl::StatusCode::kNotFound,
       "tls.cert_file: cannot read " + dir + "/none.pem"},
      {"127.0.0.1:0", {.cert_file = pem, .key_file = text}, absl::StatusCode::kInvalidArgument,
       "tls.key_file: " + text + " is not PEM"},
      {"127.0.0.1:0", {.cert_file = pem, .key_file = pem, .client_ca_file = dir + "/none.pem"},
       absl::StatusCode::kNotFound, "tls.client_ca_file: cannot read"},
      {"127.0.0.1:0", {.cert_file = pem, .key_file = pem, .reload_interval_seconds = 0},
       absl::StatusCode::kInvalidArgument, "tls.reload_interval_seconds"},
  };
  for (const Case& c : cases) {
    PluginServer server(ServeOptions{.address = c.address, .process_name = "tls", .plugins = TestPlugins(),
                                     .tls = c.tls});
    absl::Status s = server.Start();
    EXPECT_EQ(s.code(), c.code) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr(c.message));
    EXPECT_EQ(server.port(), 0);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace podium::sdk

namespace podium::sdk {
namespace {

// Filter holds every call until the test opens the gate; tells when the first
// call has started. Its Handle is kept so that the test can speak as the
// plugin from its own thread.
struct Gate {
  absl::Notification entered;
  absl::Notification open;
  std::atomic<bool> entered_once{false};
  std::atomic<Handle*> handle{nullptr};
};

class GatePlugin final : public FilterPlugin {
 public:
  explicit GatePlugin(Gate& gate) : gate_(gate) {}
  std::string_view Name() const override { return "Gate"; }
  Status Filter(CycleState&, const PodInfo&, const NodeInfo&) override {
    if (!gate_.entered_once.exchange(true)) gate_.entered.Notify();
    gate_.open.WaitForNotification();
    return Status::Success();
  }

 private:
  Gate& gate_;
};

std::vector<PluginDefinition> GatedPlugins(Gate& gate) {
  std::vector<PluginDefinition> plugins = TestPlugins();
  plugins.push_back({"Gate", [&gate](const boost::json::object&, Handle& handle) -> absl::StatusOr<PluginPtr> {
                       gate.handle = &handle;
                       return std::make_unique<GatePlugin>(gate);
                     }});
  return plugins;
}

v1::SchedulerToPlugin OneNode() {
  v1::SchedulerToPlugin message;  // id 0: no answer.
  message.mutable_delta()->set_reset(true);
  AddNode(message.mutable_delta(), 1, MakeNode("n1"));
  return message;
}

v1::SchedulerToPlugin GatedCycle(uint64_t id) {
  v1::SchedulerToPlugin message;
  message.set_id(id);
  message.mutable_cycle()->set_cycle_id(id);
  *message.mutable_cycle()->mutable_pod() = MakePod("p" + std::to_string(id));
  message.mutable_cycle()->add_filter_plugins("Gate");
  message.mutable_cycle()->mutable_nodes()->set_all_nodes(true);
  return message;
}

class GatedServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<PluginServer>(ServeOptions{
        .address = "127.0.0.1:0", .process_name = "gated", .plugins = GatedPlugins(gate_)});
    ASSERT_TRUE(server_->Start().ok());
    stub_ = v1::Plugin::NewStub(grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (!gate_.open.HasBeenNotified()) gate_.open.Notify();
    server_->Shutdown();
  }

  // A raw stream (the test cancels it or shuts the server down under it)
  // that opened Gate, then sent the one-node state and a gated cycle (id 2)
  // (the test waits for gate_.entered before its Filter is known to run).
  std::unique_ptr<grpc::ClientReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> GateEntered(
      grpc::ClientContext& context) {
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
    auto stream = stub_->Run(&context);
    v1::SchedulerToPlugin open;
    open.set_id(1);
    open.mutable_open()->set_protocol_version(1);
    open.mutable_open()->add_plugins()->set_name("Gate");
    EXPECT_TRUE(stream->Write(open));
    v1::PluginToScheduler registration;
    EXPECT_TRUE(stream->Read(&registration));
    EXPECT_EQ(registration.registration().error(), "");
    EXPECT_TRUE(stream->Write(OneNode()));
    EXPECT_TRUE(stream->Write(GatedCycle(2)));
    return stream;
  }

  Gate gate_;
  std::unique_ptr<PluginServer> server_;
  std::unique_ptr<v1::Plugin::Stub> stub_;
};

// A plugin thread speaks (PermitDecision) while the stream's request is being
// handled: the decision is queued ahead of that request's answer and both are
// delivered. (Written at once or, when gRPC's transport needs the driver's
// poll, as soon as the handler returns: the answer is not read before both.)
TEST_F(GatedServerTest, APluginSpeaksFromItsOwnThreadWhileARequestIsHandled) {
  SchedulerStream stream(server_->address());
  ASSERT_EQ(stream.Open({{"Gang", ""}, {"Gate", ""}}).error(), "");
  ASSERT_TRUE(stream.Write(OneNode()));
  ASSERT_EQ(stream.Call(PermitMessage(2, MakePod("a"))).permit().results(0).status().code(),
            v1::Status::WAIT);
  ASSERT_TRUE(stream.Write(GatedCycle(3)));
  gate_.entered.WaitForNotification();
  ASSERT_NE(gate_.handle.load(), nullptr);
  EXPECT_TRUE(gate_.handle.load()->AllowWaitingPod("a", "Gang"));
  gate_.open.Notify();
  v1::PluginToScheduler decision = stream.Read();
  EXPECT_EQ(decision.id(), 0u);
  EXPECT_EQ(decision.permit_decision().pod_uid(), "a");
  EXPECT_TRUE(decision.permit_decision().allow());
  v1::PluginToScheduler answer = stream.Read();
  EXPECT_EQ(answer.id(), 3u);
  EXPECT_EQ(answer.cycle().feasible_size(), 1);
}

// The scheduler cancels a stream while its request is being handled: the late
// answer is dropped, and the server goes on serving other streams.
TEST_F(GatedServerTest, AStreamCancelledMidRequestLeavesTheServerServing) {
  grpc::ClientContext context;
  auto cancelled = GateEntered(context);
  gate_.entered.WaitForNotification();
  context.TryCancel();
  v1::PluginToScheduler ignored;
  while (cancelled->Read(&ignored)) {
  }
  EXPECT_EQ(cancelled->Finish().error_code(), grpc::StatusCode::CANCELLED);
  gate_.open.Notify();

  SchedulerStream next(server_->address());
  ASSERT_EQ(next.Open({{"Fit", ""}}).error(), "");
  ASSERT_TRUE(next.Write(OneNode()));
  v1::SchedulerToPlugin cycle = GatedCycle(2);
  cycle.mutable_cycle()->clear_filter_plugins();
  cycle.mutable_cycle()->add_filter_plugins("Fit");
  EXPECT_EQ(next.Call(cycle).cycle().feasible_size(), 1);
}

// Shutdown while a request is being handled: it waits for the handler, ends
// the stream with an error and leaves nothing running.
TEST_F(GatedServerTest, ShutdownWithARequestInFlightEndsTheStream) {
  grpc::ClientContext context;
  auto stream = GateEntered(context);
  v1::PluginToScheduler answer;
  ASSERT_TRUE(stream->Write(GatedCycle(3)));  // Waits in the backlog.
  gate_.entered.WaitForNotification();
  std::thread shutdown([this] { server_->Shutdown(); });
  gate_.open.Notify();
  shutdown.join();
  // The server cancelled the stream: whatever was answered before, it ends
  // with an error, not OK.
  while (stream->Read(&answer)) {
  }
  EXPECT_FALSE(stream->Finish().ok());
}

// grpc.health.v1.Health through a generic call: `method`, request bytes ->
// the status and the first answer (a Watch is cancelled after it).
struct HealthAnswer {
  grpc::Status status;
  std::string first;
};
HealthAnswer CallHealth(const std::string& address, const std::string& method, const std::string& request) {
  test_support::GenericStreamCall call(address, method);
  EXPECT_TRUE(call.started());
  EXPECT_TRUE(call.Write(request));
  EXPECT_TRUE(call.WritesDone());
  HealthAnswer out;
  if (std::optional<std::string> first = call.Read()) {
    out.first = *first;
    if (absl::EndsWith(method, "/Watch")) call.Cancel();  // It never ends by itself.
  }
  out.status = call.Finish();
  return out;
}

// A port already taken: Start fails naming the address, and the server (its
// completion queue never driven) is destroyed cleanly.
TEST(PluginServerListenTest, APortInUseFailsStartNamingTheAddress) {
  PluginServer first(ServeOptions{.address = "127.0.0.1:0", .process_name = "first", .plugins = TestPlugins()});
  ASSERT_TRUE(first.Start().ok());
  const std::string taken = first.address();
  auto second = std::make_unique<PluginServer>(
      ServeOptions{.address = taken, .process_name = "second", .plugins = TestPlugins()});
  absl::Status s = second->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot listen on " + taken));
  second.reset();
  SchedulerStream stream(taken);  // The first one still serves.
  EXPECT_EQ(stream.Open({{"Fit", ""}}).error(), "");
}

// The health service itself (grpc_support::HealthService: named services,
// bad requests, unknown methods, Watch until cancelled) is tested once, in
// services/scheduler/server/async_server_test.cc; here, that PluginServer
// serves it under its own name and ends its calls on Shutdown.
TEST(PluginServerHealthTest, ServesHealthForTheProcessAndEndsAWatchOnShutdown) {
  PluginServer server(ServeOptions{.address = "127.0.0.1:0", .process_name = "health", .plugins = TestPlugins()});
  ASSERT_TRUE(server.Start().ok());
  const std::string serving("\x08\x01", 2);
  // HealthCheckRequest{service: "podium.v1.Plugin"}: not a service it names.
  const std::string named = std::string("\x0a\x10", 2) + "podium.v1.Plugin";

  HealthAnswer check = CallHealth(server.address(), "/grpc.health.v1.Health/Check", "");
  EXPECT_TRUE(check.status.ok()) << check.status.error_message();
  EXPECT_EQ(check.first, serving);

  HealthAnswer check_named = CallHealth(server.address(), "/grpc.health.v1.Health/Check", named);
  EXPECT_EQ(check_named.status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(check_named.status.error_message(), HasSubstr("podium.v1.Plugin"));

  // A Watch left open ends with the server's shutdown.
  test_support::GenericStreamCall watch(server.address(), "/grpc.health.v1.Health/Watch");
  ASSERT_TRUE(watch.started());
  ASSERT_TRUE(watch.WriteLast(""));
  ASSERT_EQ(watch.Read().value_or("(ended)"), serving);
  server.Shutdown();
  EXPECT_FALSE(watch.Finish().ok());
}

}  // namespace
}  // namespace podium::sdk
