#pragma once

#include <string>
#include <string_view>
#include <type_traits>

namespace podium::plugins {
namespace internal_str {
inline void AppendTo(std::string& out, std::string_view s) { out.append(s); }
template <typename T>
requires std::is_integral_v<T>
void AppendTo(std::string& out, T v) { out += std::to_string(v); }
}  // namespace internal_str

// Concatenates strings and integers. (Debian's Abseil has its own string_view,
// so absl::StrCat does not take std::string_view.)
template <typename... Args>
std::string Cat(const Args&... args) {
  std::string out;
  (internal_str::AppendTo(out, args), ...);
  return out;
}

}  // namespace podium::plugins
