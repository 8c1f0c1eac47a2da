#pragma once

#include <optional>
#include <string>

#include "common/translate/k8s_yaml.h"

namespace podium::sim {

// kube-scheduler scheduler_perf's "SchedulingBasic" shapes: nodes of 4 CPU,
// 32 GiB and 110 pods; pods requesting 100m CPU and 500 MiB. Init pods are in
// the initial list; measured pods are marked create_later.
struct WorkloadShape {
  std::string name;
  int nodes = 0;
  int init_pods = 0;
  int measured_pods = 0;
  // Preemption shapes (preempt-edge-10, preempt-500): nodes of node_milli_cpu /
  // node_memory, each filled at load by init_per_node bound pods of
  // init_priority; measured pods of measured_priority that must preempt.
  // sequential: each measured pod is created once the previous one is bound.
  bool preempt = false;
  int64_t node_milli_cpu = 4000, node_memory = 32LL << 30;
  int init_per_node = 0;
  int64_t init_milli_cpu = 100, init_memory = 500LL << 20;
  int32_t init_priority = 0;
  int64_t measured_milli_cpu = 100, measured_memory = 500LL << 20;
  int32_t measured_priority = 0;
  bool sequential = false;
  // Placement-rule shapes (spread-1000, antiaffinity-500): node i is in zone
  // "zone-(i mod zones)" when zones > 0, and every measured pod carries the
  // rule (kube-scheduler scheduler_perf's topology spreading and required
  // anti-affinity shapes).
  enum class Rule { kNone, kTopologySpread, kHostAntiAffinity };
  Rule rule = Rule::kNone;
  int zones = 0;
  // Gang shapes (gang-1000): `gangs` PodGroups (scheduler-plugins' API) of
  // minMember gang_size in the initial list; their gang_size * gangs measured
  // pods, labelled with their group, are created at once.
  int gangs = 0;
  int gang_size = 0;
  // basic-5000-mixed (issue 9): nodes in 10 zones and 4 pools, every tenth
  // node tainted dedicated=batch:NoSchedule; measured pods from 40
  // deployments of different sizes, requests, pool node selectors and
  // tolerations, created interleaved.
  int mixed_deployments = 0;
};

// "basic-500", "basic-5000", "basic-5000-mixed", "preempt-edge-10", "preempt-500", "spread-1000",
// "antiaffinity-500", "gang-1000"; nullopt for an unknown name.
std::optional<WorkloadShape> FindWorkload(const std::string& name);
k8s::LoadedCluster GenerateWorkload(const WorkloadShape& shape, absl::Time now);

}  // namespace podium::sim
