#pragma once

// The adapter's metrics, in client-go's names where client-go has one
// (rest_client_requests_total, rest_client_request_duration_seconds,
// rest_client_rate_limiter_duration_seconds, rest_client_request_retries_total,
// leader_election_master_status), podium_adapter_* for the rest. Every
// component takes an optional AdapterMetrics*: null records nothing (tests).
// Thread-safe (prometheus-cpp's families are).

#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace podium::kube {

// The API resource a request path names: "pods", "pods/binding", "nodes",
// "events", "leases"; "" when the path is not an API resource path.
std::string ResourceOf(std::string_view target);

class AdapterMetrics {
 public:
  explicit AdapterMetrics(std::shared_ptr<prometheus::Registry> registry);

  // One HTTP request: its answer's status (0: no answer, code "<error>" as
  // client-go), and the time to the answer's head (a watch's stream is not counted).
  void ObserveRequest(std::string_view method, std::string_view target, int status, absl::Duration latency);
  // How long a request waited for the client-side rate limiter.
  void ObserveRateLimiterWait(std::string_view method, absl::Duration wait);
  // A request about to be retried after `status` (0: no answer).
  void CountRetry(std::string_view method, std::string_view target, int status);

  // A watch of `kind` ended and is started again: "timeout" (the server
  // ended it), "error", or "gone" (410: a relist follows).
  void CountWatchRestart(std::string_view kind, std::string_view reason);
  // A relist of `kind` after its first list (410 Gone).
  void CountRelist(std::string_view kind);
  // An object of `kind` the translation refused (skipped).
  void CountSkippedObject(std::string_view kind);

  // Actions waiting for a worker, per lane ("actions", "events").
  void SetActionQueueDepth(std::string_view lane, size_t depth);
  // An action's outcome: action "bind", "delete", "patch_status", "event";
  // result an ActionResult code name ("OK", "CONFLICT", ...), or for events
  // also "aggregated" / "dropped".
  void CountAction(std::string_view action, std::string_view result);

  void SetLeader(std::string_view lease, bool leading);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_duration_;
  prometheus::Family<prometheus::Histogram>& rate_limiter_duration_;
  prometheus::Family<prometheus::Counter>& retries_;
  prometheus::Family<prometheus::Counter>& watch_restarts_;
  prometheus::Family<prometheus::Counter>& relists_;
  prometheus::Family<prometheus::Counter>& skipped_;
  prometheus::Family<prometheus::Gauge>& queue_depth_;
  prometheus::Family<prometheus::Counter>& actions_;
  prometheus::Family<prometheus::Gauge>& leader_;

  // The per-call metrics' children by their label values: a lookup here
  // instead of building a label map for the family on every API call.
  struct RequestMetrics {
    prometheus::Counter* count;
    prometheus::Histogram* duration;
  };
  // The child cached under `key`, made by `make` the first time.
  template <typename V, typename Make>
  V Child(absl::flat_hash_map<std::string, V>& cache, std::string key, Make make) {
    absl::MutexLock lock(&mu_);
    auto [it, added] = cache.try_emplace(std::move(key));
    if (added) it->second = make();
    return it->second;
  }
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, RequestMetrics> by_request_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Histogram*> by_wait_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Gauge*> by_lane_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, prometheus::Counter*> by_action_ ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::kube
