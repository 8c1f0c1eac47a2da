// Plugin mirrors over the production path: the cache and its snapshot, the
// CacheStateSource, the framework, GrpcPluginProcess, and the real SDK server
// on a temporary unix socket; the plugins report what their mirror holds.
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cache/cache.h"
#include "cache/mirror_state_source.h"
#include "cache/snapshot.h"
#include "framework/framework.h"
#include "gtest/gtest.h"
#include "podium/sdk/extension_points.h"
#include "podium/sdk/serve.h"
#include "remote/grpc_plugin_process.h"

namespace podium::scheduler {
namespace {

// What a plugin's Handle::snapshot() holds, as a status reason.
std::string Describe(const sdk::Snapshot& s, const std::string& ns) {
  const v1::PodGroup* group = s.GetPodGroup(ns, "gang");
  size_t pods = 0;
  for (const sdk::NodeInfo* node : s.Nodes()) pods += node->pods().size();
  return absl::StrCat("nodes=", s.NumNodes(), " pods=", pods,
                      " pdbs=", s.PodDisruptionBudgets(ns).size(),
                      " gang=", group == nullptr ? -1 : group->min_member());
}

// Rejects every node and every pod with what its mirror holds.
class Probe final : public sdk::FilterPlugin, public sdk::PermitPlugin, public sdk::BindPlugin {
 public:
  Probe(std::string name, sdk::Handle& handle) : name_(std::move(name)), handle_(handle) {}
  std::string_view Name() const override { return name_; }
  sdk::Status Filter(sdk::CycleState&, const sdk::PodInfo& pod, const sdk::NodeInfo&) override {
    return Reject(pod);
  }
  sdk::PermitResult Permit(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) override {
    return {Reject(pod)};
  }
  sdk::Status Bind(sdk::CycleState&, const sdk::PodInfo& pod, const std::string&) override {
    return Reject(pod);
  }

 private:
  sdk::Status Reject(const sdk::PodInfo& pod) const {
    return sdk::Status(sdk::Code::kUnschedulable,
                       Describe(handle_.snapshot(), pod.pod->meta().namespace_()));
  }
  const std::string name_;
  sdk::Handle& handle_;
};

sdk::PluginDefinition ProbeDefinition(const std::string& name, sdk::MirrorNeeds needs) {
  return {name,
          [name](const boost::json::object&, sdk::Handle& handle) -> absl::StatusOr<sdk::PluginPtr> {
            return std::make_unique<Probe>(name, handle);
          },
          needs};
}

// Rejects every node with the Namespaces its mirror holds: how many, and the
// team label of the pod's namespace ("-" when the namespace is unknown).
class NamespaceProbe final : public sdk::FilterPlugin {
 public:
  NamespaceProbe(std::string name, sdk::Handle& handle) : name_(std::move(name)), handle_(handle) {}
  std::string_view Name() const override { return name_; }
  sdk::Status Filter(sdk::CycleState&, const sdk::PodInfo& pod, const sdk::NodeInfo&) override {
    const sdk::Snapshot& s = handle_.snapshot();
    const v1::Namespace* ns = s.GetNamespace(pod.pod->meta().namespace_());
    std::string team = "-";
    if (ns != nullptr) {
      auto it = ns->meta().labels().find("team");
      team = it == ns->meta().labels().end() ? "" : it->second;
    }
    return sdk::Status(sdk::Code::kUnschedulable,
                       absl::StrCat("namespaces=", s.Namespaces().size(), " team=", team));
  }

 private:
  const std::string name_;
  sdk::Handle& handle_;
};

sdk::PluginDefinition NamespaceProbeDefinition(const std::string& name, sdk::MirrorNeeds needs) {
  return {name,
          [name](const boost::json::object&, sdk::Handle& handle) -> absl::StatusOr<sdk::PluginPtr> {
            return std::make_unique<NamespaceProbe>(name, handle);
          },
          needs};
}

class MirrorSyncTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/podium-mirror-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    cache_.AddOrUpdateNode(Node("n1"));
    ASSERT_TRUE(cache_.AddOrUpdatePod(BoundPod("p1", "n1")).ok());
    v1::PodDisruptionBudget pdb;
    pdb.mutable_meta()->set_uid("pdb1");
    pdb.mutable_meta()->set_namespace_("ns");
    pdb.mutable_meta()->set_name("budget");
    ASSERT_TRUE(cache_.AddOrUpdatePdb(pdb).ok());
    group_.mutable_meta()->set_uid("g1");
    group_.mutable_meta()->set_namespace_("ns");
    group_.mutable_meta()->set_name("gang");
    group_.set_min_member(3);
    ASSERT_TRUE(cache_.AddOrUpdatePodGroup(group_).ok());
  }
  void TearDown() override {
    for (auto& p : processes_) p->Shutdown();
    for (auto& s : servers_) s->Shutdown();
    std::string cmd = "rm -rf " + dir_;
    (void)std::system(cmd.c_str());
  }

  static v1::Node Node(const std::string& name) {
    v1::Node node;
    node.mutable_meta()->set_name(name);
    node.mutable_meta()->set_uid("node-" + name);
    node.mutable_allocatable()->set_milli_cpu(4000);
    node.mutable_allocatable()->set_pods(110);
    return node;
  }
  static v1::Pod BoundPod(const std::string& uid, const std::string& node) {
    v1::Pod pod;
    pod.mutable_meta()->set_uid(uid);
    pod.mutable_meta()->set_namespace_("ns");
    pod.mutable_meta()->set_name(uid);
    pod.set_node_name(node);
    return pod;
  }

  // A plugin process serving `definitions` on its own unix socket.
  std::string Serve(const std::string& name, std::vector<sdk::PluginDefinition> definitions) {
    const std::string address = absl::StrCat("unix://", dir_, "/", name, ".sock");
    auto server = std::make_unique<sdk::PluginServer>(
        sdk::ServeOptions{.address = address, .process_name = name, .plugins = std::move(definitions)});
    EXPECT_TRUE(server->Start().ok());
    servers_.push_back(std::move(server));
    return address;
  }

  GrpcPluginProcess& Dial(const std::string& name, const std::string& address) {
    PluginEndpointOptions options;
    options.name = name;
    options.address = address;
    options.timeout = absl::Seconds(5);
    options.reconnect_initial_backoff = absl::Milliseconds(20);
    auto process = std::make_unique<GrpcPluginProcess>(options, state_, nullptr);
    EXPECT_TRUE(process->Start().ok());
    processes_.push_back(std::move(process));
    return *processes_.back();
  }

  // One cycle request to `process` for `plugin` at the current snapshot: the
  // first rejection's reason (what the plugin's mirror holds).
  std::string FilterReason(GrpcPluginProcess& process, const std::string& plugin) {
    cache_.UpdateSnapshot(snapshot_);
    v1::SchedulerToPlugin message;
    v1::CycleRequest& cycle = *message.mutable_cycle();
    cycle.set_cycle_id(++cycle_id_);
    *cycle.mutable_pod() = BoundPod("pending", "");
    cycle.add_filter_plugins(plugin);
    cycle.mutable_nodes()->set_all_nodes(true);
    PluginAnswer answer = process.Call(std::move(message), snapshot_.delta_seq()).get();
    if (!answer.ok()) return std::string(answer.status().message());
    if (answer->cycle().rejected_size() == 0) return "no rejection";
    const v1::CycleResponse& response = answer->cycle();
    const v1::NodeStatus& first = response.rejected(0);
    // The SDK speaks protocol version 2: statuses in the status table.
    return first.status_index() == 0 ? first.status().reasons(0)
                                     : response.status_table(first.status_index() - 1).reasons(0);
  }

  std::string dir_;
  Cache cache_;
  Snapshot snapshot_;
  CacheStateSource state_{cache_, snapshot_};
  v1::PodGroup group_;
  uint64_t cycle_id_ = 0;
  std::vector<std::unique_ptr<sdk::PluginServer>> servers_;
  std::vector<std::unique_ptr<GrpcPluginProcess>> processes_;
};

TEST_F(MirrorSyncTest, PdbsAndPodGroupsReachTheMirrorOnResetDeltasAndReconnect) {
  const sdk::MirrorNeeds all{.pod_disruption_budgets = true, .pod_groups = true};
  const std::string address = Serve("gang", {ProbeDefinition("GangProbe", all)});
  GrpcPluginProcess& process = Dial("gang", address);
  ASSERT_TRUE(process.registration().mirror().pod_disruption_budgets());

  // The first request carries a reset built from the snapshot.
  EXPECT_EQ(FilterReason(process, "GangProbe"), "nodes=1 pods=1 pdbs=1 gang=3");

  // Incremental deltas.
  group_.set_min_member(5);
  ASSERT_TRUE(cache_.AddOrUpdatePodGroup(group_).ok());
  ASSERT_TRUE(cache_.RemovePdb("pdb1").ok());
  EXPECT_EQ(FilterReason(process, "GangProbe"), "nodes=1 pods=1 pdbs=0 gang=5");
  ASSERT_TRUE(cache_.RemovePodGroup("g1").ok());
  EXPECT_EQ(FilterReason(process, "GangProbe"), "nodes=1 pods=1 pdbs=0 gang=-1");

  // The plugin process restarts: the new stream starts with a reset.
  ASSERT_TRUE(cache_.AddOrUpdatePodGroup(group_).ok());
  servers_.back()->Shutdown();
  servers_.pop_back();
  Serve("gang", {ProbeDefinition("GangProbe", all)});
  std::string reason;
  for (int i = 0; i < 250; ++i) {  // Reconnect backoff: bounded wait.
    reason = FilterReason(process, "GangProbe");
    if (reason.rfind("nodes=", 0) == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(reason, "nodes=1 pods=1 pdbs=0 gang=5");
  EXPECT_GE(process.stats().reconnects, 1u);
}

TEST_F(MirrorSyncTest, AProcessGetsOnlyTheStateItAskedFor) {
  const std::string address =
      Serve("plain", {ProbeDefinition("PlainProbe", sdk::MirrorNeeds{.assigned_pods = false})});
  GrpcPluginProcess& process = Dial("plain", address);
  EXPECT_FALSE(process.registration().mirror().assigned_pods());
  EXPECT_EQ(FilterReason(process, "PlainProbe"), "nodes=1 pods=0 pdbs=0 gang=-1");
}

TEST_F(MirrorSyncTest, NamespacesReachOnlyTheMirrorsThatAskForThem) {
  auto make = [](const std::string& name, const std::string& team) {
    v1::Namespace ns;
    ns.mutable_meta()->set_name(name);
    ns.mutable_meta()->set_uid("uid-" + name);
    if (!team.empty()) (*ns.mutable_meta()->mutable_labels())["team"] = team;
    return ns;
  };
  ASSERT_TRUE(cache_.AddOrUpdateNamespace(make("ns", "data")).ok());
  ASSERT_TRUE(cache_.AddOrUpdateNamespace(make("other", "")).ok());
  GrpcPluginProcess& asks = Dial(
      "asks", Serve("asks", {NamespaceProbeDefinition("NsProbe", sdk::MirrorNeeds{.namespaces = true})}));
  GrpcPluginProcess& plain =
      Dial("plain", Serve("plain", {NamespaceProbeDefinition("PlainNsProbe", sdk::MirrorNeeds{})}));
  EXPECT_TRUE(asks.registration().mirror().namespaces());
  EXPECT_FALSE(plain.registration().mirror().namespaces());

  EXPECT_EQ(FilterReason(asks, "NsProbe"), "namespaces=2 team=data");
  EXPECT_EQ(FilterReason(plain, "PlainNsProbe"), "namespaces=0 team=-");
  // A relabel and a removal travel as deltas.
  ASSERT_TRUE(cache_.AddOrUpdateNamespace(make("ns", "web")).ok());
  ASSERT_TRUE(cache_.RemoveNamespace("other").ok());
  EXPECT_EQ(FilterReason(asks, "NsProbe"), "namespaces=1 team=web");
  EXPECT_EQ(FilterReason(plain, "PlainNsProbe"), "namespaces=0 team=-");
  ASSERT_TRUE(cache_.RemoveNamespace("ns").ok());
  EXPECT_EQ(FilterReason(asks, "NsProbe"), "namespaces=0 team=-");
}

// Processes that serve only Permit or only Bind get no cycle request: their
// mirrors are brought to the cycle's snapshot by the Permit request itself and
// by a state-only message at Reserve.
TEST_F(MirrorSyncTest, PermitAndBindOnlyProcessesGetState) {
  const sdk::MirrorNeeds all{.pod_disruption_budgets = true, .pod_groups = true};
  GrpcPluginProcess& permit = Dial("permit", Serve("permit", {ProbeDefinition("PermitProbe", all)}));
  GrpcPluginProcess& bind = Dial("bind", Serve("bind", {ProbeDefinition("BindProbe", all)}));
  ProfileSpec spec;
  spec.plugins[v1::PERMIT] = {PluginRef{"PermitProbe", 1}};
  spec.plugins[v1::BIND] = {PluginRef{"BindProbe", 1}};
  spec.processes = {{"PermitProbe", &permit}, {"BindProbe", &bind}};
  Framework fw(std::move(spec));

  cache_.UpdateSnapshot(snapshot_);
  const v1::Pod pod = BoundPod("pending", "");
  ScheduleResult result = fw.SchedulePod(pod, snapshot_, snapshot_.delta_seq(), 1);
  ASSERT_EQ(result.outcome, ScheduleResult::Outcome::kScheduled);
  ASSERT_TRUE(fw.RunReserve(pod, result.node_name, 1).IsSuccess());
  PermitOutcome outcome = fw.RunPermit(pod, result.node_name, 1);
  ASSERT_TRUE(outcome.status.IsRejected()) << outcome.status.Message();
  EXPECT_EQ(outcome.status.Message(), "nodes=1 pods=1 pdbs=1 gang=3");
  sdk::Status bound = fw.RunBindPlugins(pod, result.node_name, 1);
  EXPECT_EQ(bound.Message(), "nodes=1 pods=1 pdbs=1 gang=3");
}

}  // namespace
}  // namespace podium::scheduler
