#include "podium/sdk/label_selector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace podium::sdk {
namespace {

using ::testing::HasSubstr;

Labels MakeLabels(std::initializer_list<std::pair<std::string, std::string>> kv) {
  Labels out;
  for (const auto& [k, v] : kv) out[k] = v;
  return out;
}

v1::LabelSelectorRequirement Req(std::string key, v1::LabelSelectorRequirement::Operator op,
                                 std::vector<std::string> values = {}) {
  v1::LabelSelectorRequirement r;
  r.set_key(std::move(key));
  r.set_operator_(op);
  for (auto& v : values) r.add_values(std::move(v));
  return r;
}

struct MatchCase {
  std::string name;
  v1::LabelSelector selector;
  Labels labels;
  bool want;
};

TEST(LabelSelectorTest, MatchesAsKubernetes) {
  auto sel = [](std::initializer_list<std::pair<std::string, std::string>> match_labels,
                std::vector<v1::LabelSelectorRequirement> exprs = {}) {
    v1::LabelSelector s;
    for (const auto& [k, v] : match_labels) (*s.mutable_match_labels())[k] = v;
    for (auto& e : exprs) *s.add_match_expressions() = std::move(e);
    return s;
  };
  using R = v1::LabelSelectorRequirement;
  std::vector<MatchCase> cases = {
      {"empty selector matches everything", sel({}), MakeLabels({{"a", "1"}}), true},
      {"empty selector matches no labels", sel({}), Labels(), true},
      {"matchLabels equal", sel({{"app", "web"}}), MakeLabels({{"app", "web"}, {"x", "y"}}), true},
      {"matchLabels differ", sel({{"app", "web"}}), MakeLabels({{"app", "db"}}), false},
      {"matchLabels missing", sel({{"app", "web"}}), Labels(), false},
      {"In", sel({}, {Req("tier", R::IN, {"a", "b"})}), MakeLabels({{"tier", "b"}}), true},
      {"In missing key", sel({}, {Req("tier", R::IN, {"a"})}), Labels(), false},
      {"NotIn other value", sel({}, {Req("tier", R::NOT_IN, {"a"})}), MakeLabels({{"tier", "b"}}),
       true},
      {"NotIn missing key matches", sel({}, {Req("tier", R::NOT_IN, {"a"})}), Labels(), true},
      {"NotIn listed value", sel({}, {Req("tier", R::NOT_IN, {"a"})}), MakeLabels({{"tier", "a"}}),
       false},
      {"Exists", sel({}, {Req("gpu", R::EXISTS)}), MakeLabels({{"gpu", ""}}), true},
      {"DoesNotExist", sel({}, {Req("gpu", R::DOES_NOT_EXIST)}), MakeLabels({{"gpu", "1"}}), false},
      {"ANDed", sel({{"app", "web"}}, {Req("tier", R::IN, {"fe"})}),
       MakeLabels({{"app", "web"}, {"tier", "be"}}), false},
  };
  for (const MatchCase& c : cases) {
    absl::StatusOr<LabelSelector> s = LabelSelector::Compile(c.selector);
    ASSERT_TRUE(s.ok()) << c.name << ": " << s.status();
    EXPECT_EQ(s->Matches(c.labels), c.want) << c.name;
  }
}

TEST(LabelSelectorTest, NothingMatchesNothing) {
  EXPECT_FALSE(LabelSelector::Nothing().Matches(Labels()));
  EXPECT_TRUE(LabelSelector::Everything().Matches(Labels()));
  LabelSelector n = LabelSelector::Nothing();
  n.AddRequirement("a", LabelSelector::Operator::kExists, {});
  EXPECT_FALSE(n.Matches(MakeLabels({{"a", "1"}})));
}

TEST(LabelSelectorTest, InvalidSelectorsNameTheField) {
  using R = v1::LabelSelectorRequirement;
  struct Case {
    v1::LabelSelectorRequirement req;
    std::string error;
  };
  std::vector<Case> cases = {
      {Req("a", R::IN), "spec.sel.matchExpressions[0].values: must be specified"},
      {Req("a", R::EXISTS, {"x"}), "spec.sel.matchExpressions[0].values: may not be specified"},
      {Req("", R::EXISTS), "spec.sel.matchExpressions[0].key: empty key"},
      {Req("a", R::OPERATOR_UNSPECIFIED), "spec.sel.matchExpressions[0].operator"},
  };
  for (const Case& c : cases) {
    v1::LabelSelector s;
    *s.add_match_expressions() = c.req;
    absl::StatusOr<LabelSelector> compiled = LabelSelector::Compile(s, "spec.sel");
    ASSERT_FALSE(compiled.ok()) << c.error;
    EXPECT_THAT(std::string(compiled.status().message()), HasSubstr(c.error));
  }
}

}  // namespace
}  // namespace podium::sdk
