// Debian's Abseil has its own string_view (not std's): hash lookups, StrCat
// and StrJoin need it.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace podium::sdk::internal {

inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace podium::sdk::internal
