#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <fstream>

#include <boost/json.hpp>

#include "sim/report.h"
#include "sim/sim_run.h"
#include "sim/spawner.h"
#include "sim/workload.h"

namespace podium::sim {
namespace {

TEST(PercentileTest, NearestRank) {
  EXPECT_FALSE(Percentile({}, 50).has_value());
  EXPECT_EQ(*Percentile({3, 1, 2}, 50), 2);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_EQ(*Percentile(hundred, 99), 99);
  EXPECT_EQ(*Percentile(hundred, 100), 100);
  EXPECT_EQ(*Percentile({7}, 99), 7);
}

TEST(WorkloadTest, BasicShapes) {
  auto shape = FindWorkload("basic-500");
  ASSERT_TRUE(shape);
  k8s::LoadedCluster c = GenerateWorkload(*shape, absl::Now());
  ASSERT_EQ(c.nodes.size(), 500u);
  EXPECT_EQ(c.nodes[0].allocatable().milli_cpu(), 4000);
  EXPECT_EQ(c.nodes[0].allocatable().memory_bytes(), 32LL << 30);
  EXPECT_EQ(c.nodes[0].allocatable().pods(), 110);
  ASSERT_EQ(c.pods.size(), 1500u);
  EXPECT_FALSE(c.pods[499].create_later);
  EXPECT_TRUE(c.pods[500].create_later);
  EXPECT_EQ(c.pods[0].pod.containers(0).requests().milli_cpu(), 100);
  EXPECT_EQ(c.pods[0].pod.containers(0).requests().memory_bytes(), 500LL << 20);
  auto big = FindWorkload("basic-5000");
  ASSERT_TRUE(big);
  EXPECT_EQ(big->nodes, 5000);
  EXPECT_EQ(big->init_pods, 1000);
  EXPECT_EQ(big->measured_pods, 10000);
  EXPECT_FALSE(FindWorkload("basic-7"));
}

TEST(ReportTest, JsonHasTheMachineFields) {
  Report r;
  r.workload = "basic-500";
  r.measured_pods = 2;
  r.e2e_p50_ms = 1.5;
  r.placements.push_back({"ns", "a", "n1"});
  r.unschedulable_pods.push_back({"ns", "b", "0/1 nodes are available: 1 Insufficient cpu."});
  r.unschedulable_pods.push_back({"ns", "c", "0/1 nodes are available: 1 Insufficient cpu.", "n1"});
  boost::json::object o = boost::json::parse(ReportJson(r)).as_object();
  EXPECT_EQ(o["workload"].as_string(), "basic-500");
  EXPECT_EQ(o["e2e_p50_ms"].as_double(), 1.5);
  EXPECT_TRUE(o["attempt_p50_ms"].is_null());
  EXPECT_TRUE(o["first_bind_ms"].is_null());
  r.first_bind_ms = 312.5;
  EXPECT_EQ(boost::json::parse(ReportJson(r)).as_object()["first_bind_ms"].as_double(), 312.5);
  EXPECT_THAT(ReportText(r, 10), ::testing::HasSubstr("first bind 312.50 ms"));
  EXPECT_TRUE(o["scheduler_peak_rss_mb"].is_null());
  EXPECT_EQ(o["placements"].as_array().size(), 1u);
  EXPECT_EQ(o["unschedulable_pods"].as_array()[0].as_object()["message"].as_string(),
            "0/1 nodes are available: 1 Insufficient cpu.");
  EXPECT_EQ(o["unschedulable_pods"].as_array()[0].as_object()["nominated_node"].as_string(), "");
  EXPECT_EQ(o["unschedulable_pods"].as_array()[1].as_object()["nominated_node"].as_string(), "n1");
  EXPECT_THAT(ReportText(r, 10), ::testing::HasSubstr("ns/b: 0/1 nodes are available"));
  EXPECT_THAT(ReportText(r, 10), ::testing::HasSubstr("ns/c: 0/1 nodes are available: 1 Insufficient cpu. (nominated to n1)"));
}

TEST(ReportTest, PerPodCostPerProcess) {
  Report r;
  EXPECT_FALSE(boost::json::parse(ReportJson(r)).as_object().contains("cost"));
  r.scheduler_cost = Report::Cost{0.61234, 19.456};
  r.sim_cost = Report::Cost{0.5, 12};
  boost::json::object o = boost::json::parse(ReportJson(r)).as_object();
  boost::json::object& cost = o["cost"].as_object();
  EXPECT_DOUBLE_EQ(cost["scheduler"].as_object()["cpu_ms_per_pod"].as_double(), 0.6123);
  EXPECT_DOUBLE_EQ(cost["scheduler"].as_object()["context_switches_per_pod"].as_double(), 19.46);
  EXPECT_FALSE(cost.contains("plugin_host"));
  EXPECT_THAT(ReportText(r, 0), ::testing::HasSubstr("scheduler 0.612 ms, 19.5; plugin host n/a; podium-sim 0.500 ms, 12.0"));
}

TEST(ProcessCostTest, ReadsCpuAndContextSwitchesOfALiveProcess) {
  // Burn some CPU and sleep a few times so both counters move.
  volatile double x = 0;
  for (int i = 0; i < 20'000'000; ++i) x = x + i * 0.5;
  for (int i = 0; i < 3; ++i) absl::SleepFor(absl::Milliseconds(1));
  std::optional<ProcessCost> cost = CostOf(getpid());
  ASSERT_TRUE(cost.has_value());
  EXPECT_GT(cost->cpu_seconds, 0);
  EXPECT_GE(cost->context_switches, 3u);
  EXPECT_GT(OwnCost().cpu_seconds, 0);
  EXPECT_FALSE(CostOf(-1).has_value());  // No such process: no numbers.
}

// Defect 18: errors were counted as unschedulable and the run exited 0.
TEST(ReportTest, SchedulingErrorsAreReportedApart) {
  Report r;
  r.outcome = "scheduling_errors";
  r.scheduling_errors = 1;
  r.error_attempts = 3;
  r.error_pods.push_back({"ns", "c", "running Filter on endpoint host: UNAVAILABLE"});
  boost::json::object o = boost::json::parse(ReportJson(r)).as_object();
  EXPECT_EQ(o["outcome"].as_string(), "scheduling_errors");
  EXPECT_EQ(o["scheduling_errors"].as_int64(), 1);
  EXPECT_EQ(o["error_attempts"].as_int64(), 3);
  EXPECT_EQ(o["unschedulable"].as_int64(), 0);
  EXPECT_EQ(o["error_pods"].as_array()[0].as_object()["message"].as_string(),
            "running Filter on endpoint host: UNAVAILABLE");
  const std::string text = ReportText(r, 10);
  EXPECT_THAT(text, ::testing::HasSubstr("Scheduling errors"));
  EXPECT_THAT(text, ::testing::HasSubstr("0 unschedulable, 1 scheduling errors"));
}

// Item 7: --spawn needed an endpoint named "host" and said nothing about it.
TEST(SpawnEndpointTest, TheConfigMustDeclareThePluginHostEndpoint) {
  SimOptions o;
  EXPECT_TRUE(CheckSpawnEndpoint(o).ok());  // The default config's one endpoint is "host".
  o.plugin_host_endpoint = "plugins";
  absl::Status s = CheckSpawnEndpoint(o);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("declares only host"));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("--plugin-host-endpoint"));

  const std::string path = ::testing::TempDir() + "/sim_spawn_config.yaml";
  {
    std::ofstream out(path);
    out << "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n---\n"
           "apiVersion: podium.dev/v1alpha1\nkind: PodiumConfiguration\npluginEndpoints:\n"
           "- name: plugins\n  address: unix:///tmp/x.sock\n"
           "  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,\n"
           "            NodeResourcesFit, NodeResourcesBalancedAllocation, ImageLocality,\n"
           "            PodTopologySpread, InterPodAffinity]\n";
  }
  o.config = path;
  EXPECT_TRUE(CheckSpawnEndpoint(o).ok()) << CheckSpawnEndpoint(o);
  o.plugin_host_endpoint = "host";
  s = CheckSpawnEndpoint(o);
  EXPECT_THAT(s.message(), ::testing::HasSubstr("endpoint \"host\""));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("declares only plugins"));

  const char* flag[] = {"podium-sim", "--workload", "basic-500", "--spawn", "--plugin-host-endpoint", "plugins"};
  auto parsed = ParseSimArgs(std::size(flag), const_cast<char**>(flag));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->plugin_host_endpoint, "plugins");
}

TEST(SimArgsTest, ParsesAndRefuses) {
  const char* ok[] = {"podium-sim", "--cluster", "a.yaml", "--cluster=dir", "--spawn", "--api-latency", "5ms",
                      "--output", "json", "--plugin-endpoint", "py=unix:///tmp/p.sock", "--create-rate", "100"};
  auto o = ParseSimArgs(std::size(ok), const_cast<char**>(ok));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->clusters.size(), 2u);
  EXPECT_EQ(o->api_latency, absl::Milliseconds(5));
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->create_rate, 100);
  EXPECT_THAT(o->scheduler_bin, ::testing::EndsWith("services/scheduler/podium-scheduler"));

  const char* both[] = {"podium-sim", "--cluster", "a.yaml", "--workload", "basic-500", "--spawn"};
  EXPECT_FALSE(ParseSimArgs(std::size(both), const_cast<char**>(both)).ok());
  const char* no_sched[] = {"podium-sim", "--cluster", "a.yaml"};
  EXPECT_FALSE(ParseSimArgs(std::size(no_sched), const_cast<char**>(no_sched)).ok());
  const char* bad_dur[] = {"podium-sim", "--workload", "basic-500", "--spawn", "--timeout", "soon"};
  EXPECT_FALSE(ParseSimArgs(std::size(bad_dur), const_cast<char**>(bad_dur)).ok());
  const char* unknown[] = {"podium-sim", "--workload", "basic-500", "--spawn", "--frobnicate"};
  EXPECT_FALSE(ParseSimArgs(std::size(unknown), const_cast<char**>(unknown)).ok());
}

}  // namespace
}  // namespace podium::sim
