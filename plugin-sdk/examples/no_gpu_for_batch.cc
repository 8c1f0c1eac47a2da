// The plugin of the README's "Writing a plugin" section, built so that the
// example stays true: a Filter plugin and one Serve call.
#include "podium/sdk/framework.h"
#include "podium/sdk/serve.h"

namespace sdk = podium::sdk;

class NoGpuForBatch : public sdk::FilterPlugin {
 public:
  std::string_view Name() const override { return "NoGpuForBatch"; }
  sdk::Status Filter(sdk::CycleState&, const sdk::PodInfo& pod, const sdk::NodeInfo& node) override {
    if (pod.pod->priority_class_name() == "batch" && node.allocatable().scalar.contains("nvidia.com/gpu"))
      return sdk::Status(sdk::Code::kUnschedulable, "node(s) are reserved for GPU work");
    return sdk::Status::Success();
  }
};

int main() {
  return podium::sdk::Serve({.address = "unix:///run/podium/mine.sock",
                             .process_name = "my-plugins",
                             .plugins = {{"NoGpuForBatch", [](const boost::json::object&, sdk::Handle&)
                                            -> absl::StatusOr<sdk::PluginPtr> {
                                            return std::make_unique<NoGpuForBatch>(); }}}}).ok() ? 0 : 1;
}
