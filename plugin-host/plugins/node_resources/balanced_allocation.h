// NodeResourcesBalancedAllocation: prefers nodes whose resource usage stays
// balanced across resources once the pod is placed: (1 - std) * 100 over the
// requested/allocatable fractions.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "plugins/node_resources/resource_allocation.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class NodeResourcesBalancedAllocation : public sdk::SignPlugin,
      public sdk::PreScorePlugin,
                                        public sdk::ScorePlugin,
                                        public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodeResourcesBalancedAllocation";

  // args: {resources: [{name, weight}]}; weights must be 1. Default cpu, memory.
  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);
  explicit NodeResourcesBalancedAllocation(std::vector<ScoredResource> resources)
      : resources_(std::move(resources)) {}

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_RESOURCES}}; }
  sdk::Status PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                       const std::vector<const sdk::NodeInfo*>& nodes) override;
  std::pair<int64_t, sdk::Status> Score(sdk::CycleState& state, const sdk::PodInfo& pod,
                                        const sdk::NodeInfo& node) override;
  // A score plugin rejects nothing, so no event can help.
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override { return {}; }

  int64_t ScoreNode(const sdk::NodeInfo& node, const PodRequestList& pod_requests) const;

 private:
  std::vector<ScoredResource> resources_;
};

}  // namespace podium::plugins
