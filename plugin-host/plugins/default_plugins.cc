#include "plugins/default_plugins.h"

#include "plugins/coscheduling/coscheduling.h"
#include "plugins/image_locality/image_locality.h"
#include "plugins/inter_pod_affinity/inter_pod_affinity.h"
#include "plugins/node_affinity/node_affinity.h"
#include "plugins/node_name/node_name.h"
#include "plugins/node_ports/node_ports.h"
#include "plugins/node_resources/balanced_allocation.h"
#include "plugins/node_resources/fit.h"
#include "plugins/node_unschedulable/node_unschedulable.h"
#include "plugins/pod_topology_spread/pod_topology_spread.h"
#include "plugins/taint_toleration/taint_toleration.h"

namespace podium::plugins {
namespace {

template <typename P>
sdk::PluginDefinition Definition(sdk::MirrorNeeds mirror = {}) {
  return {std::string(P::kName), &P::New, mirror};
}

}  // namespace

std::vector<sdk::PluginDefinition> DefaultPlugins() {
  return {
      Definition<NodeUnschedulable>(),
      Definition<NodeName>(),
      Definition<TaintToleration>(),
      Definition<NodeAffinity>(),
      Definition<NodePorts>(),
      Definition<NodeResourcesFit>(),
      // The label index: the pods a constraint's selector matches, counted
      // per domain without scanning every pod.
      Definition<PodTopologySpread>({.pod_label_index = true, .pod_changes = true}),
      // Namespace labels: what namespaceSelectors match; the label index: the
      // pods an incoming pod's terms select, without scanning every pod; pod
      // changes: anti-affinity counts kept across cycles.
      Definition<InterPodAffinity>(
          {.assigned_pods = true, .namespaces = true, .pod_label_index = true, .pod_changes = true}),
      Definition<NodeResourcesBalancedAllocation>(),
      Definition<ImageLocality>(),
      Coscheduling::Definition(),
  };
}

}  // namespace podium::plugins
