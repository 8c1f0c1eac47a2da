// Taint and toleration matching, as Kubernetes' core/v1 helpers define it.
#pragma once

#include <functional>

#include "google/protobuf/repeated_field.h"
#include "podium/v1/objects.pb.h"

namespace podium::plugins {

using Tolerations = google::protobuf::RepeatedPtrField<v1::Toleration>;
using Taints = google::protobuf::RepeatedPtrField<v1::Taint>;

// Toleration.ToleratesTaint: an empty effect matches every effect, an empty key
// every key; Equal compares values, Exists ignores them.
bool ToleratesTaint(const v1::Toleration& toleration, const v1::Taint& taint);

template <typename TolerationRange>
bool TolerationsTolerateTaint(const TolerationRange& tolerations, const v1::Taint& taint) {
  for (const v1::Toleration& t : tolerations) {
    if (ToleratesTaint(t, taint)) return true;
  }
  return false;
}

// NoSchedule and NoExecute: the taints that keep a pod off a node.
inline bool IsDoNotScheduleTaint(const v1::Taint& taint) {
  return taint.effect() == v1::NO_SCHEDULE || taint.effect() == v1::NO_EXECUTE;
}

// The first NoSchedule/NoExecute taint of `taints` no toleration tolerates, or
// null.
const v1::Taint* FindUntoleratedDoNotScheduleTaint(const Taints& taints,
                                                   const Tolerations& tolerations);

// node.kubernetes.io/unschedulable:NoSchedule, which stands for
// spec.unschedulable.
const v1::Taint& UnschedulableTaint();

// NodeUnschedulable's rule: the node is not cordoned (spec.unschedulable), or
// the pod tolerates UnschedulableTaint.
inline bool SchedulableFor(const v1::Pod& pod, const v1::Node& node) {
  return !node.unschedulable() || TolerationsTolerateTaint(pod.tolerations(), UnschedulableTaint());
}

}  // namespace podium::plugins
