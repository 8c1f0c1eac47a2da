// ImageLocality: prefers nodes that already have the pod's images, weighted by
// how widely each image is spread (so one node with a popular image does not
// attract every pod).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

class ImageLocality : public sdk::SignPlugin,
      public sdk::PreScorePlugin,
                      public sdk::ScorePlugin,
                      public sdk::EnqueueExtensions {
 public:
  static constexpr std::string_view kName = "ImageLocality";

  static absl::StatusOr<sdk::PluginPtr> New(const boost::json::object& args, sdk::Handle& handle);
  explicit ImageLocality(sdk::Handle& handle) : handle_(handle) {}

  // "nginx" -> "nginx:latest"; names with a tag or digest are kept.
  static std::string NormalizedImageName(std::string_view name);

  std::string_view Name() const override { return kName; }
  sdk::PodSignatureSpec SignatureSpec() const override { return {.parts = {v1::POD_PART_IMAGES}}; }
  sdk::Status PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                       const std::vector<const sdk::NodeInfo*>& nodes) override;
  std::pair<int64_t, sdk::Status> Score(sdk::CycleState& state, const sdk::PodInfo& pod,
                                        const sdk::NodeInfo& node) override;
  std::vector<sdk::ClusterEventWithHint> EventsToRegister() const override { return {}; }

 private:
  sdk::Handle& handle_;
};

}  // namespace podium::plugins
