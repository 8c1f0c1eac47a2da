// NodeUnschedulable: keeps pods off nodes marked spec.unschedulable, unless
// they tolerate node.kubernetes.io/unschedulable:NoSchedule.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class NodeUnschedulable : public sdk::SignPlugin,
      public sdk::FilterPlugin, public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodeUnschedulable";
  static constexpr std::string_view kReason = "node(s) were unschedulable";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_TOLERATIONS}}; }
  sdk::Status Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                     const sdk::NodeInfo& node) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;
};

}  // namespace podium::plugins
