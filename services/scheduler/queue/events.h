// Which ActionType bits an update carries, as kube-scheduler's
// nodeSchedulingPropertiesChange / PodSchedulingPropertiesChange compute them,
// for building the ClusterEvent handed to MoveAllToActiveOrBackoffQueue.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

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

// The events a plugin's Registration names, as the queue's registry holds
// them. A process older than protocol version 10 did not register the
// pending pod's own updates (UNSCHEDULED_POD), which moved the pod whatever
// the registrations said: a plugin of such a process that registered any
// event is also given every such update without a hint, so nothing it relied
// on changes. A plugin that registered nothing is left so (the registry
// then treats it as registered for every event).
std::vector<v1::ClusterEventInterest> RegisteredEvents(const v1::PluginRegistration& registration,
                                                       bool registers_pending_pod_updates);

// Whether two pods are equal field for field but for some of their fields:
// Pod fields `pod_fields` and ObjectMeta fields `meta_fields`, by field number
// (v1::Pod::kConditionsFieldNumber, ...); empty lists compare every field.
// Each pod's deterministic bytes (map entries sorted; Pod holds no
// floating-point field, so equal bytes are equal pods) are walked with those
// fields skipped, so neither pod is copied: a copy of each to clear the
// fields in was most of the comparison's cost, made per pod event on the
// event thread. A meta left empty equals no meta.
bool SamePodExcept(const v1::Pod& a, const v1::Pod& b, std::initializer_list<int> pod_fields,
                   std::initializer_list<int> meta_fields);

}  // namespace podium::scheduler
