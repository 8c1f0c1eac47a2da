#include "plugins/node_name/node_name.h"

#include "plugins/helper/args.h"
#include "plugins/helper/events.h"

namespace podium::plugins {

absl::StatusOr<sdk::PluginPtr> NodeName::New(const boost::json::object& args, sdk::Handle&) {
  if (absl::Status s = ExpectNoArgs(args, kName); !s.ok()) return s;
  return std::make_unique<NodeName>();
}

std::pair<sdk::PreFilterResult, sdk::Status> NodeName::PreFilter(sdk::CycleState&,
                                                                 const sdk::PodInfo& pod,
                                                                 const sdk::Snapshot&) {
  const std::string& wanted = pod.pod->node_name();
  if (wanted.empty()) return {sdk::PreFilterResult{}, sdk::Status(sdk::Code::kSkip)};
  sdk::PreFilterResult result;
  result.node_names.emplace();
  result.node_names->insert(wanted);
  return {std::move(result), sdk::Status::Success()};
}

sdk::Status NodeName::Filter(sdk::CycleState&, const sdk::PodInfo& pod, const sdk::NodeInfo& node) {
  const std::string& wanted = pod.pod->node_name();
  if (wanted.empty() || wanted == node.name()) return sdk::Status::Success();
  return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable, std::string(kReason));
}

std::vector<sdk::ClusterEventWithHint> NodeName::EventsToRegister() const {
  return {{v1::NODE, Actions(v1::ADD), [](const v1::Pod& pod, const v1::ClusterEvent& e) {
             const v1::Node* now = NewNode(e);
             if (now == nullptr || pod.node_name().empty() ||
                 pod.node_name() == now->meta().name()) {
               return sdk::QueueingHint::kQueue;
             }
             return sdk::QueueingHint::kQueueSkip;
           }}};
}

}  // namespace podium::plugins
