#pragma once

#include <string_view>

#include "plugins/helper/str.h"
#include "podium/sdk/framework.h"

namespace podium::plugins {

// kube-scheduler's error when a plugin's PreFilter/PreScore state is missing
// from the cycle state.
inline sdk::Status MissingCycleState(std::string_view key) {
  return sdk::Status(sdk::Code::kError, Cat("reading \"", key, "\" from cycleState: not found"));
}

}  // namespace podium::plugins
