// kube-scheduler's metric names, so existing dashboards work, plus Podium's
// own (podium_*) for plugin endpoints and refused input.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "framework/extension_point_recorder.h"

#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace podium::scheduler {

// The series of one family, resolved once per label values: hot paths observe
// without building and hashing a label map each time. Thread-safe.
template <typename Metric>
class SeriesCache {
 public:
  using Build = std::function<Metric&(const std::vector<std::string>& values)>;
  explicit SeriesCache(Build build) : build_(std::move(build)) {}

  Metric& Get(std::initializer_list<std::string_view> values) {
    std::string key;
    for (std::string_view v : values) {
      key.append(v);
      key.push_back('\x1f');
    }
    absl::MutexLock lock(&mu_);
    auto [it, inserted] = series_.try_emplace(key, nullptr);
    if (inserted) it->second = &build_(std::vector<std::string>(values.begin(), values.end()));
    return *it->second;
  }

 private:
  const Build build_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Metric*> series_ ABSL_GUARDED_BY(mu_);
};

class SchedulerMetrics {
 public:
  // The series of one profile, resolved once: observing a metric on the hot
  // path must not build and hash a label map per pod.
  struct ProfileSeries {
    prometheus::Counter* attempts_scheduled;
    prometheus::Counter* attempts_unschedulable;
    prometheus::Counter* attempts_error;
    prometheus::Histogram* attempt_scheduled;
    prometheus::Histogram* attempt_unschedulable;
    prometheus::Histogram* attempt_error;
    // The scheduling algorithm (snapshot through Score), kube-scheduler's
    // scheduler_scheduling_algorithm_duration_seconds, by outcome. (Named
    // filter_* until its caller is renamed; each extension point is recorded
    // by the framework through ExtensionPointMetrics.)
    prometheus::Histogram* filter_success;
    prometheus::Histogram* filter_unschedulable;
  };

  explicit SchedulerMetrics(std::shared_ptr<prometheus::Registry> registry);

  ProfileSeries ForProfile(const std::string& profile);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void ObservePodScheduled(int attempts, double e2e_seconds);
  void SetPendingPods(const std::string& queue, double count);
  // Plugin endpoint counters, refreshed from the clients' own counters.
  void SetPluginCounter(const std::string& endpoint, const std::string& kind, double value);
  void SetPluginConnected(const std::string& endpoint, bool connected);
  // An object from the adapter refused at the door (kind: Pod, Node...).
  void CountInvalidObject(const std::string& kind);
  // The scheduler refused or dropped something, or a safety net fired
  // (kind: permit_decision_unknown_plugin, assumed_pod_expired, ...).
  void CountSchedulerEvent(const std::string& kind);
  // 1 while the adapter is connected (0 from its disconnect to its next list).
  void SetAdapterConnected(bool connected);
  // kube-scheduler's scheduler_cache_size{type}: type is nodes, pods or assumed_pods.
  void SetCacheSize(const std::string& type, double count);
  // kube-scheduler's scheduler_unschedulable_pods{plugin,profile}: pods in the
  // unschedulable pool per plugin that rejected them (a pod counts once per
  // plugin), from a listing of the pool. Series missing from `counts` drop to 0.
  void SetUnschedulablePods(const absl::flat_hash_map<std::pair<std::string, std::string>, int>& counts);
  // kube-scheduler's scheduler_inflight_events{event}: the cluster events the
  // queue keeps for the pods in flight, by event. Series missing from
  // `counts` drop to 0.
  void SetInFlightEvents(const absl::flat_hash_map<std::string, size_t>& counts);

  // kube-scheduler's scheduler_queue_incoming_pods_total{queue,event}: queue is
  // active, backoff, unschedulable or gated; event what brought the pod there
  // (PodAdd, ScheduleAttemptFailure, BackoffComplete, NodeAdd, ...).
  void CountIncomingPod(std::string_view queue, std::string_view event);
  // scheduler_plugin_execution_duration_seconds{plugin,extension_point,status}.
  void ObservePluginExecution(std::string_view plugin, std::string_view extension_point,
                              std::string_view status, absl::Duration duration);
  // scheduler_queueing_hint_execution_duration_seconds{plugin,event,hint}: hint
  // is Queue, QueueSkip or Error.
  void ObserveQueueingHint(std::string_view plugin, std::string_view event, std::string_view hint,
                           absl::Duration duration);
  // scheduler_preemption_attempts_total and scheduler_preemption_victims.
  void CountPreemptionAttempt();
  void ObservePreemptionVictims(int victims);
  // kube-scheduler's scheduler_preemption_goroutines_duration_seconds{result}
  // and scheduler_preemption_goroutines_execution_total{result} (its async
  // preemption, KEP-4832): one preemption's API calls, from when they are
  // sent until every victim's delete returned; result is success, or error
  // when one failed.
  void ObservePreemptionApiCalls(std::string_view result, absl::Duration duration);
  // scheduler_permit_wait_duration_seconds{result}: result is the status code
  // the wait ended with, as kube-scheduler's (Success when every Permit plugin
  // allowed, Unschedulable when one rejected or the wait timed out).
  void ObservePermitWait(std::string_view result, absl::Duration duration);
  // kube-scheduler's scheduler_event_handling_duration_seconds{event}: one
  // cluster event from the adapter, handled (cache updated, queue moves
  // handed to the queue worker), by kube's event label (NodeAdd,
  // AssignedPodUpdate, UnscheduledPodDelete, ...).
  void ObserveEventHandling(std::string_view event, absl::Duration duration);
  // podium_plugin_endpoint_request_duration_seconds{endpoint,request}: one
  // round trip on a plugin stream, by request kind (cycle, queueing_hint...).
  void ObservePluginRequest(std::string_view endpoint, std::string_view request, absl::Duration duration);
  // podium_plugin_failure_policy_total{endpoint,policy}: a plugin process
  // failed (error, timeout, invalid answer) and its failurePolicy was applied:
  // Ignore (its answer dropped, the cycle goes on) or Fail (the attempt fails).
  void CountFailurePolicy(std::string_view endpoint, std::string_view policy);
  // Exports an endpoint's failure-policy counters at 0 before its first
  // failure, so rates and alerts see the series from the start.
  void AddPluginEndpoint(std::string_view endpoint);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& attempts_;
  prometheus::Family<prometheus::Histogram>& attempt_duration_;
  prometheus::Family<prometheus::Histogram>& pod_attempts_;
  prometheus::Family<prometheus::Histogram>& e2e_duration_;
  prometheus::Family<prometheus::Gauge>& pending_pods_;
  friend class ExtensionPointMetrics;
  prometheus::Family<prometheus::Histogram>& extension_point_duration_;
  prometheus::Family<prometheus::Histogram>& algorithm_duration_;
  prometheus::Family<prometheus::Gauge>& plugin_counters_;
  prometheus::Family<prometheus::Gauge>& plugin_connected_;
  prometheus::Family<prometheus::Counter>& invalid_objects_;
  prometheus::Family<prometheus::Counter>& scheduler_events_;
  prometheus::Family<prometheus::Gauge>& adapter_connected_;
  prometheus::Family<prometheus::Gauge>& cache_size_;
  prometheus::Family<prometheus::Gauge>& unschedulable_pods_;
  prometheus::Family<prometheus::Gauge>& inflight_events_;
  prometheus::Family<prometheus::Counter>& queue_incoming_;
  prometheus::Family<prometheus::Histogram>& plugin_execution_;
  prometheus::Family<prometheus::Histogram>& queueing_hint_;
  prometheus::Family<prometheus::Counter>& preemption_attempts_;
  prometheus::Family<prometheus::Histogram>& preemption_victims_;
  prometheus::Family<prometheus::Histogram>& preemption_goroutines_duration_;
  prometheus::Family<prometheus::Counter>& preemption_goroutines_total_;
  prometheus::Family<prometheus::Histogram>& permit_wait_;
  prometheus::Family<prometheus::Histogram>& event_handling_;
  prometheus::Family<prometheus::Histogram>& plugin_request_;
  prometheus::Family<prometheus::Counter>& failure_policy_;
  SeriesCache<prometheus::Counter> queue_incoming_series_;
  SeriesCache<prometheus::Histogram> plugin_execution_series_;
  SeriesCache<prometheus::Histogram> queueing_hint_series_;
  SeriesCache<prometheus::Histogram> plugin_request_series_;
  SeriesCache<prometheus::Histogram> event_handling_series_;
  absl::Mutex unschedulable_mu_;
  // (plugin, profile) series ever set, so that one whose pods left goes to 0.
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Gauge*> unschedulable_series_
      ABSL_GUARDED_BY(unschedulable_mu_);
  absl::flat_hash_map<std::string, prometheus::Gauge*> inflight_series_ ABSL_GUARDED_BY(unschedulable_mu_);
};

// scheduler_framework_extension_point_duration_seconds of one profile, by
// extension point and status, for the framework (ProfileSpec::recorder).
class ExtensionPointMetrics final : public ExtensionPointRecorder {
 public:
  ExtensionPointMetrics(SchedulerMetrics& metrics, std::string profile)
      : metrics_(metrics), profile_(std::move(profile)) {}
  void Observe(std::string_view extension_point, std::string_view status,
               absl::Duration duration) override;
  void ObservePlugin(std::string_view plugin, std::string_view extension_point, std::string_view status,
                     absl::Duration duration) override {
    metrics_.ObservePluginExecution(plugin, extension_point, status, duration);
  }
  void CountPreemptionAttempt() override { metrics_.CountPreemptionAttempt(); }
  void ObservePreemptionVictims(int victims) override { metrics_.ObservePreemptionVictims(victims); }
  void CountFailurePolicy(std::string_view endpoint, std::string_view policy) override {
    metrics_.CountFailurePolicy(endpoint, policy);
  }

 private:
  prometheus::Histogram& Series(std::string_view extension_point, std::string_view status);

  SchedulerMetrics& metrics_;
  const std::string profile_;
  absl::Mutex mu_;
  // Resolved once per (point, status): no label map per observation.
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Histogram*> series_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace podium::scheduler
