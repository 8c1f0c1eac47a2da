// TaintToleration: filters out nodes with a NoSchedule/NoExecute taint the pod
// does not tolerate, and prefers nodes with fewer untolerated PreferNoSchedule
// taints.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class TaintToleration : public sdk::SignPlugin,
      public sdk::FilterPlugin,
                        public sdk::PreScorePlugin,
                        public sdk::ScorePlugin,
                        public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "TaintToleration";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  // kube-scheduler's message: "node(s) had untolerated taint {key: value}".
  static std::string UntoleratedReason(const v1::Taint& taint);

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_TOLERATIONS}}; }
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
};

}  // namespace podium::plugins
