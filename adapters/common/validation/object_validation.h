// Validation of podium.v1 objects, the same wherever objects enter a Podium
// process: the scheduler on Cluster.Sync, podium-sim's and the Kubernetes
// adapter's loaders. An error names the field ("spec.containers[0].ports[0].
// hostPort: ..."); callers prefix the object. The object is refused whole.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "podium/v1/cluster.pb.h"

namespace podium::validation {

// Kubernetes' name lengths: a DNS-1123 subdomain (object names) and a DNS-1123
// label (namespaces).
inline constexpr size_t kMaxNameLength = 253;
inline constexpr size_t kMaxNamespaceLength = 63;
inline constexpr size_t kMaxUidLength = 128;

// The largest value of any one quantity (milli-CPU, bytes, counts): 2^53, the
// largest integer a JSON number keeps exactly. 1 024 such values still sum
// within int64, and sums beyond that saturate (plugin-sdk, scheduler cache).
// It is 9e12 CPUs or 8 PiB of memory on one node or container.
inline constexpr int64_t kMaxQuantity = int64_t{1} << 53;

// Built-in priority classes every Kubernetes cluster has, and the highest
// value a user-defined class may take (Kubernetes' scheduling API).
inline constexpr int32_t kSystemClusterCritical = 2000000000;
inline constexpr int32_t kSystemNodeCritical = 2000001000;
inline constexpr int32_t kHighestUserDefinablePriority = 1000000000;

// Protobuf refuses to serialize a string field that is not UTF-8 (and a
// parser on the other side would end the stream), so adapters check text
// before it becomes a field. Overlongs, surrogates and > U+10FFFF are invalid.
bool IsValidUtf8(std::string_view value);

// A name, namespace, uid, key...: valid UTF-8, no control characters (they
// would forge log lines), at most max_length bytes. `required` refuses "".
absl::Status ValidateName(std::string_view value, std::string_view field, size_t max_length,
                          bool required = true);

absl::Status ValidateResources(const v1::ResourceList& list, std::string_view field);
absl::Status ValidatePod(const v1::Pod& pod);
// ValidatePod, then what the API server also refuses in a pod's spec (request
// above its limit, container resource names, affinity terms and spread
// constraints as Kubernetes validates them). podium-sim's loader refuses such
// a file; the scheduler's gate (ValidateObjectEvent) keeps such a pod from an
// adapter, so a bound one still counts on its node, and its plugins judge it
// as written (an invalid selector is reported naming the field).
absl::Status ValidatePodSpec(const v1::Pod& pod);
absl::Status ValidateNode(const v1::Node& node);
absl::Status ValidatePriorityClass(const v1::PriorityClass& priority_class);
// A Namespace: its name is a DNS-1123 label (at most 63 bytes); it has no
// namespace; label keys and values as any object's.
absl::Status ValidateNamespace(const v1::Namespace& ns);
// A gang: at least one member, a non-negative timeout. Fields are named as
// the API the group came from spells them (spec.minMember, ...gang.minCount).
absl::Status ValidatePodGroup(const v1::PodGroup& group);

// A label selector's requirements (kube-apiserver's rules): a key, a known
// operator, values for In/NotIn and none for Exists/DoesNotExist. `path` is
// the selector's field ("spec.selector"; empty: none).
absl::Status ValidateLabelSelector(const v1::LabelSelector& selector, const std::string& path);

// A PodDisruptionBudget to store: its identity and its selector.
absl::Status ValidatePodDisruptionBudget(const v1::PodDisruptionBudget& pdb);
// Validates whichever object the event carries.
absl::Status ValidateObjectEvent(const v1::ObjectEvent& event);

// "Pod default/web-1", "Node edge-1"; names are escaped and truncated, so an
// invalid object can be named in a log line.
std::string DescribeObject(const v1::ObjectEvent& event);
// Escaped (C escapes for control and non-UTF-8 bytes) and cut at max_length.
std::string Printable(std::string_view value, size_t max_length = kMaxNameLength);

}  // namespace podium::validation
