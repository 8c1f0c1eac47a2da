// PodDisruptionBudgets from Kubernetes YAML (policy/v1).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/translate/k8s_yaml.h"

namespace podium::k8s {
namespace {

TEST(PdbYamlTest, LoadsSelectorAndBudget) {
  auto c = LoadCluster({{"pdb.yaml", R"(apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: db}
spec:
  minAvailable: 50%
  selector:
    matchLabels: {app: db}
    matchExpressions: [{key: tier, operator: NotIn, values: [cache]}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec:
  maxUnavailable: 1
  selector: {matchLabels: {app: web}}
)"}});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->pdbs.size(), 2u);
  const v1::PodDisruptionBudget& db = c->pdbs[0];
  EXPECT_EQ(db.meta().namespace_(), "default");
  EXPECT_FALSE(db.meta().uid().empty());
  EXPECT_EQ(db.min_available().percent(), "50%");
  EXPECT_EQ(db.selector().match_labels().at("app"), "db");
  ASSERT_EQ(db.selector().match_expressions_size(), 1);
  EXPECT_EQ(db.selector().match_expressions(0).operator_(), v1::LabelSelectorRequirement::NOT_IN);
  EXPECT_EQ(c->pdbs[1].meta().namespace_(), "shop");
  EXPECT_EQ(c->pdbs[1].max_unavailable().int_value(), 1);
}

TEST(PdbYamlTest, BadBudgetsNameTheObjectAndField) {
  struct Case {
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"kind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {selector: {matchExpressions: [{key: app, operator: "
       "In}]}}\n",
       "x.yaml: document 1 (PodDisruptionBudget p): spec.selector.matchExpressions[0].values: must be non-empty for "
       "operator In and NotIn"},
      {"kind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {minAvailable: 1, maxUnavailable: 1}\n",
       "x.yaml: document 1 (PodDisruptionBudget p): spec: minAvailable and maxUnavailable cannot both be set"},
      {"kind: PodDisruptionBudget\nmetadata: {name: p}\nspec: {minAvailable: 150%}\n",
       "x.yaml: document 1 (PodDisruptionBudget p): spec.minAvailable: invalid percentage \"150%\" (0%-100%)"},
  };
  for (const Case& c : cases) {
    auto r = LoadCluster({{"x.yaml", c.text}});
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().message(), c.error);
  }
}

}  // namespace
}  // namespace podium::k8s
