// Where the framework records how long the plugins of each extension point
// took, with the point's status (kube-scheduler's
// scheduler_framework_extension_point_duration_seconds). metrics/ implements
// it; the framework never sees Prometheus.
#pragma once

#include <string_view>

#include "absl/time/time.h"

namespace podium::scheduler {

class ExtensionPointRecorder {
 public:
  virtual ~ExtensionPointRecorder() = default;
  // extension_point: kube-scheduler's label value ("PreFilter", "Filter",
  // "PreScore", "Score", "Reserve", "Unreserve", "Permit", "PreBind", "Bind",
  // "PostBind"); status: its status code name ("Success", "Error",
  // "Unschedulable", ...). Thread-safe.
  virtual void Observe(std::string_view extension_point, std::string_view status,
                       absl::Duration duration) = 0;
};

}  // namespace podium::scheduler
