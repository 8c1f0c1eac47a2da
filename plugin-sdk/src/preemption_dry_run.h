// Preemption's batched dry run inside a plugin process: kube-scheduler's
// SelectVictimsOnNode for every candidate node of one PreemptionDryRunRequest,
// run against the mirror with the PreFilter AddPod/RemovePod extensions and
// the process's Filter plugins. The author writes nothing for it.
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "podium/sdk/framework.h"
#include "mirror.h"
#include "podium/v1/plugin.pb.h"

namespace podium::sdk::internal {

struct NamedFilter {
  const std::string* name;
  FilterPlugin* plugin;
};
struct NamedExtensions {
  const std::string* name;
  PreFilterExtensions* extensions;
};

// `base` is the pod's cycle state after PreFilter, never changed: cloned per
// node when an extension may write it, read as it is when there is none;
// `filters` and `extensions` are those PreFilter did not skip. An
// error (a victim that is not on its node, an unknown node) names the field.
// Nominated pods are the request's, or the mirror's when it carries none.
absl::Status RunPreemptionDryRun(v1::PreemptionDryRunRequest& request, const Mirror& mirror,
                                 CycleState& base, const PodInfo& pod,
                                 const std::vector<NamedFilter>& filters,
                                 const std::vector<NamedExtensions>& extensions,
                                 v1::PreemptionDryRunResponse& out);

}  // namespace podium::sdk::internal
