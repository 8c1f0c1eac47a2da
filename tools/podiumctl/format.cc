#include "format.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <regex>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "boost/json/serialize.hpp"
#include "yaml-cpp/yaml.h"

namespace podium::ctl {

Table::Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}

void Table::AddRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  for (auto& c : cells) {
    if (c.empty()) c = "<none>";
  }
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t i = 0; i < headers_.size(); ++i) widths[i] = headers_[i].size();
  for (const auto& row : rows_) {
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    std::string l;
    for (size_t i = 0; i < cells.size(); ++i) {
      l += cells[i];
      if (i + 1 < cells.size()) l += std::string(widths[i] - cells[i].size() + 3, ' ');
    }
    out += l;
    out += '\n';
  };
  line(headers_);
  for (const auto& row : rows_) line(row);
  return out;
}

std::string FormatMilliCpu(int64_t milli) {
  if (milli % 1000 == 0) return absl::StrCat(milli / 1000);
  return absl::StrCat(milli, "m");
}

std::string FormatBytes(int64_t bytes) {
  static const char* kUnits[] = {"Ei", "Pi", "Ti", "Gi", "Mi", "Ki"};
  if (bytes == 0) return "0";
  for (int i = 0; i < 6; ++i) {
    const int64_t unit = int64_t{1} << (10 * (6 - i));
    if (bytes >= unit && bytes % unit == 0) return absl::StrCat(bytes / unit, kUnits[i]);
  }
  return absl::StrCat(bytes);
}

std::string FormatPercent(int64_t used, int64_t total) {
  if (total <= 0) return "-";
  return absl::StrCat(static_cast<int64_t>(static_cast<double>(used) * 100.0 / static_cast<double>(total) + 0.5),
                      "%");
}

std::string FormatAge(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(d);
  if (s < 0) s = 0;
  if (s < 120) return absl::StrCat(s, "s");
  const int64_t m = s / 60, h = s / 3600, days = s / 86400;
  if (s < 600) return s % 60 ? absl::StrCat(m, "m", s % 60, "s") : absl::StrCat(m, "m");
  if (h < 3) return absl::StrCat(m, "m");
  if (h < 8) return m % 60 ? absl::StrCat(h, "h", m % 60, "m") : absl::StrCat(h, "h");
  if (days < 2) return absl::StrCat(h, "h");
  if (days < 8) return h % 24 ? absl::StrCat(days, "d", h % 24, "h") : absl::StrCat(days, "d");
  return absl::StrCat(days, "d");
}

std::string FormatTimestamp(absl::Time t) { return absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", t, absl::UTCTimeZone()); }

boost::json::value JsonTimestamp(int64_t unix_micros) {
  if (unix_micros == 0) return nullptr;
  return boost::json::value(FormatTimestamp(absl::FromUnixMicros(unix_micros)));
}

std::string CamelCase(const std::string& upper_snake) {
  std::string out;
  bool upper = true;
  for (char c : upper_snake) {
    if (c == '_') {
      upper = true;
      continue;
    }
    out += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
                 : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    upper = false;
  }
  return out;
}

std::string JoinCell(const boost::json::value& array_of_strings, const std::string& sep) {
  std::string out;
  if (!array_of_strings.is_array()) return out;
  for (const auto& v : array_of_strings.as_array()) {
    if (!out.empty()) out += sep;
    if (v.is_string()) out += std::string(v.as_string());
  }
  return out;
}

std::string Printable(absl::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u != 0x7f) {
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else {
      out += absl::StrFormat("\\x%02x", u);
    }
  }
  return out;
}

std::string ShellWord(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("._:/=@%+-").find(c) != std::string_view::npos;
  });
  if (plain) return word;
  std::string out = "'";
  for (const char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace {

// Shortest text that reads back as the same double ("0.389", not "3.89E-1");
// JSON has no NaN or infinity, so those are null.
std::string FormatDouble(double d) {
  if (!std::isfinite(d)) return "null";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), d);
  std::string out(buf, end);
  // A float to every reader (YAML 1.1 wants a "." in the mantissa): 2 -> 2.0, 1e-05 -> 1.0e-05.
  if (out.find('.') == std::string::npos) {
    const auto e = out.find('e');
    out.insert(e == std::string::npos ? out.size() : e, ".0");
  }
  return out;
}

// indent < 0: one line.
void WriteJson(const boost::json::value& v, int indent, std::string& out) {
  const bool pretty = indent >= 0;
  const std::string pad(pretty ? indent : 0, ' '), inner(pretty ? indent + 2 : 0, ' ');
  const char* open_sep = pretty ? "\n" : "";
  const char* item_sep = pretty ? ",\n" : ",";
  const int child = pretty ? indent + 2 : -1;
  if (v.is_object()) {
    const auto& o = v.as_object();
    if (o.empty()) {
      out += "{}";
      return;
    }
    out += "{";
    out += open_sep;
    bool first = true;
    for (const auto& kv : o) {
      if (!first) out += item_sep;
      first = false;
      out += inner;
      out += boost::json::serialize(boost::json::value(kv.key()));
      out += pretty ? ": " : ":";
      WriteJson(kv.value(), child, out);
    }
    if (pretty) out += "\n" + pad;
    out += "}";
  } else if (v.is_array()) {
    const auto& a = v.as_array();
    if (a.empty()) {
      out += "[]";
      return;
    }
    out += "[";
    out += open_sep;
    for (size_t i = 0; i < a.size(); ++i) {
      if (i > 0) out += item_sep;
      out += inner;
      WriteJson(a[i], child, out);
    }
    if (pretty) out += "\n" + pad;
    out += "]";
  } else if (v.is_double()) {
    out += FormatDouble(v.as_double());
  } else {
    out += boost::json::serialize(v);
  }
}

// Strings a YAML reader would take for a number, boolean, null or (YAML 1.1) timestamp.
bool NeedsQuotes(const std::string& s) {
  if (s.empty()) return true;
  static const std::regex kSpecial(
      R"((?:[-+]?(?:\d[\d_]*)?\.?\d+(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+|0o[0-7]+|\.inf|\.nan|~|null|true|false|yes|no|on|off|y|n|\d{4}-\d\d?-\d\d?(?:[Tt ].*)?))",
      std::regex::icase);
  return std::regex_match(s, kSpecial);
}

void ToYaml(const boost::json::value& v, YAML::Emitter& e) {
  switch (v.kind()) {
    case boost::json::kind::object:
      if (v.as_object().empty()) e << YAML::Flow;
      e << YAML::BeginMap;
      for (const auto& kv : v.as_object()) {
        e << YAML::Key << std::string(kv.key()) << YAML::Value;
        ToYaml(kv.value(), e);
      }
      e << YAML::EndMap;
      break;
    case boost::json::kind::array:
      if (v.as_array().empty()) e << YAML::Flow;
      e << YAML::BeginSeq;
      for (const auto& x : v.as_array()) ToYaml(x, e);
      e << YAML::EndSeq;
      break;
    case boost::json::kind::string: {
      const std::string s(v.as_string());
      if (NeedsQuotes(s)) e << YAML::DoubleQuoted;
      e << s;
      break;
    }
    case boost::json::kind::null: e << YAML::Null; break;
    case boost::json::kind::bool_: e << v.as_bool(); break;
    case boost::json::kind::int64: e << v.as_int64(); break;
    case boost::json::kind::uint64: e << v.as_uint64(); break;
    case boost::json::kind::double_: {
      const std::string d = FormatDouble(v.as_double());
      if (d == "null") e << YAML::Null;
      else e << d;
      break;
    }
  }
}

}  // namespace

std::string RenderJson(const boost::json::value& v) {
  std::string out;
  WriteJson(v, 0, out);
  out += '\n';
  return out;
}

std::string RenderJsonLine(const boost::json::value& v) {
  std::string out;
  WriteJson(v, -1, out);
  out += '\n';
  return out;
}

std::string RenderYaml(const boost::json::value& v) {
  YAML::Emitter e;
  e.SetIndent(2);
  e << YAML::Block;
  ToYaml(v, e);
  return std::string(e.c_str()) + "\n";
}

}  // namespace podium::ctl
