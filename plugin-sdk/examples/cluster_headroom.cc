// An example PreFilter plugin whose rejection preemption can resolve: a pod
// is Unschedulable at PreFilter when no node has its CPU request free (a
// cluster-wide check ahead of the per-node filters, as a quota or headroom
// check would be). With protocol version 9 that plain Unschedulable leaves
// preemption every node, as kube-scheduler does; the integration tests use it
// to check that end to end.
//
//   podium-example-cluster-headroom --listen unix:///run/podium/headroom.sock
#include <iostream>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"

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
  std::string listen;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--listen" && i + 1 < argc) {
      listen = argv[++i];
    } else if (arg.starts_with("--listen=")) {
      listen = std::string(arg.substr(9));
    } else {
      listen.clear();
      break;
    }
  }
  if (listen.empty()) {
    std::cerr << "usage: podium-example-cluster-headroom --listen ADDR\n";
    return 2;
  }
  absl::Status served = sdk::Serve(
      {.address = listen,
       .process_name = "podium-example-cluster-headroom",
       .plugins = {{"ClusterHeadroom",
                    [](const boost::json::object&, sdk::Handle&) -> absl::StatusOr<sdk::PluginPtr> {
                      return std::make_unique<ClusterHeadroom>();
                    }}}});
  if (!served.ok()) {
    std::cerr << "podium-example-cluster-headroom: " << served.message() << "\n";
    return 1;
  }
  return 0;
}
