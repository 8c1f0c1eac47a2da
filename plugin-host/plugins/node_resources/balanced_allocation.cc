#include "plugins/node_resources/balanced_allocation.h"

#include <cmath>

#include "plugins/helper/args.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreScoreStateKey = "PreScoreNodeResourcesBalancedAllocation";

struct PreScoreState : sdk::StateData {
  PodRequestList pod_requests;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

std::string CheckBalancedWeight(const ScoredResource& r) {
  return r.weight == 1 ? "" : "must be 1";
}

}  // namespace

absl::StatusOr<sdk::PluginPtr> NodeResourcesBalancedAllocation::New(const boost::json::object& args,
                                                                    sdk::Handle&) {
  if (absl::Status s = CheckKnownFields(args, kName, "", {"resources"}); !s.ok()) return s;
  std::vector<ScoredResource> resources = DefaultScoredResources();
  if (const boost::json::value* r = args.if_contains("resources")) {
    absl::StatusOr<std::vector<ScoredResource>> parsed =
        ReadScoredResources(*r, kName, "resources", &CheckBalancedWeight);
    if (!parsed.ok()) return parsed.status();
    if (!parsed->empty()) resources = *std::move(parsed);
  }
  return std::make_unique<NodeResourcesBalancedAllocation>(std::move(resources));
}

sdk::Status NodeResourcesBalancedAllocation::PreScore(sdk::CycleState& state,
                                                      const sdk::PodInfo& pod,
                                                      const std::vector<const sdk::NodeInfo*>&) {
  auto s = std::make_unique<PreScoreState>();
  s->pod_requests = PodRequestsFor(resources_, pod);
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

int64_t NodeResourcesBalancedAllocation::ScoreNode(const sdk::NodeInfo& node,
                                                   const PodRequestList& pod_requests) const {
  absl::InlinedVector<double, 4> fractions;
  double total = 0;
  for (size_t i = 0; i < resources_.size(); ++i) {
    auto [allocatable, requested] = AllocatableAndRequested(resources_[i], node, pod_requests[i]);
    if (allocatable == 0) continue;
    double fraction = static_cast<double>(requested) / static_cast<double>(allocatable);
    if (fraction > 1) fraction = 1;
    total += fraction;
    fractions.push_back(fraction);
  }
  double std_dev = 0;
  if (fractions.size() == 2) {
    std_dev = std::abs((fractions[0] - fractions[1]) / 2);
  } else if (fractions.size() > 2) {
    const double mean = total / static_cast<double>(fractions.size());
    double sum = 0;
    for (double f : fractions) sum += (f - mean) * (f - mean);
    std_dev = std::sqrt(sum / static_cast<double>(fractions.size()));
  }
  return static_cast<int64_t>((1 - std_dev) * static_cast<double>(sdk::kMaxNodeScore));
}

std::pair<int64_t, sdk::Status> NodeResourcesBalancedAllocation::Score(sdk::CycleState& state,
                                                                       const sdk::PodInfo& pod,
                                                                       const sdk::NodeInfo& node) {
  if (const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey)) {
    return {ScoreNode(node, s->pod_requests), sdk::Status::Success()};
  }
  return {ScoreNode(node, PodRequestsFor(resources_, pod)), sdk::Status::Success()};
}

}  // namespace podium::plugins
