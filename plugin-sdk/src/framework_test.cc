#include "podium/sdk/framework.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podium::sdk {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kMi = 1024 * 1024;

v1::Container MakeContainer(int64_t milli_cpu, int64_t memory, bool restartable = false) {
  v1::Container c;
  c.mutable_requests()->set_milli_cpu(milli_cpu);
  c.mutable_requests()->set_memory_bytes(memory);
  c.set_restartable(restartable);
  return c;
}

struct PodRequestsCase {
  std::string name;
  std::vector<v1::Container> containers;
  std::vector<v1::Container> init_containers;
  std::optional<std::pair<int64_t, int64_t>> overhead;
  int64_t want_cpu;
  int64_t want_memory;
  int64_t want_non_zero_cpu;
  int64_t want_non_zero_memory;
};
// ctest lists the case by its name, not as a dump of its bytes.
void PrintTo(const PodRequestsCase& c, std::ostream* os) { *os << c.name; }

class PodRequestsTest : public ::testing::TestWithParam<PodRequestsCase> {};

TEST_P(PodRequestsTest, EffectiveRequests) {
  const PodRequestsCase& tc = GetParam();
  v1::Pod pod;
  pod.mutable_meta()->set_uid("u");
  for (const auto& c : tc.containers) *pod.add_containers() = c;
  for (const auto& c : tc.init_containers) *pod.add_init_containers() = c;
  if (tc.overhead) {
    pod.mutable_overhead()->set_milli_cpu(tc.overhead->first);
    pod.mutable_overhead()->set_memory_bytes(tc.overhead->second);
  }
  PodInfoPtr info = PodInfo::Create(pod);
  EXPECT_EQ(info->requests.milli_cpu, tc.want_cpu);
  EXPECT_EQ(info->requests.memory, tc.want_memory);
  EXPECT_EQ(info->non_zero_milli_cpu, tc.want_non_zero_cpu);
  EXPECT_EQ(info->non_zero_memory, tc.want_non_zero_memory);
  EXPECT_EQ(info->uid(), "u");
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PodRequestsTest,
    ::testing::Values(
        PodRequestsCase{"no containers", {}, {}, {}, 0, 0, 0, 0},
        PodRequestsCase{"containers are summed",
                        {MakeContainer(100, 100 * kMi), MakeContainer(200, 50 * kMi)},
                        {},
                        {},
                        300,
                        150 * kMi,
                        300,
                        150 * kMi},
        PodRequestsCase{"an empty container counts with the non-zero defaults for scoring",
                        {MakeContainer(0, 0), MakeContainer(300, 0)},
                        {},
                        {},
                        300,
                        0,
                        400,
                        400 * kMi},
        PodRequestsCase{"the largest init container wins per resource",
                        {MakeContainer(100, 100 * kMi)},
                        {MakeContainer(500, 10 * kMi), MakeContainer(50, 300 * kMi)},
                        {},
                        500,
                        300 * kMi,
                        500,
                        300 * kMi},
        PodRequestsCase{"init containers smaller than the containers do not count",
                        {MakeContainer(1000, 1000 * kMi)},
                        {MakeContainer(500, 500 * kMi)},
                        {},
                        1000,
                        1000 * kMi,
                        1000,
                        1000 * kMi},
        PodRequestsCase{"sidecars add to the containers",
                        {MakeContainer(100, 100 * kMi)},
                        {MakeContainer(50, 50 * kMi, /*restartable=*/true)},
                        {},
                        150,
                        150 * kMi,
                        150,
                        150 * kMi},
        PodRequestsCase{"an init container runs beside the sidecars started before it",
                        {MakeContainer(100, 100 * kMi)},
                        {MakeContainer(50, 50 * kMi, true), MakeContainer(200, 10 * kMi)},
                        {},
                        250,
                        150 * kMi,
                        250,
                        150 * kMi},
        PodRequestsCase{"an init container before the sidecar runs alone",
                        {MakeContainer(100, 100 * kMi)},
                        {MakeContainer(200, 10 * kMi), MakeContainer(50, 50 * kMi, true)},
                        {},
                        200,
                        150 * kMi,
                        200,
                        150 * kMi},
        PodRequestsCase{"overhead is added after the max",
                        {MakeContainer(100, 100 * kMi)},
                        {MakeContainer(500, 10 * kMi)},
                        std::make_pair(int64_t{10}, 5 * kMi),
                        510,
                        105 * kMi,
                        510,
                        105 * kMi},
        PodRequestsCase{"an empty init container still counts the defaults for scoring",
                        {MakeContainer(50, 10 * kMi)},
                        {MakeContainer(0, 0)},
                        {},
                        50,
                        10 * kMi,
                        100,
                        200 * kMi}),
    [](const ::testing::TestParamInfo<PodRequestsCase>& info) {
      std::string n = info.param.name;
      for (char& c : n) {
        if (!isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return n;
    });

TEST(PodInfoTest, ScalarAndEphemeralRequests) {
  v1::Pod pod;
  v1::Container* c = pod.add_containers();
  c->mutable_requests()->set_ephemeral_storage_bytes(10);
  (*c->mutable_requests()->mutable_scalar())["nvidia.com/gpu"] = 1;
  v1::Container* init = pod.add_init_containers();
  (*init->mutable_requests()->mutable_scalar())["nvidia.com/gpu"] = 2;
  (*init->mutable_requests()->mutable_scalar())["example.com/foo"] = 3;
  PodInfoPtr info = PodInfo::Create(pod);
  EXPECT_EQ(info->requests.ephemeral_storage, 10);
  EXPECT_EQ(info->requests.Get("nvidia.com/gpu"), 2);
  EXPECT_EQ(info->requests.Get("example.com/foo"), 3);
  EXPECT_EQ(info->requests.Get("unknown.com/bar"), 0);
}

TEST(PodInfoTest, HostPortsWithDefaults) {
  v1::Pod pod;
  v1::Container* c = pod.add_containers();
  c->add_ports()->set_container_port(80);  // No host port: ignored.
  v1::ContainerPort* p = c->add_ports();
  p->set_container_port(8080);
  p->set_host_port(8080);
  p = c->add_ports();
  p->set_host_port(53);
  p->set_protocol("UDP");
  p->set_host_ip("10.0.0.1");
  v1::ContainerPort* ip = pod.add_init_containers()->add_ports();
  ip->set_host_port(9000);
  PodInfoPtr info = PodInfo::Create(pod);
  EXPECT_THAT(info->host_ports,
              ElementsAre(HostPort{"0.0.0.0", "TCP", 8080}, HostPort{"10.0.0.1", "UDP", 53},
                          HostPort{"0.0.0.0", "TCP", 9000}));
}

v1::Pod MakePod(std::string uid, int64_t milli_cpu, int64_t memory, int32_t host_port = 0) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid(std::move(uid));
  v1::Container* c = pod.add_containers();
  *c = MakeContainer(milli_cpu, memory);
  (*c->mutable_requests()->mutable_scalar())["example.com/dev"] = 1;
  if (host_port > 0) c->add_ports()->set_host_port(host_port);
  return pod;
}

// Defect 11: a pod requesting 2 x 5e15 CPUs summed past int64, went negative
// and was bound to a 4-CPU node. Sums saturate instead of wrapping.
TEST(PodInfoTest, RequestSumsSaturateInsteadOfWrapping) {
  v1::Pod pod;
  pod.mutable_meta()->set_uid("u");
  pod.add_containers()->mutable_requests()->set_milli_cpu(5'000'000'000'000'000'000);
  pod.add_containers()->mutable_requests()->set_milli_cpu(5'000'000'000'000'000'000);
  (*pod.mutable_containers(0)->mutable_requests()->mutable_scalar())["example.com/x"] = INT64_MAX;
  (*pod.mutable_containers(1)->mutable_requests()->mutable_scalar())["example.com/x"] = 1;
  pod.mutable_overhead()->set_memory_bytes(INT64_MAX);
  pod.mutable_containers(0)->mutable_requests()->set_memory_bytes(1);
  auto info = PodInfo::Create(pod);
  EXPECT_EQ(info->requests.milli_cpu, INT64_MAX);
  EXPECT_EQ(info->requests.memory, INT64_MAX);
  EXPECT_EQ(info->requests.Get("example.com/x"), INT64_MAX);
  EXPECT_EQ(info->non_zero_milli_cpu, INT64_MAX);
  EXPECT_EQ(info->non_zero_memory, INT64_MAX);

  auto node = std::make_shared<v1::Node>();
  node->mutable_allocatable()->set_milli_cpu(4000);
  NodeInfo n(1, node);
  n.AddPod(info);
  n.AddPod(info);  // Two such pods: still "full", never negative.
  EXPECT_EQ(n.requested().milli_cpu, INT64_MAX);
  EXPECT_EQ(n.non_zero_requested_milli_cpu(), INT64_MAX);
  EXPECT_GT(n.requested().milli_cpu, n.allocatable().milli_cpu);
  EXPECT_EQ(SaturatingAdd(INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(SaturatingAdd(40, 2), 42);
}

TEST(NodeInfoTest, AllocatableFromNode) {
  auto node = std::make_shared<v1::Node>();
  node->mutable_meta()->set_name("n1");
  node->mutable_allocatable()->set_milli_cpu(4000);
  node->mutable_allocatable()->set_memory_bytes(8 * 1024 * kMi);
  node->mutable_allocatable()->set_pods(110);
  (*node->mutable_allocatable()->mutable_scalar())["nvidia.com/gpu"] = 4;
  NodeInfo info(7, node);
  EXPECT_EQ(info.id(), 7u);
  EXPECT_EQ(info.name(), "n1");
  EXPECT_EQ(info.allocatable().milli_cpu, 4000);
  EXPECT_EQ(info.allocatable().memory, 8 * 1024 * kMi);
  EXPECT_EQ(info.allocatable().allowed_pod_number, 110);
  EXPECT_EQ(info.allocatable().Get("pods"), 110);
  EXPECT_EQ(info.allocatable().Get("nvidia.com/gpu"), 4);

  auto updated = std::make_shared<v1::Node>(*node);
  updated->mutable_allocatable()->set_milli_cpu(2000);
  info.SetNode(updated);
  EXPECT_EQ(info.allocatable().milli_cpu, 2000);
}

TEST(NodeInfoTest, AddAndRemovePods) {
  auto node = std::make_shared<v1::Node>();
  node->mutable_meta()->set_name("n1");
  NodeInfo info(1, node);
  info.AddPod(PodInfo::Create(MakePod("a", 100, 100 * kMi, 8080)));
  info.AddPod(PodInfo::Create(MakePod("b", 0, 0)));
  info.AddPod(PodInfo::Create(MakePod("c", 300, 10 * kMi, 8080)));

  EXPECT_EQ(info.pods().size(), 3u);
  EXPECT_EQ(info.requested().milli_cpu, 400);
  EXPECT_EQ(info.requested().memory, 110 * kMi);
  EXPECT_EQ(info.requested().Get("example.com/dev"), 3);
  EXPECT_EQ(info.non_zero_requested_milli_cpu(), 500);
  EXPECT_EQ(info.non_zero_requested_memory(), 310 * kMi);
  EXPECT_EQ(info.used_ports().size(), 2u);
  ASSERT_NE(info.FindPod("b"), nullptr);
  EXPECT_EQ(info.FindPod("b")->uid(), "b");
  EXPECT_EQ(info.FindPod("zzz"), nullptr);

  EXPECT_TRUE(info.RemovePod("a"));
  EXPECT_FALSE(info.RemovePod("a"));
  EXPECT_EQ(info.pods().size(), 2u);
  EXPECT_EQ(info.requested().milli_cpu, 300);
  EXPECT_EQ(info.non_zero_requested_milli_cpu(), 400);
  EXPECT_EQ(info.requested().Get("example.com/dev"), 2);
  // c still holds 8080.
  EXPECT_THAT(info.used_ports(), ElementsAre(HostPort{"0.0.0.0", "TCP", 8080}));

  EXPECT_TRUE(info.RemovePod("c"));
  EXPECT_TRUE(info.RemovePod("b"));
  EXPECT_THAT(info.pods(), IsEmpty());
  EXPECT_THAT(info.used_ports(), IsEmpty());
  EXPECT_EQ(info.requested().milli_cpu, 0);
  EXPECT_EQ(info.requested().memory, 0);
  EXPECT_EQ(info.non_zero_requested_milli_cpu(), 0);
  EXPECT_EQ(info.non_zero_requested_memory(), 0);
  EXPECT_EQ(info.requested().Get("example.com/dev"), 0);
}

TEST(NodeInfoTest, CopyIsIndependent) {
  NodeInfo info(1, std::make_shared<v1::Node>());
  info.AddPod(PodInfo::Create(MakePod("a", 100, 0)));
  NodeInfo copy = info;
  copy.AddPod(PodInfo::Create(MakePod("b", 100, 0)));
  EXPECT_EQ(info.requested().milli_cpu, 100);
  EXPECT_EQ(copy.requested().milli_cpu, 200);
}

TEST(ResourceTest, AddSubtractSetMax) {
  Resource a;
  a.milli_cpu = 100;
  a.memory = 10;
  a.scalar["x/y"] = 1;
  Resource b;
  b.milli_cpu = 50;
  b.memory = 20;
  b.ephemeral_storage = 5;
  b.scalar["x/y"] = 3;
  b.scalar["x/z"] = 2;

  Resource sum = a;
  sum.Add(b);
  EXPECT_EQ(sum.milli_cpu, 150);
  EXPECT_EQ(sum.Get("memory"), 30);
  EXPECT_EQ(sum.Get("ephemeral-storage"), 5);
  EXPECT_EQ(sum.Get("x/y"), 4);
  EXPECT_EQ(sum.Get("x/z"), 2);
  sum.Subtract(b);
  EXPECT_EQ(sum.milli_cpu, 100);
  EXPECT_EQ(sum.Get("x/y"), 1);

  Resource max = a;
  max.SetMax(b);
  EXPECT_EQ(max.milli_cpu, 100);
  EXPECT_EQ(max.memory, 20);
  EXPECT_EQ(max.Get("x/y"), 3);
  EXPECT_EQ(max.Get("x/z"), 2);
  EXPECT_EQ(max.Get("cpu"), 100);
}

TEST(ResourceTest, FromProto) {
  v1::ResourceList list;
  list.set_milli_cpu(1);
  list.set_memory_bytes(2);
  list.set_ephemeral_storage_bytes(3);
  list.set_pods(4);
  (*list.mutable_scalar())["hugepages-2Mi"] = 5;
  Resource r = Resource::FromProto(list);
  EXPECT_EQ(r.milli_cpu, 1);
  EXPECT_EQ(r.memory, 2);
  EXPECT_EQ(r.ephemeral_storage, 3);
  EXPECT_EQ(r.allowed_pod_number, 4);
  EXPECT_EQ(r.Get("hugepages-2Mi"), 5);
}

TEST(StatusTest, MessageAndCodes) {
  Status s(Code::kUnschedulable, std::vector<std::string>{"Insufficient cpu", "Too many pods"});
  EXPECT_EQ(s.Message(), "Insufficient cpu, Too many pods");
  EXPECT_TRUE(s.IsRejected());
  EXPECT_FALSE(s.IsSuccess());
  EXPECT_TRUE(Status().IsSuccess());
  EXPECT_TRUE(Status(Code::kSkip).IsSkip());
  EXPECT_EQ(CodeName(Code::kUnschedulableAndUnresolvable), "UnschedulableAndUnresolvable");
  EXPECT_EQ(CodeName(Code::kSuccess), "Success");
  EXPECT_EQ(CodeName(Code::kPending), "Pending");
}

TEST(StatusTest, ProtoRoundTrip) {
  Status s(Code::kUnschedulableAndUnresolvable, "node(s) were unschedulable");
  s.WithPlugin("NodeUnschedulable");
  v1::Status proto;
  s.ToProto(&proto);
  EXPECT_EQ(proto.code(), v1::Status::UNSCHEDULABLE_AND_UNRESOLVABLE);
  EXPECT_EQ(proto.plugin(), "NodeUnschedulable");
  ASSERT_EQ(proto.reasons_size(), 1);
  Status back = Status::FromProto(proto);
  EXPECT_EQ(back.code(), Code::kUnschedulableAndUnresolvable);
  EXPECT_EQ(back.plugin(), "NodeUnschedulable");
  EXPECT_THAT(back.reasons(), ElementsAre("node(s) were unschedulable"));
}

TEST(StatusTest, UnknownCodeFromTheWireIsAnError) {
  v1::Status proto;
  proto.set_code(static_cast<v1::Status::Code>(42));
  Status s = Status::FromProto(proto);
  EXPECT_EQ(s.code(), Code::kError);
  EXPECT_FALSE(s.reasons().empty());
}

struct Counter : StateData {
  int value = 0;
  std::unique_ptr<StateData> Clone() const override { return std::make_unique<Counter>(*this); }
};

TEST(CycleStateTest, WriteReadDeleteClone) {
  CycleState state;
  EXPECT_EQ(state.Read("k"), nullptr);
  auto c = std::make_unique<Counter>();
  c->value = 1;
  state.Write("k", std::move(c));
  ASSERT_NE(state.ReadAs<Counter>("k"), nullptr);
  EXPECT_EQ(state.ReadAs<Counter>("k")->value, 1);
  state.skip_filter_plugins().insert("NodePorts");

  std::unique_ptr<CycleState> clone = state.Clone();
  clone->ReadAs<Counter>("k")->value = 2;
  EXPECT_EQ(state.ReadAs<Counter>("k")->value, 1);
  EXPECT_EQ(clone->ReadAs<Counter>("k")->value, 2);
  EXPECT_TRUE(clone->skip_filter_plugins().contains("NodePorts"));

  state.Delete("k");
  EXPECT_EQ(state.Read("k"), nullptr);
  EXPECT_NE(clone->Read("k"), nullptr);
}

}  // namespace
}  // namespace podium::sdk
