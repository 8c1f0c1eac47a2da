#pragma once

// The API's JSON as yaml-cpp nodes, for the shared translation (which reads
// YAML::Node). Parsed with Boost.JSON: yaml-cpp's own parser was the
// adapter's largest CPU cost per pod (a sixth of it on adapter-basic-5000).
// Numbers become their decimal text (an integral double as an integer:
// 1e3 -> "1000"), null a Null node, true/false "true"/"false".

#include <string_view>

#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace podium::kube {

// An error (DataLoss) names `what` and where the JSON is malformed.
absl::StatusOr<YAML::Node> JsonToYaml(std::string_view text, std::string_view what);

}  // namespace podium::kube
