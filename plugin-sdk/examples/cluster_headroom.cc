// An example PreFilter plugin whose rejection preemption can resolve: a pod
// is Unschedulable at PreFilter when no node has its CPU request free (a
// cluster-wide check ahead of the per-node filters, as a quota or headroom
// check would be). With protocol version 9 that plain Unschedulable leaves
// preemption every node, as kube-scheduler does; the integration tests use it
// to check that end to end.
//
//   podium-example-cluster-headroom --listen unix:///run/podium/headroom.sock
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "podium/sdk/framework.h"
#include "serve_example.h"

namespace sdk = podium::sdk;

namespace {

class ClusterHeadroom : public sdk::PreFilterPlugin, public sdk::EnqueueExtensions {
 public:
  std::string_view Name() const override { return "ClusterHeadroom"; }
  std::pair<sdk::PreFilterResult, sdk::Status> PreFilter(sdk::CycleState&, const sdk::PodInfo& pod,
                                                         const sdk::Snapshot& snapshot) override {
    const int64_t wanted = pod.requests.milli_cpu;
    for (const sdk::NodeInfo* node : snapshot.Nodes()) {
      if (node->allocatable().milli_cpu - node->requested().milli_cpu >= wanted) {
        return {sdk::PreFilterResult{}, sdk::Status::Success()};
      }
    }
    return {sdk::PreFilterResult{},
            sdk::Status(sdk::Code::kUnschedulable, absl::StrCat("no node has ", wanted, "m CPU free"))};
  }
  // Room appears when a pod leaves or a node comes or grows.
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override {
    return {{.resource = podium::v1::POD, .action_mask = podium::v1::DELETE},
            {.resource = podium::v1::NODE, .action_mask = podium::v1::ADD | podium::v1::UPDATE}};
  }
};

}  // namespace

int main(int argc, char** argv) {
  return sdk::examples::ServeExample(
      argc, argv, "podium-example-cluster-headroom",
      {"ClusterHeadroom", [](const boost::json::object&, sdk::Handle&) -> absl::StatusOr<sdk::PluginPtr> {
         return std::make_unique<ClusterHeadroom>();
       }});
}
