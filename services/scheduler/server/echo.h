// Input from outside that an error message or a log line repeats is cut to a
// bound, so a client cannot make the scheduler write (or send back) megabytes.
#pragma once

#include <cstddef>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace podium::scheduler {

inline constexpr size_t kMaxEchoedBytes = 256;

// `text` when it fits in `max` bytes, else its first `max` bytes (never cutting
// a UTF-8 sequence) and "...(N bytes)".
inline std::string Echo(absl::string_view text, size_t max = kMaxEchoedBytes) {
  if (text.size() <= max) return std::string(text);
  size_t cut = max;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return absl::StrCat(text.substr(0, cut), "...(", text.size(), " bytes)");
}

}  // namespace podium::scheduler
