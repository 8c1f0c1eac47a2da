#include "plugins/taint_toleration/taint_toleration.h"

#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/normalize.h"
#include "plugins/helper/str.h"
#include "plugins/helper/taints.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreScoreStateKey = "PreScoreTaintToleration";

// The pod's tolerations that can tolerate a PreferNoSchedule taint.
struct PreScoreState : sdk::StateData {
  std::vector<v1::Toleration> tolerations;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

std::vector<v1::Toleration> PreferNoScheduleTolerations(const v1::Pod& pod) {
  std::vector<v1::Toleration> out;
  for (const v1::Toleration& t : pod.tolerations()) {
    if (t.effect() == v1::TAINT_EFFECT_UNSPECIFIED || t.effect() == v1::PREFER_NO_SCHEDULE) {
      out.push_back(t);
    }
  }
  return out;
}

template <typename TolerationRange>
int64_t CountIntolerablePreferNoSchedule(const v1::Node& node, const TolerationRange& tolerations) {
  int64_t count = 0;
  for (const v1::Taint& taint : node.taints()) {
    if (taint.effect() != v1::PREFER_NO_SCHEDULE) continue;
    if (!TolerationsTolerateTaint(tolerations, taint)) ++count;
  }
  return count;
}

}  // namespace

absl::StatusOr<sdk::PluginPtr> TaintToleration::New(const boost::json::object& args, sdk::Handle&) {
  if (absl::Status s = ExpectNoArgs(args, kName); !s.ok()) return s;
  return std::make_unique<TaintToleration>();
}

std::string TaintToleration::UntoleratedReason(const v1::Taint& taint) {
  return Cat("node(s) had untolerated taint {", taint.key(), ": ", taint.value(), "}");
}

sdk::Status TaintToleration::Filter(sdk::CycleState&, const sdk::PodInfo& pod,
                                    const sdk::NodeInfo& node) {
  const v1::Taint* taint =
      FindUntoleratedDoNotScheduleTaint(node.node().taints(), pod.pod->tolerations());
  if (taint == nullptr) return sdk::Status::Success();
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, UntoleratedReason(*taint));
}

sdk::Status TaintToleration::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                                      const std::vector<const sdk::NodeInfo*>& nodes) {
  if (nodes.empty()) return sdk::Status::Success();
  auto s = std::make_unique<PreScoreState>();
  s->tolerations = PreferNoScheduleTolerations(*pod.pod);
  state.Write(std::string(kPreScoreStateKey), std::move(s));
  return sdk::Status::Success();
}

std::pair<int64_t, sdk::Status> TaintToleration::Score(sdk::CycleState& state,
                                                       const sdk::PodInfo& pod,
                                                       const sdk::NodeInfo& node) {
  if (const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey)) {
    return {CountIntolerablePreferNoSchedule(node.node(), s->tolerations), sdk::Status::Success()};
  }
  return {CountIntolerablePreferNoSchedule(node.node(), PreferNoScheduleTolerations(*pod.pod)),
          sdk::Status::Success()};
}

sdk::Status TaintToleration::NormalizeScore(sdk::CycleState&, const sdk::PodInfo&,
                                            std::vector<sdk::NodeScore>& scores) {
  DefaultNormalizeScore(sdk::kMaxNodeScore, /*reverse=*/true, scores);
  return sdk::Status::Success();
}

std::vector<sdk::ClusterEventWithHint> TaintToleration::EventsToRegister() const {
  return {{v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_TAINT),
           [](const v1::Pod& pod, const v1::ClusterEvent& e) {
             const v1::Node* now = NewNode(e);
             if (now == nullptr) return sdk::QueueingHint::kQueue;
             const bool untolerated_now =
                 FindUntoleratedDoNotScheduleTaint(now->taints(), pod.tolerations()) != nullptr;
             if (untolerated_now) return sdk::QueueingHint::kQueueSkip;
             const v1::Node* before = OldNode(e);
             const bool untolerated_before =
                 before == nullptr ||
                 FindUntoleratedDoNotScheduleTaint(before->taints(), pod.tolerations()) != nullptr;
             return untolerated_before ? sdk::QueueingHint::kQueue : sdk::QueueingHint::kQueueSkip;
           }},
          // kube's isSchedulableAfterPodTolerationChange: the pending pod
          // itself got tolerations (they can only be added).
          {v1::UNSCHEDULED_POD, static_cast<uint32_t>(v1::UPDATE_POD_TOLERATIONS), nullptr}};
}

}  // namespace podium::plugins
