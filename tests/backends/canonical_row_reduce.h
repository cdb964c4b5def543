// Shared by the JIT's tests: the canonical row-reduction order written out
// one float at a time (docs/BYTECODE.md, backends/microkernels.h): element i
// to lane i mod W of accumulator (i / W) mod 4, then op(op(a0, a1), op(a2,
// a3)) lane-wise, then the tree (j, j + W/2), ..., (0, 1). max and min are
// vmaxps / vminps (a, b) after a NaN check of a (docs/MATH.md).
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "vm/opcodes.h"

namespace dvm::backends::testing {

inline float canonical_row_reduce(vm::Op op, size_t w, const std::vector<float>& x) {
  auto f = [op](float a, float b) {
    if (op == vm::Op::RSUM) return a + b;
    if (std::isnan(a)) return a;
    return op == vm::Op::RMAX ? (a > b ? a : b) : (a < b ? a : b);
  };
  const float id = op == vm::Op::RSUM   ? 0.0f
                   : op == vm::Op::RMAX ? -std::numeric_limits<float>::infinity()
                                        : std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> a(4, std::vector<float>(w, id));
  for (size_t i = 0; i < x.size(); ++i) a[(i / w) % 4][i % w] = f(a[(i / w) % 4][i % w], x[i]);
  std::vector<float> t(w);
  for (size_t j = 0; j < w; ++j) t[j] = f(f(a[0][j], a[1][j]), f(a[2][j], a[3][j]));
  for (size_t h = w / 2; h >= 1; h /= 2)
    for (size_t j = 0; j < h; ++j) t[j] = f(t[j], t[j + h]);
  return t[0];
}

}  // namespace dvm::backends::testing
