#pragma once

// The API requests behind the scheduler's actions, shaped as kube-scheduler
// sends them.

#include <string>

#include "absl/time/time.h"
#include "client/transport.h"
#include "podium/v1/cluster.pb.h"

namespace podium::kube {

// POST /api/v1/namespaces/NS/pods/NAME/binding (a v1 Binding carrying the pod's uid).
HttpRequest BindRequest(const v1::BindPod& bind);
// GET of the pod (to tell "already bound here" from a conflict after a retry).
HttpRequest GetPodRequest(const v1::ObjectRef& pod);
// DELETE of the pod with DeleteOptions{preconditions.uid, gracePeriodSeconds}.
HttpRequest DeletePodRequest(const v1::DeletePod& del);
// PATCH .../pods/NAME/status, strategic merge: conditions merge by type;
// nominatedNodeName set, or null to clear it.
HttpRequest PatchPodStatusRequest(const v1::PatchPodStatus& patch);
// POST /apis/events.k8s.io/v1/namespaces/NS/events.
struct EventSource {
  std::string reporting_controller = "podium";  // kube-scheduler: the scheduler name.
  std::string reporting_instance;               // Host name.
};
HttpRequest EventRequest(const v1::RecordEvent& event, const EventSource& source, absl::Time now);
// The same, under `name` (see EventName).
HttpRequest EventRequest(const v1::RecordEvent& event, const EventSource& source, absl::Time now,
                         const std::string& name);
// client-go's event name: "<object>.<unix nanos in hex>" (plus 16 random bits).
std::string EventName(const v1::ObjectRef& regarding, absl::Time now);
// PATCH (JSON merge) of an event's series: what a repeat of it does.
HttpRequest EventSeriesPatchRequest(const v1::ObjectRef& regarding, const std::string& name, int32_t count,
                                    absl::Time last_observed);

// RFC 3339 with microseconds, UTC (a Kubernetes MicroTime).
std::string MicroTime(absl::Time t);

}  // namespace podium::kube
