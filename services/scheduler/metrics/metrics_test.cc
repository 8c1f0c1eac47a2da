#include "metrics/metrics.h"

#include <map>
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

TEST(SchedulerMetricsTest, CacheSizeByType) {
  auto registry = std::make_shared<prometheus::Registry>();
  SchedulerMetrics metrics(registry);
  metrics.SetCacheSize("nodes", 3);
  metrics.SetCacheSize("pods", 7);
  metrics.SetCacheSize("assumed_pods", 1);
  EXPECT_EQ(Gauges(*registry, "scheduler_cache_size", "type"),
            (std::map<std::string, double>{{"nodes", 3}, {"pods", 7}, {"assumed_pods", 1}}));
}

}  // namespace
}  // namespace podium::scheduler
