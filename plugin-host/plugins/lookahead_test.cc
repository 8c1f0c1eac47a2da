// Lookahead verdicts (plugin protocol version 4) with every default plugin:
// the verdicts a request of pod p answers for the next pod q must be what a
// request of q narrowed to the same nodes says, on the nodes as they are
// (node_ids) and on each node with p assumed there (after_node_ids).
#include <grpcpp/grpcpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/default_plugins.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"

namespace podium::plugins {
namespace {

using Verdict = v1::WhatIfVerdicts;

class Stream {
 public:
  explicit Stream(const std::string& address)
      : stub_(v1::Plugin::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {
    context_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Run(&context_);
  }
  ~Stream() {
    stream_->WritesDone();
    v1::PluginToScheduler ignored;
    while (stream_->Read(&ignored)) {
    }
    stream_->Finish();
  }
  v1::PluginToScheduler Call(v1::SchedulerToPlugin message) {
    message.set_id(++id_);
    EXPECT_TRUE(stream_->Write(message));
    v1::PluginToScheduler answer;
    EXPECT_TRUE(stream_->Read(&answer)) << "stream ended";
    EXPECT_EQ(answer.error(), "");
    return answer;
  }

 private:
  uint64_t id_ = 0;
  std::unique_ptr<v1::Plugin::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::SchedulerToPlugin, v1::PluginToScheduler>> stream_;
};

v1::Node Node(const std::string& name, int64_t milli_cpu) {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("uid-" + name);
  (*node.mutable_meta()->mutable_labels())["kubernetes.io/hostname"] = name;
  node.mutable_allocatable()->set_milli_cpu(milli_cpu);
  node.mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
  node.mutable_allocatable()->set_pods(110);
  return node;
}

v1::Pod Pod(const std::string& name, int64_t milli_cpu, int64_t memory, int32_t host_port = 0) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("uid-" + name);
  pod.mutable_meta()->set_namespace_("default");
  pod.mutable_meta()->set_name(name);
  (*pod.mutable_meta()->mutable_labels())["app"] = "web";
  v1::Container& c = *pod.add_containers();
  c.set_name("c");
  c.set_image("registry/web:1");
  c.mutable_requests()->set_milli_cpu(milli_cpu);
  c.mutable_requests()->set_memory_bytes(memory);
  if (host_port != 0) {
    v1::ContainerPort& port = *c.add_ports();
    port.set_container_port(80);
    port.set_host_port(host_port);
  }
  // Preferences and tolerations, so that NodeAffinity and TaintToleration score.
  v1::PreferredSchedulingTerm& preferred = *pod.mutable_affinity()->mutable_node_affinity()->add_preferred();
  preferred.set_weight(10);
  v1::NodeSelectorRequirement& req = *preferred.mutable_preference()->add_match_expressions();
  req.set_key("disk");
  req.set_operator_(v1::NodeSelectorRequirement::IN);
  req.add_values("ssd");
  v1::Toleration& toleration = *pod.add_tolerations();
  toleration.set_key("dedicated");
  toleration.set_operator_(v1::Toleration::EQUAL);
  toleration.set_value("web");
  toleration.set_effect(v1::NO_SCHEDULE);
  return pod;
}

// Six nodes, each with something a default plugin looks at.
v1::StateDelta Cluster() {
  v1::StateDelta delta;
  delta.set_reset(true);
  delta.set_generation(1);
  std::vector<v1::Node> nodes;
  nodes.push_back(Node("plain", 8000));
  nodes.push_back(Node("tight", 4000));  // 1500m pods: the pod and one copy fit, two do not.
  v1::Node ssd = Node("ssd", 8000);
  (*ssd.mutable_meta()->mutable_labels())["disk"] = "ssd";
  nodes.push_back(ssd);
  v1::Node tainted = Node("tainted", 8000);
  v1::Taint& prefer = *tainted.add_taints();
  prefer.set_key("spot");
  prefer.set_effect(v1::PREFER_NO_SCHEDULE);
  nodes.push_back(tainted);
  v1::Node cached = Node("cached", 8000);
  v1::ContainerImage& image = *cached.add_images();
  image.add_names("registry/web:1");
  image.set_size_bytes(int64_t{400} << 20);
  nodes.push_back(cached);
  nodes.push_back(Node("busy", 8000));
  nodes.push_back(Node("guarded", 8000));
  for (size_t i = 0; i < nodes.size(); ++i) {
    v1::MirroredNode& upsert = *delta.add_node_upserts();
    upsert.set_id(static_cast<uint32_t>(i + 1));
    *upsert.mutable_node() = std::move(nodes[i]);
  }
  // "busy" holds a memory-heavy pod (BalancedAllocation, LeastAllocated).
  v1::MirroredPod& resident = *delta.add_pod_upserts();
  resident.set_node_id(6);
  *resident.mutable_pod() = Pod("resident", 500, int64_t{5} << 30);
  resident.mutable_pod()->set_node_name("busy");
  // "tainted" holds a pod that prefers not to share its node with app=web
  // (InterPodAffinity scores); "guarded" one that requires it (web fits
  // nowhere there, and InterPodAffinity's PreFilter state counts it, so the
  // copies go through its AddPod).
  for (const auto& [node_id, node_name, required] :
       {std::tuple<uint32_t, const char*, bool>{4, "tainted", false}, {7, "guarded", true}}) {
    v1::MirroredPod& loner = *delta.add_pod_upserts();
    loner.set_node_id(node_id);
    *loner.mutable_pod() = Pod(absl::StrCat("loner-", node_name), 100, int64_t{64} << 20);
    loner.mutable_pod()->set_node_name(node_name);
    (*loner.mutable_pod()->mutable_meta()->mutable_labels())["app"] = "loner";
    v1::PodAffinityTerm term;
    (*term.mutable_label_selector()->mutable_match_labels())["app"] = "web";
    term.set_topology_key("kubernetes.io/hostname");
    v1::PodAffinity& anti = *loner.mutable_pod()->mutable_affinity()->mutable_pod_anti_affinity();
    if (required) {
      *anti.add_required() = term;
    } else {
      v1::WeightedPodAffinityTerm& weighted = *anti.add_preferred();
      weighted.set_weight(50);
      *weighted.mutable_term() = term;
    }
  }
  return delta;
}

// A preemptor nominated to "plain" (id 1): 5 000m of its 8 000m count for
// pods of lower priority.
v1::MirroredPod Nominee() {
  v1::MirroredPod nominee;
  nominee.set_node_id(1);
  *nominee.mutable_pod() = Pod("nominee", 5000, int64_t{1} << 30);
  nominee.mutable_pod()->set_priority(10);
  nominee.mutable_pod()->set_nominated_node_name("plain");
  return nominee;
}

class LookaheadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<sdk::PluginServer>(sdk::ServeOptions{
        .address = "127.0.0.1:0", .process_name = "default-plugins", .plugins = DefaultPlugins(),
        .parallelism = 1});
    ASSERT_TRUE(server_->Start().ok());
    stream_ = std::make_unique<Stream>(server_->address());
    v1::SchedulerToPlugin open;
    open.mutable_open()->set_protocol_version(1);
    open.mutable_open()->set_max_protocol_version(4);
    open.mutable_open()->set_scheduler_id("test");
    for (const sdk::PluginDefinition& def : DefaultPlugins()) {
      if (def.name != "Coscheduling") open.mutable_open()->add_plugins()->set_name(def.name);
    }
    v1::Registration reg = stream_->Call(open).registration();
    ASSERT_EQ(reg.error(), "");
    ASSERT_EQ(reg.protocol_version(), 4u);
    for (const v1::PluginRegistration& plugin : reg.plugins()) {
      for (int point : plugin.extension_points()) {
        if (point == v1::PRE_FILTER) pre_filter_.push_back(plugin.name());
        if (point == v1::FILTER) filter_.push_back(plugin.name());
        if (point == v1::PRE_SCORE) pre_score_.push_back(plugin.name());
        if (point == v1::SCORE) score_.push_back(plugin.name());
      }
    }
    ASSERT_EQ(score_.size(), 7u);
    // The cluster, once.
    v1::SchedulerToPlugin first = Cycle(Pod("warm-up", 100, 1 << 20), {1});
    *first.mutable_delta() = Cluster();
    stream_->Call(first);
  }
  void TearDown() override {
    stream_.reset();
    server_->Shutdown();
  }

  v1::SchedulerToPlugin Cycle(const v1::Pod& pod, const std::vector<uint32_t>& nodes) {
    v1::SchedulerToPlugin message;
    v1::CycleRequest& cycle = *message.mutable_cycle();
    cycle.set_cycle_id(++cycle_id_);
    cycle.set_profile("default-scheduler");
    *cycle.mutable_pod() = pod;
    for (const auto& p : pre_filter_) cycle.add_pre_filter_plugins(p);
    for (const auto& p : filter_) cycle.add_filter_plugins(p);
    for (const auto& p : pre_score_) cycle.add_pre_score_plugins(p);
    for (const auto& p : score_) cycle.add_score_plugins(p);
    for (uint32_t id : nodes) cycle.mutable_nodes()->add_node_ids(id);
    return message;
  }

  // `answer`'s entry `entry` against a real request of `q` narrowed to
  // `nodes`, for node `node`.
  void ExpectEqualsRequest(const v1::LookaheadVerdicts& answer, int entry, const v1::CycleResponse& real,
                           uint32_t node, const std::string& what) {
    int index = -1;
    for (int i = 0; i < real.feasible_size(); ++i) {
      if (real.feasible(i) == node) index = i;
    }
    EXPECT_EQ(answer.verdicts(entry), index >= 0 ? Verdict::FEASIBLE : Verdict::INFEASIBLE)
        << what << " node " << node;
    if (index < 0) return;
    ASSERT_EQ(real.scores_size(), static_cast<int>(score_.size()));
    for (const v1::PluginScores& s : real.scores()) {
      bool found = false;
      for (const v1::PluginScores& a : answer.scores()) {
        if (a.plugin() != s.plugin()) continue;
        found = true;
        EXPECT_EQ(a.scores(entry), s.scores(index)) << s.plugin() << ", " << what << " node " << node;
      }
      EXPECT_TRUE(found) << s.plugin();
    }
  }

  // p's request (narrowed to p_nodes) carries q's lookahead for now_nodes and
  // after_nodes; every entry must equal q's own request. Returns the answer.
  v1::LookaheadVerdicts Check(const v1::Pod& p, const v1::Pod& q, const std::vector<uint32_t>& p_nodes,
                              const std::vector<uint32_t>& now_nodes, const std::vector<uint32_t>& after_nodes) {
    v1::SchedulerToPlugin request = Cycle(p, p_nodes);
    v1::Lookahead& lookahead = *request.mutable_cycle()->mutable_lookahead();
    *lookahead.mutable_pod() = q;
    for (uint32_t id : now_nodes) lookahead.add_node_ids(id);
    for (uint32_t id : after_nodes) lookahead.add_after_node_ids(id);
    const v1::CycleResponse answer = stream_->Call(request).cycle();
    EXPECT_TRUE(answer.has_lookahead());
    const v1::LookaheadVerdicts& verdicts = answer.lookahead();
    const int total = static_cast<int>(now_nodes.size() + after_nodes.size());
    EXPECT_EQ(verdicts.verdicts_size(), total);
    EXPECT_EQ(verdicts.scores_size(), static_cast<int>(score_.size()));
    if (verdicts.verdicts_size() != total) return verdicts;
    // The nodes as they are: one request of q narrowed to them.
    const v1::CycleResponse now = stream_->Call(Cycle(q, now_nodes)).cycle();
    for (size_t k = 0; k < now_nodes.size(); ++k) {
      ExpectEqualsRequest(verdicts, static_cast<int>(k), now, now_nodes[k], "as is,");
    }
    // Each node with p assumed there.
    uint64_t generation = 1;
    for (size_t k = 0; k < after_nodes.size(); ++k) {
      v1::SchedulerToPlugin with_p = Cycle(q, {after_nodes[k]});
      v1::StateDelta& delta = *with_p.mutable_delta();
      delta.set_generation(++generation);
      v1::MirroredPod& assumed = *delta.add_pod_upserts();
      assumed.set_node_id(after_nodes[k]);
      assumed.set_assumed(true);
      *assumed.mutable_pod() = p;
      const v1::CycleResponse real = stream_->Call(with_p).cycle();
      ExpectEqualsRequest(verdicts, static_cast<int>(now_nodes.size() + k), real, after_nodes[k], "with p,");
      v1::SchedulerToPlugin restore = Cycle(q, {after_nodes[k]});
      restore.mutable_delta()->set_generation(++generation);
      restore.mutable_delta()->add_pod_removals(p.meta().uid());
      stream_->Call(restore);
    }
    return verdicts;
  }

  std::unique_ptr<sdk::PluginServer> server_;
  std::unique_ptr<Stream> stream_;
  std::vector<std::string> pre_filter_, filter_, pre_score_, score_;
  uint64_t cycle_id_ = 0;
};

v1::Pod Other(const std::string& name, int64_t milli_cpu, int64_t memory, int32_t host_port = 0) {
  v1::Pod pod = Pod(name, milli_cpu, memory, host_port);
  (*pod.mutable_meta()->mutable_labels())["app"] = "api";
  pod.mutable_containers(0)->set_image("registry/api:2");
  return pod;
}

TEST_F(LookaheadTest, VerdictsEqualTheNextPodsOwnRequest) {
  // p 1500m, q 3000m: "tight" (id 2, 4000m) holds either alone, not both.
  const v1::Pod p = Pod("web", 1500, int64_t{1} << 30);
  const v1::Pod q = Other("api", 3000, int64_t{2} << 30);
  const auto verdicts = Check(p, q, {1, 2, 3}, {4, 5, 6, 7}, {1, 2, 3, 4, 5, 6, 7});
  ASSERT_EQ(verdicts.verdicts_size(), 11);
  EXPECT_EQ(verdicts.verdicts(4 + 1), Verdict::INFEASIBLE);  // "tight" with p.
  EXPECT_EQ(verdicts.verdicts(4 + 0), Verdict::FEASIBLE);    // "plain" with p.
}

TEST_F(LookaheadTest, SameLabelsAndAHostPort) {
  // q shares p's labels (InterPodAffinity's counts) and p's host port: every
  // node with p is infeasible for q; "guarded" (id 7) rejects both.
  const v1::Pod p = Pod("web", 500, int64_t{1} << 30, 8080);
  const v1::Pod q = Pod("web-2", 700, int64_t{1} << 29, 8080);
  const auto verdicts = Check(p, q, {5, 6}, {1, 2, 3, 7}, {4, 5, 6});
  ASSERT_EQ(verdicts.verdicts_size(), 7);
  EXPECT_EQ(verdicts.verdicts(3), Verdict::INFEASIBLE);
  for (int k = 4; k < 7; ++k) EXPECT_EQ(verdicts.verdicts(k), Verdict::INFEASIBLE) << k;
}

TEST_F(LookaheadTest, NotAnsweredWithNominatedPods) {
  v1::SchedulerToPlugin request = Cycle(Pod("web", 1500, 1 << 20), {1, 2});
  *request.mutable_cycle()->add_nominated_pods() = Nominee();
  v1::Lookahead& lookahead = *request.mutable_cycle()->mutable_lookahead();
  *lookahead.mutable_pod() = Other("api", 100, 1 << 20);
  lookahead.add_node_ids(3);
  const v1::CycleResponse answer = stream_->Call(request).cycle();
  EXPECT_EQ(answer.feasible_size(), 2);
  EXPECT_FALSE(answer.has_lookahead());
}

TEST_F(LookaheadTest, NotAnsweredOnAStreamOfAnOlderProtocol) {
  Stream old(server_->address());
  v1::SchedulerToPlugin open;
  open.mutable_open()->set_protocol_version(1);
  open.mutable_open()->set_max_protocol_version(3);
  open.mutable_open()->set_scheduler_id("test");
  open.mutable_open()->add_plugins()->set_name("NodeResourcesFit");
  ASSERT_EQ(old.Call(open).registration().protocol_version(), 3u);
  v1::SchedulerToPlugin cycle;
  cycle.mutable_cycle()->set_cycle_id(1);
  *cycle.mutable_cycle()->mutable_pod() = Pod("web", 1500, 1 << 20);
  cycle.mutable_cycle()->add_filter_plugins("NodeResourcesFit");
  cycle.mutable_cycle()->add_score_plugins("NodeResourcesFit");
  cycle.mutable_cycle()->mutable_nodes()->set_all_nodes(true);
  *cycle.mutable_cycle()->mutable_lookahead()->mutable_pod() = Other("api", 100, 1 << 20);
  cycle.mutable_cycle()->mutable_lookahead()->add_node_ids(1);
  *cycle.mutable_delta() = Cluster();
  const v1::CycleResponse answer = old.Call(cycle).cycle();
  EXPECT_EQ(answer.feasible_size(), 7);
  EXPECT_FALSE(answer.has_lookahead());
}

TEST_F(LookaheadTest, ANodeSelectorNoNodeMatchesIsInfeasibleEverywhere) {
  v1::Pod q = Other("api", 100, 1 << 20);
  (*q.mutable_node_selector())["zone"] = "nowhere";
  const auto verdicts = Check(Pod("web", 1500, 1 << 20), q, {1, 2}, {3, 4}, {1, 2});
  ASSERT_EQ(verdicts.verdicts_size(), 4);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(verdicts.verdicts(k), Verdict::INFEASIBLE) << k;
}

}  // namespace
}  // namespace podium::plugins
