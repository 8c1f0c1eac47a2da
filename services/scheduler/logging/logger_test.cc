#include "logging/logger.h"

#include <string>

#include "boost/json/parse.hpp"
#include "gtest/gtest.h"
#include "logging/capturing_sink.h"

namespace podium::logging {
namespace {

Record MakeRecord(std::string_view message, std::initializer_list<Field> fields) {
  Record r;
  r.time = absl::FromUnixMicros(1763913184123456);  // 2025-11-23 15:53:04.123456 UTC
  r.severity = Severity::kInfo;
  r.verbosity = 2;
  r.component = "podium-scheduler";
  r.message = message;
  r.fields.assign(fields.begin(), fields.end());
  return r;
}

TEST(FormatJsonTest, OneObjectPerLineWithEveryFieldEscaped) {
  const std::string evil = "a\"b\\c\nd\te\x01f ü";
  const std::string line = FormatJson(MakeRecord("bound \"pod\"\nnext", {{"pod", evil}, {"cycle", uint64_t{7}},
                                                                         {"node", "n1"}, {"ok", true}}));
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  EXPECT_EQ(line.find('\n'), line.size() - 1) << "a raw newline inside the record: " << line;
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(line, ec);
  ASSERT_FALSE(ec) << line;
  const boost::json::object& o = v.as_object();
  EXPECT_EQ(o.at("msg").as_string(), "bound \"pod\"\nnext");
  EXPECT_EQ(o.at("pod").as_string(), evil);
  EXPECT_EQ(o.at("cycle").as_int64(), 7);
  EXPECT_EQ(o.at("node").as_string(), "n1");
  EXPECT_EQ(o.at("ok").as_bool(), true);
  EXPECT_EQ(o.at("level").as_string(), "info");
  EXPECT_EQ(o.at("v").as_int64(), 2);
  EXPECT_EQ(o.at("component").as_string(), "podium-scheduler");
  EXPECT_DOUBLE_EQ(o.at("ts").to_number<double>(), 1763913184.123456);
}

TEST(FormatTextTest, KlogStyleWithQuotedEscapedValuesOnOneLine) {
  const std::string line =
      FormatText(MakeRecord("Successfully bound pod to node", {{"pod", "default/web\n\"x\""}, {"cycle", 12}}));
  EXPECT_EQ(line,
            "I1123 15:53:04.123456 podium-scheduler] \"Successfully bound pod to node\" "
            "pod=\"default/web\\n\\\"x\\\"\" cycle=12\n");
}

TEST(LoggerTest, VerbosityGatesInfoLinesButNeverWarningsOrErrors) {
  CapturingSink sink;
  Logger logger("podium-scheduler", &sink, /*verbosity=*/0);
  logger.Log(Severity::kInfo, 2, "hidden", {});
  logger.Log(Severity::kWarning, 0, "warned", {{"plugin", "Fit"}});
  logger.Log(Severity::kError, 0, "failed", {});
  EXPECT_EQ(logger.SetVerbosity(4), 0);
  logger.Log(Severity::kInfo, 4, "shown", {{"pod", "ns/p"}});
  logger.Log(Severity::kInfo, 5, "still hidden", {});
  const auto lines = sink.lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].message, "warned");
  EXPECT_EQ(lines[0].fields, (std::vector<std::pair<std::string, std::string>>{{"plugin", "Fit"}}));
  EXPECT_EQ(lines[1].message, "failed");
  EXPECT_EQ(lines[2].message, "shown");
  EXPECT_EQ(lines[2].verbosity, 4);
}

TEST(LoggerTest, ParseFormatAcceptsTextAndJsonOnly) {
  Format f;
  EXPECT_TRUE(ParseFormat("json", &f));
  EXPECT_EQ(f, Format::kJson);
  EXPECT_TRUE(ParseFormat("text", &f));
  EXPECT_EQ(f, Format::kText);
  EXPECT_FALSE(ParseFormat("yaml", &f));
}

}  // namespace
}  // namespace podium::logging
