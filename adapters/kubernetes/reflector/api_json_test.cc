#include "reflector/api_json.h"

#include <fstream>
#include <functional>
#include <iterator>

#include <boost/json.hpp>
#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "common/translate/json_node.h"
#include "common/translate/k8s_json.h"
#include "common/translate/k8s_yaml.h"
#include "reflector/resource_kind.h"

namespace podium::kube {
namespace {

namespace json = boost::json;
using ::testing::HasSubstr;

json::value Parse(std::string_view text) {
  auto v = ParseApiJson(text, "test");
  EXPECT_TRUE(v.ok()) << v.status();
  return v.ok() ? *std::move(v) : json::value();
}

// Numbers read as decimal text (integral values without exponent), as the
// translation's integer and quantity fields parse them.
TEST(ApiJsonTest, ScalarsAreText) {
  const json::value v = Parse(R"({"a":1,"b":[true,null,"x"],"c":1.5,"d":1e3,"e":{"f":-7},"g":"null","h":18446744073709551615})");
  EXPECT_EQ(ScalarText(Member(&v, "g")), "null");
  EXPECT_EQ(ScalarText(Member(&v, "h")), "18446744073709551615");
  EXPECT_EQ(ScalarText(Member(&v, "a")), "1");
  EXPECT_EQ(ScalarText(Member(&v, "c")), "1.5");
  EXPECT_EQ(ScalarText(Member(&v, "d")), "1000");
  EXPECT_EQ(ScalarText(Member(Member(&v, "e"), "f")), "-7");
  EXPECT_EQ(ScalarText(Member(&v, "b")), "");  // A list has no text.
  EXPECT_EQ(Member(&v, "missing"), nullptr);
  EXPECT_EQ(Member(Member(&v, "a"), "x"), nullptr);  // Not an object.

  const k8s::JsonNode n(v);
  EXPECT_TRUE(n.IsMap());
  EXPECT_TRUE(n["b"].IsSequence());
  EXPECT_EQ(n["b"].size(), 3u);
  bool b = false;
  EXPECT_TRUE(n["b"][size_t{0}].DecodeBool(&b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(n["b"][size_t{1}].IsNull());
  EXPECT_TRUE(n["b"][size_t{1}].IsDefined());
  EXPECT_FALSE(n["b"][size_t{3}].IsDefined());
  EXPECT_FALSE(n["missing"].IsDefined());
  EXPECT_EQ(n["g"].Type(), YAML::NodeType::Scalar);  // The string "null" is not null.
  EXPECT_FALSE(n["c"].DecodeBool(&b));
}

TEST(ApiJsonTest, MalformedJsonIsDataLossNamingWhat) {
  for (const char* bad : {"", "{", "<html>502</html>", R"({"a":1,})", "[1,2"}) {
    auto n = ParseApiJson(bad, "list /api/v1/pods");
    EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(n.status().message(), HasSubstr("list /api/v1/pods: not JSON")) << bad;
  }
}

std::string Read(const std::string& name) {
  std::ifstream in(std::string(PODIUM_KUBE_JSON_CORPUS_DIR) + "/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One translation, two readers: each object of the seed corpus translates from
// Boost.JSON exactly as yaml-cpp's reading of the same text does through the
// *FromYaml functions (the same objects, or the same refusal and message).
TEST(ApiJsonTest, JsonTranslationEqualsTheYamlTranslationOnTheSeedCorpus) {
  struct Pair {
    json::value json;
    YAML::Node yaml;
  };
  std::vector<Pair> objects;
  for (const char* file : {"pod-list.json", "node-list.json", "pdb-list.json", "priorityclass-list.json",
                           "bad-quantity-and-no-name.json", "out-of-range-fields.json"}) {
    const std::string text = Read(file);
    ASSERT_FALSE(text.empty()) << file;
    const json::value doc = Parse(text);
    const YAML::Node theirs = YAML::Load(text);
    const json::value* items = Member(&doc, "items");
    ASSERT_NE(items, nullptr) << file;
    ASSERT_EQ(items->get_array().size(), theirs["items"].size()) << file;
    for (size_t i = 0; i < theirs["items"].size(); ++i) objects.push_back({items->get_array()[i], theirs["items"][i]});
  }
  const std::vector<std::string> lines = absl::StrSplit(Read("watch-events.jsonl"), '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    const json::value doc = Parse(line);
    ASSERT_NE(Member(&doc, "object"), nullptr) << line;
    objects.push_back({*Member(&doc, "object"), YAML::Load(line)["object"]});
  }
  ASSERT_GE(objects.size(), 15u);

  using google::protobuf::util::MessageDifferencer;
  int translated = 0, refused = 0;
  auto same = [&](const auto& a, const auto& b, const char* what) {
    ASSERT_EQ(a.status(), b.status()) << what;
    if (!a.ok()) {
      ++refused;
      return;
    }
    ++translated;
    EXPECT_TRUE(MessageDifferencer::Equals(*a, *b))
        << what << "\njson: " << a->ShortDebugString() << "\nyaml: " << b->ShortDebugString();
  };
  for (const Pair& o : objects) {
    same(k8s::PodFromJson(o.json), k8s::PodFromYaml(o.yaml), "Pod");
    same(k8s::NodeFromJson(o.json), k8s::NodeFromYaml(o.yaml), "Node");
    same(k8s::PriorityClassFromJson(o.json), k8s::PriorityClassFromYaml(o.yaml), "PriorityClass");
    same(k8s::PodDisruptionBudgetFromJson(o.json), k8s::PodDisruptionBudgetFromYaml(o.yaml), "PDB");
    same(k8s::NamespaceFromJson(o.json), k8s::NamespaceFromYaml(o.yaml), "Namespace");
    same(k8s::PodGroupFromJson(o.json), k8s::PodGroupFromYaml(o.yaml), "PodGroup");
  }
  EXPECT_GE(translated, 8);
  EXPECT_GE(refused, 8);
}

// The JSON path's refusals name the field, for each way an API object can be
// malformed; what JSON types carry (numbers, booleans, null) reads as the
// YAML path reads the same text.
TEST(ApiJsonTest, PodTable) {
  struct Case {
    const char* name;
    const char* spec_json;  // The pod's "spec".
    const char* error;      // "" = translates.
    std::function<void(const v1::Pod&)> check = nullptr;
  };
  const std::vector<Case> cases = {
      {"plain", R"({"containers":[{"name":"c","resources":{"requests":{"cpu":"100m","memory":"500Mi"}}}]})", "",
       [](const v1::Pod& p) {
         EXPECT_EQ(p.containers(0).requests().milli_cpu(), 100);
         EXPECT_EQ(p.containers(0).requests().memory_bytes(), 500 * 1024 * 1024);
       }},
      {"numeric quantity", R"({"containers":[{"name":"c","resources":{"limits":{"cpu":2}}}]})", "",
       [](const v1::Pod& p) { EXPECT_EQ(p.containers(0).requests().milli_cpu(), 2000); }},
      {"bad quantity", R"({"containers":[{"name":"c","resources":{"requests":{"cpu":"lots"}}}]})",
       "spec.containers[0].resources.requests.cpu: "},
      {"negative quantity", R"({"containers":[{"name":"c","resources":{"requests":{"memory":"-1Gi"}}}]})",
       "spec.containers[0].resources.requests.memory: quantity \"-1Gi\" must not be negative"},
      {"containers not a list", R"({"containers":{"name":"c"}})", "spec.containers: expected a list, got a mapping"},
      {"name not a string", R"({"containers":[{"name":["c"]}]})", "spec.containers[0].name: expected a string, got a list"},
      {"priority", R"({"priority":7,"containers":[]})", "", [](const v1::Pod& p) { EXPECT_EQ(p.priority(), 7); }},
      {"priority not an integer", R"({"priority":1.5})", "spec.priority: expected an integer, got \"1.5\""},
      {"priority out of range", R"({"priority":3000000000})", "spec.priority: integer out of range: 3000000000"},
      {"null fields are absent", R"({"nodeName":null,"tolerations":null,"affinity":null,"priority":null})", "",
       [](const v1::Pod& p) { EXPECT_EQ(p.node_name(), ""); }},
      {"toleration seconds", R"({"tolerations":[{"key":"k","operator":"Exists","effect":"NoExecute","tolerationSeconds":30}]})",
       "", [](const v1::Pod& p) { EXPECT_EQ(p.tolerations(0).toleration_seconds(), 30); }},
      {"unknown toleration operator", R"({"tolerations":[{"key":"k","operator":"Like"}]})",
       "spec.tolerations[0].operator: unknown operator \"Like\""},
      {"node selector", R"({"nodeSelector":{"zone":"a","n":1}})", "",
       [](const v1::Pod& p) { EXPECT_EQ(p.node_selector().at("n"), "1"); }},
      {"affinity term", R"({"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"z","operator":"Near"}]}]}}}})",
       "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator: unknown operator \"Near\""},
      {"spec not a mapping", R"("nope")", "spec: expected a mapping, got a scalar"},
  };
  for (const Case& c : cases) {
    const std::string text = std::string(R"({"kind":"Pod","metadata":{"name":"p","namespace":"ns","uid":"u1"},"spec":)") +
                             c.spec_json + "}";
    const json::value v = Parse(text);
    auto pod = k8s::PodFromJson(v);
    auto via_yaml = k8s::PodFromYaml(YAML::Load(text));
    ASSERT_EQ(pod.status(), via_yaml.status()) << c.name;  // The same answer as the YAML path.
    if (*c.error == '\0') {
      ASSERT_TRUE(pod.ok()) << c.name << ": " << pod.status();
      EXPECT_EQ(pod->meta().name(), "p") << c.name;
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*pod, *via_yaml)) << c.name;
      if (c.check) c.check(*pod);
    } else {
      EXPECT_EQ(pod.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
      EXPECT_THAT(pod.status().message(), HasSubstr(c.error)) << c.name;
    }
  }
}

TEST(ApiJsonTest, NodeTable) {
  struct Case {
    const char* name;
    const char* json;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"plain", R"({"metadata":{"name":"n"},"status":{"capacity":{"cpu":"4","pods":110}}})", ""},
      {"unschedulable true", R"({"metadata":{"name":"n"},"spec":{"unschedulable":true}})", ""},
      {"unschedulable as text", R"({"metadata":{"name":"n"},"spec":{"unschedulable":"true"}})", ""},
      {"unschedulable not a boolean", R"({"metadata":{"name":"n"},"spec":{"unschedulable":"maybe"}})",
       "spec.unschedulable: expected a boolean"},
      {"unschedulable a number", R"({"metadata":{"name":"n"},"spec":{"unschedulable":1}})",
       "spec.unschedulable: expected a boolean"},
      {"taint without effect", R"({"metadata":{"name":"n"},"spec":{"taints":[{"key":"k"}]}})",
       "spec.taints[0].effect: missing"},
      {"no name", R"({"metadata":{"labels":{}}})", "metadata.name: missing"},
      {"metadata a list", R"({"metadata":[]})", "metadata: expected a mapping, got a list"},
      {"bad allocatable", R"({"metadata":{"name":"n"},"status":{"allocatable":{"memory":"1Qi"}}})",
       "status.allocatable.memory: "},
      {"creation time", R"({"metadata":{"name":"n","creationTimestamp":"yesterday"}})",
       "metadata.creationTimestamp: invalid time \"yesterday\""},
  };
  for (const Case& c : cases) {
    const json::value v = Parse(c.json);
    auto node = k8s::NodeFromJson(v);
    auto via_yaml = k8s::NodeFromYaml(YAML::Load(c.json));
    ASSERT_EQ(node.status(), via_yaml.status()) << c.name;
    if (*c.error == '\0') {
      ASSERT_TRUE(node.ok()) << c.name << ": " << node.status();
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*node, *via_yaml)) << c.name;
    } else {
      EXPECT_THAT(node.status().message(), HasSubstr(c.error)) << c.name;
    }
  }
  auto node = k8s::NodeFromJson(Parse(R"({"metadata":{"name":"n"},"spec":{"unschedulable":true},"status":{"capacity":{"cpu":"4","pods":110}}})"));
  ASSERT_TRUE(node.ok());
  EXPECT_TRUE(node->unschedulable());
  EXPECT_EQ(node->allocatable().milli_cpu(), 4000);  // Defaulted from capacity.
  EXPECT_EQ(node->allocatable().pods(), 110);
}

}  // namespace
}  // namespace podium::kube
