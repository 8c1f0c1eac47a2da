// NodePorts: a pod's host ports must be free on the node.
#pragma once

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class NodePorts : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                  public sdk::FilterPlugin,
                  public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodePorts";
  static constexpr std::string_view kReason =
      "node(s) didn't have free ports for the requested pod ports";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_HOST_PORTS}}; }
  // Skip when the pod asks for no host port. The wanted ports are
  // PodInfo::host_ports, computed once when the pod entered the mirror.
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override;
  sdk::Status Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                     const sdk::NodeInfo& node) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;
};

}  // namespace podium::plugins
