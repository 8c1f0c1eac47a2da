#pragma once

// The Kubernetes resources the adapter lists and watches, and how each one's
// JSON becomes a podium.v1 object (the shared translation, podium_translate:
// the parsed JSON goes through the same functions as podium-sim's YAML,
// k8s_json.h).

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/v1/cluster.pb.h"
#include <boost/json/value.hpp>

namespace podium::kube {

// The first list of a kind may be split in parts by field selectors, listed
// one after the other (and streamed page by page). The scheduler may start
// scheduling once the parts `needed_to_schedule` of every kind are sent:
// assigned pods hold node resources and must all be known; pending pods may
// keep arriving while the first ones are placed.
struct ListPart {
  std::string field_selector;  // Empty: every object.
  bool needed_to_schedule = true;
};

struct ResourceKind {
  std::string kind;       // "Pod", for logs and bad-object reports.
  std::string list_path;  // "/api/v1/pods": every namespace.
  std::string list_kind;  // "PodList": what a list answer must say it is.
  // A kind the scheduler can do without (gangs, PriorityClasses): when its
  // first list is refused (404: the API group is absent; 403: RBAC does not
  // allow it) the reflector logs it and gives up on that kind. A required
  // kind (Nodes, Pods, ...) retries every list error, as client-go does.
  bool optional = false;
  // The first list's parts, in order; the parts needed to schedule come
  // first. Relists are one unfiltered list (they must see what vanished).
  std::vector<ListPart> first_list_parts = {ListPart{}};
  // The object as an UPSERT event.
  std::function<absl::StatusOr<v1::ObjectEvent>(const boost::json::value&)> decode;
  // Set instead of `decode` for an API object that is several podium.v1
  // objects (a Workload: one PodGroup per podGroups[] entry). The reflector
  // sends each as an UPSERT, a DELETE for one an update dropped, and a DELETE
  // for each when the API object goes.
  std::function<absl::StatusOr<std::vector<v1::ObjectEvent>>(const boost::json::value&)> decode_many;
  // Objects that hold no resources any more (Succeeded/Failed pods): the
  // scheduler gets a DELETE for them, as kube-scheduler drops them from its cache.
  std::function<bool(const v1::ObjectEvent&)> finished = [](const v1::ObjectEvent&) { return false; };
};

ResourceKind NodesKind();
ResourceKind PodsKind();
ResourceKind PriorityClassesKind();
ResourceKind PodDisruptionBudgetsKind();  // policy/v1
ResourceKind NamespacesKind();           // v1; their labels, for namespaceSelectors
// Gangs: scheduler-plugins' PodGroups (scheduling.x-k8s.io/v1alpha1) and
// Kubernetes' (scheduling.k8s.io/v1alpha2). A cluster without the API group
// answers 404: the reflector logs it once and does not watch that kind.
ResourceKind SchedulerPluginsPodGroupsKind();
ResourceKind KubernetesPodGroupsKind();
// Kubernetes' 1.35 alpha Workload (scheduling.k8s.io/v1alpha1): each of its
// podGroups[] is a PodGroup named "<workload>/<podGroup>" (the gang code's
// KUBERNETES_WORKLOAD source).
ResourceKind WorkloadsKind();

// Every kind the adapter watches, in the order their initial lists are sent
// (nodes before the pods bound to them).
std::vector<ResourceKind> AllKinds();

}  // namespace podium::kube
