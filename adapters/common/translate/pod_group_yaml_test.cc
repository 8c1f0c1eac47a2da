// Gangs in the translation: both PodGroup APIs, the 1.35 alpha Workload, how
// pods join each, and the bad input each refuses or warns about.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/translate/k8s_yaml.h"

namespace podium::k8s {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

absl::StatusOr<LoadedCluster> Load(const std::string& yaml) { return LoadCluster({{"gangs.yaml", yaml}}); }

const v1::Pod* FindPod(const LoadedCluster& c, const std::string& name) {
  for (const auto& p : c.pods) {
    if (p.pod.meta().name() == name) return &p.pod;
  }
  return nullptr;
}

constexpr char kAllForms[] = R"(
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: sp, namespace: batch}
spec: {minMember: 2, scheduleTimeoutSeconds: 30}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: kg, namespace: batch}
spec:
  schedulingPolicy:
    gang: {minCount: 2}
---
apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: loose, namespace: batch}
spec:
  schedulingPolicy: {basic: {}}
---
apiVersion: scheduling.k8s.io/v1alpha1
kind: Workload
metadata: {name: job, namespace: batch, uid: wl-1}
spec:
  podGroups:
  - name: workers
    policy: {gang: {minCount: 2}}
  - name: driver
    policy: {basic: {}}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Pod, metadata: {name: sp-0, namespace: batch, labels: {scheduling.x-k8s.io/pod-group: sp}}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: sp-1, namespace: batch, labels: {scheduling.x-k8s.io/pod-group: sp}}, spec: {containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: kg-0, namespace: batch}, spec: {schedulingGroup: {podGroupName: kg}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: kg-1, namespace: batch}, spec: {schedulingGroup: {podGroupName: kg}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: loose-0, namespace: batch}, spec: {schedulingGroup: {podGroupName: loose}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: w-0, namespace: batch}, spec: {workloadRef: {name: job, podGroup: workers}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: w-1, namespace: batch}, spec: {workloadRef: {name: job, podGroup: workers}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: d-0, namespace: batch}, spec: {workloadRef: {name: job, podGroup: driver}, containers: [{name: c}]}}
- {apiVersion: v1, kind: Pod, metadata: {name: plain, namespace: batch}, spec: {containers: [{name: c}]}}
)";

TEST(PodGroupYamlTest, BothApisAndWorkloadsBecomeOneShape) {
  auto c = Load(kAllForms);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->warnings, IsEmpty());
  ASSERT_EQ(c->pod_groups.size(), 5u);
  std::map<std::string, const v1::PodGroup*> by_name;
  for (const auto& g : c->pod_groups) {
    EXPECT_FALSE(g.meta().uid().empty()) << g.meta().name();
    EXPECT_EQ(g.meta().namespace_(), "batch");
    by_name[g.meta().name()] = &g;
  }
  ASSERT_TRUE(by_name.contains("sp") && by_name.contains("kg") && by_name.contains("loose") &&
              by_name.contains("job/workers") && by_name.contains("job/driver"));
  EXPECT_EQ(by_name["sp"]->source(), v1::PodGroup::SCHEDULER_PLUGINS);
  EXPECT_EQ(by_name["sp"]->min_member(), 2);
  EXPECT_EQ(by_name["sp"]->schedule_timeout_seconds(), 30);
  EXPECT_EQ(by_name["kg"]->source(), v1::PodGroup::KUBERNETES_POD_GROUP);
  EXPECT_EQ(by_name["kg"]->min_member(), 2);
  EXPECT_EQ(by_name["kg"]->schedule_timeout_seconds(), kKubernetesGangTimeoutSeconds);
  EXPECT_EQ(by_name["loose"]->min_member(), 1);  // basic: each pod on its own.
  EXPECT_EQ(by_name["job/workers"]->source(), v1::PodGroup::KUBERNETES_WORKLOAD);
  EXPECT_EQ(by_name["job/workers"]->min_member(), 2);
  EXPECT_EQ(by_name["job/workers"]->meta().uid(), "wl-1/workers");
  EXPECT_EQ(by_name["job/driver"]->min_member(), 1);

  EXPECT_EQ(FindPod(*c, "sp-0")->pod_group(), "sp");
  EXPECT_EQ(FindPod(*c, "kg-1")->pod_group(), "kg");
  EXPECT_EQ(FindPod(*c, "loose-0")->pod_group(), "loose");
  EXPECT_EQ(FindPod(*c, "w-0")->pod_group(), "job/workers");
  EXPECT_EQ(FindPod(*c, "d-0")->pod_group(), "job/driver");
  EXPECT_EQ(FindPod(*c, "plain")->pod_group(), "");
}

TEST(PodGroupYamlTest, BadGroupsAreRefusedNamingObjectAndField) {
  struct Case {
    std::string name;
    std::string yaml;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"minMember 0",
       "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 0}\n",
       "gangs.yaml: document 1 (PodGroup default/g): spec.minMember: must be at least 1, got 0"},
      {"minMember missing",
       "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {}\n",
       "(PodGroup default/g): spec.minMember: must be at least 1, got 0"},
      {"negative timeout",
       "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\n"
       "spec: {minMember: 2, scheduleTimeoutSeconds: -1}\n",
       "spec.scheduleTimeoutSeconds: must not be negative, got -1"},
      {"minCount 0",
       "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: g}\n"
       "spec: {schedulingPolicy: {gang: {minCount: 0}}}\n",
       "spec.schedulingPolicy.gang.minCount: must be at least 1, got 0"},
      {"no policy",
       "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: g}\nspec: {}\n",
       "spec.schedulingPolicy: required"},
      {"both policies",
       "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: g}\n"
       "spec: {schedulingPolicy: {basic: {}, gang: {minCount: 2}}}\n",
       "spec.schedulingPolicy: exactly one of basic and gang must be set"},
      {"gang without minCount",
       "apiVersion: scheduling.k8s.io/v1alpha2\nkind: PodGroup\nmetadata: {name: g}\n"
       "spec: {schedulingPolicy: {gang: {}}}\n",
       "spec.schedulingPolicy.gang.minCount: required"},
      {"unknown API group",
       "apiVersion: example.com/v1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 2}\n",
       "apiVersion: \"example.com/v1\" is neither scheduling.x-k8s.io"},
      {"workload group minCount 0",
       "apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\n"
       "spec: {podGroups: [{name: a, policy: {gang: {minCount: 0}}}]}\n",
       "(Workload default/w): spec.podGroups[0].policy.gang.minCount: must be at least 1, got 0"},
      {"workload without groups",
       "apiVersion: scheduling.k8s.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: {}\n",
       "spec.podGroups: required"},
      {"duplicate group",
       "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 1}\n---\n"
       "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g}\nspec: {minMember: 1}\n",
       "document 2 (PodGroup default/g): metadata.name: duplicate pod group default/g"},
      {"pod with an empty schedulingGroup",
       "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulingGroup: {}, containers: [{name: c}]}\n",
       "(Pod default/p): spec.schedulingGroup.podGroupName: required"},
      {"pod with a workloadRef without podGroup",
       "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {workloadRef: {name: w}, containers: [{name: c}]}\n",
       "spec.workloadRef.podGroup: required"},
      {"pod with a workloadRef replica key (not supported)",
       "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
       "spec: {workloadRef: {name: job, podGroup: workers, podGroupReplicaKey: \"1\"}, containers: [{name: c}]}\n",
       "(Pod default/p): spec.workloadRef.podGroupReplicaKey: not supported: Podium would schedule every replica of "
       "pod group job/workers as one gang; leave it unset (got \"1\")"},
  };
  for (const Case& tc : cases) {
    SCOPED_TRACE(tc.name);
    auto c = Load(tc.yaml);
    ASSERT_FALSE(c.ok());
    EXPECT_THAT(std::string(c.status().message()), HasSubstr(tc.error));
  }
}

TEST(PodGroupYamlTest, GangsThatCannotStartAsLoadedAreWarnedAbout) {
  auto c = Load(R"(
apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: big}
spec: {minMember: 3}
---
apiVersion: v1
kind: Pod
metadata: {name: b-0, labels: {scheduling.x-k8s.io/pod-group: big}}
spec: {containers: [{name: c}]}
---
apiVersion: v1
kind: Pod
metadata: {name: lost, labels: {scheduling.x-k8s.io/pod-group: nowhere}}
spec: {containers: [{name: c}]}
)");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->warnings,
              ElementsAre(HasSubstr("(PodGroup default/big): minMember 3 but only 1 pod(s) name pod group default/big"),
                          HasSubstr("(Pod default/lost): names pod group default/nowhere, which does not exist")));
}

TEST(PodGroupYamlTest, PerObjectConversionForTheAdapter) {
  YAML::Node o = YAML::Load(
      R"({"apiVersion": "scheduling.k8s.io/v1alpha2", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ml", "uid": "u1"},
          "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}})");
  auto g = PodGroupFromYaml(o);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->meta().uid(), "u1");
  EXPECT_EQ(g->min_member(), 4);
  YAML::Node w = YAML::Load(
      R"({"apiVersion": "scheduling.k8s.io/v1alpha1", "kind": "Workload", "metadata": {"name": "w", "uid": "wu"},
          "spec": {"podGroups": [{"name": "a", "policy": {"gang": {"minCount": 2}}}, {"name": "b", "policy": {"basic": {}}}]}})");
  auto groups = PodGroupsFromWorkloadYaml(w);
  ASSERT_TRUE(groups.ok()) << groups.status();
  ASSERT_EQ(groups->size(), 2u);
  EXPECT_EQ((*groups)[0].meta().name(), "w/a");
  EXPECT_EQ((*groups)[1].min_member(), 1);
}

}  // namespace
}  // namespace podium::k8s
