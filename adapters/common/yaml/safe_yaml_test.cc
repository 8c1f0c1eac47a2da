#include "common/yaml/safe_yaml.h"

#include <fstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podium::yaml {
namespace {

using ::testing::HasSubstr;

std::string BillionLaughs(int levels) {
  std::string text = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < levels; ++i) {
    text += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) text += (k ? ", *a" : "*a") + std::to_string(i - 1);
    text += "]\n";
  }
  return text;
}

TEST(LoadAllDocuments, LoadsDocumentsAndModestAliases) {
  auto docs = LoadAllDocuments("ok.yaml", "base: &b {cpu: 1}\nuse: *b\n---\n{\"kind\": \"Node\"}\n");
  ASSERT_TRUE(docs.ok()) << docs.status();
  ASSERT_EQ(docs->size(), 2u);
  EXPECT_EQ((*docs)[0]["use"]["cpu"].as<std::string>(), "1");
  EXPECT_EQ((*docs)[1]["kind"].as<std::string>(), "Node");
}

// Defect 15: a 1 KB "billion laughs" aborted the scheduler's --config loader
// and an 800 KB file grew podium-sim to 1.2 GB.
TEST(LoadAllDocuments, RefusesAliasAmplification) {
  const std::string text = BillionLaughs(9);  // 10^9 nodes once expanded.
  ASSERT_LT(text.size(), 1024u);
  auto docs = LoadAllDocuments("laughs.yaml", text);
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("laughs.yaml: document 1: line "));
  EXPECT_THAT(docs.status().message(), HasSubstr("alias amplification"));

  // Within the ratio but beyond the absolute bound.
  auto many = LoadAllDocuments("big.yaml", BillionLaughs(2), {.max_nodes = 50});
  ASSERT_FALSE(many.ok());
  EXPECT_THAT(many.status().message(), HasSubstr("more than 50 nodes"));
}

// kubectl and kube-scheduler decode strictly: a key written twice is an
// error. yaml-cpp kept one of the two (which one depended on how the loader
// read the map), and dropped merge keys, which it does not implement.
TEST(LoadAllDocuments, RefusesDuplicateKeysAndMergeKeys) {
  auto dup = LoadAllDocuments("d.yaml", "kind: Pod\nspec:\n  requests: {cpu: \"1\", cpu: \"64\"}\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("d.yaml: document 1: line 3"));
  EXPECT_THAT(dup.status().message(), HasSubstr("mapping key \"cpu\" already defined"));
  auto json = LoadAllDocuments("d.json", "{\"kind\": \"Node\", \"kind\": \"Pod\"}");
  EXPECT_THAT(json.status().message(), HasSubstr("mapping key \"kind\" already defined"));
  auto merge = LoadAllDocuments("m.yaml", "base: &b {namespace: prod}\nmetadata: {name: p1, <<: *b}\n");
  ASSERT_FALSE(merge.ok());
  EXPECT_THAT(merge.status().message(), HasSubstr("merge keys (<<) are not supported"));
  // The same key in two maps, a quoted "<<", and equal values are fine.
  auto ok = LoadAllDocuments("ok.yaml", "a: {cpu: 1}\nb: {cpu: 1, \"<<\": x}\nc: [{k: 1}, {k: 1}]\n");
  EXPECT_TRUE(ok.ok()) << ok.status();
}

TEST(LoadAllDocuments, NamesTheDocumentAndLineOfAParseError) {
  auto docs = LoadAllDocuments("f.yaml", "kind: Node\n---\nkind: Pod\nmetadata: [oops\n");
  ASSERT_FALSE(docs.ok());
  EXPECT_THAT(docs.status().message(), HasSubstr("f.yaml: document 2: line "));
  EXPECT_THAT(docs.status().message(), HasSubstr("invalid YAML"));
}

TEST(LoadAllDocuments, RefusesDeepNestingInvalidUtf8AndSize) {
  auto deep = LoadAllDocuments("deep.yaml", std::string(100000, '['));
  ASSERT_FALSE(deep.ok());
  EXPECT_THAT(deep.status().message(), HasSubstr("deep.yaml: document 1"));

  auto utf8 = LoadAllDocuments("u.yaml", "kind: Pod\nmetadata: {name: \"web-\xff\"}\n");
  ASSERT_FALSE(utf8.ok());
  EXPECT_THAT(utf8.status().message(), HasSubstr("u.yaml: document 1: line 2"));
  EXPECT_THAT(utf8.status().message(), HasSubstr("not valid UTF-8"));

  auto big = LoadAllDocuments("big.yaml", std::string(100, 'x'), {.max_bytes = 10});
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.status().message(), HasSubstr("big.yaml: 100 bytes, more than the limit of 10"));
}

TEST(ReadFileBounded, RefusesLargeAndMissingFiles) {
  EXPECT_FALSE(ReadFileBounded("/nonexistent/podium.yaml", 100).ok());
  const std::string path = ::testing::TempDir() + "/safe_yaml_test.yaml";
  {
    std::ofstream out(path);
    out << std::string(200, 'x');
  }
  EXPECT_FALSE(ReadFileBounded(path, 100).ok());
  auto text = ReadFileBounded(path, 200);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(text->size(), 200u);
}

}  // namespace
}  // namespace podium::yaml
