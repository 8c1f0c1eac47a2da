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

}  // namespace
}  // namespace podium::scheduler
