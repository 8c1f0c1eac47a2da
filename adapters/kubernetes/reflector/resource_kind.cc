#include "reflector/resource_kind.h"

#include "common/translate/k8s_json.h"

namespace podium::kube {

ResourceKind NodesKind() {
  return {.kind = "Node",
          .list_path = "/api/v1/nodes",
          .list_kind = "NodeList",
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto node = k8s::NodeFromJson(o);
            if (!node.ok()) return node.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_node() = *std::move(node);
            return e;
          }};
}

ResourceKind PodsKind() {
  return {.kind = "Pod",
          .list_path = "/api/v1/pods",
          .list_kind = "PodList",
          // Assigned pods first (all of them before the scheduler may place
          // a pod), then the pending ones, streamed while it already schedules.
          .first_list_parts = {{.field_selector = "spec.nodeName!=", .needed_to_schedule = true},
                               {.field_selector = "spec.nodeName=", .needed_to_schedule = false}},
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto pod = k8s::PodFromJson(o);
            if (!pod.ok()) return pod.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_pod() = *std::move(pod);
            return e;
          },
          .finished = [](const v1::ObjectEvent& e) {
            return e.has_pod() && (e.pod().phase() == v1::SUCCEEDED || e.pod().phase() == v1::FAILED);
          }};
}

ResourceKind PriorityClassesKind() {
  return {.kind = "PriorityClass",
          .list_path = "/apis/scheduling.k8s.io/v1/priorityclasses",
          .list_kind = "PriorityClassList",
          .optional = true,  // The deployed ClusterRole does not grant them.
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto pc = k8s::PriorityClassFromJson(o);
            if (!pc.ok()) return pc.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_priority_class() = *std::move(pc);
            return e;
          }};
}

ResourceKind PodDisruptionBudgetsKind() {
  return {.kind = "PodDisruptionBudget",
          .list_path = "/apis/policy/v1/poddisruptionbudgets",
          .list_kind = "PodDisruptionBudgetList",
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto pdb = k8s::PodDisruptionBudgetFromJson(o);
            if (!pdb.ok()) return pdb.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_pdb() = *std::move(pdb);
            return e;
          }};
}

ResourceKind NamespacesKind() {
  return {.kind = "Namespace",
          .list_path = "/api/v1/namespaces",
          .list_kind = "NamespaceList",
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto ns = k8s::NamespaceFromJson(o);
            if (!ns.ok()) return ns.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_namespace_object() = *std::move(ns);
            return e;
          }};
}

namespace {

// `kind` is distinct per API group: the link waits for each kind's list.
ResourceKind PodGroupsKind(std::string kind, std::string list_path) {
  return {.kind = std::move(kind),
          .list_path = std::move(list_path),
          .list_kind = "PodGroupList",
          .optional = true,  // An absent API group: no gangs of this kind.
          .decode = [](const boost::json::value& o) -> absl::StatusOr<v1::ObjectEvent> {
            auto group = k8s::PodGroupFromJson(o);
            if (!group.ok()) return group.status();
            v1::ObjectEvent e;
            e.set_type(v1::ObjectEvent::UPSERT);
            *e.mutable_pod_group() = *std::move(group);
            return e;
          }};
}

}  // namespace

ResourceKind SchedulerPluginsPodGroupsKind() {
  return PodGroupsKind("PodGroup.scheduling.x-k8s.io", "/apis/scheduling.x-k8s.io/v1alpha1/podgroups");
}

ResourceKind KubernetesPodGroupsKind() {
  return PodGroupsKind("PodGroup.scheduling.k8s.io", "/apis/scheduling.k8s.io/v1alpha2/podgroups");
}

ResourceKind WorkloadsKind() {
  return {.kind = "Workload.scheduling.k8s.io",
          .list_path = "/apis/scheduling.k8s.io/v1alpha1/workloads",
          .list_kind = "WorkloadList",
          .optional = true,  // An absent API group: no gangs of this kind.
          .decode_many = [](const boost::json::value& o) -> absl::StatusOr<std::vector<v1::ObjectEvent>> {
            auto groups = k8s::PodGroupsFromWorkloadJson(o);
            if (!groups.ok()) return groups.status();
            std::vector<v1::ObjectEvent> events;
            events.reserve(groups->size());
            for (v1::PodGroup& g : *groups) {
              v1::ObjectEvent& e = events.emplace_back();
              e.set_type(v1::ObjectEvent::UPSERT);
              *e.mutable_pod_group() = std::move(g);
            }
            return events;
          }};
}

std::vector<ResourceKind> AllKinds() {
  // Groups before pods: a member's PreEnqueue finds its group.
  return {NamespacesKind(), NodesKind(), PriorityClassesKind(), PodDisruptionBudgetsKind(), SchedulerPluginsPodGroupsKind(),
          KubernetesPodGroupsKind(), WorkloadsKind(), PodsKind()};
}

}  // namespace podium::kube
