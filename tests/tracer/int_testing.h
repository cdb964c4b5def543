// Helpers for the integer tests (test_int32.cpp, test_int64.cpp,
// test_int_ops.cpp): tensors of int64, int32, uint8 or bool made from and
// read back as int64_t, torch's
// wrap-around, and generated values with the extremes.
#pragma once

#include <climits>

#include "tests/tracer/tracer_testing.h"

namespace dvm::testing {

// A tensor of type t (int64, int32, uint8 or bool) holding v (each value
// already in t's range), 1-D or of the given shape.
inline Tensor make(Dtype t, const std::vector<int64_t>& v, Shape s) {
  switch (t) {
    case Dtype::I64: return Tensor::from_vector(v, s);
    case Dtype::I32: return Tensor::from_vector(std::vector<int32_t>(v.begin(), v.end()), s);
    case Dtype::U8: return Tensor::from_vector(std::vector<uint8_t>(v.begin(), v.end()), s);
    default: {
      std::vector<bool> x;
      for (int64_t e : v) x.push_back(e != 0);
      return Tensor::from_vector(x, s);
    }
  }
}
inline Tensor make(Dtype t, const std::vector<int64_t>& v) { return make(t, v, Shape{static_cast<int64_t>(v.size())}); }

// y's values (int64, int32, uint8 or bool) as int64_t.
inline std::vector<int64_t> read(const Tensor& y) {
  std::vector<int64_t> out;
  switch (y.dtype()) {
    case Dtype::I64: return y.to_vector<int64_t>();
    case Dtype::I32:
      for (int32_t e : y.to_vector<int32_t>()) out.push_back(e);
      break;
    case Dtype::U8:
      for (uint8_t e : y.to_vector<uint8_t>()) out.push_back(e);
      break;
    case Dtype::Bool:
      for (bool e : y.to_vector<bool>()) out.push_back(e ? 1 : 0);
      break;
    default: ADD_FAILURE() << "unexpected result type " << dtype_name(y.dtype());
  }
  return out;
}

// v wrapped to t as torch's integers wrap.
inline int64_t wrap(Dtype t, int64_t v) {
  if (t == Dtype::U8) return static_cast<int64_t>(static_cast<uint64_t>(v) & 0xffu);
  if (t == Dtype::Bool) return v != 0;
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
}

// n values of type t: the extremes, small negatives, random ones.
inline std::vector<int64_t> values(Dtype t, int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> v;
  const std::vector<int64_t> special =
      t == Dtype::I32 ? std::vector<int64_t>{INT32_MIN, INT32_MAX, INT32_MIN + 1, INT32_MAX - 1, 0, -1, 1, -2,
                                             16777217, -16777217, 65536, 46341, -46341}
      : t == Dtype::U8 ? std::vector<int64_t>{0, 255, 1, 254, 128, 127, 16}
                       : std::vector<int64_t>{0, 1};
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = rng();
    int64_t e;
    if (r % 3 == 0) e = special[rng() % special.size()];
    else if (t == Dtype::I32) e = r % 2 ? static_cast<int32_t>(rng()) : static_cast<int64_t>(rng() % 201) - 100;
    else if (t == Dtype::U8) e = rng() % 256;
    else e = rng() % 2;
    v.push_back(e);
  }
  return v;
}

// Runs program() on the interpreter, then again with every kernel compiled
// before its first run, and expects the same values and that the second run
// really was machine code. `where` names the case in failures.
template <class F>
void expect_tiers_agree(F&& program, const std::string& where) {
  dvm::set_tier_mode(TierMode::Off);
  const auto interp = program();
  dvm::set_tier_mode(TierMode::Eager);
  dvm::set_kernel_log(true);
  const auto jit = program();
  dvm::set_kernel_log(false);
  const std::vector<KernelRun> log = dvm::take_kernel_log();
  EXPECT_FALSE(log.empty()) << where;
  for (const KernelRun& run : log) EXPECT_EQ(run.tier, "jit") << where;
  EXPECT_EQ(interp, jit) << where;
}

}  // namespace dvm::testing
