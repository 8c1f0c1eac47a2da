#include "metrics/adapter_metrics.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace podium::kube {
namespace {

// client-go's buckets for request and rate-limiter latency.
const prometheus::Histogram::BucketBoundaries& LatencyBuckets() {
  static const auto* b =
      new prometheus::Histogram::BucketBoundaries{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
  return *b;
}

std::string Code(int status) { return status > 0 ? absl::StrCat(status) : "<error>"; }

// This absl's string_view is its own type.
absl::string_view Abs(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

std::string ResourceOf(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  std::string_view parts[8];  // Enough for apis/GROUP/VERSION/namespaces/NS/RESOURCE/NAME/SUBRESOURCE.
  size_t n = 0;
  for (absl::string_view part : absl::StrSplit(Abs(path), '/', absl::SkipEmpty())) {
    if (n == std::size(parts)) break;
    parts[n++] = std::string_view(part.data(), part.size());
  }
  size_t i;
  if (n >= 2 && parts[0] == "api") {
    i = 2;  // api/v1/...
  } else if (n >= 3 && parts[0] == "apis") {
    i = 3;  // apis/GROUP/VERSION/...
  } else {
    return "";
  }
  // namespaces/NS/RESOURCE... (but "namespaces" alone, or namespaces/NAME, is the resource itself).
  if (n > i + 2 && parts[i] == "namespaces") i += 2;
  if (i >= n) return "";
  std::string resource(parts[i]);
  if (n > i + 2) absl::StrAppend(&resource, "/", Abs(parts[i + 2]));  // RESOURCE/NAME/SUBRESOURCE
  return resource;
}

AdapterMetrics::AdapterMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      requests_(prometheus::BuildCounter()
                    .Name("rest_client_requests_total")
                    .Help("Number of HTTP requests to the Kubernetes API, by status code, method and resource.")
                    .Register(*registry_)),
      request_duration_(prometheus::BuildHistogram()
                            .Name("rest_client_request_duration_seconds")
                            .Help("Request latency in seconds (to the answer's head), by verb and resource.")
                            .Register(*registry_)),
      rate_limiter_duration_(prometheus::BuildHistogram()
                                 .Name("rest_client_rate_limiter_duration_seconds")
                                 .Help("Client-side rate limiter latency in seconds, by verb.")
                                 .Register(*registry_)),
      retries_(prometheus::BuildCounter()
                   .Name("rest_client_request_retries_total")
                   .Help("Number of request retries, by the status code that caused them, verb and resource.")
                   .Register(*registry_)),
      watch_restarts_(prometheus::BuildCounter()
                          .Name("podium_adapter_watch_restarts_total")
                          .Help("Watches started again, by kind and why the last one ended (timeout, error, gone).")
                          .Register(*registry_)),
      relists_(prometheus::BuildCounter()
                   .Name("podium_adapter_relists_total")
                   .Help("Lists after the first one (the watch's resourceVersion was gone), by kind.")
                   .Register(*registry_)),
      skipped_(prometheus::BuildCounter()
                   .Name("podium_adapter_objects_skipped_total")
                   .Help("API objects the translation refused (logged and skipped), by kind.")
                   .Register(*registry_)),
      queue_depth_(prometheus::BuildGauge()
                       .Name("podium_adapter_action_queue_depth")
                       .Help("Scheduler actions waiting for an API call, by lane (actions, events).")
                       .Register(*registry_)),
      actions_(prometheus::BuildCounter()
                   .Name("podium_adapter_actions_total")
                   .Help("Scheduler actions done, by action and result (an ActionResult code, or for events "
                         "aggregated / dropped).")
                   .Register(*registry_)),
      leader_(prometheus::BuildGauge()
                  .Name("leader_election_master_status")
                  .Help("1 while this replica holds the lease, else 0.")
                  .Register(*registry_)) {}

void AdapterMetrics::ObserveRequest(std::string_view method, std::string_view target, int status,
                                    absl::Duration latency) {
  std::string resource = ResourceOf(target);
  std::string code = Code(status);
  const RequestMetrics m = Child(by_request_, absl::StrCat(code, " ", Abs(method), " ", resource), [&] {
    return RequestMetrics{
        &requests_.Add({{"code", code}, {"method", std::string(method)}, {"resource", resource}}),
        &request_duration_.Add({{"verb", std::string(method)}, {"resource", resource}}, LatencyBuckets())};
  });
  m.count->Increment();
  m.duration->Observe(absl::ToDoubleSeconds(latency));
}

void AdapterMetrics::ObserveRateLimiterWait(std::string_view method, absl::Duration wait) {
  Child(by_wait_, std::string(method), [&] {
    return &rate_limiter_duration_.Add({{"verb", std::string(method)}}, LatencyBuckets());
  })->Observe(absl::ToDoubleSeconds(wait));
}

void AdapterMetrics::CountRetry(std::string_view method, std::string_view target, int status) {
  retries_.Add({{"code", Code(status)}, {"verb", std::string(method)}, {"resource", ResourceOf(target)}}).Increment();
}

void AdapterMetrics::CountWatchRestart(std::string_view kind, std::string_view reason) {
  watch_restarts_.Add({{"kind", std::string(kind)}, {"reason", std::string(reason)}}).Increment();
}

void AdapterMetrics::CountRelist(std::string_view kind) { relists_.Add({{"kind", std::string(kind)}}).Increment(); }

void AdapterMetrics::CountSkippedObject(std::string_view kind) {
  skipped_.Add({{"kind", std::string(kind)}}).Increment();
}

void AdapterMetrics::SetActionQueueDepth(std::string_view lane, size_t depth) {
  Child(by_lane_, std::string(lane), [&] { return &queue_depth_.Add({{"lane", std::string(lane)}}); })
      ->Set(static_cast<double>(depth));
}

void AdapterMetrics::CountAction(std::string_view action, std::string_view result) {
  Child(by_action_, absl::StrCat(Abs(action), " ", Abs(result)), [&] {
    return &actions_.Add({{"action", std::string(action)}, {"result", std::string(result)}});
  })->Increment();
}

void AdapterMetrics::SetLeader(std::string_view lease, bool leading) {
  leader_.Add({{"name", std::string(lease)}}).Set(leading ? 1 : 0);
}

}  // namespace podium::kube
