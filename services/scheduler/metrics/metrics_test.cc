#include "metrics/metrics.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>
#include <string>

#include "gtest/gtest.h"

namespace podium::scheduler {
namespace {

// Sample counts of a histogram family by "extension_point/status".
std::map<std::string, uint64_t> ExtensionPointCounts(prometheus::Registry& registry) {
  std::map<std::string, uint64_t> counts;
  for (const auto& family : registry.Collect()) {
    if (family.name != "scheduler_framework_extension_point_duration_seconds") continue;
    for (const auto& metric : family.metric) {
      std::string point, status;
      for (const auto& label : metric.label) {
        if (label.name == "extension_point") point = label.value;
        if (label.name == "status") status = label.value;
      }
      counts[point + "/" + status] += metric.histogram.sample_count;
    }
  }
  return counts;
}

// Defect 10: every extension point and status is its own series.
TEST(ExtensionPointMetricsTest, EachPointAndStatusIsItsOwnSeries) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  (void)metrics.ForProfile("default-scheduler");
  ExtensionPointMetrics recorder(metrics, "default-scheduler");
  recorder.Observe("PreFilter", "Success", absl::Microseconds(5));
  recorder.Observe("Filter", "Unschedulable", absl::Microseconds(50));
  recorder.Observe("Filter", "Error", absl::Microseconds(50));
  recorder.Observe("Filter", "Error", absl::Microseconds(50));
  recorder.Observe("Score", "Success", absl::Microseconds(20));
  const std::map<std::string, uint64_t> want = {{"PreFilter/Success", 1},
                                                {"Filter/Unschedulable", 1},
                                                {"Filter/Error", 2},
                                                {"Score/Success", 1}};
  EXPECT_EQ(ExtensionPointCounts(*registry), want);
}

// Gauge values of `name` by the value of label `label` (and `label2` if given).
std::map<std::string, double> Gauges(prometheus::Registry& registry, const std::string& name,
                                     const std::string& label, const std::string& label2 = "") {
  std::map<std::string, double> out;
  for (const auto& family : registry.Collect()) {
    if (family.name != name) continue;
    for (const auto& metric : family.metric) {
      std::string key;
      for (const auto& l : metric.label) {
        if (l.name == label) key = l.value + key;
        if (!label2.empty() && l.name == label2) key += "/" + l.value;
      }
      out[key] = metric.gauge.value;
    }
  }
  return out;
}

TEST(SchedulerMetricsTest, UnschedulablePodsPerPluginAndProfileDropToZeroWhenThePodsLeave) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  metrics.SetUnschedulablePods({{{"NodeResourcesFit", "default-scheduler"}, 2},
                                {{"TaintToleration", "default-scheduler"}, 1}});
  EXPECT_EQ(Gauges(*registry, "scheduler_unschedulable_pods", "plugin", "profile"),
            (std::map<std::string, double>{{"NodeResourcesFit/default-scheduler", 2},
                                           {"TaintToleration/default-scheduler", 1}}));
  metrics.SetUnschedulablePods({{{"NodeResourcesFit", "default-scheduler"}, 1}});
  EXPECT_EQ(Gauges(*registry, "scheduler_unschedulable_pods", "plugin", "profile"),
            (std::map<std::string, double>{{"NodeResourcesFit/default-scheduler", 1},
                                           {"TaintToleration/default-scheduler", 0}}));
}

TEST(SchedulerMetricsTest, InFlightEventsByEventDropToZeroWhenPruned) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  metrics.SetInFlightEvents({{"PodPoppedInFlightEvent", 2}, {"NodeAdd", 3}});
  EXPECT_EQ(Gauges(*registry, "scheduler_inflight_events", "event"),
            (std::map<std::string, double>{{"PodPoppedInFlightEvent", 2}, {"NodeAdd", 3}}));
  metrics.SetInFlightEvents({{"AssignedPodDelete", 1}});
  EXPECT_EQ(Gauges(*registry, "scheduler_inflight_events", "event"),
            (std::map<std::string, double>{{"PodPoppedInFlightEvent", 0}, {"NodeAdd", 0}, {"AssignedPodDelete", 1}}));
}

TEST(SchedulerMetricsTest, CacheSizeByType) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  metrics.SetCacheSize("nodes", 3);
  metrics.SetCacheSize("pods", 7);
  metrics.SetCacheSize("assumed_pods", 1);
  EXPECT_EQ(Gauges(*registry, "scheduler_cache_size", "type"),
            (std::map<std::string, double>{{"nodes", 3}, {"pods", 7}, {"assumed_pods", 1}}));
}

const prometheus::MetricFamily* FindFamily(const std::vector<prometheus::MetricFamily>& families,
                                           const std::string& name) {
  for (const auto& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

// The label names of a series, sorted, joined by ",".
std::string LabelNames(const prometheus::ClientMetric& metric) {
  std::vector<std::string> names;
  for (const auto& l : metric.label) names.push_back(l.name);
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

std::vector<double> Bounds(const prometheus::ClientMetric& metric) {
  std::vector<double> out;
  for (const auto& b : metric.histogram.bucket) out.push_back(b.upper_bound);
  return out;
}

std::vector<double> Exponential(double start, double factor, int count) {
  std::vector<double> out;
  for (int i = 0; i < count; ++i, start *= factor) out.push_back(start);
  out.push_back(std::numeric_limits<double>::infinity());
  return out;
}

// kube-scheduler's names, types, label sets and buckets
// (pkg/scheduler/metrics/metrics.go), so its dashboards and alerts work.
TEST(SchedulerMetricsTest, KubeSchedulersLaterMetricsHaveItsNamesLabelsAndBuckets) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  ExtensionPointMetrics recorder(metrics, "default-scheduler");
  metrics.CountIncomingPod("active", "PodAdd");
  metrics.CountIncomingPod("active", "PodAdd");
  metrics.CountIncomingPod("backoff", "ScheduleAttemptFailure");
  recorder.ObservePlugin("NodeResourcesFit", "Filter", "Success", absl::Microseconds(30));
  metrics.ObserveQueueingHint("NodeResourcesFit", "NodeAdd", "Queue", absl::Microseconds(40));
  recorder.CountPreemptionAttempt();
  recorder.ObservePreemptionVictims(3);
  metrics.ObservePreemptionApiCalls("success", absl::Milliseconds(40));
  metrics.ObservePreemptionApiCalls("success", absl::Milliseconds(20));
  metrics.ObservePreemptionApiCalls("error", absl::Milliseconds(5));
  metrics.ObservePermitWait("Success", absl::Milliseconds(3));
  metrics.ObserveEventHandling("NodeAdd", absl::Microseconds(250));
  metrics.ObservePluginRequest("host", "cycle", absl::Microseconds(35));
  metrics.CountFailurePolicy("host", "Ignore");

  const auto families = registry->Collect();
  struct Want {
    std::string name;
    prometheus::MetricType type;
    std::string labels;
    std::vector<double> buckets;  // Histograms only.
  };
  const std::vector<Want> wants = {
      {"scheduler_queue_incoming_pods_total", prometheus::MetricType::Counter, "event,queue", {}},
      {"scheduler_plugin_execution_duration_seconds", prometheus::MetricType::Histogram,
       "extension_point,plugin,status", Exponential(0.00001, 1.5, 20)},
      {"scheduler_queueing_hint_execution_duration_seconds", prometheus::MetricType::Histogram,
       "event,hint,plugin", Exponential(0.00001, 1.5, 20)},
      {"scheduler_preemption_attempts_total", prometheus::MetricType::Counter, "", {}},
      {"scheduler_preemption_victims", prometheus::MetricType::Histogram, "", Exponential(1, 2, 7)},
      {"scheduler_preemption_goroutines_duration_seconds", prometheus::MetricType::Histogram, "result",
       Exponential(0.01, 2, 20)},
      {"scheduler_preemption_goroutines_execution_total", prometheus::MetricType::Counter, "result", {}},
      {"scheduler_permit_wait_duration_seconds", prometheus::MetricType::Histogram, "result",
       Exponential(0.001, 2, 15)},
      {"scheduler_event_handling_duration_seconds", prometheus::MetricType::Histogram, "event",
       Exponential(0.0001, 2, 12)},
      {"podium_plugin_endpoint_request_duration_seconds", prometheus::MetricType::Histogram,
       "endpoint,request", {}},
      {"podium_plugin_failure_policy_total", prometheus::MetricType::Counter, "endpoint,policy", {}},
  };
  for (const Want& want : wants) {
    SCOPED_TRACE(want.name);
    const prometheus::MetricFamily* f = FindFamily(families, want.name);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->type, want.type);
    ASSERT_FALSE(f->metric.empty());
    for (const auto& m : f->metric) {
      EXPECT_EQ(LabelNames(m), want.labels);
      if (!want.buckets.empty()) {
        EXPECT_EQ(Bounds(m), want.buckets);
      }
    }
  }
  std::map<std::string, double> incoming;
  for (const auto& m : FindFamily(families, "scheduler_queue_incoming_pods_total")->metric) {
    incoming[m.label[0].value + "/" + m.label[1].value] = m.counter.value;
  }
  // Labels come sorted by name: event, then queue.
  EXPECT_EQ(incoming, (std::map<std::string, double>{{"PodAdd/active", 2}, {"ScheduleAttemptFailure/backoff", 1}}));
  EXPECT_EQ(FindFamily(families, "scheduler_preemption_attempts_total")->metric[0].counter.value, 1);
  const auto& victims = FindFamily(families, "scheduler_preemption_victims")->metric[0].histogram;
  EXPECT_EQ(victims.sample_count, 1u);
  EXPECT_EQ(victims.sample_sum, 3);
  std::map<std::string, std::pair<uint64_t, double>> goroutines;
  for (const auto& m : FindFamily(families, "scheduler_preemption_goroutines_duration_seconds")->metric) {
    goroutines[m.label[0].value] = {m.histogram.sample_count, m.histogram.sample_sum};
  }
  EXPECT_EQ(goroutines.size(), 2u);
  EXPECT_EQ(goroutines["success"].first, 2u);
  EXPECT_DOUBLE_EQ(goroutines["success"].second, 0.06);
  EXPECT_EQ(goroutines["error"].first, 1u);
  std::map<std::string, double> executions;
  for (const auto& m : FindFamily(families, "scheduler_preemption_goroutines_execution_total")->metric) {
    executions[m.label[0].value] = m.counter.value;
  }
  EXPECT_EQ(executions, (std::map<std::string, double>{{"error", 1}, {"success", 2}}));
  // result -> (count, sum); Unschedulable is exported at 0 from the start.
  std::map<std::string, std::pair<uint64_t, double>> waits;
  for (const auto& m : FindFamily(families, "scheduler_permit_wait_duration_seconds")->metric) {
    waits[m.label[0].value] = {m.histogram.sample_count, m.histogram.sample_sum};
  }
  EXPECT_EQ(waits, (std::map<std::string, std::pair<uint64_t, double>>{{"Success", {1, 0.003}},
                                                                       {"Unschedulable", {0, 0}}}));
  const auto& events = FindFamily(families, "scheduler_event_handling_duration_seconds")->metric.at(0);
  EXPECT_EQ(events.label[0].value, "NodeAdd");
  EXPECT_EQ(events.histogram.sample_count, 1u);
  EXPECT_DOUBLE_EQ(events.histogram.sample_sum, 0.00025);
}

}  // namespace
}  // namespace podium::scheduler
