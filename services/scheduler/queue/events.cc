#include "queue/events.h"

#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/message_differencer.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/label_selector.h"

namespace podium::scheduler {
namespace {

using google::protobuf::util::MessageDifferencer;

template <typename T>
bool SameRepeated(const google::protobuf::RepeatedPtrField<T>& a,
                  const google::protobuf::RepeatedPtrField<T>& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < a.size(); ++i) {
    if (!MessageDifferencer::Equals(a[i], b[i])) return false;
  }
  return true;
}

// Some resource request went down and none went up.
bool ScaledDown(const v1::Pod& old_pod, const v1::Pod& new_pod) {
  const sdk::Resource before = sdk::PodInfo::Create(old_pod)->requests;
  const sdk::Resource after = sdk::PodInfo::Create(new_pod)->requests;
  return after.milli_cpu < before.milli_cpu || after.memory < before.memory ||
         after.ephemeral_storage < before.ephemeral_storage || [&] {
           for (const auto& [name, value] : before.scalar) {
             auto it = after.scalar.find(name);
             if ((it == after.scalar.end() ? 0 : it->second) < value) return true;
           }
           return false;
         }();
}

}  // namespace

uint32_t NodeUpdateActions(const v1::Node& old_node, const v1::Node& new_node) {
  uint32_t actions = 0;
  if (!MessageDifferencer::Equals(old_node.allocatable(), new_node.allocatable())) {
    actions |= v1::UPDATE_NODE_ALLOCATABLE;
  }
  if (!sdk::SameStringMap(old_node.meta().labels(), new_node.meta().labels())) {
    actions |= v1::UPDATE_NODE_LABEL;
  }
  // kube counts spec.unschedulable as a taint change (node.kubernetes.io/unschedulable).
  if (old_node.unschedulable() != new_node.unschedulable() ||
      !SameRepeated(old_node.taints(), new_node.taints())) {
    actions |= v1::UPDATE_NODE_TAINT;
  }
  if (!SameRepeated(old_node.conditions(), new_node.conditions())) {
    actions |= v1::UPDATE_NODE_CONDITION;
  }
  if (!sdk::SameStringMap(old_node.meta().annotations(), new_node.meta().annotations())) {
    actions |= v1::UPDATE_NODE_ANNOTATION;
  }
  return actions;
}

uint32_t PodUpdateActions(const v1::Pod& old_pod, const v1::Pod& new_pod) {
  uint32_t actions = 0;
  if (!sdk::SameStringMap(old_pod.meta().labels(), new_pod.meta().labels())) actions |= v1::UPDATE_POD_LABEL;
  if (ScaledDown(old_pod, new_pod)) actions |= v1::UPDATE_POD_SCALE_DOWN;
  if (!SameRepeated(old_pod.tolerations(), new_pod.tolerations())) {
    actions |= v1::UPDATE_POD_TOLERATIONS;
  }
  if (!old_pod.scheduling_gates().empty() && new_pod.scheduling_gates().empty()) {
    actions |= v1::UPDATE_POD_SCHEDULING_GATES_ELIMINATED;
  }
  if (actions != 0) return actions;
  v1::Pod a = old_pod;
  v1::Pod b = new_pod;
  for (v1::Pod* p : {&a, &b}) {
    p->mutable_meta()->clear_resource_version();
    p->clear_conditions();
    p->clear_phase();
  }
  return SamePod(a, b) ? 0 : static_cast<uint32_t>(v1::UPDATE);
}

std::string ClusterEventLabel(const v1::ClusterEvent& event) {
  std::string resource;
  switch (event.resource()) {
    case v1::NODE: resource = "Node"; break;
    case v1::POD: resource = "AssignedPod"; break;
    case v1::UNSCHEDULED_POD: resource = "UnscheduledPod"; break;
    case v1::POD_DISRUPTION_BUDGET: resource = "PodDisruptionBudget"; break;
    case v1::POD_GROUP: resource = "PodGroup"; break;
    case v1::NAMESPACE: resource = "Namespace"; break;
    default: resource = "Unknown"; break;
  }
  const uint32_t action = event.action();
  if (action & v1::ADD) return resource + "Add";
  if (action & v1::DELETE) return resource + "Delete";
  // One update bit: its own name, as kube-scheduler's labels.
  switch (action) {
    case v1::UPDATE_NODE_ALLOCATABLE: return "NodeAllocatableChange";
    case v1::UPDATE_NODE_LABEL: return "NodeLabelChange";
    case v1::UPDATE_NODE_TAINT: return "NodeTaintChange";
    case v1::UPDATE_NODE_CONDITION: return "NodeConditionChange";
    case v1::UPDATE_NODE_ANNOTATION: return "NodeAnnotationChange";
    case v1::UPDATE_POD_LABEL: return resource == "AssignedPod" ? "AssignedPodLabelChange" : "PodLabelChange";
    case v1::UPDATE_POD_SCALE_DOWN: return "AssignedPodScaleDown";
    case v1::UPDATE_POD_TOLERATIONS: return "PodTolerationChange";
    case v1::UPDATE_POD_SCHEDULING_GATES_ELIMINATED: return "PodSchedulingGateEliminatedChange";
    default: return resource + "Update";
  }
}

bool SamePod(const v1::Pod& a, const v1::Pod& b) {
  auto bytes = [](const v1::Pod& pod) {
    std::string out;
    {
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      pod.SerializePartialToCodedStream(&coded);
    }
    return out;
  };
  return bytes(a) == bytes(b);
}

}  // namespace podium::scheduler
