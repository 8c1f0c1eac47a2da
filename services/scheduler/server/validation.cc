#include "server/validation.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace podium::scheduler {
namespace {

absl::Status Invalid(const std::string& field, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::Status ValidateMeta(const v1::ObjectMeta& meta, bool namespaced) {
  if (meta.name().empty()) return Invalid("metadata.name", "required");
  if (meta.uid().empty()) return Invalid("metadata.uid", "required");
  if (namespaced && meta.namespace_().empty()) return Invalid("metadata.namespace", "required");
  return absl::OkStatus();
}

absl::Status ValidateResources(const v1::ResourceList& list, const std::string& field) {
  if (list.milli_cpu() < 0) return Invalid(field + ".cpu", "must be non-negative");
  if (list.memory_bytes() < 0) return Invalid(field + ".memory", "must be non-negative");
  if (list.ephemeral_storage_bytes() < 0) {
    return Invalid(field + ".ephemeral-storage", "must be non-negative");
  }
  if (list.pods() < 0) return Invalid(field + ".pods", "must be non-negative");
  for (const auto& [name, value] : list.scalar()) {
    if (name.empty()) return Invalid(field, "resource with an empty name");
    if (value < 0) return Invalid(absl::StrCat(field, ".", name), "must be non-negative");
  }
  return absl::OkStatus();
}

absl::Status ValidateContainers(const google::protobuf::RepeatedPtrField<v1::Container>& containers,
                                const std::string& field) {
  for (int i = 0; i < containers.size(); ++i) {
    const std::string prefix = absl::StrCat(field, "[", i, "]");
    if (auto s = ValidateResources(containers[i].requests(), prefix + ".resources.requests"); !s.ok()) {
      return s;
    }
    for (int p = 0; p < containers[i].ports_size(); ++p) {
      const auto& port = containers[i].ports(p);
      if (port.host_port() < 0 || port.host_port() > 65535) {
        return Invalid(absl::StrCat(prefix, ".ports[", p, "].hostPort"), "must be between 0 and 65535");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidatePod(const v1::Pod& pod) {
  if (auto s = ValidateMeta(pod.meta(), true); !s.ok()) return s;
  if (auto s = ValidateContainers(pod.containers(), "spec.containers"); !s.ok()) return s;
  if (auto s = ValidateContainers(pod.init_containers(), "spec.initContainers"); !s.ok()) return s;
  if (auto s = ValidateResources(pod.overhead(), "spec.overhead"); !s.ok()) return s;
  for (int i = 0; i < pod.tolerations_size(); ++i) {
    const auto& t = pod.tolerations(i);
    if (t.operator_() == v1::Toleration::EXISTS && !t.value().empty()) {
      return Invalid(absl::StrCat("spec.tolerations[", i, "].value"),
                     "must be empty when operator is Exists");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNode(const v1::Node& node) {
  if (auto s = ValidateMeta(node.meta(), false); !s.ok()) return s;
  if (auto s = ValidateResources(node.allocatable(), "status.allocatable"); !s.ok()) return s;
  for (int i = 0; i < node.taints_size(); ++i) {
    if (node.taints(i).key().empty()) return Invalid(absl::StrCat("spec.taints[", i, "].key"), "required");
    if (node.taints(i).effect() == v1::TAINT_EFFECT_UNSPECIFIED) {
      return Invalid(absl::StrCat("spec.taints[", i, "].effect"), "required");
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateObjectEvent(const v1::ObjectEvent& event) {
  if (event.type() != v1::ObjectEvent::UPSERT && event.type() != v1::ObjectEvent::DELETE) {
    return Invalid("type", "must be UPSERT or DELETE");
  }
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: return ValidatePod(event.pod());
    case v1::ObjectEvent::kNode: return ValidateNode(event.node());
    case v1::ObjectEvent::kPdb: return ValidateMeta(event.pdb().meta(), true);
    case v1::ObjectEvent::kPodGroup: return ValidateMeta(event.pod_group().meta(), true);
    case v1::ObjectEvent::kPriorityClass: return ValidateMeta(event.priority_class().meta(), false);
    default: return Invalid("object", "missing");
  }
}

std::string DescribeObject(const v1::ObjectEvent& event) {
  auto ns_name = [](const v1::ObjectMeta& m) {
    return m.namespace_().empty() ? m.name() : absl::StrCat(m.namespace_(), "/", m.name());
  };
  switch (event.object_case()) {
    case v1::ObjectEvent::kPod: return "Pod " + ns_name(event.pod().meta());
    case v1::ObjectEvent::kNode: return "Node " + ns_name(event.node().meta());
    case v1::ObjectEvent::kPdb: return "PodDisruptionBudget " + ns_name(event.pdb().meta());
    case v1::ObjectEvent::kPodGroup: return "PodGroup " + ns_name(event.pod_group().meta());
    case v1::ObjectEvent::kPriorityClass: return "PriorityClass " + ns_name(event.priority_class().meta());
    default: return "object";
  }
}

}  // namespace podium::scheduler
