// The default plugins' queueing hints through the production path: the real
// SchedulingQueue, the RemoteQueueingHintEvaluator, a GrpcPluginProcess and
// the plugin host's plugins served by the SDK on a temporary unix socket. The
// event registry is the one the plugins registered. Per plugin, a pod that
// only it rejected stays in the pool on an event that cannot help and moves
// on one that can. (NodeName is left to its own test: the queue holds a pod
// with spec.nodeName as assigned, so its rejections never reach the pool.)
#include <unistd.h>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/cache.h"
#include "cache/mirror_state_source.h"
#include "cache/snapshot.h"
#include "framework/queueing_hints.h"
#include "gtest/gtest.h"
#include "plugins/default_plugins.h"
#include "podium/sdk/serve.h"
#include "queue/events.h"
#include "queue/fake_clock.h"
#include "queue/scheduling_queue.h"
#include "remote/grpc_plugin_process.h"

namespace podium::scheduler {
namespace {

v1::Pod Pod(const std::string& name) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-" + name);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(name);
  pod.add_containers()->set_name("c");
  return pod;
}
v1::Pod Requesting(v1::Pod pod, int64_t milli_cpu) {
  pod.mutable_containers(0)->mutable_requests()->set_milli_cpu(milli_cpu);
  return pod;
}
v1::Pod Labelled(v1::Pod pod, const std::string& k, const std::string& v) {
  (*pod.mutable_meta()->mutable_labels())[k] = v;
  return pod;
}
// A DoNotSchedule spread over zones of the pods labelled app=`app`.
v1::Pod SpreadByZone(v1::Pod pod, const std::string& app) {
  auto* c = pod.add_topology_spread_constraints();
  c->set_max_skew(1);
  c->set_topology_key("topology.kubernetes.io/zone");
  c->set_when_unsatisfiable(v1::TopologySpreadConstraint::DO_NOT_SCHEDULE);
  (*c->mutable_label_selector()->mutable_match_labels())["app"] = app;
  return pod;
}
// Required affinity to the zone of a pod labelled app=`app`.
v1::Pod AffineByZone(v1::Pod pod, const std::string& app) {
  auto* term = pod.mutable_affinity()->mutable_pod_affinity()->add_required();
  term->set_topology_key("topology.kubernetes.io/zone");
  (*term->mutable_label_selector()->mutable_match_labels())["app"] = app;
  return pod;
}
v1::Pod On(v1::Pod pod, const std::string& node) {
  pod.set_node_name(node);
  return pod;
}
v1::Pod WithHostPort(v1::Pod pod, int32_t port) {
  v1::ContainerPort* p = pod.mutable_containers(0)->add_ports();
  p->set_container_port(port);
  p->set_host_port(port);
  return pod;
}

v1::Node Node(const std::string& name, int64_t milli_cpu = 4000) {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("node-" + name);
  node.mutable_allocatable()->set_milli_cpu(milli_cpu);
  node.mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
  node.mutable_allocatable()->set_pods(110);
  return node;
}
v1::Node Labelled(v1::Node node, const std::string& k, const std::string& v) {
  (*node.mutable_meta()->mutable_labels())[k] = v;
  return node;
}
v1::Node Tainted(v1::Node node, const std::string& key) {
  v1::Taint* t = node.add_taints();
  t->set_key(key);
  t->set_effect(v1::NO_SCHEDULE);
  return node;
}
v1::Node Cordoned(v1::Node node) {
  node.set_unschedulable(true);
  return node;
}

v1::ClusterEvent NodeAdded(const v1::Node& node) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(v1::ADD);
  *e.mutable_new_node() = node;
  return e;
}
v1::ClusterEvent NodeUpdated(const v1::Node& before, const v1::Node& after) {
  v1::ClusterEvent e;
  e.set_resource(v1::NODE);
  e.set_action(NodeUpdateActions(before, after));
  *e.mutable_old_node() = before;
  *e.mutable_new_node() = after;
  return e;
}
v1::ClusterEvent PodAdded(const v1::Pod& pod) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(v1::ADD);
  *e.mutable_new_pod() = pod;
  return e;
}
v1::ClusterEvent PodDeleted(const v1::Pod& pod) {
  v1::ClusterEvent e;
  e.set_resource(v1::POD);
  e.set_action(v1::DELETE);
  *e.mutable_old_pod() = pod;
  return e;
}

class DefaultPluginHintsTest : public testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/podium-hints-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    const std::string address = absl::StrCat("unix://", dir_, "/host.sock");
    server_ = std::make_unique<sdk::PluginServer>(sdk::ServeOptions{
        .address = address, .process_name = "host", .plugins = plugins::DefaultPlugins()});
    ASSERT_TRUE(server_->Start().ok());
    PluginEndpointOptions options;
    options.name = "host";
    options.address = address;
    options.timeout = absl::Seconds(5);
    process_ = std::make_unique<GrpcPluginProcess>(options, state_, nullptr);
    ASSERT_TRUE(process_->Start().ok());
    absl::flat_hash_map<std::string, PluginProcess*> by_plugin;
    const v1::Registration registration = process_->registration();
    for (const v1::PluginRegistration& p : registration.plugins()) {
      by_plugin[p.name()] = process_.get();
      registry_[p.name()] = RegisteredEvents(p, process_->RegistersPendingPodUpdates());
    }
    evaluator_ = std::make_unique<RemoteQueueingHintEvaluator>(std::move(by_plugin));
  }
  void TearDown() override {
    if (process_) process_->Shutdown();
    if (server_) server_->Shutdown();
    std::string cmd = "rm -rf " + dir_;
    (void)std::system(cmd.c_str());
  }

  // A queue holding `pod` in the unschedulable pool, rejected by `plugin`,
  // with its backoff over.
  std::unique_ptr<SchedulingQueue> PoolWith(const v1::Pod& pod, const std::string& plugin) {
    SchedulingQueue::Options o;
    o.clock = &clock_;
    o.hint_evaluator = evaluator_.get();
    auto q = std::make_unique<SchedulingQueue>(o);
    q->SetEventRegistry(registry_);
    q->Add(sdk::PodInfo::Create(pod));
    std::optional<QueuedPodInfo> info = q->TryPop();
    EXPECT_TRUE(info.has_value());
    if (!info) return q;
    info->unschedulable_plugins = {plugin};
    EXPECT_TRUE(q->AddUnschedulableIfNotPresent(*info, q->scheduling_cycle()).ok());
    q->Done(info->uid());
    clock_.Advance(absl::Seconds(30));
    return q;
  }

  std::string dir_;
  Cache cache_;
  Snapshot snapshot_;
  CacheStateSource state_{cache_, snapshot_};
  FakeClock clock_;
  std::unique_ptr<sdk::PluginServer> server_;
  std::unique_ptr<GrpcPluginProcess> process_;
  EventRegistry registry_;
  std::unique_ptr<RemoteQueueingHintEvaluator> evaluator_;
};

TEST_F(DefaultPluginHintsTest, EachPluginRequeuesOnlyOnEventsThatCanHelp) {
  const v1::Node plain = Node("n");
  const v1::Pod bound_big = On(Requesting(Pod("big"), 3000), "n");
  const v1::Pod web = Labelled(Pod("web"), "app", "web");

  v1::Pod wants_foo_bar = Pod("pending");
  {
    auto* term = wants_foo_bar.mutable_affinity()
                     ->mutable_node_affinity()
                     ->mutable_required()
                     ->add_terms();
    auto* req = term->add_match_expressions();
    req->set_key("foo");
    req->set_operator_(v1::NodeSelectorRequirement::IN);
    req->add_values("bar");
  }
  const v1::Pod spread = SpreadByZone(Labelled(Pod("pending"), "app", "web"), "web");
  const v1::Pod affine = AffineByZone(Pod("pending"), "db");

  v1::Pod member = Requesting(Pod("pending"), 2000);
  member.set_pod_group("train");

  struct Case {
    std::string plugin;
    v1::Pod pending;
    v1::ClusterEvent stays;  // Cannot help: the pod stays in the pool.
    v1::ClusterEvent moves;  // Can help: the pod moves to activeQ.
  };
  const std::vector<Case> cases = {
      {"NodeResourcesFit", Requesting(Pod("pending"), 2000),
       NodeUpdated(plain, Labelled(plain, "zone", "b")), PodDeleted(bound_big)},
      {"NodeResourcesFit", Requesting(Pod("pending"), 2000), NodeAdded(Node("small", 1000)),
       NodeAdded(Node("large", 4000))},
      {"NodeResourcesFit", Requesting(Pod("pending"), 2000),
       PodDeleted(Requesting(Pod("unassigned"), 3000)), NodeUpdated(Node("n", 1000), Node("n", 3000))},
      {"NodeAffinity", wants_foo_bar, NodeUpdated(plain, Labelled(plain, "foo", "baz")),
       NodeUpdated(plain, Labelled(plain, "foo", "bar"))},
      {"TaintToleration", Pod("pending"),
       NodeUpdated(Tainted(plain, "a"), Tainted(Tainted(plain, "a"), "b")),
       NodeUpdated(Tainted(plain, "a"), plain)},
      {"NodeUnschedulable", Pod("pending"),
       NodeUpdated(Cordoned(plain), Labelled(Cordoned(plain), "k", "v")),
       NodeUpdated(Cordoned(plain), plain)},
      {"NodePorts", WithHostPort(Pod("pending"), 8080),
       PodDeleted(On(WithHostPort(Pod("d"), 9090), "n")),
       PodDeleted(On(WithHostPort(Pod("d"), 8080), "n"))},
      {"PodTopologySpread", spread, PodAdded(web), PodDeleted(On(web, "n"))},
      {"InterPodAffinity", affine, PodAdded(On(web, "n")),
       PodAdded(On(Labelled(Pod("db"), "app", "db"), "n"))},
      // A gang member rejected at Permit (the gang's wait timed out): only
      // room can help. A pending pod's deletion frees none; a bound one's does.
      {"Coscheduling", member, PodDeleted(Requesting(Pod("unassigned"), 3000)), PodDeleted(bound_big)},
      // A cordoned node the member does not tolerate is no room; a usable one is.
      {"Coscheduling", member, NodeAdded(Cordoned(Node("new"))), NodeAdded(Node("new"))},
      // Allocatable that shrank is no room; allocatable that grew is.
      {"Coscheduling", member, NodeUpdated(Node("n", 3000), Node("n", 1000)),
       NodeUpdated(Node("n", 1000), Node("n", 3000))},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.plugin, ": stays on ", c.stays.ShortDebugString().substr(0, 120)));
    ASSERT_TRUE(registry_.contains(c.plugin));
    std::unique_ptr<SchedulingQueue> q = PoolWith(c.pending, c.plugin);
    const std::string uid = c.pending.meta().uid();
    ASSERT_TRUE(q->Find(uid).has_value());
    ASSERT_EQ(q->Find(uid)->queue, QueueKind::kUnschedulable);
    EXPECT_EQ(q->MoveAllToActiveOrBackoffQueue(c.stays), 0u);
    ASSERT_TRUE(q->Find(uid).has_value());
    EXPECT_EQ(q->Find(uid)->queue, QueueKind::kUnschedulable);
    EXPECT_EQ(q->MoveAllToActiveOrBackoffQueue(c.moves), 1u);
    ASSERT_TRUE(q->Find(uid).has_value());
    EXPECT_EQ(q->Find(uid)->queue, QueueKind::kActive);
  }
  EXPECT_EQ(process_->stats().invalid_answers, 0u);
  EXPECT_EQ(process_->stats().errors, 0u);
}

// The pending pod's own update (UNSCHEDULED_POD), through the plugins'
// registrations and hints: it moves the pod only when what changed can
// resolve the rejection.
TEST_F(DefaultPluginHintsTest, APendingPodsOwnUpdateMovesItOnlyWhenItCanHelp) {
  ASSERT_TRUE(process_->RegistersPendingPodUpdates());
  auto annotated = [](v1::Pod pod) {
    (*pod.mutable_meta()->mutable_annotations())["note"] = "x";
    return pod;
  };
  auto tolerating = [](v1::Pod pod, const std::string& key) {
    v1::Toleration* t = pod.add_tolerations();
    t->set_key(key);
    t->set_operator_(v1::Toleration::EXISTS);
    return pod;
  };
  const v1::Pod spread = SpreadByZone(Labelled(Pod("pending"), "app", "web"), "web");
  const v1::Pod affine = AffineByZone(Pod("pending"), "db");
  struct Case {
    std::string plugin;
    v1::Pod pending;
    v1::Pod stays;  // An update that cannot help.
    v1::Pod moves;  // One that can (nullopt-like: same as pending when none).
    bool can_move;
  };
  const v1::Pod big = Requesting(Pod("pending"), 2000);
  const std::vector<Case> cases = {
      {"NodeResourcesFit", big, annotated(big), Requesting(Pod("pending"), 1000), true},
      {"NodeResourcesFit", big, Requesting(Pod("pending"), 3000), Requesting(Pod("pending"), 1000), true},
      {"TaintToleration", Pod("pending"), Labelled(Pod("pending"), "k", "v"), tolerating(Pod("pending"), "a"), true},
      {"NodeUnschedulable", Pod("pending"), tolerating(Pod("pending"), "a"),
       tolerating(Pod("pending"), "node.kubernetes.io/unschedulable"), true},
      {"PodTopologySpread", spread, Labelled(spread, "tier", "x"), Labelled(spread, "app", "api"), true},
      // kube-scheduler's InterPodAffinity ignores unscheduled pods, itself
      // included: its own labels never requeue it.
      {"InterPodAffinity", affine, Labelled(affine, "app", "db"), affine, false},
      // NodeAffinity registered no update of the pod (its affinity can change
      // only while gated, which PreEnqueue handles).
      {"NodeAffinity", Pod("pending"), annotated(Pod("pending")), Pod("pending"), false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat(c.plugin, ": stays on ", c.stays.ShortDebugString().substr(0, 160)));
    ASSERT_TRUE(registry_.contains(c.plugin));
    std::unique_ptr<SchedulingQueue> q = PoolWith(c.pending, c.plugin);
    const std::string uid = c.pending.meta().uid();
    q->Update(sdk::PodInfo::Create(c.stays));
    ASSERT_TRUE(q->Find(uid).has_value());
    EXPECT_EQ(q->Find(uid)->queue, QueueKind::kUnschedulable);
    if (!c.can_move) continue;
    q->Update(sdk::PodInfo::Create(c.moves));
    ASSERT_TRUE(q->Find(uid).has_value());
    EXPECT_EQ(q->Find(uid)->queue, QueueKind::kActive);
  }
  EXPECT_EQ(process_->stats().invalid_answers, 0u);
  EXPECT_EQ(process_->stats().errors, 0u);
}

// One request per event for every candidate of the process, whatever the
// number of pods and plugins asked.
TEST_F(DefaultPluginHintsTest, OneRequestPerEventForAllCandidates) {
  SchedulingQueue::Options o;
  o.clock = &clock_;
  o.hint_evaluator = evaluator_.get();
  SchedulingQueue q(o);
  q.SetEventRegistry(registry_);
  for (int i = 0; i < 20; ++i) {
    q.Add(sdk::PodInfo::Create(Requesting(Pod(absl::StrCat("p", i)), i < 10 ? 2000 : 6000)));
  }
  while (std::optional<QueuedPodInfo> info = q.TryPop()) {
    info->unschedulable_plugins = {"NodeResourcesFit", "TaintToleration"};
    ASSERT_TRUE(q.AddUnschedulableIfNotPresent(*info, q.scheduling_cycle()).ok());
    q.Done(info->uid());
  }
  clock_.Advance(absl::Seconds(30));
  const uint64_t before = process_->stats().requests;
  // A 4-CPU node with a taint none tolerates: the ten 2-CPU pods may fit
  // (NodeResourcesFit says Queue), the 6-CPU ones cannot (both say skip).
  EXPECT_EQ(q.MoveAllToActiveOrBackoffQueue(NodeAdded(Tainted(Node("n2", 4000), "x"))), 10u);
  EXPECT_EQ(process_->stats().requests - before, 1u);
}

}  // namespace
}  // namespace podium::scheduler
