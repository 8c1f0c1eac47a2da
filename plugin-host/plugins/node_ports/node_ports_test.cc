#include "plugins/node_ports/node_ports.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugins/helper/testing.h"

namespace podium::plugins {
namespace {

using ::testing::ElementsAre;
using testing::FakeSnapshot;
using testing::MakeNodeInfo;
using testing::NodeBuilder;
using testing::PodBuilder;

struct Port {
  std::string protocol;
  std::string ip;
  int32_t port;
};

v1::Pod PodWithPorts(const std::vector<Port>& ports, std::string name = "p") {
  PodBuilder b(name);
  for (const Port& p : ports) b.HostPort(p.port, p.protocol, p.ip);
  return b.Build();
}

TEST(NodePortsTest, Filter) {
  struct Case {
    std::string name;
    std::vector<Port> want;
    std::vector<Port> used;
    bool fits;
  };
  const std::vector<Case> cases = {
      {"nothing running", {}, {}, true},
      {"other port", {{"UDP", "127.0.0.1", 8080}}, {{"UDP", "127.0.0.1", 9090}}, true},
      {"same udp port", {{"UDP", "127.0.0.1", 8080}}, {{"UDP", "127.0.0.1", 8080}}, false},
      {"same tcp port", {{"TCP", "127.0.0.1", 8080}}, {{"TCP", "127.0.0.1", 8080}}, false},
      {"different host ip", {{"TCP", "127.0.0.1", 8080}}, {{"TCP", "127.0.0.2", 8080}}, true},
      {"different protocol", {{"UDP", "127.0.0.1", 8080}}, {{"TCP", "127.0.0.1", 8080}}, true},
      {"second udp port conflict",
       {{"UDP", "127.0.0.1", 8000}, {"UDP", "127.0.0.1", 8080}},
       {{"UDP", "127.0.0.1", 8080}},
       false},
      {"first tcp port conflict",
       {{"TCP", "127.0.0.1", 8001}, {"UDP", "127.0.0.1", 8080}},
       {{"TCP", "127.0.0.1", 8001}, {"UDP", "127.0.0.1", 8081}},
       false},
      {"tcp conflict with the pod binding 0.0.0.0",
       {{"TCP", "0.0.0.0", 8001}},
       {{"TCP", "127.0.0.1", 8001}},
       false},
      {"tcp conflict with one of the pod's ports on 0.0.0.0",
       {{"TCP", "10.0.10.10", 8001}, {"TCP", "0.0.0.0", 8001}},
       {{"TCP", "127.0.0.1", 8001}},
       false},
      {"tcp conflict with the node's 0.0.0.0",
       {{"TCP", "127.0.0.1", 8001}},
       {{"TCP", "0.0.0.0", 8001}},
       false},
      {"different protocol on 0.0.0.0",
       {{"UDP", "127.0.0.1", 8001}},
       {{"TCP", "0.0.0.0", 8001}},
       true},
      {"udp conflict with the node's 0.0.0.0",
       {{"UDP", "127.0.0.1", 8001}},
       {{"TCP", "0.0.0.0", 8001}, {"UDP", "0.0.0.0", 8001}},
       false},
      {"unset ip and protocol default to 0.0.0.0 and TCP",
       {{"", "", 80}},
       {{"TCP", "10.0.0.1", 80}},
       false},
  };
  NodePorts plugin;
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    sdk::PodInfoPtr pod = sdk::PodInfo::Create(PodWithPorts(tc.want));
    sdk::NodeInfo node = MakeNodeInfo(NodeBuilder().Build(), {PodWithPorts(tc.used, "existing")});
    FakeSnapshot snapshot;
    sdk::CycleState state;
    auto [result, pre] = plugin.PreFilter(state, *pod, snapshot);
    if (tc.want.empty()) {
      EXPECT_TRUE(pre.IsSkip());
      continue;
    }
    ASSERT_TRUE(pre.IsSuccess());
    sdk::Status status = plugin.Filter(state, *pod, node);
    if (tc.fits) {
      EXPECT_TRUE(status.IsSuccess()) << status.Message();
    } else {
      EXPECT_EQ(status.code(), sdk::Code::kUnschedulable);
      EXPECT_THAT(status.reasons(),
                  ElementsAre("node(s) didn't have free ports for the requested pod ports"));
    }
  }
}

TEST(NodePortsTest, QueueingHint) {
  struct Case {
    std::string name;
    v1::Pod deleted;
    sdk::QueueingHint want;
  };
  const v1::Pod pod = PodWithPorts({{"TCP", "", 8080}});
  const std::vector<Case> cases = {
      {"unassigned pod deleted", PodWithPorts({{"TCP", "", 8080}}, "d"),
       sdk::QueueingHint::kQueueSkip},
      {"assigned pod holding the port deleted",
       PodBuilder(PodWithPorts({{"TCP", "", 8080}}, "d").meta().name())
           .HostPort(8080)
           .NodeName("n")
           .Build(),
       sdk::QueueingHint::kQueue},
      {"assigned pod holding another port deleted",
       PodBuilder("d").HostPort(9090).NodeName("n").Build(), sdk::QueueingHint::kQueueSkip},
      {"assigned pod without ports deleted", PodBuilder("d").NodeName("n").Build(),
       sdk::QueueingHint::kQueueSkip},
      {"nominated pod holding the port deleted", [] {
         v1::Pod p = PodBuilder("d").HostPort(8080).Build();
         p.set_nominated_node_name("n");
         return p;
       }(), sdk::QueueingHint::kQueue},
  };
  NodePorts plugin;
  auto events = plugin.EventsToRegister();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].resource, v1::POD);
  EXPECT_EQ(events[0].action_mask, static_cast<uint32_t>(v1::DELETE));
  EXPECT_EQ(events[1].resource, v1::NODE);
  EXPECT_EQ(events[1].action_mask, static_cast<uint32_t>(v1::ADD));
  EXPECT_FALSE(events[1].hint);
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    v1::ClusterEvent e;
    e.set_resource(v1::POD);
    e.set_action(v1::DELETE);
    *e.mutable_old_pod() = tc.deleted;
    EXPECT_EQ(events[0].hint(pod, e), tc.want);
  }
}

// Through the event registration: a new node or the deletion of a pod holding
// a wanted port requeues the pod; pod additions and node updates do not.
TEST(NodePortsTest, RequeuesOnlyWhenAWantedPortIsFreed) {
  using namespace testing;  // Event builders.
  const v1::Pod pod = PodBuilder("p").HostPort(8080).Build();
  const v1::Pod holder = PodBuilder("d").HostPort(8080).NodeName("n").Build();
  const v1::Pod other_port = PodBuilder("d").HostPort(9090).NodeName("n").Build();
  const v1::Node node = NodeBuilder("n").Build();
  v1::Node labelled = node;
  (*labelled.mutable_meta()->mutable_labels())["k"] = "v";
  const auto events = NodePorts().EventsToRegister();
  EXPECT_TRUE(Requeues(events, pod, PodDeleted(holder)));
  EXPECT_TRUE(Requeues(events, pod, NodeAdded(node)));
  EXPECT_FALSE(Requeues(events, pod, PodDeleted(other_port)));
  EXPECT_FALSE(Requeues(events, pod, PodAdded(holder)));
  EXPECT_FALSE(Requeues(events, pod, NodeUpdated(node, labelled, v1::UPDATE_NODE_LABEL)));
}

}  // namespace
}  // namespace podium::plugins
