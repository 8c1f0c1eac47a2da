// A Sink that keeps what was logged, for tests that assert on what a logger
// wrote (in-process, never on stderr text).
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "logging/logger.h"

namespace podium::logging {

class CapturingSink final : public Sink {
 public:
  struct Line {
    Severity severity;
    int verbosity;
    std::string message;
    std::vector<std::pair<std::string, std::string>> fields;
  };

  void Write(const Record& record) override {
    Line line{record.severity, record.verbosity, std::string(record.message), {}};
    for (const Field& f : record.fields) line.fields.emplace_back(std::string(f.key), f.value);
    absl::MutexLock lock(&mu_);
    lines_.push_back(std::move(line));
  }

  std::vector<Line> lines() const {
    absl::MutexLock lock(&mu_);
    return lines_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Line> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::logging
