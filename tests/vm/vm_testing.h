// Inputs shared by the vm tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace dvm::testing {

// amplitude * sin(k * i), i in [0, n): smooth, signed, every value distinct.
inline std::vector<float> ramp(int64_t n, float k, float amplitude) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(k * static_cast<float>(i)) * amplitude;
  return v;
}

}  // namespace dvm::testing
