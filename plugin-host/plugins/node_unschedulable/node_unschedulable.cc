#include "plugins/node_unschedulable/node_unschedulable.h"

#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/taints.h"

namespace podium::plugins {

absl::StatusOr<sdk::PluginPtr> NodeUnschedulable::New(const boost::json::object& args,
                                                      sdk::Handle&) {
  if (absl::Status s = ExpectNoArgs(args, kName); !s.ok()) return s;
  return std::make_unique<NodeUnschedulable>();
}

sdk::Status NodeUnschedulable::Filter(sdk::CycleState&, const sdk::PodInfo& pod,
                                      const sdk::NodeInfo& node) {
  if (SchedulableFor(*pod.pod, node.node())) return sdk::Status::Success();
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReason));
}

std::vector<sdk::ClusterEventWithHint> NodeUnschedulable::EventsToRegister() const {
  return {{v1::NODE, Actions(v1::ADD, v1::UPDATE_NODE_TAINT),
           [](const v1::Pod& pod, const v1::ClusterEvent& e) {
             const v1::Node* now = NewNode(e);
             if (now == nullptr) return sdk::QueueingHint::kQueue;
             if (!SchedulableFor(pod, *now)) return sdk::QueueingHint::kQueueSkip;
             // Queue only when the node became schedulable for the pod.
             const v1::Node* before = OldNode(e);
             if (before != nullptr && SchedulableFor(pod, *before)) {
               return sdk::QueueingHint::kQueueSkip;
             }
             return sdk::QueueingHint::kQueue;
           }},
          // kube's isSchedulableAfterPodTolerationChange: the pending pod
          // itself now tolerates the unschedulable taint.
          {v1::UNSCHEDULED_POD, static_cast<uint32_t>(v1::UPDATE_POD_TOLERATIONS),
           [](const v1::Pod&, const v1::ClusterEvent& e) {
             if (!e.has_new_pod()) return sdk::QueueingHint::kQueue;
             const bool now = TolerationsTolerateTaint(e.new_pod().tolerations(), UnschedulableTaint());
             const bool before = e.has_old_pod() &&
                                 TolerationsTolerateTaint(e.old_pod().tolerations(), UnschedulableTaint());
             return now && !before ? sdk::QueueingHint::kQueue : sdk::QueueingHint::kQueueSkip;
           }}};
}

}  // namespace podium::plugins
