// sleef_loop on AVX-512: sleef_loops_impl.h over 16-float vectors, built with
// -O3 -mavx512f -mavx512dq -mavx512vl -mavx512bw -mavx2 -mfma
// (bench/CMakeLists.txt), as TorchInductor builds its AVX-512 kernels; exp
// and tanh are SLEEF's Sleef_expf16_u10 and Sleef_tanhf16_u10 (libsleef's
// AVX-512F versions). Chosen at run time by sleef_loops.cpp.
#ifdef DVM_BENCH_HAVE_SLEEF
#include <immintrin.h>
#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "bench/fused_loops.h"

namespace bench {
namespace sleef_impl {
namespace {

struct V {
  using T = __m512;
  static constexpr int N = 16;
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float v) { return _mm512_set1_ps(v); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T exp(T a) { return Sleef_expf16_u10(a); }
  static T tanh(T a) { return Sleef_tanhf16_u10(a); }
  static float hsum(T a) { return _mm512_reduce_add_ps(a); }
  static float hmax(T a) { return _mm512_reduce_max_ps(a); }
};

#include "bench/sleef_loops_impl.h"

}  // namespace
}  // namespace sleef_impl

const RefLoops& sleef_loops_avx512() { return sleef_impl::loops_for<sleef_impl::V>(); }

}  // namespace bench
#endif  // DVM_BENCH_HAVE_SLEEF
