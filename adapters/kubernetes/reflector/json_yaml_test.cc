#include "reflector/json_yaml.h"

#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "absl/strings/str_split.h"
#include "reflector/resource_kind.h"

namespace podium::kube {
namespace {

using ::testing::HasSubstr;

TEST(JsonToYamlTest, ReadsJsonAsYamlCppWould) {
  auto n = JsonToYaml(R"({"a":1,"b":[true,null,"x"],"c":1.5,"d":1e3,"e":{"f":-7},"g":"null"})", "test");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ((*n)["a"].Scalar(), "1");
  EXPECT_EQ((*n)["a"].as<int>(), 1);
  ASSERT_TRUE((*n)["b"].IsSequence());
  EXPECT_TRUE((*n)["b"][0].as<bool>());
  EXPECT_TRUE((*n)["b"][1].IsNull());
  EXPECT_EQ((*n)["b"][2].Scalar(), "x");
  EXPECT_EQ((*n)["c"].Scalar(), "1.5");
  EXPECT_EQ((*n)["d"].Scalar(), "1000");
  EXPECT_EQ((*n)["e"]["f"].as<int>(), -7);
  EXPECT_EQ((*n)["g"].Scalar(), "null");
  EXPECT_FALSE((*n)["missing"]);
}

TEST(JsonToYamlTest, MalformedJsonIsDataLossNamingWhat) {
  for (const char* bad : {"", "{", "<html>502</html>", R"({"a":1,})", "[1,2"}) {
    auto n = JsonToYaml(bad, "list /api/v1/pods");
    EXPECT_EQ(n.status().code(), absl::StatusCode::kDataLoss) << bad;
    EXPECT_THAT(n.status().message(), HasSubstr("list /api/v1/pods: not JSON")) << bad;
  }
}

std::string Read(const std::string& name) {
  std::ifstream in(std::string(PODIUM_KUBE_JSON_CORPUS_DIR) + "/" + name, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Every object of the seed corpus translates exactly as it did through
// yaml-cpp's parser (the same objects, or the same refusal).
TEST(JsonToYamlTest, TranslationEqualsTheYamlCppParsersOnTheSeedCorpus) {
  std::vector<std::pair<YAML::Node, YAML::Node>> objects;  // (ours, yaml-cpp's)
  for (const char* file : {"pod-list.json", "node-list.json", "pdb-list.json", "priorityclass-list.json",
                           "bad-quantity-and-no-name.json", "out-of-range-fields.json"}) {
    const std::string text = Read(file);
    ASSERT_FALSE(text.empty()) << file;
    auto ours = JsonToYaml(text, file);
    ASSERT_TRUE(ours.ok()) << ours.status();
    YAML::Node theirs = YAML::Load(text);
    ASSERT_EQ((*ours)["items"].size(), theirs["items"].size()) << file;
    for (size_t i = 0; i < theirs["items"].size(); ++i) objects.push_back({(*ours)["items"][i], theirs["items"][i]});
  }
  const std::vector<std::string> lines = absl::StrSplit(Read("watch-events.jsonl"), '\n', absl::SkipEmpty());
  for (const std::string& line : lines) {
    auto ours = JsonToYaml(line, "watch");
    ASSERT_TRUE(ours.ok()) << ours.status();
    objects.push_back({(*ours)["object"], YAML::Load(line)["object"]});
  }
  ASSERT_GE(objects.size(), 15u);
  int translated = 0;
  for (const ResourceKind& kind : AllKinds()) {
    if (!kind.decode) continue;  // decode_many kinds (Workloads): not in the fixtures.
    for (const auto& [ours, theirs] : objects) {
      auto a = kind.decode(ours);
      auto b = kind.decode(theirs);
      ASSERT_EQ(a.status(), b.status()) << kind.kind;
      if (!a.ok()) continue;
      ++translated;
      EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*a, *b))
          << kind.kind << "\nours:   " << a->ShortDebugString() << "\ntheirs: " << b->ShortDebugString();
    }
  }
  EXPECT_GE(translated, 8);
}

}  // namespace
}  // namespace podium::kube
