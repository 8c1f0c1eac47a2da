#include "common/translate/k8s_yaml.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "boost/json/parse.hpp"
#include "common/translate/k8s_json.h"

namespace podium::k8s {
namespace {

using ::testing::HasSubstr;

constexpr char kNodesAndPods[] = R"(
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {topology.kubernetes.io/zone: a}
spec:
  taints: [{key: edge, value: "true", effect: NoSchedule}]
  unschedulable: false
status:
  capacity: {cpu: "4", memory: 32Gi, pods: "110", nvidia.com/gpu: "2"}
  allocatable: {cpu: 3800m, memory: 30Gi, pods: "110", nvidia.com/gpu: "2"}
  images:
  - names: [nginx:1.25]
    sizeBytes: 1000
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  uid: u-web-1
  creationTimestamp: "2024-01-02T03:04:05Z"
  labels: {app: web}
spec:
  priority: 7
  preemptionPolicy: Never
  nodeSelector: {disk: ssd}
  overhead: {cpu: 10m}
  schedulingGates: [{name: wait}]
  initContainers:
  - name: sidecar
    restartPolicy: Always
    resources: {requests: {cpu: 50m}}
  - name: setup
    resources: {requests: {cpu: "1"}}
  containers:
  - name: app
    image: nginx:1.25
    ports: [{containerPort: 80, hostPort: 8080}]
    resources:
      requests: {cpu: "0.5", memory: 500Mi, example.com/foo: "3"}
      limits: {cpu: "1", ephemeral-storage: 1Gi}
  tolerations:
  - {key: edge, operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  - {operator: Exists}
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: zone, operator: In, values: [a, b]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 10
        preference: {matchExpressions: [{key: gpu, operator: Exists}]}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: web}}
        topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: topology.kubernetes.io/zone
    whenUnsatisfiable: ScheduleAnyway
    labelSelector: {matchLabels: {app: web}}
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    labelSelector: {matchLabels: {app: web}}
    minDomains: 2
status:
  nominatedNodeName: n1
)";

TEST(K8sYamlTest, LoadsMultiDocumentNodesAndPods) {
  auto c = LoadCluster({{"a.yaml", kNodesAndPods}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->nodes.size(), 1u);
  const v1::Node& n = c->nodes[0];
  EXPECT_EQ(n.meta().name(), "n1");
  EXPECT_FALSE(n.meta().uid().empty());
  EXPECT_EQ(n.allocatable().milli_cpu(), 3800);
  EXPECT_EQ(n.allocatable().memory_bytes(), 30LL << 30);
  EXPECT_EQ(n.capacity().memory_bytes(), 32LL << 30);
  EXPECT_EQ(n.allocatable().pods(), 110);
  EXPECT_EQ(n.allocatable().scalar().at("nvidia.com/gpu"), 2);
  ASSERT_EQ(n.taints_size(), 1);
  EXPECT_EQ(n.taints(0).effect(), v1::NO_SCHEDULE);
  ASSERT_EQ(n.images_size(), 1);
  EXPECT_EQ(n.images(0).size_bytes(), 1000);

  ASSERT_EQ(c->pods.size(), 1u);
  const v1::Pod& p = c->pods[0].pod;
  EXPECT_FALSE(c->pods[0].create_later);
  EXPECT_EQ(p.meta().namespace_(), "default");
  EXPECT_EQ(p.meta().uid(), "u-web-1");
  EXPECT_EQ(p.meta().creation_timestamp_us(), 1704164645000000);
  EXPECT_EQ(p.priority(), 7);
  EXPECT_EQ(p.preemption_policy(), v1::NEVER);
  EXPECT_EQ(p.node_selector().at("disk"), "ssd");
  EXPECT_EQ(p.overhead().milli_cpu(), 10);
  EXPECT_THAT(p.scheduling_gates(), ::testing::ElementsAre("wait"));
  ASSERT_EQ(p.init_containers_size(), 2);
  EXPECT_TRUE(p.init_containers(0).restartable());
  EXPECT_FALSE(p.init_containers(1).restartable());
  const v1::Container& app = p.containers(0);
  EXPECT_EQ(app.image(), "nginx:1.25");
  EXPECT_EQ(app.requests().milli_cpu(), 500);
  EXPECT_EQ(app.requests().memory_bytes(), 500LL << 20);
  EXPECT_EQ(app.requests().scalar().at("example.com/foo"), 3);
  EXPECT_EQ(app.requests().ephemeral_storage_bytes(), 1LL << 30);  // Defaulted from limits.
  EXPECT_EQ(app.limits().milli_cpu(), 1000);
  ASSERT_EQ(app.ports_size(), 1);
  EXPECT_EQ(app.ports(0).host_port(), 8080);
  EXPECT_EQ(app.ports(0).protocol(), "TCP");
  ASSERT_EQ(p.tolerations_size(), 2);
  EXPECT_EQ(p.tolerations(0).operator_(), v1::Toleration::EXISTS);
  EXPECT_EQ(p.tolerations(0).effect(), v1::NO_EXECUTE);
  EXPECT_EQ(p.tolerations(0).toleration_seconds(), 30);
  EXPECT_FALSE(p.tolerations(1).has_toleration_seconds());
  const auto& na = p.affinity().node_affinity();
  ASSERT_EQ(na.required().terms_size(), 1);
  EXPECT_EQ(na.required().terms(0).match_expressions(0).operator_(), v1::NodeSelectorRequirement::IN);
  EXPECT_EQ(na.preferred(0).weight(), 10);
  EXPECT_EQ(p.affinity().pod_anti_affinity().required(0).topology_key(), "kubernetes.io/hostname");
  ASSERT_EQ(p.topology_spread_constraints_size(), 2);
  EXPECT_EQ(p.topology_spread_constraints(0).when_unsatisfiable(), v1::TopologySpreadConstraint::SCHEDULE_ANYWAY);
  EXPECT_FALSE(p.topology_spread_constraints(0).has_min_domains());
  EXPECT_EQ(p.topology_spread_constraints(1).when_unsatisfiable(), v1::TopologySpreadConstraint::DO_NOT_SCHEDULE);
  EXPECT_EQ(p.topology_spread_constraints(1).min_domains(), 2);
  EXPECT_EQ(p.nominated_node_name(), "n1");
}

TEST(K8sYamlTest, LoadsKindListAndKeepsFileOrderInCreationTime) {
  constexpr char kList[] = R"(
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: a, namespace: ns}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: b, namespace: ns}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Service, metadata: {name: svc, namespace: ns}}
- {apiVersion: v1, kind: Pod, metadata: {name: c, namespace: ns, annotations: {sim.podium.dev/create-later: "true"}}}
)";
  auto c = LoadCluster({{"list.yaml", kList}}, {.default_creation_time = absl::FromUnixSeconds(1000)});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->pods.size(), 3u);
  EXPECT_LT(c->pods[0].pod.meta().creation_timestamp_us(), c->pods[1].pod.meta().creation_timestamp_us());
  EXPECT_LT(c->pods[1].pod.meta().creation_timestamp_us(), c->pods[2].pod.meta().creation_timestamp_us());
  EXPECT_NE(c->pods[0].pod.meta().uid(), c->pods[1].pod.meta().uid());
  EXPECT_TRUE(c->pods[2].create_later);
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_THAT(c->warnings[0], HasSubstr("list.yaml: document 1 item 3 (Service ns/svc)"));
  EXPECT_THAT(c->warnings[0], HasSubstr("Service"));
}

TEST(K8sYamlTest, AReplacementNamesAPodOfItsNamespaceInTheFiles) {
  constexpr char kGood[] = R"(
{kind: Pod, metadata: {name: db-0, namespace: ns}, spec: {containers: [{name: c}]}}
---
{kind: Pod, metadata: {name: db-0-next, namespace: ns, annotations: {sim.podium.dev/replaces: db-0}}, spec: {containers: [{name: c}]}}
)";
  auto good = LoadCluster({{"good.yaml", kGood}});
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_EQ(good->pods.size(), 2u);
  EXPECT_EQ(good->pods[0].replaces, "");
  EXPECT_EQ(good->pods[1].replaces, "db-0");

  struct Case {
    std::string yaml, error;
  };
  auto pod = [](const std::string& name, const std::string& annotations = "", const std::string& ns = "ns") {
    return absl::StrCat("{kind: Pod, metadata: {name: ", name, ", namespace: ", ns, ", annotations: {", annotations,
                        "}}, spec: {containers: [{name: c}]}}\n---\n");
  };
  const std::string field = "(Pod ns/next): metadata.annotations[sim.podium.dev/replaces]: ";
  const std::vector<Case> bad = {
      {pod("next", "sim.podium.dev/replaces: db-0") + pod("db-0", "", "other"), field + "no pod ns/db-0 in the files"},
      {pod("next", "sim.podium.dev/replaces: next"), field + "a pod cannot replace itself"},
      {pod("db-0") + pod("next", "sim.podium.dev/replaces: db-0, sim.podium.dev/create-later: \"true\""),
       field + "a replacement is not also sim.podium.dev/create-later"},
      {pod("db-0") + pod("first", "sim.podium.dev/replaces: db-0") + pod("next", "sim.podium.dev/replaces: db-0"),
       field + "ns/db-0 has another replacement"},
      {pod("db-0") + pod("first", "sim.podium.dev/replaces: db-0") + pod("next", "sim.podium.dev/replaces: first"),
       field + "ns/first is a replacement itself"},
  };
  for (const Case& c : bad) {
    auto loaded = LoadCluster({{"bad.yaml", c.yaml}});
    ASSERT_FALSE(loaded.ok()) << c.yaml;
    EXPECT_THAT(std::string(loaded.status().message()), HasSubstr(c.error)) << c.yaml;
  }
}

// podium-sim's per-pod termination grace: a duration of at least zero, or
// the file is refused naming the pod and the field.
TEST(K8sYamlTest, APodsTerminationGraceIsADuration) {
  auto pod = [](const std::string& grace) {
    return absl::StrCat("{kind: Pod, metadata: {name: low, namespace: ns, annotations: ",
                        "{sim.podium.dev/termination-grace: \"", grace, "\"}}, spec: {containers: [{name: c}]}}\n");
  };
  auto good = LoadCluster({{"good.yaml", pod("300ms")}});
  ASSERT_TRUE(good.ok()) << good.status();
  auto grace = SimTerminationGrace(good->pods[0].pod);
  ASSERT_TRUE(grace.ok());
  EXPECT_EQ(*grace, absl::Milliseconds(300));
  for (const std::string bad : {"soon", "-1s", "", "inf"}) {
    auto loaded = LoadCluster({{"bad.yaml", pod(bad)}});
    ASSERT_FALSE(loaded.ok()) << bad;
    EXPECT_THAT(std::string(loaded.status().message()),
                HasSubstr(absl::StrCat("(Pod ns/low): metadata.annotations[sim.podium.dev/termination-grace]: "
                                       "invalid duration \"", bad, "\"")))
        << bad;
  }
}

TEST(K8sYamlTest, ResolvesPriorityClasses) {
  constexpr char kText[] = R"(
kind: PriorityClass
metadata: {name: high}
value: 1000
preemptionPolicy: Never
---
kind: PriorityClass
metadata: {name: normal}
value: 10
globalDefault: true
---
kind: Pod
metadata: {name: by-class}
spec: {priorityClassName: high}
---
kind: Pod
metadata: {name: by-default}
---
kind: Pod
metadata: {name: explicit}
spec: {priority: 3}
---
kind: Pod
metadata: {name: critical}
spec: {priorityClassName: system-node-critical}
)";
  auto c = LoadCluster({{"pc.yaml", kText}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->pods.size(), 4u);
  EXPECT_EQ(c->pods[0].pod.priority(), 1000);
  EXPECT_EQ(c->pods[0].pod.preemption_policy(), v1::NEVER);
  EXPECT_EQ(c->pods[1].pod.priority(), 10);
  EXPECT_EQ(c->pods[1].pod.priority_class_name(), "normal");
  EXPECT_EQ(c->pods[2].pod.priority(), 3);
  EXPECT_EQ(c->pods[3].pod.priority(), kSystemNodeCritical);

  auto no_default = LoadCluster({{"x.yaml", "kind: Pod\nmetadata: {name: p}\n"}});
  ASSERT_TRUE(no_default.ok());
  EXPECT_EQ(no_default->pods[0].pod.priority(), 0);
}

TEST(K8sYamlTest, UnknownPriorityClassNamesThePod) {
  auto c = LoadCluster({{"x.yaml", "kind: Pod\nmetadata: {name: p, namespace: n}\nspec: {priorityClassName: gold}\n"}});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("x.yaml: document 1 (Pod n/p): spec.priorityClassName"));
  EXPECT_THAT(c.status().message(), HasSubstr("gold"));
}

TEST(K8sYamlTest, LoadsNamespacesWithTheirLabels) {
  constexpr char kText[] = R"(
apiVersion: v1
kind: Namespace
metadata:
  name: prod
  uid: u-prod
  labels: {team: data, kubernetes.io/metadata.name: prod}
---
apiVersion: v1
kind: Namespace
metadata: {name: dev}
)";
  auto c = LoadCluster({{"ns.yaml", kText}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->namespaces.size(), 2u);
  EXPECT_EQ(c->namespaces[0].meta().name(), "prod");
  EXPECT_EQ(c->namespaces[0].meta().uid(), "u-prod");
  EXPECT_EQ(c->namespaces[0].meta().namespace_(), "");
  EXPECT_EQ(c->namespaces[0].meta().labels().at("team"), "data");
  EXPECT_EQ(c->namespaces[1].meta().name(), "dev");
  EXPECT_FALSE(c->namespaces[1].meta().uid().empty());  // Stamped.
  EXPECT_TRUE(c->namespaces[1].meta().labels().empty());

  auto one = NamespaceFromYaml(YAML::Load("kind: Namespace\nmetadata: {name: a, labels: {x: y}}\n"));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->meta().labels().at("x"), "y");
}

TEST(K8sYamlTest, RefusesBadNamespacesNamingTheObjectAndField) {
  struct Case {
    std::string text;
    std::string error;
  };
  const std::string long_name(64, 'n');
  std::vector<Case> cases = {
      {"kind: Namespace\nmetadata: {labels: {a: b}}\n", "metadata.name"},
      {"kind: Namespace\nmetadata: {name: " + long_name + "}\n", "metadata.name"},
      {"kind: Namespace\nmetadata: {name: a, labels: [x]}\n", "metadata.labels"},
      {"kind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: a}\n",
       "document 2 (Namespace a): metadata.name: duplicate Namespace"},
  };
  for (const Case& c : cases) {
    auto r = LoadCluster({{"f.yaml", c.text}});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.error)) << c.text;
  }
}

TEST(K8sYamlTest, MalformedObjectNamesFileDocumentObjectAndField) {
  constexpr char kGood[] = "kind: Node\nmetadata: {name: n1}\n";
  constexpr char kBad[] = R"(
kind: Node
metadata: {name: n2}
---
kind: PriorityClass
metadata: {name: x}
value: 1
---
kind: Pod
metadata: {name: web-1}
spec:
  containers:
  - name: app
    resources: {requests: {cpu: "12x"}}
)";
  auto c = LoadCluster({{"good.yaml", kGood}, {"edge.yaml", kBad}});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "edge.yaml: document 3 (Pod default/web-1): spec.containers[0].resources.requests.cpu: "
            "invalid quantity \"12x\"");
}

TEST(K8sYamlTest, RefusesWrongTypesAndNegativeRequests) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: {name: c}}\n", "spec.containers: expected a list"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {memory: -1Gi}}}]}\n",
       "spec.containers[0].resources.requests.memory: quantity \"-1Gi\" must not be negative"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {priority: high}\n", "spec.priority: expected an integer"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {tolerations: [{operator: Maybe}]}\n",
       "spec.tolerations[0].operator: unknown operator \"Maybe\""},
      {"kind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: [1]}}\n",
       "(Node n): status.allocatable.cpu: expected a quantity"},
      {"kind: Node\nmetadata: {}\n", "metadata.name: missing"},
      {"kind: Pod\nmetadata: {name: p}\nspec: [1, 2]\n", "spec: expected a mapping"},
      {"kind: [Pod\n", "invalid YAML"},
      {"- 1\n- 2\n", "document 1: expected a Kubernetes object"},
  };
  for (const Case& c : cases) {
    auto r = LoadCluster({{"f.yaml", c.text}});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr("f.yaml")) << c.text;
  }
}

// Defect 16: podium-sim loaded what the scheduler refuses, then waited until
// its timeout. The loader applies the scheduler's validation and refuses the
// object with the file, document, object and field named.
TEST(K8sYamlTest, RefusesWhatTheSchedulerRefuses) {
  struct Case {
    std::string text;
    const char* error;
  };
  const Case cases[] = {
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, ports: [{containerPort: 80, hostPort: 70000}]}]}\n",
       "f.yaml: document 1 (Pod default/p): spec.containers[0].ports[0].hostPort: must be between 0 and 65535"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {tolerations: [{key: k, operator: Exists, value: v}]}\n",
       "f.yaml: document 1 (Pod default/p): spec.tolerations[0].value: must be empty when operator is Exists"},
      {"kind: Pod\nmetadata: {name: \"p\\nE0000 forged log line\"}\n",
       "f.yaml: document 1 (Pod default/p\\nE0000 forged log line): metadata.name: control character at byte 1"},
      {"kind: Pod\nmetadata: {name: \"" + std::string(254, 'a') + "\"}\n",
       "metadata.name: must be at most 253 bytes, got 254"},
      {"kind: Pod\nmetadata: {name: p, namespace: \"" + std::string(64, 'n') + "\"}\n",
       "metadata.namespace: must be at most 63 bytes, got 64"},
      {"kind: Pod\nmetadata: {name: p}\n---\nkind: Pod\nmetadata: {name: p, namespace: default}\n",
       "f.yaml: document 2 (Pod default/p): metadata.name: duplicate Pod, first in f.yaml: document 1 (Pod default/p)"},
      {"kind: Node\nmetadata: {name: n}\n---\nkind: Node\nmetadata: {name: n}\n",
       "f.yaml: document 2 (Node n): metadata.name: duplicate Node, first in f.yaml: document 1 (Node n)"},
      {"kind: Node\nmetadata: {name: n, uid: u1}\n---\nkind: Pod\nmetadata: {name: p, uid: u1}\n",
       "f.yaml: document 2 (Pod default/p): metadata.uid: \"u1\" is also the uid of f.yaml: document 1 (Node n)"},
      // Found by a probe: accepted before, each misbehaving later.
      {"kind: PriorityClass\nmetadata: {name: system-node-critical}\nvalue: 5\n",
       "f.yaml: document 1 (PriorityClass system-node-critical): value: the built-in PriorityClass "
       "system-node-critical has value 2000001000"},
      {"kind: PriorityClass\nmetadata: {name: urgent}\nvalue: 2000000500\n",
       "value: maximum allowed value of a user defined priority is 1000000000"},
      {"kind: PodDisruptionBudget\nmetadata: {name: \"bad\\u0001name\"}\nspec: {minAvailable: 1}\n",
       "metadata.name: control character"},
      {"kind: PodDisruptionBudget\nmetadata: {name: d}\nspec: {minAvailable: 1}\n---\n"
       "kind: PodDisruptionBudget\nmetadata: {name: d}\nspec: {maxUnavailable: 1}\n",
       "f.yaml: document 2 (PodDisruptionBudget d): metadata.name: duplicate PodDisruptionBudget"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: \"0.5\"}}}]}\n",
       "spec.containers[0].resources.limits.nvidia.com/gpu: quantity \"0.5\" must be an integer"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {request: {cpu: \"64\"}}}]}\n",
       "spec.containers[0].resources.request: unknown field"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {gpu: \"1\"}}}]}\n",
       "spec.containers[0].resources.requests[gpu]: must be a standard resource type or fully qualified"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: \"2\"}, "
       "limits: {cpu: \"1\"}}}]}\n",
       "spec.containers[0].resources.requests[cpu]: must be less than or equal to cpu limit"},
      {"kind: Pod\nmetadata: {name: p}\nspec: {topologySpreadConstraints: [{maxSkew: 0, topologyKey: zone, "
       "whenUnsatisfiable: DoNotSchedule}]}\n",
       "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero"},
  };
  for (const Case& c : cases) {
    auto r = LoadCluster({{"f.yaml", c.text}});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.text;
  }
  // The same names in two namespaces are two pods.
  auto ok = LoadCluster({{"f.yaml", "kind: Pod\nmetadata: {name: p, namespace: a}\n---\n"
                                    "kind: Pod\nmetadata: {name: p, namespace: b}\n"}});
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// Defect 11: 2 x 5e15 CPUs summed past int64 and the pod was bound to a 4-CPU
// node. Each quantity is bounded where it enters (2^53).
TEST(K8sYamlTest, RefusesQuantitiesBeyondTheBound) {
  constexpr char kHuge[] = R"(
kind: Pod
metadata: {name: huge}
spec:
  containers:
  - {name: a, resources: {requests: {cpu: "5e15"}}}
  - {name: b, resources: {requests: {cpu: "5e15"}}}
)";
  auto r = LoadCluster({{"huge.yaml", kHuge}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("huge.yaml: document 1 (Pod default/huge): spec.containers[0].resources.requests.cpu: "
                        "must be at most 2^53"));
  // 8 PiB (2^53 bytes) is accepted; one byte more is not.
  EXPECT_TRUE(LoadCluster({{"n.yaml", "kind: Node\nmetadata: {name: n}\nstatus: {capacity: {memory: 8Pi}}\n"}}).ok());
  auto over = LoadCluster({{"n.yaml", "kind: Node\nmetadata: {name: n}\nstatus: {capacity: {memory: \"9007199254740993\"}}\n"}});
  ASSERT_FALSE(over.ok());
  EXPECT_THAT(over.status().message(), HasSubstr("status.capacity.memory: must be at most 2^53"));
}

// Defect 15: podium-sim aborted (uncaught YAML::InvalidNode) on a document or
// List item without kind:, including a kubectl dump cut off mid-item.
TEST(K8sYamlTest, MissingKindAndTruncatedDumpsAreErrorsNotAborts) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"metadata: {name: p}\n", "f.yaml: document 1: kind: missing"},
      {"kind: Node\nmetadata: {name: n}\n---\napiVersion: v1\n", "f.yaml: document 2: kind: missing"},
      {"apiVersion: v1\nkind: List\nitems:\n- kind: Node\n  metadata: {name: n}\n- metadata: {name: p}\n",
       "f.yaml: document 1 item 2: kind: missing"},
      // `kubectl get nodes,pods -A -o yaml` cut off in the middle of an item.
      {"apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n  metadata:\n    name: n1\n"
       "- apiVersion: v1\n  metadata:\n    name: web-",
       "f.yaml: document 1 item 2: kind: missing"},
      {"kind: List\nitems: [~]\n", "f.yaml: document 1 item 1: expected a Kubernetes object"},
      {"kind: List\nitems: {a: 1}\n", "f.yaml: document 1: items: expected a list"},
      {"kind: [Pod]\nmetadata: {name: p}\n", "f.yaml: document 1: kind: missing"},
      {"kind: Pod\nmetadata: [a]\n", "metadata: expected a mapping"},
      {"kind: Pod\nmetadata: {name: \"web-\xff\"}\n", "f.yaml: document 1: line 2"},
  };
  for (const Case& c : cases) {
    auto r = LoadCluster({{"f.yaml", c.text}});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_THAT(r.status().message(), HasSubstr(c.error)) << c.text;
  }
}

TEST(K8sYamlTest, RefusesAliasAmplification) {
  std::string text = "kind: Pod\nmetadata:\n  name: p\n  labels: &l0 {a: b}\nx0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 9; ++i) {
    text += "x" + std::to_string(i) + ": &x" + std::to_string(i) + " [";
    for (int k = 0; k < 8; ++k) text += (k ? ", *x" : "*x") + std::to_string(i - 1);
    text += "]\n";
  }
  auto r = LoadCluster({{"laughs.yaml", text}});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("laughs.yaml: document 1: line"));
  EXPECT_THAT(r.status().message(), HasSubstr("alias amplification"));
}

// The Kubernetes adapter's path: API server JSON, parsed by yaml-cpp, then the
// same per-object translation.
TEST(K8sYamlTest, TranslatesJsonObjects) {
  YAML::Node obj = YAML::Load(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","namespace":"x","uid":"u-1"},)"
      R"("spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"250m","memory":"128Mi"}}}]}})");
  auto pod = PodFromYaml(obj);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->meta().namespace_(), "x");
  EXPECT_EQ(pod->meta().uid(), "u-1");
  EXPECT_EQ(pod->containers(0).requests().milli_cpu(), 250);
  EXPECT_EQ(pod->containers(0).requests().memory_bytes(), 128 << 20);
}

// A file is decoded strictly (an unknown key under a container's resources
// is refused, LoadCluster's cases); an object from the API server, which
// validated it, is not: a key a newer API adds there must not make the pod
// untranslatable to the Kubernetes adapter.
TEST(K8sYamlTest, TheApisObjectsAreNotDecodedStrictly) {
  const boost::json::value obj = boost::json::parse(
      R"({"apiVersion":"v1","kind":"Pod","metadata":{"name":"j","namespace":"x","uid":"u-1"},)"
      R"("spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"250m"},"newField":{}}}]}})");
  auto pod = PodFromJson(obj);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->containers(0).requests().milli_cpu(), 250);
}

TEST(K8sYamlTest, LoadsDirectoriesInNameOrder) {
  namespace fs = std::filesystem;
  std::string tmpl = (fs::temp_directory_path() / "podium-yaml-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  fs::path dir(tmpl);
  std::ofstream(dir / "b-pods.yaml") << "kind: Pod\nmetadata: {name: p}\n";
  std::ofstream(dir / "a-nodes.yml") << "kind: Node\nmetadata: {name: n}\n";
  std::ofstream(dir / "README.md") << "not yaml: [";
  auto c = LoadClusterPaths({dir.string()});
  fs::remove_all(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->nodes.size(), 1u);
  EXPECT_EQ(c->pods.size(), 1u);
  EXPECT_FALSE(LoadClusterPaths({"/nonexistent/podium.yaml"}).ok());
}

TEST(K8sYamlTest, PodDisruptionBudgetFromTheApisJson) {
  // JSON as the API serves it: yaml-cpp reads it as YAML.
  auto pdb = PodDisruptionBudgetFromYaml(YAML::Load(R"({"apiVersion":"policy/v1","kind":"PodDisruptionBudget",
      "metadata":{"name":"web","namespace":"shop","uid":"u-1","resourceVersion":"7"},
      "spec":{"minAvailable":"50%","selector":{"matchLabels":{"app":"web"}}},
      "status":{"disruptionsAllowed":1,"currentHealthy":3,"desiredHealthy":2,"expectedPods":3,
                "disruptedPods":{"web-1":"2024-01-02T03:04:05Z"}}})"));
  ASSERT_TRUE(pdb.ok()) << pdb.status();
  EXPECT_EQ(pdb->meta().namespace_(), "shop");
  EXPECT_EQ(pdb->min_available().percent(), "50%");
  EXPECT_FALSE(pdb->has_max_unavailable());
  EXPECT_EQ(pdb->selector().match_labels().at("app"), "web");
  EXPECT_EQ(pdb->disruptions_allowed(), 1);
  EXPECT_EQ(pdb->expected_pods(), 3);
  EXPECT_EQ(pdb->disrupted_pods().at("web-1"), 1704164645000000);

  auto max = PodDisruptionBudgetFromYaml(YAML::Load(R"({"metadata":{"name":"m"},"spec":{"maxUnavailable":1}})"));
  ASSERT_TRUE(max.ok()) << max.status();
  EXPECT_EQ(max->max_unavailable().int_value(), 1);
  EXPECT_EQ(max->meta().namespace_(), "default");

  auto bad = PodDisruptionBudgetFromYaml(YAML::Load(R"({"metadata":{"name":"b"},"spec":{"minAvailable":"half"}})"));
  EXPECT_THAT(bad.status().message(), HasSubstr("spec.minAvailable: expected an integer"));
  auto both = PodDisruptionBudgetFromYaml(
      YAML::Load(R"({"metadata":{"name":"b"},"spec":{"minAvailable":1,"maxUnavailable":1}})"));
  EXPECT_THAT(both.status().message(), HasSubstr("cannot both be set"));
}

TEST(K8sYamlTest, PendingResizeFromItsConditionsOrTheDeprecatedField) {
  auto pod = [](const std::string& status) {
    return PodFromYaml(YAML::Load(R"({"metadata":{"name":"db","namespace":"x","uid":"u-1"},
        "spec":{"nodeName":"n1","containers":[{"name":"main","resources":{"requests":{"cpu":"2"}}}]},
        "status":)" + status + "}"));
  };
  const std::string allocated =
      R"("containerStatuses":[{"name":"main","allocatedResources":{"cpu":"1","memory":"1Gi"}}])";
  // Kubernetes 1.33+: the kubelet reports a deferred resize as a condition.
  auto deferred = pod(R"({"phase":"Running","conditions":[{"type":"PodResizePending","status":"True",
      "reason":"Deferred","message":"Node didn't have enough capacity: cpu"}],)" + allocated + "}");
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  EXPECT_EQ(deferred->resize_status(), "Deferred");
  EXPECT_EQ(deferred->allocated().milli_cpu(), 1000);
  auto infeasible = pod(R"({"conditions":[{"type":"PodResizePending","status":"True","reason":"Infeasible"}],)" +
                        allocated + "}");
  ASSERT_TRUE(infeasible.ok()) << infeasible.status();
  EXPECT_EQ(infeasible->resize_status(), "Infeasible");
  // A resize pending behind one in progress is the pending one.
  auto both = pod(R"({"conditions":[{"type":"PodResizeInProgress","status":"True"},
      {"type":"PodResizePending","status":"True","reason":"Deferred"}],)" + allocated + "}");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->resize_status(), "Deferred");
  auto in_progress = pod(R"({"conditions":[{"type":"PodResizeInProgress","status":"True"}],)" + allocated + "}");
  ASSERT_TRUE(in_progress.ok()) << in_progress.status();
  EXPECT_EQ(in_progress->resize_status(), "InProgress");
  // 1.27-1.32: status.resize.
  auto old = pod(R"({"resize":"Deferred",)" + allocated + "}");
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ(old->resize_status(), "Deferred");
  // No resize pending: no condition True, no field; what the kubelet admitted is not kept.
  auto none = pod(R"({"conditions":[{"type":"PodResizePending","status":"False"}],)" + allocated + "}");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->resize_status(), "");
  EXPECT_FALSE(none->has_allocated());
}

}  // namespace
}  // namespace podium::k8s
