// Test helpers shared by the default plugins' tests over the SDK's server
// (what_if_test.cc, lookahead_test.cc): a blocking Plugin.Run stream, a small
// cluster where every default plugin has something to look at, and a fixture
// that serves DefaultPlugins() and opens the stream at a protocol version.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugins/default_plugins.h"
#include "podium/sdk/serve.h"
#include "podium/v1/plugin.grpc.pb.h"

namespace podium::plugins::stream_test {

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

inline v1::Node Node(const std::string& name, int64_t milli_cpu) {
  v1::Node node;
  node.mutable_meta()->set_name(name);
  node.mutable_meta()->set_uid("uid-" + name);
  (*node.mutable_meta()->mutable_labels())["kubernetes.io/hostname"] = name;
  node.mutable_allocatable()->set_milli_cpu(milli_cpu);
  node.mutable_allocatable()->set_memory_bytes(int64_t{8} << 30);
  node.mutable_allocatable()->set_pods(110);
  return node;
}

inline v1::Pod Pod(const std::string& name, int64_t milli_cpu, int64_t memory, int32_t host_port = 0) {
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
inline v1::StateDelta Cluster() {
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
inline v1::MirroredPod Nominee() {
  v1::MirroredPod nominee;
  nominee.set_node_id(1);
  *nominee.mutable_pod() = Pod("nominee", 5000, int64_t{1} << 30);
  nominee.mutable_pod()->set_priority(10);
  nominee.mutable_pod()->set_nominated_node_name("plain");
  return nominee;
}

// Serves every default plugin on 127.0.0.1:0 and opens one stream offering
// protocol versions 1 .. max_protocol, which the process must pick; collects
// the plugins per extension point for the cycle requests.
class DefaultPluginsOverStream : public ::testing::Test {
 protected:
  void OpenStream(uint32_t max_protocol) {
    server_ = std::make_unique<sdk::PluginServer>(sdk::ServeOptions{
        .address = "127.0.0.1:0", .process_name = "default-plugins", .plugins = DefaultPlugins(),
        .parallelism = 1});
    ASSERT_TRUE(server_->Start().ok());
    stream_ = std::make_unique<Stream>(server_->address());
    v1::SchedulerToPlugin open;
    open.mutable_open()->set_protocol_version(1);
    open.mutable_open()->set_max_protocol_version(max_protocol);
    open.mutable_open()->set_scheduler_id("test");
    for (const sdk::PluginDefinition& def : DefaultPlugins()) {
      if (def.name != "Coscheduling") open.mutable_open()->add_plugins()->set_name(def.name);
    }
    v1::Registration reg = stream_->Call(open).registration();
    ASSERT_EQ(reg.error(), "");
    ASSERT_EQ(reg.protocol_version(), max_protocol);
    for (const v1::PluginRegistration& plugin : reg.plugins()) {
      for (int point : plugin.extension_points()) {
        if (point == v1::PRE_FILTER) pre_filter_.push_back(plugin.name());
        if (point == v1::FILTER) filter_.push_back(plugin.name());
        if (point == v1::PRE_SCORE) pre_score_.push_back(plugin.name());
        if (point == v1::SCORE) score_.push_back(plugin.name());
      }
    }
    ASSERT_EQ(score_.size(), 7u);
  }
  void TearDown() override {
    stream_.reset();
    if (server_ != nullptr) server_->Shutdown();
  }

  // A cycle request of `pod` for every default plugin but Coscheduling.
  v1::SchedulerToPlugin CycleOf(const v1::Pod& pod) {
    v1::SchedulerToPlugin message;
    v1::CycleRequest& cycle = *message.mutable_cycle();
    cycle.set_cycle_id(++cycle_id_);
    cycle.set_profile("default-scheduler");
    *cycle.mutable_pod() = pod;
    for (const auto& p : pre_filter_) cycle.add_pre_filter_plugins(p);
    for (const auto& p : filter_) cycle.add_filter_plugins(p);
    for (const auto& p : pre_score_) cycle.add_pre_score_plugins(p);
    for (const auto& p : score_) cycle.add_score_plugins(p);
    return message;
  }

  // Another stream to the same server, offering protocol versions 1 ..
  // `version` and opening NodeResourcesFit alone; the process must pick
  // `version`.
  std::unique_ptr<Stream> OpenFitOnlyStream(uint32_t version) {
    auto stream = std::make_unique<Stream>(server_->address());
    v1::SchedulerToPlugin open;
    open.mutable_open()->set_protocol_version(1);
    open.mutable_open()->set_max_protocol_version(version);
    open.mutable_open()->set_scheduler_id("test");
    open.mutable_open()->add_plugins()->set_name("NodeResourcesFit");
    EXPECT_EQ(stream->Call(open).registration().protocol_version(), version);
    return stream;
  }
  // A cycle of `pod` over every node for NodeResourcesFit alone, with the
  // cluster (for a stream from OpenFitOnlyStream).
  static v1::SchedulerToPlugin FitOnlyCycle(const v1::Pod& pod) {
    v1::SchedulerToPlugin cycle;
    cycle.mutable_cycle()->set_cycle_id(1);
    *cycle.mutable_cycle()->mutable_pod() = pod;
    cycle.mutable_cycle()->add_filter_plugins("NodeResourcesFit");
    cycle.mutable_cycle()->add_score_plugins("NodeResourcesFit");
    cycle.mutable_cycle()->mutable_nodes()->set_all_nodes(true);
    *cycle.mutable_delta() = Cluster();
    return cycle;
  }

  std::unique_ptr<sdk::PluginServer> server_;
  std::unique_ptr<Stream> stream_;
  std::vector<std::string> pre_filter_, filter_, pre_score_, score_;
  uint64_t cycle_id_ = 0;
};

}  // namespace podium::plugins::stream_test
