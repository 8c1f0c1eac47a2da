#include "config/config.h"

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "boost/json/serialize.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Names(const std::vector<PluginRef>& refs) {
  std::vector<std::string> out;
  for (const auto& r : refs) out.push_back(r.name);
  return out;
}

int WeightOf(const std::vector<PluginRef>& refs, const std::string& name) {
  for (const auto& r : refs) {
    if (r.name == name) return r.weight;
  }
  return -1;
}

constexpr char kFullExample[] = R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 0
podInitialBackoffSeconds: 2
podMaxBackoffSeconds: 20
profiles:
- schedulerName: default-scheduler
  percentageOfNodesToScore: 30
  plugins:
    multiPoint:
      enabled: [{name: Foo, weight: 2}]
      disabled: [{name: ImageLocality}]
    score:
      enabled: [{name: NodeResourcesFit, weight: 5}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated, resources: [{name: cpu, weight: 1}]}}
- schedulerName: no-defaults
  plugins:
    multiPoint:
      enabled: [{name: PrioritySort}, {name: Foo}, {name: DefaultBinder}]
      disabled: [{name: "*"}]
---
apiVersion: podium.dev/v1alpha1
kind: PodiumConfiguration
pluginEndpoints:
- name: host
  address: unix:///run/podium/host.sock
  failurePolicy: Fail
  timeout: 2s
  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality]
- name: foo
  address: localhost:7070
  failurePolicy: Ignore
  timeout: 500ms
  plugins: [Foo]
)";

TEST(ConfigTest, DefaultConfigIsKubesDefaultProfile) {
  SchedulerConfig c = DefaultConfig("unix:///tmp/h.sock");
  EXPECT_EQ(c.percentage_of_nodes_to_score, 0);
  EXPECT_EQ(c.initial_backoff, absl::Seconds(1));
  EXPECT_EQ(c.max_backoff, absl::Seconds(10));
  EXPECT_EQ(c.max_in_unschedulable, absl::Minutes(5));
  ASSERT_EQ(c.profiles.size(), 1u);
  EXPECT_EQ(c.profiles[0].scheduler_name, "default-scheduler");
  EXPECT_FALSE(c.profiles[0].percentage_of_nodes_to_score.has_value());
  EXPECT_THAT(Names(c.profiles[0].multi_point.enabled),
              ElementsAre("SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName",
                          "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                          "PodTopologySpread", "InterPodAffinity",
                          "NodeResourcesBalancedAllocation", "ImageLocality", "Coscheduling",
                          "DefaultBinder"));
  EXPECT_EQ(WeightOf(c.profiles[0].multi_point.enabled, "TaintToleration"), 3);
  EXPECT_EQ(WeightOf(c.profiles[0].multi_point.enabled, "NodeAffinity"), 2);
  EXPECT_EQ(WeightOf(c.profiles[0].multi_point.enabled, "PodTopologySpread"), 2);
  EXPECT_EQ(WeightOf(c.profiles[0].multi_point.enabled, "InterPodAffinity"), 2);
  EXPECT_EQ(WeightOf(c.profiles[0].multi_point.enabled, "ImageLocality"), 1);
  ASSERT_EQ(c.endpoints.size(), 1u);
  EXPECT_EQ(c.endpoints[0].name, "host");
  EXPECT_EQ(c.endpoints[0].address, "unix:///tmp/h.sock");
  EXPECT_EQ(c.endpoints[0].failure_policy, FailurePolicy::kFail);
  EXPECT_EQ(c.endpoints[0].timeout, absl::Seconds(1));
  EXPECT_EQ(c.endpoints[0].plugins.size(), 11u);
  EXPECT_EQ(c.EndpointFor("NodeAffinity"), &c.endpoints[0]);
  EXPECT_EQ(c.EndpointFor("PrioritySort"), nullptr);
}

TEST(ConfigTest, EmptyFileGivesDefaults) {
  for (const char* yaml : {"", "---\n", R"(apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
)"}) {
    absl::StatusOr<SchedulerConfig> c = ParseConfig(yaml);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_EQ(c->profiles.size(), 1u);
    EXPECT_EQ(c->profiles[0].multi_point.enabled, DefaultConfig().profiles[0].multi_point.enabled);
    ASSERT_EQ(c->endpoints.size(), 1u);
    EXPECT_EQ(c->endpoints[0].address, "unix:///run/podium/host.sock");
  }
}

TEST(ConfigTest, FullExample) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(kFullExample);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->percentage_of_nodes_to_score, 0);
  EXPECT_EQ(c->initial_backoff, absl::Seconds(2));
  EXPECT_EQ(c->max_backoff, absl::Seconds(20));
  ASSERT_EQ(c->profiles.size(), 2u);

  const ProfileConfig& p = c->profiles[0];
  EXPECT_EQ(p.percentage_of_nodes_to_score, 30);
  // Defaults minus ImageLocality, then Foo appended.
  EXPECT_THAT(Names(p.multi_point.enabled),
              ElementsAre("SchedulingGates", "PrioritySort", "NodeUnschedulable", "NodeName",
                          "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
                          "PodTopologySpread", "InterPodAffinity",
                          "NodeResourcesBalancedAllocation", "Coscheduling", "DefaultBinder", "Foo"));
  EXPECT_EQ(WeightOf(p.multi_point.enabled, "Foo"), 2);
  EXPECT_THAT(p.multi_point.disabled, ElementsAre("ImageLocality"));
  ASSERT_TRUE(p.per_point.contains("score"));
  EXPECT_THAT(p.per_point.at("score").enabled, ElementsAre(PluginRef{"NodeResourcesFit", 5}));
  ASSERT_TRUE(p.plugin_args.contains("NodeResourcesFit"));
  EXPECT_EQ(boost::json::serialize(p.plugin_args.at("NodeResourcesFit")),
            R"({"scoringStrategy":{"type":"MostAllocated","resources":[{"name":"cpu","weight":1}]}})");

  const ProfileConfig& q = c->profiles[1];
  EXPECT_EQ(q.scheduler_name, "no-defaults");
  EXPECT_THAT(Names(q.multi_point.enabled), ElementsAre("PrioritySort", "Foo", "DefaultBinder"));

  ASSERT_EQ(c->endpoints.size(), 2u);
  EXPECT_EQ(c->endpoints[0].timeout, absl::Seconds(2));
  EXPECT_EQ(c->endpoints[1].name, "foo");
  EXPECT_EQ(c->endpoints[1].address, "localhost:7070");
  EXPECT_EQ(c->endpoints[1].failure_policy, FailurePolicy::kIgnore);
  EXPECT_EQ(c->endpoints[1].timeout, absl::Milliseconds(500));
  EXPECT_EQ(c->EndpointFor("Foo"), &c->endpoints[1]);
}

TEST(ConfigTest, EnabledDefaultPluginIsReplacedInPlace) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins:
    multiPoint:
      enabled: [{name: NodeAffinity, weight: 7}]
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const auto& enabled = c->profiles[0].multi_point.enabled;
  EXPECT_EQ(enabled.size(), DefaultMultiPointPlugins().size());
  EXPECT_EQ(enabled[5].name, "NodeAffinity");
  EXPECT_EQ(enabled[5].weight, 7);
  EXPECT_EQ(c->profiles[0].scheduler_name, "default-scheduler");
}

TEST(ConfigTest, PluginArgsConversion) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- pluginConfig:
  - name: NotEnabledAnywhere
    args:
      i: 42
      neg: -3
      f: 0.5
      e: 1e3
      t: true
      fl: False
      s: hello
      qi: "42"
      qb: 'true'
      n: null
      tilde: ~
      list: [1, two, 3.5]
      nested: {a: {b: [x]}}
  - name: NoArgs
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const boost::json::object& a = c->profiles[0].plugin_args.at("NotEnabledAnywhere");
  EXPECT_TRUE(a.at("i").is_int64());
  EXPECT_EQ(a.at("i").as_int64(), 42);
  EXPECT_EQ(a.at("neg").as_int64(), -3);
  EXPECT_TRUE(a.at("f").is_double());
  EXPECT_DOUBLE_EQ(a.at("f").as_double(), 0.5);
  EXPECT_DOUBLE_EQ(a.at("e").as_double(), 1000.0);
  EXPECT_EQ(a.at("t").as_bool(), true);
  EXPECT_EQ(a.at("fl").as_bool(), false);
  EXPECT_EQ(a.at("s").as_string(), "hello");
  EXPECT_EQ(a.at("qi").as_string(), "42");
  EXPECT_EQ(a.at("qb").as_string(), "true");
  EXPECT_TRUE(a.at("n").is_null());
  EXPECT_TRUE(a.at("tilde").is_null());
  EXPECT_EQ(boost::json::serialize(a.at("list")), R"([1,"two",3.5E0])");
  EXPECT_EQ(boost::json::serialize(a.at("nested")), R"({"a":{"b":["x"]}})");
  EXPECT_TRUE(c->profiles[0].plugin_args.at("NoArgs").empty());
}

TEST(ConfigTest, PodiumDocumentAlone) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(R"(
apiVersion: podium.dev/v1alpha1
kind: PodiumConfiguration
podMaxInUnschedulablePodsDuration: 1m
pluginEndpoints:
- name: host
  address: localhost:9000
  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, NodeResourcesFit, PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality]
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_in_unschedulable, absl::Minutes(1));
  ASSERT_EQ(c->endpoints.size(), 1u);
  EXPECT_EQ(c->endpoints[0].address, "localhost:9000");
  EXPECT_EQ(c->endpoints[0].timeout, absl::Seconds(1));
  EXPECT_EQ(c->profiles.size(), 1u);
}

constexpr char kKubeHeader[] =
    "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n";
constexpr char kPodiumHeader[] =
    "apiVersion: podium.dev/v1alpha1\nkind: PodiumConfiguration\n";
constexpr char kHostPlugins[] =
    "  plugins: [NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts, "
    "NodeResourcesFit, PodTopologySpread, InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality]\n";

TEST(ConfigTest, ValidationErrors) {
  struct Case {
    std::string name;
    std::string yaml;
    std::string error;
  };
  const std::string kube = kKubeHeader;
  const std::string podium = kPodiumHeader;
  const std::vector<Case> cases = {
      {"unknown plugin",
       kube + "profiles:\n- plugins:\n    filter:\n      enabled: [{name: NodeName}, {name: Fooo}]\n",
       R"(profiles[0].plugins.filter.enabled[1].name: unknown plugin "Fooo")"},
      {"unknown multiPoint plugin",
       kube + "profiles:\n- schedulerName: a\n- schedulerName: b\n  plugins:\n    multiPoint:\n"
              "      enabled: [{name: Bar}]\n",
       R"(profiles[1].plugins.multiPoint.enabled[0].name: unknown plugin "Bar")"},
      {"unknown top-level key", kube + "percentageOfNodesToScor: 10\n",
       "percentageOfNodesToScor: unknown field"},
      {"unknown profile key", kube + "profiles:\n- schedulerName: a\n  plugin: {}\n",
       "profiles[0].plugin: unknown field"},
      {"unknown extension point",
       kube + "profiles:\n- plugins:\n    filters: {enabled: []}\n",
       "profiles[0].plugins.filters: unknown field"},
      {"unknown plugin set key",
       kube + "profiles:\n- plugins:\n    filter: {enable: []}\n",
       "profiles[0].plugins.filter.enable: unknown field"},
      {"wrong type percentage", kube + "percentageOfNodesToScore: lots\n",
       R"(percentageOfNodesToScore: expected an integer, got "lots")"},
      {"quoted int is a string", kube + "podMaxBackoffSeconds: \"10\"\n",
       R"(podMaxBackoffSeconds: expected an integer, got "10")"},
      {"profiles not a list", kube + "profiles: {a: b}\n",
       "profiles: expected a list, got a mapping"},
      {"percentage too high", kube + "percentageOfNodesToScore: 101\n",
       "percentageOfNodesToScore: must be in 0..100, got 101"},
      {"profile percentage negative",
       kube + "profiles:\n- percentageOfNodesToScore: -1\n",
       "profiles[0].percentageOfNodesToScore: must be in 0..100, got -1"},
      {"zero initial backoff", kube + "podInitialBackoffSeconds: 0\n",
       "podInitialBackoffSeconds: must be greater than 0, got 0"},
      {"negative max backoff", kube + "podMaxBackoffSeconds: -5\n",
       "podMaxBackoffSeconds: must be greater than 0, got -5"},
      {"initial above max", kube + "podInitialBackoffSeconds: 20\npodMaxBackoffSeconds: 10\n",
       "podMaxBackoffSeconds: must be greater than or equal to podInitialBackoffSeconds (10 < 20)"},
      {"duplicate schedulerName",
       kube + "profiles:\n- schedulerName: x\n- schedulerName: x\n",
       R"(profiles[1].schedulerName: duplicate value "x")"},
      {"duplicate default schedulerName", kube + "profiles:\n- {}\n- schedulerName: default-scheduler\n",
       R"(profiles[1].schedulerName: duplicate value "default-scheduler")"},
      {"weight above max",
       kube + "profiles:\n- plugins:\n    score:\n      enabled: [{name: NodeAffinity, weight: 101}]\n",
       "profiles[0].plugins.score.enabled[0].weight: must be in 0..100, got 101"},
      {"negative weight",
       kube + "profiles:\n- plugins:\n    multiPoint:\n      enabled: [{name: NodeAffinity, weight: -1}]\n",
       "profiles[0].plugins.multiPoint.enabled[0].weight: must be in 0..100, got -1"},
      {"duplicate pluginConfig",
       kube + "profiles:\n- pluginConfig:\n  - name: A\n  - name: A\n",
       R"(profiles[0].pluginConfig[1].name: duplicate pluginConfig for "A")"},
      {"args not a mapping", kube + "profiles:\n- pluginConfig:\n  - name: A\n    args: [1]\n",
       "profiles[0].pluginConfig[0].args: expected a mapping, got a list"},
      {"endpoint address empty",
       podium + "pluginEndpoints:\n- name: host\n  address: \"\"\n" + kHostPlugins,
       "pluginEndpoints[0].address: must not be empty"},
      {"endpoint address missing", podium + "pluginEndpoints:\n- name: host\n" + kHostPlugins,
       "pluginEndpoints[0].address: required"},
      {"duplicate endpoint",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n" + kHostPlugins +
           "- name: host\n  address: b:1\n",
       R"(pluginEndpoints[1].name: duplicate endpoint name "host")"},
      {"unknown failure policy",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n  failurePolicy: Maybe\n" +
           kHostPlugins,
       R"(pluginEndpoints[0].failurePolicy: unknown value "Maybe" (expected Fail or Ignore))"},
      {"bad duration",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n  timeout: 2 seconds\n" +
           kHostPlugins,
       R"(pluginEndpoints[0].timeout: invalid duration "2 seconds")"},
      {"zero duration",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n  timeout: 0s\n" + kHostPlugins,
       R"(pluginEndpoints[0].timeout: duration must be positive, got "0s")"},
      {"plugin served twice",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n" + kHostPlugins +
           "- name: other\n  address: b:1\n  plugins: [Foo, NodeName]\n",
       R"(pluginEndpoints[1].plugins[1]: plugin "NodeName" is already served by endpoint "host")"},
      {"built-in plugin on an endpoint",
       podium + "pluginEndpoints:\n- name: x\n  address: a:1\n  plugins: [PrioritySort]\n",
       R"(pluginEndpoints[0].plugins[0]: plugin "PrioritySort" is built into the scheduler)"},
      {"endpoint unknown key", podium + "pluginEndpoints:\n- name: x\n  adress: a:1\n",
       "pluginEndpoints[0].adress: unknown field"},
      {"default plugin not served",
       podium + "pluginEndpoints:\n- name: host\n  address: a:1\n  plugins: [NodeName]\n",
       R"(profiles[0].plugins.multiPoint: default plugin "NodeUnschedulable" is served by no plugin endpoint)"},
      {"unknown kind", "apiVersion: v1\nkind: Pod\n", R"(document 1.kind: unknown kind "Pod")"},
      {"wrong kube apiVersion",
       "apiVersion: kubescheduler.config.k8s.io/v1beta3\nkind: KubeSchedulerConfiguration\n",
       R"(apiVersion: unsupported "kubescheduler.config.k8s.io/v1beta3")"},
      {"two kube documents", kube + "---\n" + kube,
       "document 2: a second KubeSchedulerConfiguration"},
      {"bad yaml", kube + "profiles: [\n", "invalid YAML"},
      {"extenders", kube + "extenders:\n- urlPrefix: http://x\n",
       "extenders: scheduler extenders are not supported"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<SchedulerConfig> config = ParseConfig(c.yaml);
    ASSERT_FALSE(config.ok()) << c.name;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(c.error)) << c.name;
  }
}

TEST(ConfigTest, OpportunisticBatchingIsOnByDefaultAndOffPerProfile) {
  const std::string endpoints = "pluginEndpoints:\n- name: host\n  address: unix:///tmp/h.sock\n" +
                                std::string(kHostPlugins);
  absl::StatusOr<SchedulerConfig> c = ParseConfig(
      std::string(kKubeHeader) + "profiles:\n- schedulerName: a\n- schedulerName: b\n---\n" + kPodiumHeader +
      endpoints + "profiles:\n- schedulerName: b\n  opportunisticBatching: false\n");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->profiles.size(), 2u);
  EXPECT_TRUE(c->profiles[0].opportunistic_batching);
  EXPECT_FALSE(c->profiles[1].opportunistic_batching);
  EXPECT_TRUE(DefaultConfig().profiles[0].opportunistic_batching);

  const struct {
    std::string yaml, error;
  } bad[] = {
      {"profiles:\n- schedulerName: nope\n  opportunisticBatching: false\n",
       R"(profiles: PodiumConfiguration names profile "nope" that the KubeSchedulerConfiguration does not have)"},
      {"profiles:\n- opportunisticBatching: maybe\n", "profiles[0].opportunisticBatching"},
      {"profiles:\n- schedulerName: default-scheduler\n  batching: false\n", "profiles[0].batching: unknown field"},
      {"profiles:\n- {}\n- {}\n", R"(profiles[1].schedulerName: profile "default-scheduler" is listed twice)"},
  };
  for (const auto& b : bad) {
    absl::StatusOr<SchedulerConfig> config = ParseConfig(std::string(kPodiumHeader) + endpoints + b.yaml);
    ASSERT_FALSE(config.ok()) << b.yaml;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(b.error)) << b.yaml;
  }
}

TEST(ConfigTest, WhatIfCopiesAreTwoByDefaultAndSetPerProfile) {
  const std::string endpoints = "pluginEndpoints:\n- name: host\n  address: unix:///tmp/h.sock\n" +
                                std::string(kHostPlugins);
  absl::StatusOr<SchedulerConfig> c = ParseConfig(
      std::string(kKubeHeader) + "profiles:\n- schedulerName: a\n- schedulerName: b\n---\n" + kPodiumHeader +
      endpoints + "profiles:\n- schedulerName: b\n  whatIfCopies: 0\n");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->profiles.size(), 2u);
  EXPECT_EQ(c->profiles[0].what_if_copies, 2u);
  EXPECT_EQ(c->profiles[1].what_if_copies, 0u);
  EXPECT_TRUE(c->profiles[1].opportunistic_batching);
  EXPECT_EQ(DefaultConfig().profiles[0].what_if_copies, 2u);
  const struct {
    std::string yaml, error;
  } bad[] = {
      {"profiles:\n- whatIfCopies: 9\n", "profiles[0].whatIfCopies: must be between 0 and 8, got 9"},
      {"profiles:\n- whatIfCopies: -1\n", "profiles[0].whatIfCopies: must be between 0 and 8, got -1"},
      {"profiles:\n- whatIfCopies: two\n", "profiles[0].whatIfCopies"},
  };
  for (const auto& b : bad) {
    absl::StatusOr<SchedulerConfig> config = ParseConfig(std::string(kPodiumHeader) + endpoints + b.yaml);
    ASSERT_FALSE(config.ok()) << b.yaml;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(b.error)) << b.yaml;
  }
}

TEST(ConfigTest, EmptyProfilesListGivesDefaultProfile) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(std::string(kKubeHeader) + "profiles: []\n");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->profiles.size(), 1u);
  EXPECT_EQ(c->profiles[0].scheduler_name, "default-scheduler");
}

TEST(ConfigTest, EndpointOverride) {
  SchedulerConfig c = DefaultConfig();
  ASSERT_TRUE(ApplyEndpointOverride(c, "host=unix:///tmp/x.sock").ok());
  EXPECT_EQ(c.endpoints[0].address, "unix:///tmp/x.sock");
  ASSERT_TRUE(ApplyEndpointOverride(c, "host=localhost:1234").ok());
  EXPECT_EQ(c.endpoints[0].address, "localhost:1234");
  absl::Status s = ApplyEndpointOverride(c, "nope=localhost:1");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr(R"(no plugin endpoint named "nope")"));
  EXPECT_EQ(ApplyEndpointOverride(c, "host").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyEndpointOverride(c, "=x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ApplyEndpointOverride(c, "host=").code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigTest, LoadConfigFile) {
  const std::string path = ::testing::TempDir() + "/podium_config_test.yaml";
  {
    std::ofstream out(path);
    out << kFullExample;
  }
  absl::StatusOr<SchedulerConfig> c = LoadConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->profiles.size(), 2u);
  std::remove(path.c_str());
  EXPECT_EQ(LoadConfigFile(path).status().code(), absl::StatusCode::kNotFound);
}


// Configuration that Podium would accept and not honour is refused at start,
// naming the field.
constexpr char kRefusalHeader[] = R"(
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
)";

absl::Status ParseKube(const std::string& body) {
  return ParseConfig(std::string(kRefusalHeader) + body).status();
}

TEST(ConfigRefusalTest, LeaderElectTrueIsRefusedFalseIsAccepted) {
  absl::Status s = ParseKube("leaderElection: {leaderElect: true, resourceName: kube-scheduler}\n");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("leaderElection.leaderElect"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("run one scheduler per adapter"));
  EXPECT_TRUE(ParseKube("leaderElection: {leaderElect: false}\n").ok());
  EXPECT_TRUE(ParseKube("leaderElection: {leaderElect: false, leaseDuration: 15s}\n").ok());
  s = ParseKube("leaderElection: {leaderElect: maybe}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("leaderElection.leaderElect"));
  s = ParseKube("leaderElection: {leaderElekt: false}\n");
  EXPECT_THAT(std::string(s.message()), HasSubstr("leaderElekt"));
}

TEST(ConfigRefusalTest, QueueSortAcceptsOnlyPrioritySort) {
  EXPECT_TRUE(ParseKube(R"(
profiles:
- plugins:
    queueSort: {enabled: [{name: PrioritySort}]}
)").ok());
  absl::Status s = ParseKube(R"(
profiles:
- plugins:
    queueSort:
      enabled: [{name: PrioritySort}, {name: NodeAffinity}]
)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[0].plugins.queueSort.enabled[1].name"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("PrioritySort only"));
}

// kube-scheduler refuses a plugin registered twice; Podium accepted it and
// then failed every pod ("plugin scored twice").
TEST(ConfigRefusalTest, APluginEnabledTwiceAtOnePointIsRefused) {
  absl::Status s = ParseKube(R"(
profiles:
- plugins:
    multiPoint:
      enabled: [{name: NodeResourcesFit}, {name: NodeResourcesFit}]
)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[0].plugins.multiPoint.enabled[1].name"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"NodeResourcesFit\" is enabled twice"));
  s = ParseKube(R"(
profiles:
- plugins:
    score: {enabled: [{name: ImageLocality, weight: 5}, {name: ImageLocality, weight: 50}]}
)");
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[0].plugins.score.enabled[1].name"));
  // Once in multiPoint and once at a point re-configures it, as in kube.
  EXPECT_TRUE(ParseKube(R"(
profiles:
- plugins:
    multiPoint: {enabled: [{name: ImageLocality}]}
    score: {enabled: [{name: ImageLocality, weight: 5}]}
)").ok());
}

TEST(ConfigRefusalTest, DisablingTheOnlyQueueSortOrANonPositiveParallelismIsRefused) {
  absl::Status s = ParseKube(R"(
profiles:
- plugins:
    queueSort: {disabled: [{name: "*"}]}
)");
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[0].plugins.queueSort.disabled"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("no queue sort plugin is enabled"));
  EXPECT_TRUE(ParseKube(R"(
profiles:
- plugins:
    queueSort: {disabled: [{name: "*"}], enabled: [{name: PrioritySort}]}
)").ok());
  for (const char* bad : {"parallelism: 0\n", "parallelism: -4\n"}) {
    s = ParseKube(bad);
    EXPECT_THAT(std::string(s.message()), HasSubstr("parallelism: must be a positive integer")) << bad;
  }
  EXPECT_TRUE(ParseKube("parallelism: 16\n").ok());
}

TEST(ConfigRefusalTest, RemotePostFilterPluginIsRefused) {
  absl::Status s = ParseKube(R"(
profiles:
- schedulerName: a
- schedulerName: b
  plugins:
    postFilter: {enabled: [{name: NodeAffinity}]}
)");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("profiles[1].plugins.postFilter.enabled[0].name"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not called yet"));
}

// Issue 5 item 6: pluginConfig args are per profile, as in kube-scheduler.
TEST(ConfigTest, SamePluginWithDifferentArgsPerProfileIsGroupedByArgs) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(std::string(kRefusalHeader) + R"(
profiles:
- schedulerName: a
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: LeastAllocated}}
- schedulerName: b
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: c
- schedulerName: d
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: LeastAllocated}}
- schedulerName: e
  pluginConfig:
  - name: NodeResourcesFit
    args: {}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  const auto groups = c->ArgsByProfile("NodeResourcesFit");
  ASSERT_EQ(groups.size(), 3u);
  ASSERT_NE(groups[0].args, nullptr);
  EXPECT_EQ(boost::json::serialize(*groups[0].args), R"({"scoringStrategy":{"type":"LeastAllocated"}})");
  EXPECT_THAT(groups[0].scheduler_names, testing::ElementsAre("a", "d"));
  EXPECT_THAT(groups[1].scheduler_names, testing::ElementsAre("b"));
  // No args and empty args are both the defaults.
  EXPECT_EQ(groups[2].args, nullptr);
  EXPECT_THAT(groups[2].scheduler_names, testing::ElementsAre("c", "e"));
  // One group when every profile agrees.
  EXPECT_EQ(c->ArgsByProfile("TaintToleration").size(), 1u);
}

TEST(ConfigRefusalTest, SameArgsOrUnusedPluginIsAccepted) {
  absl::StatusOr<SchedulerConfig> c = ParseConfig(std::string(kRefusalHeader) + R"(
profiles:
- schedulerName: a
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: b
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: MostAllocated}}
- schedulerName: c
  plugins:
    multiPoint:
      enabled: [{name: PrioritySort}, {name: NodeName}, {name: DefaultBinder}]
      disabled: [{name: "*"}]
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->profiles.size(), 3u);
  const boost::json::object* args = c->ArgsFor("NodeResourcesFit");
  ASSERT_NE(args, nullptr);
  EXPECT_EQ(boost::json::serialize(*args), R"({"scoringStrategy":{"type":"MostAllocated"}})");
}

TEST(ConfigRefusalTest, ArgsComeFromAProfileThatUsesThePlugin) {
  // Profile a disables the plugin but configures it; b uses it with defaults.
  absl::StatusOr<SchedulerConfig> c = ParseConfig(std::string(kRefusalHeader) + R"(
profiles:
- schedulerName: a
  plugins:
    multiPoint: {disabled: [{name: ImageLocality}]}
  pluginConfig:
  - name: ImageLocality
    args: {foo: 1}
- schedulerName: b
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->ArgsFor("ImageLocality"), nullptr);
}

}  // namespace
}  // namespace podium::scheduler
