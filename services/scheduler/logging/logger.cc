#include "logging/logger.h"

#include <cinttypes>

#include "absl/strings/str_format.h"

namespace podium::logging {
namespace {

void AppendJsonString(std::string_view s, std::string& out) {
  out.push_back('"');
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));  // UTF-8 passes through.
        }
    }
  }
  out.push_back('"');
}

// Go's %q as klog prints values: quoted, with escapes for what would break
// the line.
void AppendQuoted(std::string_view s, std::string& out) { AppendJsonString(s, out); }

// A key as given by code, made safe to print unquoted.
void AppendKey(std::string_view key, std::string& out) {
  for (char c : key) out.push_back((c == '"' || c == '=' || c == ' ' || static_cast<unsigned char>(c) < 0x20) ? '_' : c);
}

std::string_view LevelName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
  }
  return "info";
}

std::atomic<Logger*> default_logger{nullptr};
std::atomic<Format> line_format{Format::kText};

}  // namespace

std::string FormatJson(const Record& r) {
  std::string out;
  out.reserve(128);
  const int64_t us = absl::ToUnixMicros(r.time);
  absl::StrAppendFormat(&out, "{\"ts\":%d.%06d,\"level\":", us / 1000000, us % 1000000);
  AppendJsonString(LevelName(r.severity), out);
  absl::StrAppendFormat(&out, ",\"v\":%d,\"component\":", r.verbosity);
  AppendJsonString(r.component, out);
  out += ",\"msg\":";
  AppendJsonString(r.message, out);
  for (const Field& f : r.fields) {
    out.push_back(',');
    AppendJsonString(f.key, out);
    out.push_back(':');
    if (f.number) {
      out += f.value;
    } else {
      AppendJsonString(f.value, out);
    }
  }
  out += "}\n";
  return out;
}

std::string FormatText(const Record& r) {
  static constexpr char kLetters[] = {'I', 'W', 'E'};
  std::string out;
  out.reserve(128);
  out.push_back(kLetters[static_cast<int>(r.severity)]);
  out += absl::FormatTime("%m%d %H:%M:%E6S ", r.time, absl::UTCTimeZone());
  out.append(r.component);
  out += "] ";
  AppendQuoted(r.message, out);
  for (const Field& f : r.fields) {
    out.push_back(' ');
    AppendKey(f.key, out);
    out.push_back('=');
    if (f.number) {
      out += f.value;
    } else {
      AppendQuoted(f.value, out);
    }
  }
  out.push_back('\n');
  return out;
}

bool ParseFormat(std::string_view name, Format* out) {
  if (name == "text") {
    *out = Format::kText;
    return true;
  }
  if (name == "json") {
    *out = Format::kJson;
    return true;
  }
  return false;
}

void StreamSink::Write(const Record& record) {
  const std::string line = format_ == Format::kJson ? FormatJson(record) : FormatText(record);
  absl::MutexLock lock(&mu_);
  std::fwrite(line.data(), 1, line.size(), stream_);
  std::fflush(stream_);
}

void Logger::Log(Severity severity, int level, std::string_view message, std::initializer_list<Field> fields) {
  if (sink_ == nullptr || (severity == Severity::kInfo && !Enabled(level))) return;
  Record record;
  record.time = absl::Now();
  record.severity = severity;
  record.verbosity = level;
  record.component = component_;
  record.message = message;
  record.fields.assign(fields.begin(), fields.end());
  sink_->Write(record);
}

Logger& Default() {
  if (Logger* l = default_logger.load(std::memory_order_acquire)) return *l;
  static StreamSink* const stderr_sink = new StreamSink(stderr, Format::kText);
  static Logger* const fallback = new Logger("podium", stderr_sink);
  return *fallback;
}

void SetDefault(Logger* logger) { default_logger.store(logger, std::memory_order_release); }

void WriteLine(Format format, Severity severity, std::string_view text, std::initializer_list<Field> fields) {
  if (format == Format::kText) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
    return;
  }
  Logger& logger = Default();
  std::string_view message = text;
  const std::string& component = logger.component();
  if (!component.empty() && message.substr(0, component.size()) == component) {
    std::string_view rest = message.substr(component.size());
    if (rest.substr(0, 2) == ": ") {
      message = rest.substr(2);
    } else if (rest.substr(0, 1) == " ") {
      message = rest.substr(1);
    }
  }
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.remove_suffix(1);
  logger.Log(severity, 0, message, fields);
}

void SetLineFormat(Format format) { line_format.store(format, std::memory_order_release); }
Format LineFormat() { return line_format.load(std::memory_order_acquire); }

Line::~Line() { WriteLine(LineFormat(), severity_, stream_.str()); }

}  // namespace podium::logging
