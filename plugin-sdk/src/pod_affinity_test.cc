#include "podium/sdk/pod_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "podium/sdk/framework.h"

namespace podium::sdk {
namespace {

using ::testing::HasSubstr;

v1::Pod MakePod(std::string ns, std::initializer_list<std::pair<std::string, std::string>> labels) {
  v1::Pod pod;
  pod.mutable_meta()->set_namespace_(std::move(ns));
  pod.mutable_meta()->set_name("p");
  pod.mutable_meta()->set_uid("uid-p");
  for (const auto& [k, v] : labels) (*pod.mutable_meta()->mutable_labels())[k] = v;
  return pod;
}

v1::PodAffinityTerm Term(std::string key, std::string value, std::string topology) {
  v1::PodAffinityTerm t;
  (*t.mutable_label_selector()->mutable_match_labels())[key] = value;
  t.set_topology_key(std::move(topology));
  return t;
}

TEST(PodAffinityTermsTest, PodsWithoutTermsCarryNothing) {
  EXPECT_EQ(PodAffinityTerms::ForPod(MakePod("a", {})), nullptr);
  v1::Pod pod = MakePod("a", {});
  pod.mutable_affinity()->mutable_node_affinity();
  EXPECT_EQ(PodAffinityTerms::ForPod(pod), nullptr);
  EXPECT_EQ(PodInfo::Create(pod)->affinity, nullptr);
}

TEST(PodAffinityTermsTest, NamespacesDefaultToThePodsOwn) {
  v1::Pod pod = MakePod("shop", {{"app", "web"}});
  *pod.mutable_affinity()->mutable_pod_anti_affinity()->add_required() =
      Term("app", "web", "kubernetes.io/hostname");
  auto terms = PodAffinityTerms::ForPod(pod);
  ASSERT_NE(terms, nullptr);
  ASSERT_EQ(terms->required_anti_affinity.size(), 1u);
  const AffinityTerm& t = terms->required_anti_affinity[0];
  EXPECT_TRUE(t.Matches(MakePod("shop", {{"app", "web"}}), nullptr));
  EXPECT_FALSE(t.Matches(MakePod("other", {{"app", "web"}}), nullptr));
  EXPECT_FALSE(t.Matches(MakePod("shop", {{"app", "db"}}), nullptr));
  EXPECT_EQ(t.topology_key, "kubernetes.io/hostname");
}

TEST(PodAffinityTermsTest, NamespaceListAndSelector) {
  v1::Pod pod = MakePod("shop", {});
  v1::PodAffinityTerm listed = Term("app", "db", "zone");
  listed.add_namespaces("data");
  v1::PodAffinityTerm all = Term("app", "db", "zone");
  all.mutable_namespace_selector();  // {}: every namespace.
  v1::PodAffinityTerm labelled = Term("app", "db", "zone");
  (*labelled.mutable_namespace_selector()->mutable_match_labels())["env"] = "prod";
  auto* pa = pod.mutable_affinity()->mutable_pod_affinity();
  *pa->add_required() = listed;
  *pa->add_required() = all;
  *pa->add_required() = labelled;
  auto terms = PodAffinityTerms::ForPod(pod);
  ASSERT_EQ(terms->required_affinity.size(), 3u);
  const v1::Pod db_in_data = MakePod("data", {{"app", "db"}});
  const v1::Pod db_in_shop = MakePod("shop", {{"app", "db"}});
  EXPECT_TRUE(terms->required_affinity[0].Matches(db_in_data, nullptr));
  EXPECT_FALSE(terms->required_affinity[0].Matches(db_in_shop, nullptr));  // Listed only.
  EXPECT_TRUE(terms->required_affinity[1].Matches(db_in_shop, nullptr));
  Labels prod;
  prod["env"] = "prod";
  EXPECT_TRUE(terms->required_affinity[2].Matches(db_in_data, &prod));
  EXPECT_FALSE(terms->required_affinity[2].Matches(db_in_data, nullptr));
}

TEST(PodAffinityTermsTest, MatchAndMismatchLabelKeysUseThePodsValues) {
  v1::Pod pod = MakePod("ns", {{"app", "web"}, {"rev", "2"}, {"tenant", "a"}});
  v1::PodAffinityTerm t = Term("app", "web", "zone");
  t.add_match_label_keys("rev");
  t.add_mismatch_label_keys("tenant");
  t.add_match_label_keys("absent");  // Not on the pod: ignored.
  *pod.mutable_affinity()->mutable_pod_affinity()->add_required() = t;
  auto terms = PodAffinityTerms::ForPod(pod);
  const AffinityTerm& term = terms->required_affinity[0];
  EXPECT_TRUE(term.Matches(MakePod("ns", {{"app", "web"}, {"rev", "2"}, {"tenant", "b"}}), nullptr));
  EXPECT_FALSE(term.Matches(MakePod("ns", {{"app", "web"}, {"rev", "1"}, {"tenant", "b"}}), nullptr));
  EXPECT_FALSE(term.Matches(MakePod("ns", {{"app", "web"}, {"rev", "2"}, {"tenant", "a"}}), nullptr));
}

TEST(PodAffinityTermsTest, InvalidTermIsLeftOutAndNamed) {
  v1::Pod pod = MakePod("ns", {});
  v1::PodAffinityTerm bad;
  auto* r = bad.mutable_label_selector()->add_match_expressions();
  r->set_key("app");
  r->set_operator_(v1::LabelSelectorRequirement::IN);
  auto* pref = pod.mutable_affinity()->mutable_pod_anti_affinity()->add_preferred();
  pref->set_weight(5);
  *pref->mutable_term() = bad;
  *pod.mutable_affinity()->mutable_pod_anti_affinity()->add_preferred()->mutable_term() =
      Term("a", "b", "zone");
  auto terms = PodAffinityTerms::ForPod(pod);
  EXPECT_EQ(terms->preferred_anti_affinity.size(), 1u);
  EXPECT_THAT(std::string(terms->error.message()),
              HasSubstr("spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
                        ".podAffinityTerm.labelSelector.matchExpressions[0].values"));
}

TEST(NodeInfoAffinityListsTest, KeptAsPodsComeAndGo) {
  v1::Node node;
  node.mutable_meta()->set_name("n");
  NodeInfo info(1, std::make_shared<const v1::Node>(node));
  v1::Pod plain = MakePod("ns", {});
  plain.mutable_meta()->set_uid("plain");
  v1::Pod anti = MakePod("ns", {});
  anti.mutable_meta()->set_uid("anti");
  *anti.mutable_affinity()->mutable_pod_anti_affinity()->add_required() = Term("a", "b", "zone");
  v1::Pod pref = MakePod("ns", {});
  pref.mutable_meta()->set_uid("pref");
  *pref.mutable_affinity()->mutable_pod_affinity()->add_preferred()->mutable_term() =
      Term("a", "b", "zone");
  info.AddPod(PodInfo::Create(plain));
  info.AddPod(PodInfo::Create(anti));
  info.AddPod(PodInfo::Create(pref));
  EXPECT_EQ(info.pods_with_affinity().size(), 2u);
  ASSERT_EQ(info.pods_with_required_anti_affinity().size(), 1u);
  EXPECT_EQ(info.pods_with_required_anti_affinity()[0]->uid(), "anti");
  NodeInfo copy = info;  // A dry run's copy keeps its own lists.
  copy.RemovePod("anti");
  EXPECT_TRUE(copy.pods_with_required_anti_affinity().empty());
  EXPECT_EQ(copy.pods_with_affinity().size(), 1u);
  EXPECT_EQ(info.pods_with_required_anti_affinity().size(), 1u);
  info.RemovePod("plain");
  EXPECT_EQ(info.pods_with_affinity().size(), 2u);
}

}  // namespace
}  // namespace podium::sdk
