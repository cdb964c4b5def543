// sleef_loop on AVX2 + FMA: sleef_loops_impl.h over 8-float vectors, built
// with -O3 -mavx2 -mfma (bench/CMakeLists.txt), as TorchInductor builds its
// AVX2 kernels; exp and tanh are SLEEF's Sleef_expf8_u10 and
// Sleef_tanhf8_u10 (libsleef's dispatchers: each picks its AVX2 version on
// first use). Chosen at run time by sleef_loops.cpp.
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
  using T = __m256;
  static constexpr int N = 8;
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float v) { return _mm256_set1_ps(v); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T fmadd(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T exp(T a) { return Sleef_expf8_u10(a); }
  static T tanh(T a) { return Sleef_tanhf8_u10(a); }
  static float hsum(T a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static float hmax(T a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};

#include "bench/sleef_loops_impl.h"

}  // namespace
}  // namespace sleef_impl

const RefLoops& sleef_loops_avx2() { return sleef_impl::loops_for<sleef_impl::V>(); }

}  // namespace bench
#endif  // DVM_BENCH_HAVE_SLEEF
