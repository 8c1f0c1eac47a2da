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

  // What the scheduler knows of the pod's group when the request is sent (the
  // mirror gets no delta with PreEnqueue, so it may lag).
  struct Context {
    const v1::PodGroup* pod_group = nullptr;  // Null: the pod names none, or it does not exist.
    uint32_t pod_group_pods = 0;              // Pods naming the group, pending or assigned.
  };
  // The SDK calls this one; the default ignores the context.
  virtual Status PreEnqueue(const PodInfo& pod, const Context& context) { return PreEnqueue(pod); }
};

// kube-scheduler's BindPlugin: Skip lets the next bind plugin decide; Success
// means this plugin bound the pod.
class BindPlugin : public virtual Plugin {
 public:
  virtual Status Bind(CycleState& state, const PodInfo& pod, const std::string& node_name) = 0;
};

}  // namespace podium::sdk
