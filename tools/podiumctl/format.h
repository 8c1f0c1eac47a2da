// Output formatting: aligned tables (kubectl's look), quantities, ages, and
// JSON/YAML rendering of the documents the commands build.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "boost/json/value.hpp"

namespace podium::ctl {

// Left-aligned columns separated by three spaces; an empty cell prints "<none>"
// so every row has as many words-groups as the header (scripts may split on
// runs of two or more spaces).
class Table {
 public:
  explicit Table(std::vector<std::string> headers);
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// 1500 -> "1500m", 2000 -> "2".
std::string FormatMilliCpu(int64_t milli);
// Binary units as kubectl prints them: 4294967296 -> "4Gi", 1536Mi, 1000 -> "1000".
std::string FormatBytes(int64_t bytes);
// "75%" of used/total, "-" when total is 0.
std::string FormatPercent(int64_t used, int64_t total);
// kubectl's ages: 45s, 5m12s, 3h4m, 2d5h; negative durations print as 0s.
std::string FormatAge(absl::Duration d);
// RFC 3339 in UTC with seconds: 2026-11-23T09:40:30Z.
std::string FormatTimestamp(absl::Time t);
// The JSON timestamp of a unix-microsecond field (null when 0).
boost::json::value JsonTimestamp(int64_t unix_micros);
// "PRE_FILTER" -> "PreFilter", "UNSCHEDULABLE_AND_UNRESOLVABLE" -> "UnschedulableAndUnresolvable".
std::string CamelCase(const std::string& upper_snake);
// A list for a table cell: "a,b" ("" when empty: the table prints <none>).
std::string JoinCell(const boost::json::value& array_of_strings, const std::string& sep = ",");

// `text` safe to print on a terminal: control characters (a newline, an
// escape sequence) escaped as \n, \t, \r, \xNN; everything else, UTF-8
// included, as is.
std::string Printable(absl::string_view text);
// `word` as a shell reads it back: as is when it holds only [A-Za-z0-9._:/=@%+-],
// else in single quotes.
std::string ShellWord(const std::string& word);

// A JSON document as pretty JSON (two-space indent, one trailing newline).
std::string RenderJson(const boost::json::value& v);
// The document on one line (watch -o json: one object per line).
std::string RenderJsonLine(const boost::json::value& v);
// The same document as YAML (strings that would read as another type are quoted).
std::string RenderYaml(const boost::json::value& v);

}  // namespace podium::ctl
