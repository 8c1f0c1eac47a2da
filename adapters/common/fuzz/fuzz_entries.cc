#include "common/fuzz/fuzz_entries.h"

#include <string>

#include "common/translate/k8s_yaml.h"
#include "config/config.h"

namespace podium::fuzz {

absl::Status LoadClusterInput(const uint8_t* data, size_t size) {
  k8s::LoadOptions options;
  options.default_creation_time = absl::FromUnixSeconds(1700000000);
  // Smaller than podium-sim's bounds, so a fuzz run stays fast.
  options.yaml_limits.max_bytes = 1 << 20;
  options.yaml_limits.max_nodes = 200'000;
  auto cluster = k8s::LoadCluster({{"fuzz.yaml", std::string(reinterpret_cast<const char*>(data), size)}}, options);
  return cluster.status();
}

absl::Status ParseSchedulerConfigInput(const uint8_t* data, size_t size) {
  auto config = scheduler::ParseConfig(std::string_view(reinterpret_cast<const char*>(data), size));
  return config.status();
}

}  // namespace podium::fuzz
