// NodeResourcesFit: the node must have room for the pod's requests; scores
// nodes by LeastAllocated (default), MostAllocated or RequestedToCapacityRatio.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "plugins/node_resources/resource_allocation.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

struct FitArgs {
  enum class Strategy { kLeastAllocated, kMostAllocated, kRequestedToCapacityRatio };
  struct ShapePoint {
    int64_t utilization = 0;  // 0-100.
    int64_t score = 0;        // 0-10 in args; scaled to 0-100 when parsed.
  };
  absl::flat_hash_set<std::string> ignored_resources;
  absl::flat_hash_set<std::string> ignored_resource_groups;
  Strategy strategy = Strategy::kLeastAllocated;
  std::vector<ScoredResource> resources = DefaultScoredResources();
  std::vector<ShapePoint> shape;  // RequestedToCapacityRatio only, scores scaled.

  // {ignoredResources, ignoredResourceGroups, scoringStrategy: {type, resources,
  // requestedToCapacityRatio: {shape: [{utilization, score}]}}}.
  static absl::StatusOr<FitArgs> Parse(const boost::json::object& args);
};

class NodeResourcesFit : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                         public sdk::FilterPlugin,
                         public sdk::PreScorePlugin,
                         public sdk::ScorePlugin,
                         public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodeResourcesFit";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);
  explicit NodeResourcesFit(FitArgs args) : args_(std::move(args)) {}

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_RESOURCES}}; }
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override;
  sdk::Status Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                     const sdk::NodeInfo& node) override;
  sdk::Status PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                       const std::vector<const sdk::NodeInfo*>& nodes) override;
  std::pair<int64_t, sdk::Status> Score(sdk::CycleState& state, const sdk::PodInfo& pod,
                                        const sdk::NodeInfo& node) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;

  // The score of one node for requests already computed by PodRequestsFor.
  int64_t ScoreNode(const sdk::NodeInfo& node, const PodRequestList& pod_requests) const;

 private:
  FitArgs args_;
};

}  // namespace podium::plugins
