#include "batching/signature.h"

#include "gtest/gtest.h"

namespace podium::scheduler::batching {
namespace {

v1::PluginRegistration Reg(const std::string& name, std::vector<v1::PodPart> parts,
                           std::vector<v1::PodPart> unsignable_when = {}, bool normalizes = false) {
  v1::PluginRegistration r;
  r.set_name(name);
  v1::SignatureSpec* s = r.mutable_signature();
  for (auto p : parts) s->add_parts(p);
  for (auto p : unsignable_when) s->add_unsignable_when_set(p);
  s->set_normalizes_scores(normalizes);
  return r;
}

// A profile with the given plugins at Filter and Score, each "served remotely".
ProfileSpec Spec(const std::vector<std::string>& plugins) {
  ProfileSpec spec;
  for (const auto& p : plugins) {
    spec.plugins[v1::FILTER].push_back({p, 0});
    spec.plugins[v1::SCORE].push_back({p, p == "NodeResourcesFit" ? 3 : 0});
    spec.processes[p] = nullptr;
  }
  return spec;
}

v1::Pod Pod(const std::string& name, int64_t cpu) {
  v1::Pod p;
  p.mutable_meta()->set_name(name);
  p.mutable_meta()->set_uid("uid-" + name);
  p.mutable_meta()->set_namespace_("default");
  p.mutable_meta()->set_creation_timestamp_us(name.size());
  auto* c = p.add_containers();
  c->set_name(name + "-c");  // Names differ; no plugin looks at them.
  c->set_image("nginx");
  c->mutable_requests()->set_milli_cpu(cpu);
  return p;
}

absl::flat_hash_map<std::string, v1::PluginRegistration> DefaultRegs() {
  return {
      {"NodeResourcesFit", Reg("NodeResourcesFit", {v1::POD_PART_RESOURCES})},
      {"TaintToleration", Reg("TaintToleration", {v1::POD_PART_TOLERATIONS}, {}, true)},
      {"NodeAffinity", Reg("NodeAffinity", {v1::POD_PART_NODE_SELECTOR, v1::POD_PART_NODE_AFFINITY}, {}, true)},
      {"PodTopologySpread", Reg("PodTopologySpread", {}, {v1::POD_PART_TOPOLOGY_SPREAD, v1::POD_PART_OWNER_REFERENCES})},
      {"InterPodAffinity", Reg("InterPodAffinity", {v1::POD_PART_LABELS, v1::POD_PART_NAMESPACE},
                               {v1::POD_PART_INTER_POD_AFFINITY}, true)},
  };
}

Signer DefaultSigner() {
  return Signer::ForProfile(
      Spec({"NodeResourcesFit", "TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity"}),
      DefaultRegs());
}

TEST(SignatureTest, PodsEqualInEveryPartAPluginReadsHaveEqualSignatures) {
  const Signer signer = DefaultSigner();
  const PodSignature a = signer.Sign(Pod("a", 100));
  const PodSignature b = signer.Sign(Pod("bbbb", 100));  // Other name, uid, time, container name.
  ASSERT_TRUE(a.signable) << a.unsignable_reason;
  ASSERT_TRUE(b.signable);
  EXPECT_EQ(a.key, b.key);
  EXPECT_TRUE(signer.normalizing().contains("TaintToleration"));
  EXPECT_FALSE(signer.normalizing().contains("NodeResourcesFit"));
  EXPECT_EQ(signer.Weight("NodeResourcesFit"), 3);
  EXPECT_EQ(signer.Weight("TaintToleration"), 1);
}

TEST(SignatureTest, APartSomePluginReadsMakesSignaturesDiffer) {
  const Signer signer = DefaultSigner();
  const std::string base = signer.Sign(Pod("a", 100)).key;
  struct Case {
    const char* name;
    std::function<void(v1::Pod&)> change;
  };
  const Case cases[] = {
      {"requests", [](v1::Pod& p) { p.mutable_containers(0)->mutable_requests()->set_milli_cpu(200); }},
      {"init container", [](v1::Pod& p) { p.add_init_containers()->mutable_requests()->set_milli_cpu(1); }},
      {"overhead", [](v1::Pod& p) { p.mutable_overhead()->set_memory_bytes(1); }},
      {"node selector", [](v1::Pod& p) { (*p.mutable_node_selector())["zone"] = "a"; }},
      {"toleration", [](v1::Pod& p) { p.add_tolerations()->set_key("edge"); }},
      {"label", [](v1::Pod& p) { (*p.mutable_meta()->mutable_labels())["app"] = "x"; }},
      {"namespace", [](v1::Pod& p) { p.mutable_meta()->set_namespace_("other"); }},
      {"priority", [](v1::Pod& p) { p.set_priority(10); }},
      {"node affinity",
       [](v1::Pod& p) {
         p.mutable_affinity()->mutable_node_affinity()->add_preferred()->set_weight(1);
       }},
  };
  for (const Case& c : cases) {
    v1::Pod pod = Pod("a", 100);
    c.change(pod);
    const PodSignature sig = signer.Sign(pod);
    ASSERT_TRUE(sig.signable) << c.name << ": " << sig.unsignable_reason;
    EXPECT_NE(sig.key, base) << c.name;
  }
  // Images: no plugin of this profile reads them.
  v1::Pod other_image = Pod("a", 100);
  other_image.mutable_containers(0)->set_image("redis");
  EXPECT_EQ(signer.Sign(other_image).key, base);
}

TEST(SignatureTest, MapOrderDoesNotMatter) {
  const Signer signer = DefaultSigner();
  v1::Pod a = Pod("a", 100), b = Pod("b", 100);
  for (int i = 0; i < 20; ++i) (*a.mutable_node_selector())["k" + std::to_string(i)] = "v";
  for (int i = 19; i >= 0; --i) (*b.mutable_node_selector())["k" + std::to_string(i)] = "v";
  EXPECT_EQ(signer.Sign(a).key, signer.Sign(b).key);
}

TEST(SignatureTest, ConstraintsAndTermsMakeAPodUnsignableWithTheReason) {
  const Signer signer = DefaultSigner();
  v1::Pod spread = Pod("a", 100);
  spread.add_topology_spread_constraints()->set_topology_key("zone");
  PodSignature sig = signer.Sign(spread);
  EXPECT_FALSE(sig.signable);
  EXPECT_EQ(sig.unsignable_reason, "PodTopologySpread: the pod sets topologySpreadConstraints");

  v1::Pod owned = Pod("b", 100);
  owned.mutable_meta()->add_owner_references()->set_kind("ReplicaSet");
  sig = signer.Sign(owned);
  EXPECT_FALSE(sig.signable);
  EXPECT_EQ(sig.unsignable_reason, "PodTopologySpread: the pod sets ownerReferences");

  v1::Pod affine = Pod("c", 100);
  affine.mutable_affinity()->mutable_pod_anti_affinity()->add_required()->set_topology_key("zone");
  sig = signer.Sign(affine);
  EXPECT_FALSE(sig.signable);
  EXPECT_EQ(sig.unsignable_reason, "InterPodAffinity: the pod sets affinity.podAffinity/podAntiAffinity");

  // Node affinity alone is fine.
  v1::Pod node_affine = Pod("d", 100);
  node_affine.mutable_affinity()->mutable_node_affinity()->add_preferred()->set_weight(3);
  EXPECT_TRUE(signer.Sign(node_affine).signable);
}

TEST(SignatureTest, APluginWithoutASignatureMakesEveryPodOfTheProfileUnsignable) {
  auto regs = DefaultRegs();
  v1::PluginRegistration third_party;
  third_party.set_name("PreferZone");  // Registered, no SignatureSpec.
  regs["PreferZone"] = third_party;
  const Signer signer = Signer::ForProfile(Spec({"NodeResourcesFit", "PreferZone"}), regs);
  const PodSignature sig = signer.Sign(Pod("a", 100));
  EXPECT_FALSE(sig.signable);
  EXPECT_EQ(sig.unsignable_reason, "plugin PreferZone does not sign pods");

  // Not registered at all (its endpoint is down): unsignable too.
  const Signer missing = Signer::ForProfile(Spec({"NodeResourcesFit", "Gone"}), DefaultRegs());
  EXPECT_EQ(missing.Sign(Pod("a", 100)).unsignable_reason, "plugin Gone has not registered");
}

// InterPodAffinity reads an incoming pod's labels and namespace only through
// other pods' (anti-)affinity terms: while no pod has one, pods that differ
// only there share a signature; once one does, they differ again.
TEST(SignatureTest, PartsReadThroughAffinityTermsCountOnlyWhileTermsExist) {
  auto regs = DefaultRegs();
  v1::SignatureSpec* ipa = regs["InterPodAffinity"].mutable_signature();
  ipa->add_parts_read_through_affinity_terms(v1::POD_PART_LABELS);
  ipa->add_parts_read_through_affinity_terms(v1::POD_PART_NAMESPACE);
  const Signer signer = Signer::ForProfile(
      Spec({"NodeResourcesFit", "TaintToleration", "NodeAffinity", "PodTopologySpread", "InterPodAffinity"}), regs);
  ASSERT_TRUE(signer.HasPartsReadThroughAffinityTerms());
  v1::Pod a = Pod("a", 100);
  (*a.mutable_meta()->mutable_labels())["scheduling.x-k8s.io/pod-group"] = "gang-0";
  v1::Pod b = Pod("b", 100);
  (*b.mutable_meta()->mutable_labels())["scheduling.x-k8s.io/pod-group"] = "gang-1";
  b.mutable_meta()->set_namespace_("batch");
  EXPECT_EQ(signer.Sign(a, /*affinity_terms_exist=*/false).key, signer.Sign(b, false).key);
  EXPECT_NE(signer.Sign(a, true).key, signer.Sign(b, true).key);
  // A key without those parts is never a key with them.
  v1::Pod bare = Pod("bare", 100);
  bare.mutable_meta()->set_namespace_("");
  EXPECT_NE(signer.Sign(bare, false).key, signer.Sign(bare, true).key);
  // Other parts still count without terms.
  EXPECT_NE(signer.Sign(a, false).key, signer.Sign(Pod("c", 200), false).key);
  // Unsignable stays unsignable.
  v1::Pod own_terms = a;
  own_terms.mutable_affinity()->mutable_pod_anti_affinity()->add_required();
  EXPECT_FALSE(signer.Sign(own_terms, false).signable);
}

// A part another plugin reads directly is never left out.
TEST(SignatureTest, APartAnotherPluginReadsDirectlyStaysInTheSignature) {
  auto regs = DefaultRegs();
  regs["InterPodAffinity"].mutable_signature()->add_parts_read_through_affinity_terms(v1::POD_PART_LABELS);
  regs["LabelScorer"] = Reg("LabelScorer", {v1::POD_PART_LABELS});
  const Signer signer = Signer::ForProfile(Spec({"NodeResourcesFit", "InterPodAffinity", "LabelScorer"}), regs);
  EXPECT_FALSE(signer.HasPartsReadThroughAffinityTerms());
  v1::Pod a = Pod("a", 100);
  (*a.mutable_meta()->mutable_labels())["app"] = "a";
  v1::Pod b = Pod("b", 100);
  (*b.mutable_meta()->mutable_labels())["app"] = "b";
  EXPECT_NE(signer.Sign(a, false).key, signer.Sign(b, false).key);
}

}  // namespace
}  // namespace podium::scheduler::batching
