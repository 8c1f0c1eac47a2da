// A second plugin process for the benchmarks (make bench: basic-5000-extra) and
// an example of a Filter + Score plugin: nodes labelled
// example.podium.dev/unschedulable=true are filtered out, nodes labelled
// example.podium.dev/preferred=true score 100, the others 0.
//
//   podium-example-node-label-preference --listen unix:///run/podium/extra.sock
#include <iostream>
#include <string>
#include <string_view>

#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"

namespace sdk = podium::sdk;

namespace {

constexpr std::string_view kUnschedulableLabel = "example.podium.dev/unschedulable";
constexpr std::string_view kPreferredLabel = "example.podium.dev/preferred";

bool HasLabel(const sdk::NodeInfo& node, std::string_view key, std::string_view value) {
  const auto& labels = node.node().meta().labels();
  auto it = labels.find(std::string(key));
  return it != labels.end() && it->second == value;
}

// Stateless: Filter and Score may run concurrently for different nodes.
class NodeLabelPreference : public sdk::SignPlugin, public sdk::FilterPlugin, public sdk::ScorePlugin {
 public:
  std::string_view Name() const override { return "NodeLabelPreference"; }
  // Its verdicts read only the node's labels, nothing of the pod: every pod
  // is the same to it, so it lets the scheduler batch pods (signatures).
  sdk::PodSignatureSpec SignatureSpec() const override { return {}; }
  sdk::Status Filter(sdk::CycleState&, const sdk::PodInfo&, const sdk::NodeInfo& node) override {
    if (HasLabel(node, kUnschedulableLabel, "true")) {
      return sdk::Status(sdk::Code::kUnschedulableAndUnresolvable,
                         "node(s) were labelled example.podium.dev/unschedulable");
    }
    return sdk::Status::Success();
  }
  std::pair<int64_t, sdk::Status> Score(sdk::CycleState&, const sdk::PodInfo&,
                                        const sdk::NodeInfo& node) override {
    return {HasLabel(node, kPreferredLabel, "true") ? sdk::kMaxNodeScore : sdk::kMinNodeScore,
            sdk::Status::Success()};
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
      std::cerr << "usage: podium-example-node-label-preference --listen ADDR\n";
      return 2;
    }
  }
  if (listen.empty()) {
    std::cerr << "usage: podium-example-node-label-preference --listen ADDR\n";
    return 2;
  }
  absl::Status served = sdk::Serve(
      {.address = listen,
       .process_name = "podium-example-node-label-preference",
       .plugins = {{"NodeLabelPreference",
                    [](const boost::json::object&, sdk::Handle&) -> absl::StatusOr<sdk::PluginPtr> {
                      return std::make_unique<NodeLabelPreference>();
                    }}}});
  if (!served.ok()) {
    std::cerr << "podium-example-node-label-preference: " << served.message() << "\n";
    return 1;
  }
  return 0;
}
