// NodeAffinity: spec.nodeSelector and required node affinity as a filter,
// preferred node affinity as a score; args.addedAffinity applies to every pod
// of the profile.
#pragma once

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "plugins/helper/node_selector.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class NodeAffinity : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                     public sdk::FilterPlugin,
                     public sdk::PreScorePlugin,
                     public sdk::ScorePlugin,
                     public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "NodeAffinity";
  static constexpr std::string_view kReasonPod =
      "node(s) didn't match Pod's node affinity/selector";
  static constexpr std::string_view kReasonEnforced =
      "node(s) didn't match scheduler-enforced node affinity";
  static constexpr std::string_view kReasonConflict = "pod affinity terms conflict";

  // args: {addedAffinity: {requiredDuringSchedulingIgnoredDuringExecution,
  // preferredDuringSchedulingIgnoredDuringExecution}}.
  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  NodeAffinity(std::shared_ptr<const CompiledNodeSelector> added_required,
               CompiledPreferredTerms added_preferred)
      : added_required_(std::move(added_required)), added_preferred_(std::move(added_preferred)) {}

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_NODE_SELECTOR, v1::POD_PART_NODE_AFFINITY}}; }
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override;
  sdk::Status Filter(sdk::CycleState& state, const sdk::PodInfo& pod,
                     const sdk::NodeInfo& node) override;
  sdk::Status PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                       const std::vector<const sdk::NodeInfo*>& nodes) override;
  std::pair<int64_t, sdk::Status> Score(sdk::CycleState& state, const sdk::PodInfo& pod,
                                        const sdk::NodeInfo& node) override;
  bool HasNormalizeScore() const override { return true; }
  sdk::Status NormalizeScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                             std::vector<sdk::NodeScore>& scores) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override;

 private:
  std::shared_ptr<const CompiledNodeSelector> added_required_;  // Null: none.
  CompiledPreferredTerms added_preferred_;
};

}  // namespace podium::plugins
