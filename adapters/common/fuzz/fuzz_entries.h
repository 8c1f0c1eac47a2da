// The loaders that take YAML from outside, as fuzz entry points: libFuzzer
// targets (built with `make fuzz`, clang only) and the corpus replay test
// (every build) call the same functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace podium::fuzz {

// podium-sim's cluster loader (adapters/common/translate) on one source.
absl::Status LoadClusterInput(const uint8_t* data, size_t size);
// podium-scheduler's --config parser (services/scheduler/config).
absl::Status ParseSchedulerConfigInput(const uint8_t* data, size_t size);
// podium-k8s-adapter's JSON path: the input is served as every watched
// kind's list answer (each page, each part), then line by line as its watch;
// each kind's reflector translates what it can into podium.v1 and reports
// the rest. Errors are what the reflector refused (a bad list); a translated
// object that breaks the contract (no name, wrong kind) aborts.
absl::Status DecodeKubeJsonInput(const uint8_t* data, size_t size);

}  // namespace podium::fuzz
