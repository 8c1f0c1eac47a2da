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
};

// "basic-500" or "basic-5000"; nullopt for an unknown name.
std::optional<WorkloadShape> FindWorkload(const std::string& name);
k8s::LoadedCluster GenerateWorkload(const WorkloadShape& shape, absl::Time now);

}  // namespace podium::sim
