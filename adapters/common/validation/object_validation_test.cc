#include "common/validation/object_validation.h"

#include "gtest/gtest.h"

namespace podium::validation {
namespace {

v1::ObjectEvent GoodPod() {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  auto* p = e.mutable_pod();
  p->mutable_meta()->set_uid("u1");
  p->mutable_meta()->set_namespace_("shop");
  p->mutable_meta()->set_name("web-1");
  p->add_containers()->mutable_requests()->set_milli_cpu(100);
  return e;
}

TEST(ValidateObjectEvent, AcceptsAWellFormedPod) {
  EXPECT_TRUE(ValidateObjectEvent(GoodPod()).ok());
  EXPECT_EQ(DescribeObject(GoodPod()), "Pod shop/web-1");
}

// What Kubernetes accepts is accepted: a request equal to its limit, the
// built-in PriorityClasses as a cluster dump lists them, a user class at
// 10^9, valid affinity and spread constraints.
TEST(ValidateObjectEvent, AcceptsWhatKubernetesAccepts) {
  v1::ObjectEvent e = GoodPod();
  v1::Pod* pod = e.mutable_pod();
  pod->mutable_containers(0)->mutable_limits()->set_milli_cpu(100);
  auto* c = pod->add_topology_spread_constraints();
  c->set_max_skew(1);
  c->set_topology_key("zone");
  c->set_min_domains(3);
  auto* na = pod->mutable_affinity()->mutable_node_affinity();
  auto* r = na->mutable_required()->add_terms()->add_match_expressions();
  r->set_key("cores");
  r->set_operator_(v1::NodeSelectorRequirement::GT);
  r->add_values("4");
  auto* pref = na->add_preferred();
  pref->set_weight(100);
  pod->mutable_affinity()->mutable_pod_anti_affinity()->add_required()->set_topology_key("kubernetes.io/hostname");
  EXPECT_TRUE(ValidatePodSpec(e.pod()).ok()) << ValidatePodSpec(e.pod());
  for (const auto& [name, value] : std::vector<std::pair<std::string, int32_t>>{
           {"system-node-critical", 2000001000}, {"system-cluster-critical", 2000000000}, {"urgent", 1000000000}}) {
    v1::ObjectEvent pc;
    pc.set_type(v1::ObjectEvent::UPSERT);
    pc.mutable_priority_class()->mutable_meta()->set_uid("uid-" + name);
    pc.mutable_priority_class()->mutable_meta()->set_name(name);
    pc.mutable_priority_class()->set_value(value);
    EXPECT_TRUE(ValidateObjectEvent(pc).ok()) << name << ": " << ValidateObjectEvent(pc);
  }
}

TEST(ValidateObjectEvent, NamesTheFieldThatIsWrong) {
  struct Case {
    const char* name;
    std::function<void(v1::ObjectEvent&)> breakit;
    const char* field;
  } cases[] = {
      {"no uid", [](auto& e) { e.mutable_pod()->mutable_meta()->clear_uid(); }, "metadata.uid"},
      {"negative cpu",
       [](auto& e) { e.mutable_pod()->mutable_containers(0)->mutable_requests()->set_milli_cpu(-1); },
       "spec.containers[0].resources.requests.cpu"},
      {"negative extended resource",
       [](auto& e) {
         (*e.mutable_pod()->mutable_containers(0)->mutable_requests()->mutable_scalar())["nvidia.com/gpu"] = -2;
       },
       "spec.containers[0].resources.requests.nvidia.com/gpu"},
      {"negative memory limit",
       [](auto& e) { e.mutable_pod()->mutable_containers(0)->mutable_limits()->set_memory_bytes(-1); },
       "spec.containers[0].resources.limits.memory"},
      {"control character in a second container's resource name",
       [](auto& e) {
         (*e.mutable_pod()->add_containers()->mutable_requests()->mutable_scalar())["example.com/\x1b"] = 1;
       },
       "spec.containers[1].resources.requests resource name"},
      {"host port out of range",
       [](auto& e) { e.mutable_pod()->mutable_containers(0)->add_ports()->set_host_port(70000); },
       "spec.containers[0].ports[0].hostPort"},
      {"exists toleration with a value",
       [](auto& e) {
         auto* t = e.mutable_pod()->add_tolerations();
         t->set_operator_(v1::Toleration::EXISTS);
         t->set_value("x");
       },
       "spec.tolerations[0].value"},
      {"newline in the name (forged log line)",
       [](auto& e) { e.mutable_pod()->mutable_meta()->set_name("web\nE1123 fake error"); }, "metadata.name"},
      {"escape sequence in the namespace",
       [](auto& e) { e.mutable_pod()->mutable_meta()->set_namespace_("shop\x1b[2J"); }, "metadata.namespace"},
      {"C1 control in the name", [](auto& e) { e.mutable_pod()->mutable_meta()->set_name("web\xc2\x85"); },
       "metadata.name"},
      {"invalid UTF-8 in the name", [](auto& e) { e.mutable_pod()->mutable_meta()->set_name("web-\xff"); },
       "metadata.name"},
      {"overlong UTF-8 in the name", [](auto& e) { e.mutable_pod()->mutable_meta()->set_name("a\xc0\xaf"); },
       "metadata.name"},
      {"name longer than 253", [](auto& e) { e.mutable_pod()->mutable_meta()->set_name(std::string(254, 'a')); },
       "metadata.name"},
      {"namespace longer than 63",
       [](auto& e) { e.mutable_pod()->mutable_meta()->set_namespace_(std::string(64, 'a')); }, "metadata.namespace"},
      {"control character in nodeName", [](auto& e) { e.mutable_pod()->set_node_name("n\r1"); }, "spec.nodeName"},
      {"cpu beyond 2^53",
       [](auto& e) {
         e.mutable_pod()->mutable_containers(0)->mutable_requests()->set_milli_cpu(kMaxQuantity + 1);
       },
       "spec.containers[0].resources.requests.cpu"},
      {"5e15 CPUs (5e18 milli-CPU) in an init container",
       [](auto& e) {
         e.mutable_pod()->add_init_containers()->mutable_requests()->set_milli_cpu(5'000'000'000'000'000'000);
       },
       "spec.initContainers[0].resources.requests.cpu"},
      {"overhead memory beyond 2^53",
       [](auto& e) { e.mutable_pod()->mutable_overhead()->set_memory_bytes(INT64_MAX); }, "spec.overhead.memory"},
      {"node allocatable beyond 2^53",
       [](auto& e) {
         auto* n = e.mutable_node();
         n->mutable_meta()->set_uid("n1");
         n->mutable_meta()->set_name("edge-1");
         (*n->mutable_allocatable()->mutable_scalar())["example.com/x"] = kMaxQuantity + 1;
       },
       "status.allocatable.example.com/x"},
      {"cpu request above its limit",
       [](auto& e) {
         e.mutable_pod()->mutable_containers(0)->mutable_limits()->set_milli_cpu(50);
       },
       "spec.containers[0].resources.requests[cpu]"},
      {"spread constraint with maxSkew 0",
       [](auto& e) { e.mutable_pod()->add_topology_spread_constraints()->set_topology_key("zone"); },
       "spec.topologySpreadConstraints[0].maxSkew"},
      {"spread constraint without a topology key",
       [](auto& e) { e.mutable_pod()->add_topology_spread_constraints()->set_max_skew(1); },
       "spec.topologySpreadConstraints[0].topologyKey"},
      {"spread constraint with minDomains 0",
       [](auto& e) {
         auto* c = e.mutable_pod()->add_topology_spread_constraints();
         c->set_max_skew(1);
         c->set_topology_key("zone");
         c->set_min_domains(0);
       },
       "spec.topologySpreadConstraints[0].minDomains"},
      {"pod affinity term without a topology key",
       [](auto& e) { e.mutable_pod()->mutable_affinity()->mutable_pod_affinity()->add_required(); },
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"},
      {"anti-affinity weight 0",
       [](auto& e) {
         auto* t = e.mutable_pod()->mutable_affinity()->mutable_pod_anti_affinity()->add_preferred();
         t->mutable_term()->set_topology_key("zone");
       },
       "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"},
      {"pod affinity selector In without values",
       [](auto& e) {
         auto* t = e.mutable_pod()->mutable_affinity()->mutable_pod_affinity()->add_required();
         t->set_topology_key("zone");
         auto* r = t->mutable_label_selector()->add_match_expressions();
         r->set_key("app");
         r->set_operator_(v1::LabelSelectorRequirement::IN);
       },
       "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector."
       "matchExpressions[0].values"},
      {"required node affinity with no term",
       [](auto& e) { e.mutable_pod()->mutable_affinity()->mutable_node_affinity()->mutable_required(); },
       "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"},
      {"node affinity Gt that is no integer",
       [](auto& e) {
         auto* r = e.mutable_pod()->mutable_affinity()->mutable_node_affinity()->mutable_required()->add_terms()
                       ->add_match_expressions();
         r->set_key("cores");
         r->set_operator_(v1::NodeSelectorRequirement::GT);
         r->add_values("abc");
       },
       "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
       "matchExpressions[0].values[0]"},
      {"user PriorityClass above 10^9",
       [](auto& e) {
         auto* pc = e.mutable_priority_class();
         pc->mutable_meta()->set_uid("pc1");
         pc->mutable_meta()->set_name("urgent");
         pc->set_value(2000000500);
       },
       "value"},
      {"user PriorityClass named system-",
       [](auto& e) {
         auto* pc = e.mutable_priority_class();
         pc->mutable_meta()->set_uid("pc1");
         pc->mutable_meta()->set_name("system-mine");
         pc->set_value(5);
       },
       "metadata.name"},
      {"system-node-critical with another value",
       [](auto& e) {
         auto* pc = e.mutable_priority_class();
         pc->mutable_meta()->set_uid("pc1");
         pc->mutable_meta()->set_name("system-node-critical");
         pc->set_value(5);
       },
       "value"},
      {"no type", [](auto& e) { e.clear_type(); }, "type"},
      {"taint without effect",
       [](auto& e) {
         auto* n = e.mutable_node();
         n->mutable_meta()->set_uid("n1");
         n->mutable_meta()->set_name("edge-1");
         n->add_taints()->set_key("edge");
       },
       "spec.taints[0].effect"},
  };
  for (const auto& c : cases) {
    v1::ObjectEvent e = GoodPod();
    c.breakit(e);
    absl::Status s = ValidateObjectEvent(e);
    if (s.ok() && e.has_pod()) s = ValidatePodSpec(e.pod());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(s.message().substr(0, std::string(c.field).size()), c.field) << c.name << ": " << s;
  }
}

TEST(ValidateObjectEvent, AcceptsTheBoundsAndUtf8Names) {
  v1::ObjectEvent e = GoodPod();
  e.mutable_pod()->mutable_meta()->set_name(std::string(kMaxNameLength, 'a'));
  e.mutable_pod()->mutable_meta()->set_namespace_(std::string(kMaxNamespaceLength, 'b'));
  e.mutable_pod()->mutable_containers(0)->mutable_requests()->set_memory_bytes(kMaxQuantity);
  EXPECT_TRUE(ValidateObjectEvent(e).ok()) << ValidateObjectEvent(e);
  e.mutable_pod()->mutable_meta()->set_name("caf\xc3\xa9-\xe2\x82\xac-\xf0\x9f\x98\x80");
  EXPECT_TRUE(ValidateObjectEvent(e).ok()) << ValidateObjectEvent(e);
}

// The scheduler's gate keeps a pod whose spec the API server would refuse (a
// bound one keeps counting on its node; its plugins judge it as written);
// podium-sim's loader refuses the file (ValidatePodSpec).
TEST(ValidateObjectEvent, ThePodSpecChecksAreTheLoadersNotTheSchedulersGate) {
  v1::ObjectEvent e = GoodPod();
  e.mutable_pod()->add_topology_spread_constraints()->set_topology_key("zone");  // maxSkew 0.
  EXPECT_TRUE(ValidateObjectEvent(e).ok());
  EXPECT_EQ(ValidatePodSpec(e.pod()).message(), "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero");
}

TEST(ValidateObjectEvent, APdbWithAnInvalidSelectorIsRefusedNamingTheField) {
  v1::ObjectEvent e;
  e.set_type(v1::ObjectEvent::UPSERT);
  v1::PodDisruptionBudget* pdb = e.mutable_pdb();
  pdb->mutable_meta()->set_name("db");
  pdb->mutable_meta()->set_namespace_("shop");
  pdb->mutable_meta()->set_uid("uid-db");
  v1::LabelSelectorRequirement* r = pdb->mutable_selector()->add_match_expressions();
  r->set_key("app");
  r->set_operator_(v1::LabelSelectorRequirement::IN);
  absl::Status s = ValidateObjectEvent(e);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "spec.selector.matchExpressions[0].values: must be non-empty for operator In and NotIn");
  EXPECT_EQ(DescribeObject(e), "PodDisruptionBudget shop/db");
  // Its deletion needs only its identity; a valid selector is accepted.
  e.set_type(v1::ObjectEvent::DELETE);
  EXPECT_TRUE(ValidateObjectEvent(e).ok());
  e.set_type(v1::ObjectEvent::UPSERT);
  r->add_values("db");
  EXPECT_TRUE(ValidateObjectEvent(e).ok());
}

TEST(DescribeObject, EscapesAndTruncatesWhatItEchoes) {
  v1::ObjectEvent e = GoodPod();
  e.mutable_pod()->mutable_meta()->set_name("web\nE1123 forged");
  EXPECT_EQ(DescribeObject(e), "Pod shop/web\\nE1123 forged");
  e.mutable_pod()->mutable_meta()->set_name(std::string(1000, 'a'));
  EXPECT_EQ(DescribeObject(e), "Pod shop/" + std::string(kMaxNameLength, 'a') + "...");
}

}  // namespace
}  // namespace podium::validation
