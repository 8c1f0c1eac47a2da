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

}  // namespace podium::fuzz
