#pragma once

// Conversion of plain Kubernetes YAML (what `kubectl get nodes,pods -A -o yaml`
// prints) into podium.v1 objects. podium-sim loads files with it; the Kubernetes
// adapter reuses the per-object conversion (PodFromYaml, NodeFromYaml, ...).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/validation/object_validation.h"
#include "common/yaml/safe_yaml.h"
#include "podium/v1/objects.pb.h"
#include "yaml-cpp/yaml.h"

namespace podium::k8s {

// Pods carrying this annotation with value "true" are not part of the initial
// list: podium-sim creates them after the initial pods settled (--create-rate).
inline constexpr std::string_view kCreateLaterAnnotation = "sim.podium.dev/create-later";
// A test fault: a pod carrying this annotation (value: the name of another pod
// of its namespace in the files) is not created at load. When the first
// DeletePod aimed at the named pod reaches podium-sim, the named pod is
// replaced first, as a controller recreating it would: it is gone, and this pod
// takes its name with a uid of its own. The delete then meets the new uid.
inline constexpr std::string_view kReplacesAnnotation = "sim.podium.dev/replaces";
// A pod carrying this annotation (a duration: "3s", "500ms") terminates for
// that long once deleted on its node, instead of podium-sim's
// --termination-grace (spec.terminationGracePeriodSeconds, which Podium's pod
// does not carry, made per pod for the simulator).
inline constexpr std::string_view kTerminationGraceAnnotation = "sim.podium.dev/termination-grace";
// The pod's kTerminationGraceAnnotation, nullopt without it; an error naming
// the field when it is not a finite duration of at least zero.
absl::StatusOr<std::optional<absl::Duration>> SimTerminationGrace(const v1::Pod& pod);

// Built-in priority classes every Kubernetes cluster has.
using validation::kSystemClusterCritical;
using validation::kSystemNodeCritical;

// Per-object conversion. Errors name the field path ("spec.containers[0]...").
// Defaults that the API server applies are applied here too (namespace
// "default", requests defaulted from limits, allocatable from capacity);
// uid and creation time are left as found (possibly empty).
absl::StatusOr<v1::Pod> PodFromYaml(const YAML::Node& object);
absl::StatusOr<v1::Node> NodeFromYaml(const YAML::Node& object);
absl::StatusOr<v1::PriorityClass> PriorityClassFromYaml(const YAML::Node& object);
// policy/v1 PodDisruptionBudget (spec and status).
absl::StatusOr<v1::PodDisruptionBudget> PodDisruptionBudgetFromYaml(const YAML::Node& object);
// v1 Namespace (its labels: what namespaceSelectors match).
absl::StatusOr<v1::Namespace> NamespaceFromYaml(const YAML::Node& object);
// A gang, from either PodGroup API (told apart by apiVersion):
// scheduler-plugins' scheduling.x-k8s.io/v1alpha1 (spec.minMember,
// spec.scheduleTimeoutSeconds) or Kubernetes' scheduling.k8s.io
// (spec.schedulingPolicy.gang.minCount; basic policy = min 1). Validated
// (validation::ValidatePodGroup): minMember 0 is refused with its field.
absl::StatusOr<v1::PodGroup> PodGroupFromYaml(const YAML::Node& object);
// Kubernetes' 1.35 alpha Workload (scheduling.k8s.io/v1alpha1): one PodGroup
// per spec.podGroups[] entry, named "<workload>/<podGroup>" (what a pod's
// spec.workloadRef resolves to), uid "<workload uid>/<podGroup>".
absl::StatusOr<std::vector<v1::PodGroup>> PodGroupsFromWorkloadYaml(const YAML::Node& object);
// Kubernetes' fixed gang timeout (its scheduler waits 5 minutes at Permit).
inline constexpr int32_t kKubernetesGangTimeoutSeconds = 300;
// A resource list (requests, limits, allocatable...). Negative values refused.
absl::StatusOr<v1::ResourceList> ResourceListFromYaml(const YAML::Node& list);

struct LoadOptions {
  // Creation time given to objects without metadata.creationTimestamp; each
  // such object gets base + its index in microseconds, so file order is kept.
  absl::Time default_creation_time = absl::Now();
  // Input size and alias expansion per source (common/yaml/safe_yaml.h).
  yaml::YamlLimits yaml_limits = {};
};

struct LoadedPod {
  v1::Pod pod;
  bool create_later = false;  // kCreateLaterAnnotation.
  std::string replaces;       // kReplacesAnnotation: the name of the pod it replaces.
};

struct LoadedCluster {
  std::vector<v1::Node> nodes;
  std::vector<LoadedPod> pods;
  std::vector<v1::PriorityClass> priority_classes;
  std::vector<v1::PodDisruptionBudget> pdbs;  // policy/v1; status is podium-sim's to compute.
  // Namespaces given in the files. podium-sim adds the namespaces that pods
  // name and no file declares, without labels, as the API server would have.
  std::vector<v1::Namespace> namespaces;
  // Both PodGroup kinds and the groups of Workloads.
  std::vector<v1::PodGroup> pod_groups;
  // Skipped kinds; gangs that cannot start as loaded (a PodGroup with more
  // minMember than pods naming it, a pod naming a group that is not there):
  // their pods wait, which is not an error of the file.
  std::vector<std::string> warnings;
};

// A named YAML text (a file's content, or a test's string).
struct YamlSource {
  std::string name;
  std::string text;
};

// Loads every source, then resolves pod priorities, then returns the whole
// cluster: any error refuses everything (nothing half-loaded). Errors read
// `NAME: document N (Kind ns/name): field.path: problem`.
absl::StatusOr<LoadedCluster> LoadCluster(const std::vector<YamlSource>& sources,
                                          const LoadOptions& options = {});

// Reads files, or every *.yaml / *.yml / *.json under a directory (sorted), then
// LoadCluster.
absl::StatusOr<LoadedCluster> LoadClusterPaths(const std::vector<std::string>& paths,
                                               const LoadOptions& options = {});

// A random RFC 4122 version 4 uid.
std::string NewUid();

}  // namespace podium::k8s
