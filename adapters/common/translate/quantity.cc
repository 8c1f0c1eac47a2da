#include "common/translate/quantity.h"

#include <cctype>
#include <string>

#include "absl/strings/str_cat.h"

namespace podium::k8s {
namespace {

using u128 = unsigned __int128;
constexpr u128 kInt64Max = static_cast<u128>(INT64_MAX);
// Beyond this a mantissa cannot be represented; Kubernetes caps quantities at
// int64 anyway, so such inputs are refused as too large.
constexpr u128 kMantissaLimit = static_cast<u128>(1) << 120;

absl::Status Invalid(std::string_view text) {
  return absl::InvalidArgumentError(absl::StrCat("invalid quantity \"", std::string(text), "\""));
}

}  // namespace

absl::StatusOr<Quantity> Quantity::Parse(std::string_view text) {
  Quantity q;
  size_t i = 0;
  const size_t n = text.size();
  if (n == 0) return Invalid(text);
  if (text[i] == '+' || text[i] == '-') {
    q.negative_ = text[i] == '-';
    ++i;
  }
  int int_digits = 0, frac_digits = 0;
  bool overflow = false;
  auto take_digit = [&](char c, bool fractional) {
    if (q.digits_ >= kMantissaLimit / 10) {
      // Dropping excess fractional precision is harmless only after the point;
      // the integer part overflowing means the value is too large.
      if (!fractional) overflow = true;
      return;
    }
    q.digits_ = q.digits_ * 10 + static_cast<unsigned>(c - '0');
    if (fractional) ++frac_digits;
  };
  while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) {
    take_digit(text[i++], false);
    ++int_digits;
  }
  bool had_point = false;
  int frac_seen = 0;
  if (i < n && text[i] == '.') {
    had_point = true;
    ++i;
    while (i < n && std::isdigit(static_cast<unsigned char>(text[i]))) {
      take_digit(text[i++], true);
      ++frac_seen;
    }
  }
  if (int_digits == 0 && frac_seen == 0) return Invalid(text);
  (void)had_point;
  if (overflow) return absl::InvalidArgumentError(absl::StrCat("quantity \"", std::string(text), "\" is too large"));
  q.exp10_ = -frac_digits;

  std::string_view suffix = text.substr(i);
  if (suffix.empty()) {
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    static constexpr std::string_view kBinary = "KMGTPE";
    size_t pos = kBinary.find(suffix[0]);
    if (pos == std::string_view::npos) return Invalid(text);
    q.exp2_ = 10 * static_cast<int>(pos + 1);
  } else if (suffix.size() == 1) {
    switch (suffix[0]) {
      case 'n': q.exp10_ -= 9; break;
      case 'u': q.exp10_ -= 6; break;
      case 'm': q.exp10_ -= 3; break;
      case 'k': q.exp10_ += 3; break;
      case 'M': q.exp10_ += 6; break;
      case 'G': q.exp10_ += 9; break;
      case 'T': q.exp10_ += 12; break;
      case 'P': q.exp10_ += 15; break;
      case 'E': q.exp10_ += 18; break;
      default: return Invalid(text);
    }
  } else if (suffix[0] == 'e' || suffix[0] == 'E') {
    size_t j = 1;
    bool neg = false;
    if (j < suffix.size() && (suffix[j] == '+' || suffix[j] == '-')) neg = suffix[j++] == '-';
    if (j >= suffix.size()) return Invalid(text);
    int e = 0;
    for (; j < suffix.size(); ++j) {
      if (!std::isdigit(static_cast<unsigned char>(suffix[j]))) return Invalid(text);
      e = e * 10 + (suffix[j] - '0');
      if (e > 1000) return Invalid(text);
    }
    q.exp10_ += neg ? -e : e;
  } else {
    return Invalid(text);
  }
  if (q.digits_ == 0) q.negative_ = false;  // "-0" is zero.
  return q;
}

absl::StatusOr<int64_t> Quantity::ScaledValue(int scale) const {
  const auto too_large = [] { return absl::OutOfRangeError("quantity too large for int64"); };
  if (digits_ == 0) return 0;
  u128 num = digits_;
  int e10 = exp10_ + scale;
  for (int k = 0; k < exp2_; ++k) {
    if (num > kInt64Max) return too_large();
    num <<= 1;
  }
  for (; e10 > 0; --e10) {
    if (num > kInt64Max) return too_large();
    num *= 10;
  }
  // num * 10^e10 with e10 <= 0: divide, rounding away from zero (ceil of the
  // magnitude), as Kubernetes rounds a quantity up to the requested scale.
  bool remainder = false;
  for (; e10 < 0 && num > 0; ++e10) {
    if (num % 10 != 0) remainder = true;
    num /= 10;
  }
  if (e10 < 0 || remainder) num += 1;
  if (num > kInt64Max) return too_large();
  int64_t v = static_cast<int64_t>(num);
  return negative_ ? -v : v;
}

}  // namespace podium::k8s
