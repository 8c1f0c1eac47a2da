#include "format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "boost/json/parse.hpp"
#include "yaml-cpp/yaml.h"

namespace podium::ctl {
namespace {

TEST(PodiumctlTableTest, AlignsColumnsAndMarksEmptyCells) {
  Table t({"NAME", "QUEUE", "PLUGINS"});
  t.AddRow({"web-1", "active", ""});
  t.AddRow({"a-much-longer-name", "unschedulable", "NodeResourcesFit"});
  EXPECT_EQ(t.Render(),
            "NAME                 QUEUE           PLUGINS\n"
            "web-1                active          <none>\n"
            "a-much-longer-name   unschedulable   NodeResourcesFit\n");
}

// What an operator typed comes back in error messages: never raw control
// characters (a terminal would act on them).
TEST(PodiumctlPrintableTest, EscapesControlCharactersOnly) {
  EXPECT_EQ(Printable("pod \"\x01" "bad\x1b[2J\"\n\t\r\x7f"), "pod \"\\x01bad\\x1b[2J\"\\n\\t\\r\\x7f");
  EXPECT_EQ(Printable("default/caf\xc3\xa9 ok"), "default/caf\xc3\xa9 ok");
}

TEST(PodiumctlShellWordTest, QuotesWhatTheShellWouldSplitOrExpand) {
  EXPECT_EQ(ShellWord("offset:500"), "offset:500");
  EXPECT_EQ(ShellWord("batch-1.x"), "batch-1.x");
  EXPECT_EQ(ShellWord("a b"), "'a b'");
  EXPECT_EQ(ShellWord("$(x)"), "'$(x)'");
  EXPECT_EQ(ShellWord("it's"), "'it'\\''s'");
  EXPECT_EQ(ShellWord(""), "''");
}

TEST(PodiumctlTableTest, HeaderOnlyAndShortRows) {
  Table t({"A", "B"});
  EXPECT_EQ(t.Render(), "A   B\n");
  t.AddRow({"x"});
  EXPECT_EQ(t.Render(), "A   B\nx   <none>\n");
}

TEST(PodiumctlFormatTest, MilliCpu) {
  EXPECT_EQ(FormatMilliCpu(0), "0");
  EXPECT_EQ(FormatMilliCpu(1500), "1500m");
  EXPECT_EQ(FormatMilliCpu(2000), "2");
  EXPECT_EQ(FormatMilliCpu(250), "250m");
}

TEST(PodiumctlFormatTest, BytesInTheLargestExactBinaryUnit) {
  EXPECT_EQ(FormatBytes(0), "0");
  EXPECT_EQ(FormatBytes(int64_t{4} << 30), "4Gi");
  EXPECT_EQ(FormatBytes(int64_t{1536} << 20), "1536Mi");
  EXPECT_EQ(FormatBytes(128 << 20), "128Mi");
  EXPECT_EQ(FormatBytes(1000), "1000");
  EXPECT_EQ(FormatBytes(2048), "2Ki");
}

TEST(PodiumctlFormatTest, Percent) {
  EXPECT_EQ(FormatPercent(1500, 2000), "75%");
  EXPECT_EQ(FormatPercent(1, 3), "33%");
  EXPECT_EQ(FormatPercent(5, 0), "-");
}

TEST(PodiumctlFormatTest, AgesAsKubectlPrintsThem) {
  EXPECT_EQ(FormatAge(absl::Seconds(-3)), "0s");
  EXPECT_EQ(FormatAge(absl::Seconds(45)), "45s");
  EXPECT_EQ(FormatAge(absl::Seconds(119)), "119s");
  EXPECT_EQ(FormatAge(absl::Seconds(312)), "5m12s");
  EXPECT_EQ(FormatAge(absl::Minutes(42)), "42m");
  EXPECT_EQ(FormatAge(absl::Hours(3) + absl::Minutes(4)), "3h4m");
  EXPECT_EQ(FormatAge(absl::Hours(20)), "20h");
  EXPECT_EQ(FormatAge(absl::Hours(53)), "2d5h");
  EXPECT_EQ(FormatAge(absl::Hours(24 * 30)), "30d");
}

TEST(PodiumctlFormatTest, TimestampsAndCamelCase) {
  EXPECT_EQ(FormatTimestamp(absl::FromUnixSeconds(1795000000)), "2026-11-18T11:06:40Z");
  EXPECT_TRUE(JsonTimestamp(0).is_null());
  EXPECT_EQ(JsonTimestamp(1795000000000000).as_string(), "2026-11-18T11:06:40Z");
  EXPECT_EQ(CamelCase("PRE_FILTER"), "PreFilter");
  EXPECT_EQ(CamelCase("UNSCHEDULABLE_AND_UNRESOLVABLE"), "UnschedulableAndUnresolvable");
  EXPECT_EQ(CamelCase("READY"), "Ready");
}

TEST(PodiumctlFormatTest, JsonRoundTripsAndIsIndented) {
  boost::json::value doc = {{"pods", boost::json::array{{{"name", "a"}, {"attempts", 2}}}},
                            {"empty", boost::json::array{}},
                            {"none", nullptr}};
  const std::string text = RenderJson(doc);
  EXPECT_EQ(boost::json::parse(text), doc);
  EXPECT_THAT(text, ::testing::HasSubstr("\n  \"pods\": [\n    {\n      \"name\": \"a\""));
}

TEST(PodiumctlFormatTest, DoublesPrintShortAndReadBack) {
  boost::json::value doc = {{"p50", 0.388938}, {"p99", 72.038213}, {"whole", 2.0}, {"tiny", 1e-05}};
  EXPECT_EQ(RenderJsonLine(doc), "{\"p50\":0.388938,\"p99\":72.038213,\"whole\":2.0,\"tiny\":1.0e-05}\n");
  EXPECT_EQ(boost::json::parse(RenderJsonLine(doc)), doc);
  YAML::Node y = YAML::Load(RenderYaml(doc));
  EXPECT_DOUBLE_EQ(y["p50"].as<double>(), 0.388938);
  EXPECT_EQ(y["p50"].Scalar(), "0.388938");
  EXPECT_DOUBLE_EQ(y["tiny"].as<double>(), 1e-05);
  EXPECT_EQ(RenderJsonLine(boost::json::value(std::nan(""))), "null\n");
}

TEST(PodiumctlFormatTest, YamlKeepsTypesOfTrickyStrings) {
  boost::json::value doc = {{"name", "007"},     {"flag", "true"},  {"empty", ""},     {"plain", "web-1"},
                            {"count", 3},         {"ratio", 0.5},    {"nothing", nullptr},
                            {"time", "2026-11-18T11:06:40Z"},
                            {"list", boost::json::array{"no", "x"}}};
  YAML::Node y = YAML::Load(RenderYaml(doc));
  EXPECT_EQ(y["name"].as<std::string>(), "007");
  EXPECT_EQ(y["name"].Tag(), "!") << "a quoted scalar, read back as a string";
  EXPECT_EQ(y["flag"].Tag(), "!");
  EXPECT_EQ(y["empty"].as<std::string>(), "");
  EXPECT_EQ(y["plain"].as<std::string>(), "web-1");
  EXPECT_EQ(y["time"].Tag(), "!") << "PyYAML would read a plain timestamp as a datetime";
  EXPECT_EQ(y["count"].as<int>(), 3);
  EXPECT_DOUBLE_EQ(y["ratio"].as<double>(), 0.5);
  EXPECT_TRUE(y["nothing"].IsNull());
  EXPECT_EQ(y["list"][0].Tag(), "!");
  EXPECT_EQ(y["list"][1].as<std::string>(), "x");
}

}  // namespace
}  // namespace podium::ctl
