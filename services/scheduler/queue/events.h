// Which ActionType bits an update carries, as kube-scheduler's
// nodeSchedulingPropertiesChange / PodSchedulingPropertiesChange compute them,
// for building the ClusterEvent handed to MoveAllToActiveOrBackoffQueue.
#pragma once

#include <cstdint>
#include <string>

#include "podium/v1/objects.pb.h"
#include "podium/v1/plugin.pb.h"

namespace podium::scheduler {

// UPDATE_NODE_* bits; 0 when nothing a plugin looks at changed (kube skips the
// event then).
uint32_t NodeUpdateActions(const v1::Node& old_node, const v1::Node& new_node);

// UPDATE_POD_* bits (labels, scale down, tolerations, scheduling gates
// eliminated); v1::UPDATE when something else changed, 0 when nothing did
// beyond status and resourceVersion.
uint32_t PodUpdateActions(const v1::Pod& old_pod, const v1::Pod& new_pod);

// The event's name as kube-scheduler labels its metrics (NodeAdd,
// NodeTaintChange, AssignedPodDelete, ...): the resource, then the action, or
// the one update it carries ("NodeUpdate" when it carries several).
std::string ClusterEventLabel(const v1::ClusterEvent& event);

// Whether two pods are equal field for field: deterministic bytes (map entries
// sorted; Pod holds no floating-point field), generated code rather than
// MessageDifferencer's reflection, for comparisons made per event on the
// event thread.
bool SamePod(const v1::Pod& a, const v1::Pod& b);

// Whether two pods are equal but for the fields `strip` clears (it is given
// a copy of each).
template <typename Strip>
bool SamePodBut(const v1::Pod& a, const v1::Pod& b, Strip strip) {
  v1::Pod x = a;
  v1::Pod y = b;
  strip(x);
  strip(y);
  return SamePod(x, y);
}

}  // namespace podium::scheduler
