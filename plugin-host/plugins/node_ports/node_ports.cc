#include "plugins/node_ports/node_ports.h"

#include "plugins/helper/args.h"
#include "plugins/helper/events.h"
#include "plugins/helper/ports.h"

namespace podium::plugins {

absl::StatusOr<sdk::PluginPtr> NodePorts::New(const boost::json::object& args, sdk::Handle&) {
  if (absl::Status s = ExpectNoArgs(args, kName); !s.ok()) return s;
  return std::make_unique<NodePorts>();
}

std::pair<sdk::PreFilterResult, sdk::Status> NodePorts::PreFilter(sdk::CycleState&,
                                                                  const sdk::PodInfo& pod,
                                                                  const sdk::Snapshot&) {
  if (pod.host_ports.empty()) return {sdk::PreFilterResult{}, sdk::Status(sdk::Code::kSkip)};
  return {sdk::PreFilterResult{}, sdk::Status::Success()};
}

sdk::Status NodePorts::Filter(sdk::CycleState&, const sdk::PodInfo& pod,
                              const sdk::NodeInfo& node) {
  if (!AnyHostPortConflict(pod.host_ports, node.used_ports())) return sdk::Status::Success();
  return sdk::Status(sdk::Code::kUnschedulable, std::string(kReason));
}

std::vector<sdk::ClusterEventWithHint> NodePorts::EventsToRegister() const {
  return {
      // Container ports are immutable: only deletions free ports (kube's
      // isSchedulableAfterPodDeleted), of a pod bound or nominated to a node.
      {v1::POD, Actions(v1::DELETE),
       [](const v1::Pod& pod, const v1::ClusterEvent& e) {
         const v1::Pod* deleted = DeletedPod(e);
         if (deleted == nullptr) return sdk::QueueingHint::kQueue;
         if (deleted->node_name().empty() && deleted->nominated_node_name().empty()) {
           return sdk::QueueingHint::kQueueSkip;
         }
         sdk::PodInfoPtr freed = sdk::PodInfo::Create(*deleted);
         if (freed->host_ports.empty()) return sdk::QueueingHint::kQueueSkip;
         sdk::PodInfoPtr wanted = sdk::PodInfo::Create(pod);
         // Only a deleted pod that held one of the wanted ports can help.
         return AnyHostPortConflict(wanted->host_ports, freed->host_ports)
                    ? sdk::QueueingHint::kQueue
                    : sdk::QueueingHint::kQueueSkip;
       }},
      // A new node has every port free: no hint needed (kube registers none).
      {v1::NODE, Actions(v1::ADD), nullptr},
  };
}

}  // namespace podium::plugins
