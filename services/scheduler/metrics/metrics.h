// kube-scheduler's metric names, so existing dashboards work, plus Podium's
// own (podium_*) for plugin endpoints and refused input.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>

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
  absl::Mutex unschedulable_mu_;
  // (plugin, profile) series ever set, so that one whose pods left goes to 0.
  absl::flat_hash_map<std::pair<std::string, std::string>, prometheus::Gauge*> unschedulable_series_
      ABSL_GUARDED_BY(unschedulable_mu_);
};

// scheduler_framework_extension_point_duration_seconds of one profile, by
// extension point and status, for the framework (ProfileSpec::recorder).
class ExtensionPointMetrics final : public ExtensionPointRecorder {
 public:
  ExtensionPointMetrics(SchedulerMetrics& metrics, std::string profile)
      : metrics_(metrics), profile_(std::move(profile)) {}
  void Observe(std::string_view extension_point, std::string_view status,
               absl::Duration duration) override;

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
