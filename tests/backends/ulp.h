// ULP distance shared by the backend tests.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace dvm::backends::testing {

// |y - r| in units of the float spacing at the reference r (2^(e-23) for r in
// [2^e, 2^(e+1)), 2^-149 below FLT_MIN). Inf counts as 2^128, so a result that
// overflows one ULP early is 1 ULP off, not infinitely. NaN must match NaN.
inline double ulp_error(float y, double r) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (std::isnan(r)) return std::isnan(y) ? 0.0 : kInf;
  if (std::isnan(y)) return kInf;
  if (static_cast<double>(y) == r || y == static_cast<float>(r)) return 0.0;
  const double big = std::ldexp(1.0, 128);
  double yv = std::isinf(y) ? std::copysign(big, y) : y;
  double rv = std::isinf(r) ? std::copysign(big, r) : r;
  int e = rv == 0 ? -126 : std::max(std::ilogb(rv), -126);
  return std::fabs(yv - rv) / std::ldexp(1.0, e - 23);
}

}  // namespace dvm::backends::testing
