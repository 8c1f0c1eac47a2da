#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "podium/sdk/framework.h"

namespace podium::plugins {

// A Filter rejection with one reason, in two allocations (the reasons and the
// string). sdk::Status(code, std::string(reason)) takes three: the braced
// list it builds its reasons from is copied, string and all. Filters reject
// hundreds of nodes per pod under spread or anti-affinity.
inline sdk::Status Rejection(sdk::Code code, std::string_view reason) {
  std::vector<std::string> reasons(1);
  reasons.front().assign(reason);
  return sdk::Status(code, std::move(reasons));
}

}  // namespace podium::plugins
