// A second plugin process for the benchmarks (make bench: basic-5000-extra) and
// an example of a Filter + Score plugin: nodes labelled
// example.podium.dev/unschedulable=true are filtered out, nodes labelled
// example.podium.dev/preferred=true score 100, the others 0.
//
//   podium-example-node-label-preference --listen unix:///run/podium/extra.sock
#include <string>
#include <string_view>

#include "podium/sdk/framework.h"
#include "serve_example.h"

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
  return sdk::examples::ServeExample(
      argc, argv, "podium-example-node-label-preference",
      {"NodeLabelPreference", [](const boost::json::object&, sdk::Handle&) -> absl::StatusOr<sdk::PluginPtr> {
         return std::make_unique<NodeLabelPreference>();
       }});
}
