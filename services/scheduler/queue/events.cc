#include "queue/events.h"

#include <algorithm>
#include <string>
#include <string_view>

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

// Deterministic bytes (map entries sorted), into a buffer kept by the caller.
void DeterministicBytes(const google::protobuf::MessageLite& message, std::string* out) {
  out->clear();
  google::protobuf::io::StringOutputStream stream(out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  message.SerializePartialToCodedStream(&coded);
}

// Whether two messages are equal field for field.
bool SameBytes(const google::protobuf::MessageLite& a, const google::protobuf::MessageLite& b) {
  // Kept per thread: serializing into a grown buffer allocates nothing.
  thread_local std::string bytes_a;
  thread_local std::string bytes_b;
  DeterministicBytes(a, &bytes_a);
  DeterministicBytes(b, &bytes_b);
  return bytes_a == bytes_b;
}

// Whether the fields a pod's requests come from are unchanged: what nearly
// every update of a bound pod (a status patch, a victim's DisruptionTarget
// condition) leaves alone, found without building either pod's PodInfo.
bool SameRequestFields(const v1::Pod& a, const v1::Pod& b) {
  if (a.containers_size() != b.containers_size() || a.init_containers_size() != b.init_containers_size() ||
      a.has_overhead() != b.has_overhead()) {
    return false;
  }
  for (int i = 0; i < a.containers_size(); ++i) {
    if (!SameBytes(a.containers(i), b.containers(i))) return false;
  }
  for (int i = 0; i < a.init_containers_size(); ++i) {
    if (!SameBytes(a.init_containers(i), b.init_containers(i))) return false;
  }
  return !a.has_overhead() || SameBytes(a.overhead(), b.overhead());
}

// Some resource request went down and none went up.
bool ScaledDown(const v1::Pod& old_pod, const v1::Pod& new_pod) {
  if (SameRequestFields(old_pod, new_pod)) return false;
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
  return SamePodExcept(old_pod, new_pod,
                       {v1::Pod::kConditionsFieldNumber, v1::Pod::kPhaseFieldNumber, v1::Pod::kStartTimeUsFieldNumber},
                       {v1::ObjectMeta::kResourceVersionFieldNumber})
             ? 0
             : static_cast<uint32_t>(v1::UPDATE);
}

std::vector<v1::ClusterEventInterest> RegisteredEvents(const v1::PluginRegistration& registration,
                                                       bool registers_pending_pod_updates) {
  std::vector<v1::ClusterEventInterest> events(registration.events().begin(), registration.events().end());
  if (!events.empty() && !registers_pending_pod_updates) {
    v1::ClusterEventInterest& own = events.emplace_back();
    own.set_resource(v1::UNSCHEDULED_POD);
    own.set_action_mask(v1::UPDATE);
  }
  return events;
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

namespace {

bool ReadVarint(const char*& p, const char* end, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64 && p < end; shift += 7) {
    const auto byte = static_cast<uint8_t>(*p++);
    *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// One field of a serialized message: its number and its whole span (tag
// included), and for a length-delimited field its payload.
struct WireField {
  int number = 0;
  std::string_view span;
  std::string_view payload;
};

// The fields of `bytes` in order, those listed in `skip` (and `also_skip`,
// when not 0) left out.
class WireFields {
 public:
  WireFields(std::string_view bytes, std::initializer_list<int> skip, int also_skip = 0)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()), skip_(skip), also_skip_(also_skip) {}

  // False at the end, or on bytes that do not parse (`broken()`).
  bool Next(WireField* field) {
    while (p_ < end_) {
      const char* start = p_;
      uint64_t tag = 0;
      if (!ReadVarint(p_, end_, &tag)) return Break();
      field->number = static_cast<int>(tag >> 3);
      field->payload = {};
      switch (tag & 7) {
        case 0: {
          uint64_t ignored = 0;
          if (!ReadVarint(p_, end_, &ignored)) return Break();
          break;
        }
        case 1: if (end_ - p_ < 8) return Break(); p_ += 8; break;
        case 5: if (end_ - p_ < 4) return Break(); p_ += 4; break;
        case 2: {
          uint64_t length = 0;
          if (!ReadVarint(p_, end_, &length) || length > static_cast<uint64_t>(end_ - p_)) return Break();
          field->payload = std::string_view(p_, length);
          p_ += length;
          break;
        }
        default: return Break();  // Groups: proto3 has none.
      }
      if (field->number == also_skip_ || std::find(skip_.begin(), skip_.end(), field->number) != skip_.end()) {
        continue;
      }
      field->span = std::string_view(start, p_ - start);
      return true;
    }
    return false;
  }
  bool broken() const { return broken_; }

 private:
  bool Break() {
    broken_ = true;
    p_ = end_;
    return false;
  }
  const char* p_;
  const char* end_;
  std::initializer_list<int> skip_;
  int also_skip_;
  bool broken_ = false;
};

// Whether two field streams hold the same fields, byte for byte.
bool SameFields(WireFields a, WireFields b) {
  WireField x, y;
  while (true) {
    const bool more_a = a.Next(&x);
    const bool more_b = b.Next(&y);
    if (a.broken() || b.broken()) return false;
    if (more_a != more_b) return false;
    if (!more_a) return true;
    if (x.span != y.span) return false;
  }
}

// The meta field's payload: empty when the pod has none.
std::string_view MetaPayload(std::string_view pod_bytes) {
  WireFields fields(pod_bytes, {});
  WireField field;
  while (fields.Next(&field)) {
    if (field.number == v1::Pod::kMetaFieldNumber) return field.payload;
  }
  return {};
}

}  // namespace

bool SamePodExcept(const v1::Pod& a, const v1::Pod& b, std::initializer_list<int> pod_fields,
                   std::initializer_list<int> meta_fields) {
  // Kept per thread: serializing into a grown buffer allocates nothing.
  thread_local std::string bytes_a;
  thread_local std::string bytes_b;
  DeterministicBytes(a, &bytes_a);
  DeterministicBytes(b, &bytes_b);
  // The meta is compared by its own fields, the rest with it left out.
  return SameFields(WireFields(MetaPayload(bytes_a), meta_fields), WireFields(MetaPayload(bytes_b), meta_fields)) &&
         SameFields(WireFields(bytes_a, pod_fields, v1::Pod::kMetaFieldNumber),
                    WireFields(bytes_b, pod_fields, v1::Pod::kMetaFieldNumber));
}

}  // namespace podium::scheduler
