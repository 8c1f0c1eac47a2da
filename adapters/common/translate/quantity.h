#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/statusor.h"

namespace podium::k8s {

// A Kubernetes resource.Quantity, parsed exactly: value = digits * 10^exp10 * 2^exp2
// (with the sign). Keeping it rational lets "0.5" cpu become 500m and "1.5Gi"
// become exact bytes, without floating point.
//
// Grammar (k8s.io/apimachinery/pkg/api/resource):
//   quantity  ::= [+-] decimal suffix
//   decimal   ::= digits | digits "." | digits "." digits | "." digits
//   suffix    ::= binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m "" k M G T P E)
//               | decimalExponent ([eE] [+-]? digits)
class Quantity {
 public:
  static absl::StatusOr<Quantity> Parse(std::string_view text);

  bool negative() const { return negative_; }
  bool is_zero() const { return digits_ == 0; }

  // ceil(value * 10^scale) as Kubernetes' ScaledValue does: MilliValue() is
  // ScaledValue(3), Value() is ScaledValue(0). Fails when it overflows int64.
  absl::StatusOr<int64_t> ScaledValue(int scale) const;
  absl::StatusOr<int64_t> MilliValue() const { return ScaledValue(3); }
  absl::StatusOr<int64_t> Value() const { return ScaledValue(0); }

 private:
  bool negative_ = false;
  unsigned __int128 digits_ = 0;  // Mantissa without the decimal point.
  int exp10_ = 0;
  int exp2_ = 0;
};

}  // namespace podium::k8s
