// InterPodAffinity: required pod affinity and anti-affinity as a filter
// (including the anti-affinity of pods already placed: the symmetry rule),
// preferred terms as a score (including existing pods' preferred terms and
// their required affinity at hardPodAffinityWeight).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

// Counts of assigned pods by required anti-affinity term, kept across cycles
// (inter_pod_affinity.cc).
class KeptAntiAffinityCounts;

class InterPodAffinity : public sdk::SignPlugin,
      public sdk::PreFilterPlugin,
                         public sdk::PreFilterExtensions,
                         public sdk::FilterPlugin,
                         public sdk::PreScorePlugin,
                         public sdk::ScorePlugin,
                         public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "InterPodAffinity";
  static constexpr std::string_view kReasonAffinity = "node(s) didn't match pod affinity rules";
  static constexpr std::string_view kReasonAntiAffinity =
      "node(s) didn't match pod anti-affinity rules";
  static constexpr std::string_view kReasonExistingAntiAffinity =
      "node(s) didn't satisfy existing pods anti-affinity rules";

  // args: {hardPodAffinityWeight: 0-100 (default 1),
  // ignorePreferredTermsOfExistingPods: bool (default false)}.
  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);

  InterPodAffinity(int64_t hard_pod_affinity_weight, bool ignore_preferred_of_existing,
                   sdk::Handle& handle);
  ~InterPodAffinity() override;

  std::string_view Name() const override { return kName; }
  // A pod without terms of its own is judged by other pods' terms only:
  // its labels and namespace matter only while some pod has a term.
  sdk::PodSignatureSpec SignatureSpec() const override {
    return {.parts = {v1::POD_PART_LABELS, v1::POD_PART_NAMESPACE},
            .unsignable_when_set = {v1::POD_PART_INTER_POD_AFFINITY},
            .read_through_affinity_terms = {v1::POD_PART_LABELS, v1::POD_PART_NAMESPACE}};
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

 private:
  int64_t hard_weight_;
  bool ignore_preferred_of_existing_;
  sdk::Handle& handle_;
  // Existing pods' required anti-affinity terms (the symmetry rule) and the
  // pods that incoming pods' anti-affinity terms select, per topology domain:
  // brought up to date from the snapshot's pod changes in each PreFilter, so
  // a cycle costs O(changes + distinct terms), not O(pods with such terms).
  std::unique_ptr<KeptAntiAffinityCounts> kept_;
};

}  // namespace podium::plugins
