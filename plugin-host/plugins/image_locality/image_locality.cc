#include "plugins/image_locality/image_locality.h"

#include "absl/strings/string_view.h"
#include "plugins/helper/args.h"

namespace podium::plugins {
namespace {

constexpr std::string_view kPreScoreStateKey = "PreScoreImageLocality";
constexpr int64_t kMB = 1024 * 1024;
// Below 23MB an image is too small to matter; above 1000MB per container the
// score saturates.
constexpr int64_t kMinThreshold = 23 * kMB;
constexpr int64_t kMaxContainerThreshold = 1000 * kMB;

struct PreScoreState : sdk::StateData {
  std::vector<std::string> images;  // Normalized, init containers then containers.
  int64_t num_containers = 0;
  int64_t total_nodes = 0;
  std::unique_ptr<sdk::StateData> Clone() const override {
    return std::make_unique<PreScoreState>(*this);
  }
};

PreScoreState Compute(const v1::Pod& pod, int64_t total_nodes) {
  PreScoreState s;
  s.images.reserve(pod.init_containers_size() + pod.containers_size());
  for (const v1::Container& c : pod.init_containers()) {
    s.images.push_back(ImageLocality::NormalizedImageName(c.image()));
  }
  for (const v1::Container& c : pod.containers()) {
    s.images.push_back(ImageLocality::NormalizedImageName(c.image()));
  }
  s.num_containers = pod.init_containers_size() + pod.containers_size();
  s.total_nodes = total_nodes;
  return s;
}

int64_t ScoreNode(const PreScoreState& s, const sdk::NodeInfo& node) {
  int64_t sum = 0;
  if (s.total_nodes > 0) {
    const auto& images = node.images();
    for (const std::string& image : s.images) {
      auto it = images.find(absl::string_view(image.data(), image.size()));
      if (it == images.end()) continue;
      const double spread =
          static_cast<double>(it->second.num_nodes) / static_cast<double>(s.total_nodes);
      sum += static_cast<int64_t>(static_cast<double>(it->second.size_bytes) * spread);
    }
  }
  const int64_t max_threshold = kMaxContainerThreshold * s.num_containers;
  if (sum < kMinThreshold) {
    sum = kMinThreshold;
  } else if (sum > max_threshold) {
    sum = max_threshold;
  }
  if (max_threshold == kMinThreshold) return 0;
  return sdk::kMaxNodeScore * (sum - kMinThreshold) / (max_threshold - kMinThreshold);
}

}  // namespace

absl::StatusOr<sdk::PluginPtr> ImageLocality::New(const boost::json::object& args,
                                                  sdk::Handle& handle) {
  if (absl::Status s = ExpectNoArgs(args, kName); !s.ok()) return s;
  return std::make_unique<ImageLocality>(handle);
}

std::string ImageLocality::NormalizedImageName(std::string_view name) {
  const size_t colon = name.rfind(':');
  const size_t slash = name.rfind('/');
  // As Go's LastIndex: npos plays -1.
  const bool has_tag =
      colon != std::string_view::npos && (slash == std::string_view::npos || colon > slash);
  std::string out(name);
  if (!has_tag) out += ":latest";
  return out;
}

sdk::Status ImageLocality::PreScore(sdk::CycleState& state, const sdk::PodInfo& pod,
                                    const std::vector<const sdk::NodeInfo*>&) {
  state.Write(std::string(kPreScoreStateKey),
              std::make_unique<PreScoreState>(
                  Compute(*pod.pod, static_cast<int64_t>(handle_.snapshot().NumNodes()))));
  return sdk::Status::Success();
}

std::pair<int64_t, sdk::Status> ImageLocality::Score(sdk::CycleState& state,
                                                     const sdk::PodInfo& pod,
                                                     const sdk::NodeInfo& node) {
  if (const auto* s = state.ReadAs<PreScoreState>(kPreScoreStateKey)) {
    return {ScoreNode(*s, node), sdk::Status::Success()};
  }
  return {ScoreNode(Compute(*pod.pod, static_cast<int64_t>(handle_.snapshot().NumNodes())), node),
          sdk::Status::Success()};
}

}  // namespace podium::plugins
