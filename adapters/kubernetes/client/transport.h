#pragma once

// The seam between the adapter and HTTP: the reflector and the action
// dispatcher see only this; ApiClient is the real one, tests use fakes.

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/retry.h"

namespace podium::kube {

struct HttpRequest {
  std::string method = "GET";
  std::string target;  // Path and query, e.g. "/api/v1/pods?limit=500".
  std::string body;
  std::string content_type = "application/json";
};

// The lines of a streamed body (a watch: one JSON event per line).
class LineStream {
 public:
  virtual ~LineStream() = default;
  // The next line: true; the server ended the body cleanly: false; the
  // connection broke or timed out: an error.
  virtual absl::StatusOr<bool> NextLine(std::string* line) = 0;
};

struct StreamAnswer {
  ApiAnswer head;                      // status 200 and no body when streaming.
  std::unique_ptr<LineStream> lines;   // Set when head.status is 200.
};

class Transport {
 public:
  virtual ~Transport() = default;
  // One request and its whole answer; no retries here. A request that got no
  // answer has status 0 and `error` set.
  virtual ApiAnswer Do(const HttpRequest& request) = 0;
  // A streaming GET (watch).
  virtual StreamAnswer Stream(const HttpRequest& request) = 0;
};

}  // namespace podium::kube
