// NodeName: a pod that names its node (spec.nodeName) fits only that node.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class NodeName : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                 public sdk::FilterPlugin,
                 public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodeName";
  static constexpr std::string_view kReason = "node(s) didn't match the requested node name";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_NODE_NAME}}; }
  // Skip when the pod names no node; otherwise narrows to that node.
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override;
  sdk::Status Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                     const sdk::NodeInfo& node) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;
};

}  // namespace podium::plugins
