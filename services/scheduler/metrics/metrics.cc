#include "metrics/metrics.h"

#include <map>

namespace podium::scheduler {
namespace {

prometheus::Histogram::BucketBoundaries Exponential(double start, double factor, int count) {
  prometheus::Histogram::BucketBoundaries b;
  double v = start;
  for (int i = 0; i < count; ++i, v *= factor) b.push_back(v);
  return b;
}

// Podium's attempts take tens of microseconds: kube-scheduler's 1 ms first
// bucket would hide them, so the buckets start at 10 µs (quantiles still work).
const prometheus::Histogram::BucketBoundaries& DurationBuckets() {
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(0.00001, 2, 24));
  return *b;
}

// kube-scheduler's own buckets for the metrics Podium added later, so its
// dashboards and alerts read them unchanged.
const prometheus::Histogram::BucketBoundaries& PluginExecutionBuckets() {  // 10 µs .. ~22 ms
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(0.00001, 1.5, 20));
  return *b;
}
const prometheus::Histogram::BucketBoundaries& PermitWaitBuckets() {  // 1 ms .. ~16 s
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(0.001, 2, 15));
  return *b;
}
const prometheus::Histogram::BucketBoundaries& EventHandlingBuckets() {  // 100 µs .. ~205 ms
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(0.0001, 2, 12));
  return *b;
}
const prometheus::Histogram::BucketBoundaries& PreemptionVictimsBuckets() {  // 1 .. 64
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(1, 2, 7));
  return *b;
}
const prometheus::Histogram::BucketBoundaries& PreemptionGoroutineBuckets() {  // 10 ms .. ~87 min
  static const auto* b = new prometheus::Histogram::BucketBoundaries(Exponential(0.01, 2, 20));
  return *b;
}

}  // namespace

SchedulerMetrics::SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(std::move(registry)),
      attempts_(prometheus::BuildCounter()
                    .Name("scheduler_schedule_attempts_total")
                    .Help("Number of attempts to schedule pods, by the result.")
                    .Register(*registry_)),
      attempt_duration_(prometheus::BuildHistogram()
                            .Name("scheduler_scheduling_attempt_duration_seconds")
                            .Help("Scheduling attempt latency in seconds (scheduling algorithm + binding).")
                            .Register(*registry_)),
      pod_attempts_(prometheus::BuildHistogram()
                        .Name("scheduler_pod_scheduling_attempts")
                        .Help("Number of attempts to successfully schedule a pod.")
                        .Register(*registry_)),
      e2e_duration_(prometheus::BuildHistogram()
                        .Name("scheduler_pod_scheduling_sli_duration_seconds")
                        .Help("E2e latency for a pod being scheduled, from the time the pod enters the queue.")
                        .Register(*registry_)),
      pending_pods_(prometheus::BuildGauge()
                        .Name("scheduler_pending_pods")
                        .Help("Number of pending pods, by the queue type.")
                        .Register(*registry_)),
      extension_point_duration_(prometheus::BuildHistogram()
                                    .Name("scheduler_framework_extension_point_duration_seconds")
                                    .Help("Latency for running all plugins of a specific extension point.")
                                    .Register(*registry_)),
      algorithm_duration_(prometheus::BuildHistogram()
                              .Name("scheduler_scheduling_algorithm_duration_seconds")
                              .Help("Scheduling algorithm latency in seconds.")
                              .Register(*registry_)),
      plugin_counters_(prometheus::BuildGauge()
                           .Name("podium_plugin_endpoint_events")
                           .Help("Requests, errors, timeouts, invalid answers and ignored failures per plugin endpoint.")
                           .Register(*registry_)),
      plugin_connected_(prometheus::BuildGauge()
                            .Name("podium_plugin_endpoint_connected")
                            .Help("1 when the plugin endpoint's stream is ready.")
                            .Register(*registry_)),
      invalid_objects_(prometheus::BuildCounter()
                           .Name("podium_invalid_cluster_objects_total")
                           .Help("Objects from the adapter refused because a field was invalid.")
                           .Register(*registry_)),
      scheduler_events_(prometheus::BuildCounter()
                            .Name("podium_scheduler_events_total")
                            .Help("Refused or dropped Permit decisions, refused binding work and expired assumed pods.")
                            .Register(*registry_)),
      adapter_connected_(prometheus::BuildGauge()
                             .Name("podium_adapter_connected")
                             .Help("1 while the adapter is connected and has listed the cluster.")
                             .Register(*registry_)),
      cache_size_(prometheus::BuildGauge()
                      .Name("scheduler_cache_size")
                      .Help("Number of nodes, pods, and assumed (bound) pods in the scheduler cache.")
                      .Register(*registry_)),
      unschedulable_pods_(prometheus::BuildGauge()
                              .Name("scheduler_unschedulable_pods")
                              .Help("The number of unschedulable pods broken down by plugin name. A pod will "
                                    "increment the gauge for all plugins that caused it to not schedule and so "
                                    "this metric have meaning only when broken down by plugin.")
                              .Register(*registry_)),
      inflight_events_(prometheus::BuildGauge()
                           .Name("scheduler_inflight_events")
                           .Help("Number of events currently tracked in the scheduling queue.")
                           .Register(*registry_)),
      queue_incoming_(prometheus::BuildCounter()
                          .Name("scheduler_queue_incoming_pods_total")
                          .Help("Number of pods added to scheduling queues by event and queue type.")
                          .Register(*registry_)),
      plugin_execution_(prometheus::BuildHistogram()
                            .Name("scheduler_plugin_execution_duration_seconds")
                            .Help("Duration for running a plugin at a specific extension point.")
                            .Register(*registry_)),
      queueing_hint_(prometheus::BuildHistogram()
                         .Name("scheduler_queueing_hint_execution_duration_seconds")
                         .Help("Duration for running a queueing hint function of a plugin.")
                         .Register(*registry_)),
      preemption_attempts_(prometheus::BuildCounter()
                               .Name("scheduler_preemption_attempts_total")
                               .Help("Total preemption attempts in the cluster till now")
                               .Register(*registry_)),
      preemption_victims_(prometheus::BuildHistogram()
                              .Name("scheduler_preemption_victims")
                              .Help("Number of selected preemption victims")
                              .Register(*registry_)),
      preemption_goroutines_duration_(prometheus::BuildHistogram()
                                          .Name("scheduler_preemption_goroutines_duration_seconds")
                                          .Help("Duration in seconds for running goroutines for the preemption.")
                                          .Register(*registry_)),
      preemption_goroutines_total_(prometheus::BuildCounter()
                                       .Name("scheduler_preemption_goroutines_execution_total")
                                       .Help("Number of preemption goroutines executed.")
                                       .Register(*registry_)),
      permit_wait_(prometheus::BuildHistogram()
                       .Name("scheduler_permit_wait_duration_seconds")
                       .Help("Duration of waiting on permit.")
                       .Register(*registry_)),
      event_handling_(prometheus::BuildHistogram()
                          .Name("scheduler_event_handling_duration_seconds")
                          .Help("Event handling latency in seconds.")
                          .Register(*registry_)),
      plugin_request_(prometheus::BuildHistogram()
                          .Name("podium_plugin_endpoint_request_duration_seconds")
                          .Help("Round trip of one request on a plugin endpoint's stream, by request kind.")
                          .Register(*registry_)),
      failure_policy_(prometheus::BuildCounter()
                          .Name("podium_plugin_failure_policy_total")
                          .Help("Plugin process failures (error, timeout, invalid answer) by the failure "
                                "policy applied: Ignore drops its answer, Fail fails the attempt.")
                          .Register(*registry_)),
      queue_incoming_series_([this](const std::vector<std::string>& v) -> prometheus::Counter& {
        return queue_incoming_.Add({{"queue", v[0]}, {"event", v[1]}});
      }),
      plugin_execution_series_([this](const std::vector<std::string>& v) -> prometheus::Histogram& {
        return plugin_execution_.Add({{"plugin", v[0]}, {"extension_point", v[1]}, {"status", v[2]}},
                                     PluginExecutionBuckets());
      }),
      queueing_hint_series_([this](const std::vector<std::string>& v) -> prometheus::Histogram& {
        return queueing_hint_.Add({{"plugin", v[0]}, {"event", v[1]}, {"hint", v[2]}},
                                  PluginExecutionBuckets());
      }),
      plugin_request_series_([this](const std::vector<std::string>& v) -> prometheus::Histogram& {
        return plugin_request_.Add({{"endpoint", v[0]}, {"request", v[1]}}, DurationBuckets());
      }),
      event_handling_series_([this](const std::vector<std::string>& v) -> prometheus::Histogram& {
        return event_handling_.Add({{"event", v[0]}}, EventHandlingBuckets());
      }) {
  // kube-scheduler exports these from the start (0 until the first preemption).
  preemption_attempts_.Add({});
  // The two ways a Permit wait ends, at 0 until the first wait, so dashboards
  // and alerts over them see the series before any Permit plugin waits.
  for (const char* result : {"Success", "Unschedulable"}) permit_wait_.Add({{"result", result}}, PermitWaitBuckets());
  preemption_victims_.Add({}, PreemptionVictimsBuckets());
  // Both results at 0 from the start, as the Permit waits above, so the
  // dashboard's eviction series exist before the first preemption.
  for (const char* result : {"success", "error"}) {
    preemption_goroutines_duration_.Add({{"result", result}}, PreemptionGoroutineBuckets());
    preemption_goroutines_total_.Add({{"result", result}});
  }
}

void SchedulerMetrics::CountIncomingPod(std::string_view queue, std::string_view event) {
  queue_incoming_series_.Get({queue, event}).Increment();
}

void SchedulerMetrics::ObservePluginExecution(std::string_view plugin, std::string_view extension_point,
                                              std::string_view status, absl::Duration duration) {
  plugin_execution_series_.Get({plugin, extension_point, status}).Observe(absl::ToDoubleSeconds(duration));
}

void SchedulerMetrics::ObserveQueueingHint(std::string_view plugin, std::string_view event,
                                           std::string_view hint, absl::Duration duration) {
  queueing_hint_series_.Get({plugin, event, hint}).Observe(absl::ToDoubleSeconds(duration));
}

void SchedulerMetrics::CountPreemptionAttempt() { preemption_attempts_.Add({}).Increment(); }

void SchedulerMetrics::ObservePreemptionVictims(int victims) {
  preemption_victims_.Add({}, PreemptionVictimsBuckets()).Observe(victims);
}

void SchedulerMetrics::ObservePreemptionApiCalls(std::string_view result, absl::Duration duration) {
  const std::string r(result);
  preemption_goroutines_duration_.Add({{"result", r}}, PreemptionGoroutineBuckets())
      .Observe(absl::ToDoubleSeconds(duration));
  preemption_goroutines_total_.Add({{"result", r}}).Increment();
}

void SchedulerMetrics::ObservePermitWait(std::string_view result, absl::Duration duration) {
  permit_wait_.Add({{"result", std::string(result)}}, PermitWaitBuckets()).Observe(absl::ToDoubleSeconds(duration));
}

void SchedulerMetrics::ObserveEventHandling(std::string_view event, absl::Duration duration) {
  event_handling_series_.Get({event}).Observe(absl::ToDoubleSeconds(duration));
}

void SchedulerMetrics::ObservePluginRequest(std::string_view endpoint, std::string_view request,
                                            absl::Duration duration) {
  plugin_request_series_.Get({endpoint, request}).Observe(absl::ToDoubleSeconds(duration));
}

void SchedulerMetrics::AddPluginEndpoint(std::string_view endpoint) {
  for (const char* policy : {"Ignore", "Fail"}) {
    failure_policy_.Add({{"endpoint", std::string(endpoint)}, {"policy", policy}});
  }
}

void SchedulerMetrics::CountFailurePolicy(std::string_view endpoint, std::string_view policy) {
  failure_policy_.Add({{"endpoint", std::string(endpoint)}, {"policy", std::string(policy)}}).Increment();
}

SchedulerMetrics::ProfileSeries SchedulerMetrics::ForProfile(const std::string& profile) {
  auto counter = [&](const char* result) {
    return &attempts_.Add({{"result", result}, {"profile", profile}});
  };
  auto histogram = [&](const char* result) {
    return &attempt_duration_.Add({{"result", result}, {"profile", profile}}, DurationBuckets());
  };
  // kube-scheduler's algorithm histogram has no labels.
  prometheus::Histogram* algorithm = &algorithm_duration_.Add({}, DurationBuckets());
  return ProfileSeries{counter("scheduled"),   counter("unschedulable"), counter("error"),
                       histogram("scheduled"), histogram("unschedulable"), histogram("error"),
                       algorithm,              algorithm};
}

void SchedulerMetrics::ObservePodScheduled(int attempts, double e2e_seconds) {
  static const prometheus::Histogram::BucketBoundaries kAttempts = Exponential(1, 2, 5);
  pod_attempts_.Add({}, kAttempts).Observe(attempts);
  e2e_duration_.Add({{"attempts", std::to_string(std::min(attempts, 16))}}, DurationBuckets())
      .Observe(e2e_seconds);
}

void SchedulerMetrics::SetPendingPods(const std::string& queue, double count) {
  pending_pods_.Add({{"queue", queue}}).Set(count);
}

void SchedulerMetrics::SetPluginCounter(const std::string& endpoint, const std::string& kind,
                                        double value) {
  plugin_counters_.Add({{"endpoint", endpoint}, {"kind", kind}}).Set(value);
}

void SchedulerMetrics::SetPluginConnected(const std::string& endpoint, bool connected) {
  plugin_connected_.Add({{"endpoint", endpoint}}).Set(connected ? 1 : 0);
}

void SchedulerMetrics::CountSchedulerEvent(const std::string& kind) {
  scheduler_events_.Add({{"kind", kind}}).Increment();
}

void SchedulerMetrics::SetAdapterConnected(bool connected) {
  adapter_connected_.Add({}).Set(connected ? 1 : 0);
}

void SchedulerMetrics::SetCacheSize(const std::string& type, double count) {
  cache_size_.Add({{"type", type}}).Set(count);
}

namespace {

// Sets a gauge family from a full sample: one series per key of `counts`
// (created with `labels_of(key)` the first time), and every series seen
// before but missing from `counts` back to 0.
template <typename Key, typename Count, typename LabelsOf>
void SetGaugeSample(prometheus::Family<prometheus::Gauge>& family,
                    absl::flat_hash_map<Key, prometheus::Gauge*>& series,
                    const absl::flat_hash_map<Key, Count>& counts, const LabelsOf& labels_of) {
  for (auto& [key, gauge] : series) {
    if (!counts.contains(key)) gauge->Set(0);
  }
  for (const auto& [key, count] : counts) {
    auto [it, inserted] = series.try_emplace(key, nullptr);
    if (inserted) it->second = &family.Add(labels_of(key));
    it->second->Set(static_cast<double>(count));
  }
}

}  // namespace

void SchedulerMetrics::SetUnschedulablePods(
    const absl::flat_hash_map<std::pair<std::string, std::string>, int>& counts) {
  absl::MutexLock lock(&unschedulable_mu_);
  SetGaugeSample(unschedulable_pods_, unschedulable_series_, counts,
                 [](const std::pair<std::string, std::string>& key) -> std::map<std::string, std::string> {
                   return {{"plugin", key.first}, {"profile", key.second}};
                 });
}

void SchedulerMetrics::SetInFlightEvents(const absl::flat_hash_map<std::string, size_t>& counts) {
  absl::MutexLock lock(&unschedulable_mu_);
  SetGaugeSample(inflight_events_, inflight_series_, counts,
                 [](const std::string& event) -> std::map<std::string, std::string> { return {{"event", event}}; });
}

void SchedulerMetrics::CountInvalidObject(const std::string& kind) {
  invalid_objects_.Add({{"kind", kind}}).Increment();
}

void ExtensionPointMetrics::Observe(std::string_view extension_point, std::string_view status,
                                    absl::Duration duration) {
  Series(extension_point, status).Observe(absl::ToDoubleSeconds(duration));
}

prometheus::Histogram& ExtensionPointMetrics::Series(std::string_view extension_point,
                                                     std::string_view status) {
  std::pair<std::string, std::string> key(extension_point, status);
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = series_.try_emplace(key, nullptr);
  if (inserted) {
    it->second = &metrics_.extension_point_duration_.Add(
        {{"extension_point", key.first}, {"status", key.second}, {"profile", profile_}},
        DurationBuckets());
  }
  return *it->second;
}

}  // namespace podium::scheduler
