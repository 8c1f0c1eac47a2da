// kube-scheduler's default filter and score plugins, written with the SDK.
#pragma once

#include <vector>

#include "podium/sdk/framework.h"

namespace podium::plugins {

// NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodePorts,
// NodeResourcesFit, PodTopologySpread,
// InterPodAffinity, NodeResourcesBalancedAllocation, ImageLocality, with their
// factories.
std::vector<podium::sdk::PluginDefinition> DefaultPlugins();

}  // namespace podium::plugins
