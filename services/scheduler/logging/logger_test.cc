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

// Restores the process-wide line format and logger a test changed.
class LineTest : public ::testing::Test {
 protected:
  void TearDown() override {
    SetLineFormat(Format::kText);
    SetDefault(nullptr);
  }
};

TEST_F(LineTest, TextWritesTheCollectedBytesToStderrUnchanged) {
  CapturingSink sink;
  Logger logger("podium-k8s-adapter", &sink);
  SetDefault(&logger);
  testing::internal::CaptureStderr();
  Line(Severity::kWarning) << "podium-k8s-adapter: " << "pods" << ": retrying " << 3 << "\n";
  Line() << "podium-k8s-adapter listening on " << "unix:///x" << std::endl;
  Line() << "no newline";
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "podium-k8s-adapter: pods: retrying 3\npodium-k8s-adapter listening on unix:///x\nno newline");
  EXPECT_TRUE(sink.lines().empty());
}

TEST_F(LineTest, JsonLogsOneRecordWithoutTheComponentPrefixOrNewlines) {
  CapturingSink sink;
  Logger logger("podium-plugin-host", &sink);
  SetDefault(&logger);
  SetLineFormat(Format::kJson);
  testing::internal::CaptureStderr();
  Line(Severity::kWarning) << "podium-plugin-host: " << "bind failed: " << 42 << "\n\n";
  Line() << "podium-plugin-host listening on " << "127.0.0.1:1" << std::endl;
  Line(Severity::kError) << "podium-plugin-hostess: not our prefix\n";
  Line() << "two\nlines\n";
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
  const auto lines = sink.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0].severity, Severity::kWarning);
  EXPECT_EQ(lines[0].message, "bind failed: 42");
  EXPECT_EQ(lines[1].severity, Severity::kInfo);
  EXPECT_EQ(lines[1].message, "listening on 127.0.0.1:1");
  EXPECT_EQ(lines[2].severity, Severity::kError);
  EXPECT_EQ(lines[2].message, "podium-plugin-hostess: not our prefix");
  EXPECT_EQ(lines[3].message, "two\nlines");
}

TEST_F(LineTest, WriteLineTakesFieldsAndAnExplicitFormat) {
  CapturingSink sink;
  Logger logger("podium-scheduler", &sink);
  SetDefault(&logger);
  WriteLine(Format::kJson, Severity::kWarning, "podium-scheduler: warning: open", {{"address", "x:1"}});
  const auto lines = sink.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].message, "warning: open");
  ASSERT_EQ(lines[0].fields.size(), 1u);
  EXPECT_EQ(lines[0].fields[0].second, "x:1");
}

}  // namespace
}  // namespace podium::logging
