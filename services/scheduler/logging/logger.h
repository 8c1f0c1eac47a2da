// Structured logs: one record per line with its fields (pod, node, plugin,
// cycle, ...), as JSON (one object per line) or klog-style text, and a
// verbosity that can change while the process runs (Admin.SetLogVerbosity).
//
// Each process has one Logger, installed by main before any thread starts
// (SetDefault) and never replaced after: like klog, the logger is the one
// process-wide object, because threading it through every constructor would
// touch every class for no gain. Its verbosity is an atomic, so changing it
// at run time needs no lock. Tests use their own Logger with a capturing sink.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <sstream>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace podium::logging {

enum class Severity { kInfo, kWarning, kError };

// One key/value of a record. Values are kept as text; numbers print bare in
// JSON, everything else as a string.
struct Field {
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(v) {}
  Field(std::string_view k, const char* v) : key(k), value(v == nullptr ? "" : v) {}
  Field(std::string_view k, absl::string_view v) : key(k), value(v.data(), v.size()) {}
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>>
  Field(std::string_view k, T v) : key(k), value(std::to_string(v)), number(true) {}
  Field(std::string_view k, bool v) : key(k), value(v ? "true" : "false"), number(true) {}

  std::string_view key;
  std::string value;
  bool number = false;
};

struct Record {
  absl::Time time;
  Severity severity = Severity::kInfo;
  int verbosity = 0;  // The V level it was logged at (0 for warnings and errors).
  std::string_view component;  // "podium-scheduler".
  std::string_view message;
  std::vector<Field> fields;
};

enum class Format { kText, kJson };

// {"ts":1700000000.123456,"level":"info","v":0,"component":"...","msg":"...",<fields>}
// and a newline; every string escaped as JSON requires.
std::string FormatJson(const Record& record);
// klog's structured text: I1123 15:53:04.123456 podium-scheduler] "msg" pod="ns/p" cycle=7
// and a newline; strings quoted and escaped.
std::string FormatText(const Record& record);
// "text" or "json".
bool ParseFormat(std::string_view name, Format* out);

class Sink {
 public:
  virtual ~Sink() = default;
  // Called concurrently from any thread.
  virtual void Write(const Record& record) = 0;
};

// Writes formatted lines to a stdio stream (stderr), one whole line per write.
class StreamSink final : public Sink {
 public:
  StreamSink(std::FILE* stream, Format format) : stream_(stream), format_(format) {}
  void Write(const Record& record) override;

 private:
  std::FILE* const stream_;
  const Format format_;
  absl::Mutex mu_;
};

class Logger {
 public:
  Logger(std::string component, Sink* sink, int verbosity = 0)
      : component_(std::move(component)), sink_(sink), verbosity_(verbosity) {}

  // Whether a V(level) record would be written now.
  bool Enabled(int level) const { return level <= verbosity_.load(std::memory_order_relaxed); }
  int verbosity() const { return verbosity_.load(std::memory_order_relaxed); }
  // Returns the previous verbosity.
  int SetVerbosity(int verbosity) { return verbosity_.exchange(verbosity, std::memory_order_relaxed); }

  void Log(Severity severity, int level, std::string_view message, std::initializer_list<Field> fields);
  const std::string& component() const { return component_; }

 private:
  const std::string component_;
  Sink* const sink_;
  std::atomic<int> verbosity_;
};

// The process's logger. Before SetDefault: one writing text to stderr.
Logger& Default();
// Installs `logger` (not owned; must outlive every log call). Call once, from
// main, before starting threads.
void SetDefault(Logger* logger);

// Console lines: the "podium-k8s-adapter: API server ..." lines processes
// print for people and scripts. Under kText `text` is written to stderr as
// given (byte for byte, newline included); under kJson it becomes one record
// of Default(), with a leading "COMPONENT: " or "COMPONENT " (the default
// logger's component) and trailing newlines removed.
void WriteLine(Format format, Severity severity, std::string_view text,
               std::initializer_list<Field> fields = {});
// The format Line uses (kText until called). Call once, from main, before
// starting threads.
void SetLineFormat(Format format);
Format LineFormat();

// logging::Line(Severity::kWarning) << "podium-k8s-adapter: " << what << "\n";
// collects the text and writes it with WriteLine(LineFormat(), ...) when the
// statement ends. std::endl is accepted (as a newline; every line is flushed).
class Line {
 public:
  explicit Line(Severity severity = Severity::kInfo) : severity_(severity) {}
  ~Line();
  Line(const Line&) = delete;
  Line& operator=(const Line&) = delete;

  template <typename T>
  Line& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }
  Line& operator<<(std::ostream& (*manipulator)(std::ostream&)) {
    manipulator(stream_);
    return *this;
  }

 private:
  const Severity severity_;
  std::ostringstream stream_;
};

}  // namespace podium::logging

// PODIUM_LOG(Info|Warning|Error, "message", {"pod", key}, {"node", name});
#define PODIUM_LOG(severity, message, ...)                                                       \
  ::podium::logging::Default().Log(::podium::logging::Severity::k##severity, 0, message, \
                                   {__VA_ARGS__})

// PODIUM_VLOG(4, "message", fields...): written only when the verbosity is at
// least 4; the fields are not evaluated otherwise.
#define PODIUM_VLOG(level, message, ...)                                                  \
  do {                                                                                    \
    ::podium::logging::Logger& podium_vlog_logger_ = ::podium::logging::Default();        \
    if (podium_vlog_logger_.Enabled(level)) {                                             \
      podium_vlog_logger_.Log(::podium::logging::Severity::kInfo, level, message, {__VA_ARGS__}); \
    }                                                                                     \
  } while (0)
