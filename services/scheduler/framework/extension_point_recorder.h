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
  // kube-scheduler's scheduler_plugin_execution_duration_seconds: one
  // plugin's run at one extension point. `plugin` is a plugin's name, or
  // "endpoint/NAME" when the time is a plugin process's for several plugins
  // of that point together (the process reports time per phase, not per
  // plugin). Thread-safe.
  virtual void ObservePlugin(std::string_view plugin, std::string_view extension_point,
                             std::string_view status, absl::Duration duration) {}
  // kube-scheduler's scheduler_preemption_attempts_total (every DefaultPreemption
  // PostFilter call) and scheduler_preemption_victims (the victims of the
  // chosen candidate). Thread-safe.
  virtual void CountPreemptionAttempt() {}
  virtual void ObservePreemptionVictims(int victims) {}
  // A plugin process failed and its failurePolicy was applied: "Ignore" or
  // "Fail". Thread-safe.
  virtual void CountFailurePolicy(std::string_view endpoint, std::string_view policy) {}
};

}  // namespace podium::scheduler
