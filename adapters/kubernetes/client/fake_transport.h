#pragma once

// A scripted Transport for unit tests: answers are queued per request kind
// and every request is recorded.

#include <deque>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/transport.h"

namespace podium::kube {

class FakeLineStream : public LineStream {
 public:
  FakeLineStream(std::vector<std::string> lines, absl::Status end) : lines_(lines.begin(), lines.end()), end_(end) {}
  absl::StatusOr<bool> NextLine(std::string* line) override {
    if (!lines_.empty()) {
      *line = lines_.front();
      lines_.pop_front();
      return true;
    }
    if (!end_.ok()) return end_;
    return false;
  }

 private:
  std::deque<std::string> lines_;
  absl::Status end_;
};

class FakeTransport : public Transport {
 public:
  ApiAnswer Do(const HttpRequest& request) override {
    requests.push_back(request);
    if (answers.empty()) return ApiAnswer{.status = 0, .error = "no scripted answer"};
    ApiAnswer a = answers.front();
    answers.pop_front();
    return a;
  }
  StreamAnswer Stream(const HttpRequest& request) override {
    requests.push_back(request);
    StreamAnswer out;
    if (watches.empty()) {
      out.head.error = "no scripted watch";
      return out;
    }
    Watch w = std::move(watches.front());
    watches.pop_front();
    out.head = w.head;
    if (w.head.status == 200) out.lines = std::make_unique<FakeLineStream>(w.lines, w.end);
    return out;
  }

  struct Watch {
    ApiAnswer head{.status = 200};
    std::vector<std::string> lines;
    absl::Status end;  // OK: the server ended the body cleanly.
  };
  std::deque<ApiAnswer> answers;
  std::deque<Watch> watches;
  std::vector<HttpRequest> requests;
};

}  // namespace podium::kube
