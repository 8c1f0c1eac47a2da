// PodTopologySpread: spreads the pods that match a constraint's selector over
// the domains of its topology key. DoNotSchedule constraints filter (the skew
// after placing the pod may not exceed maxSkew), ScheduleAnyway constraints
// score. Pods without constraints get the profile's default constraints when
// a Service/ReplicaSet/ReplicationController/StatefulSet owns them.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/label_selector.h"

namespace podium::plugins {

class KeptSpreadCounts;

// A constraint as the plugin evaluates it (kube-scheduler's
// topologySpreadConstraint): matchLabelKeys merged into the selector, the
// inclusion policies resolved to their defaults.
struct SpreadConstraint {
  int32_t max_skew = 1;
  std::string topology_key;
  sdk::LabelSelector selector;
  int32_t min_domains = 1;
  bool honor_node_affinity = true;  // nodeAffinityPolicy: Honor (default) or Ignore.
  bool honor_node_taints = false;   // nodeTaintsPolicy: Ignore (default) or Honor.
};

struct DefaultSpreadConstraint {
  int32_t max_skew = 1;
  std::string topology_key;
  bool do_not_schedule = false;
};

class PodTopologySpread : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                          public sdk::PreFilterExtensions,
                          public sdk::FilterPlugin,
                          public sdk::PreScorePlugin,
                          public sdk::ScorePlugin,
                          public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "PodTopologySpread";
  static constexpr std::string_view kReasonConstraintsNotMatch =
      "node(s) didn't match pod topology spread constraints";
  static constexpr std::string_view kReasonNodeLabelNotMatch =
      "node(s) didn't match pod topology spread constraints (missing required label)";

  // args: {defaultingType: System|List, defaultConstraints: [{maxSkew,
  // topologyKey, whenUnsatisfiable}]}. System (the default) uses hostname
  // maxSkew 3 and zone maxSkew 5, ScheduleAnyway.
  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  PodTopologySpread(std::vector<DefaultSpreadConstraint> defaults, bool system_defaulted,
                    sdk::Handle& handle);
  ~PodTopologySpread() override;

  std::string_view Name() const override { return kName; }
  // A pod with constraints of its own, or one that gets the default
  // constraints (an owner, when defaults are configured), is spread against
  // pods on other nodes: unsignable. Other pods make it Skip.
  sdk::PodSignatureSpec SignatureSpec() const override {
    sdk::PodSignatureSpec spec{.unsignable_when_set = {v1::POD_PART_TOPOLOGY_SPREAD}};
    if (!defaults_->empty()) spec.unsignable_when_set.push_back(v1::POD_PART_OWNER_REFERENCES);
    return spec;
  }
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState& state,
                                                         const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override;
  sdk::PreFilterExtensions* Extensions() override { return this; }
  sdk::Status AddPod(sdk::CycleState& state, const sdk::PodInfo& pod_to_schedule,
                     const sdk::PodInfo& pod_to_add, const sdk::NodeInfo& node) override;
  sdk::Status RemovePod(sdk::CycleState& state, const sdk::PodInfo& pod_to_schedule,
                        const sdk::PodInfo& pod_to_remove, const sdk::NodeInfo& node) override;
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

  // The pod's constraints with `do_not_schedule` (Filter) or not (Score): its
  // own, or the defaults when it has none. An invalid selector is an error
  // naming the field.
  static absl::StatusOr<std::vector<SpreadConstraint>> Constraints(
      const v1::Pod& pod, bool do_not_schedule, const std::vector<DefaultSpreadConstraint>& defaults);

 private:
  std::shared_ptr<const std::vector<DefaultSpreadConstraint>> defaults_;
  bool system_defaulted_;
  sdk::Handle& handle_;
  // Domains and matching pods kept across cycles (PreFilter and PreScore
  // run one cycle at a time, on the session's thread).
  std::unique_ptr<KeptSpreadCounts> kept_;
};

}  // namespace podium::plugins
