// Extension points that framework.h does not declare yet: PreEnqueue (e.g.
// scheduling gates) and Bind. The SDK registers and runs them like the others;
// a plugin implements them next to framework.h's interfaces.
#pragma once

#include <string>

#include "podium/sdk/framework.h"

namespace podium::sdk {

// kube-scheduler's PreEnqueuePlugin: runs before a pod enters activeQ; a
// non-success status keeps the pod out of it (UnschedulableAndUnresolvable).
class PreEnqueuePlugin : public virtual Plugin {
 public:
  virtual Status PreEnqueue(const PodInfo& pod) = 0;
};

// kube-scheduler's BindPlugin: Skip lets the next bind plugin decide; Success
// means this plugin bound the pod.
class BindPlugin : public virtual Plugin {
 public:
  virtual Status Bind(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
};

}  // namespace podium::sdk
