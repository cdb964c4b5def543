// The cube GEMM's AVX2 micro-kernels (6 x 16 register tile, fused
// multiply-add). Compiled with -mavx2 -mfma; gemm.cpp calls in only after
// isa.h says the CPU has AVX2 and FMA.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "backends/cube/gemm_driver.h"
#include "backends/cube/transpose_avx2.h"

namespace dvm::backends::cube::detail {
namespace {

struct V256 {
  using T = __m256;
  static constexpr int kLanes = 8;
  [[gnu::always_inline]] static inline T zero() { return _mm256_setzero_ps(); }
  [[gnu::always_inline]] static inline T load(const float* p) { return _mm256_loadu_ps(p); }
  [[gnu::always_inline]] static inline void store(float* p, T x) { _mm256_storeu_ps(p, x); }
  [[gnu::always_inline]] static inline T bcast(const float* p) { return _mm256_set1_ps(*p); }
  // Lane q is on when q < n: the sign bits of (q - n).
  [[gnu::always_inline]] static inline __m256i first(int64_t n) {
    return _mm256_sub_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(static_cast<int>(n)));
  }
  [[gnu::always_inline]] static inline T load_n(const float* p, int64_t n) { return _mm256_maskload_ps(p, first(n)); }
  [[gnu::always_inline]] static inline void store_n(float* p, T x, int64_t n) { _mm256_maskstore_ps(p, first(n), x); }
  [[gnu::always_inline]] static inline T madd(T a, T b, T acc) { return _mm256_fmadd_ps(a, b, acc); }
  [[gnu::always_inline]] static inline T load_bf16(const uint16_t* p) {
    const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
  }
  [[gnu::always_inline]] static inline T load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
};

struct Params {
  using V = V256;
  // One scalar step of V::madd (one fused rounding).
  [[gnu::always_inline]] static inline float madd1(float a, float b, float acc) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(acc)));
  }
  static constexpr int MR = 6;
  static constexpr int NV = 2;
  static constexpr int64_t KC = 256;
  static constexpr int64_t MB = 240;
  static constexpr int64_t NB = 512;
  static constexpr int64_t kSmallM = 16;
  static constexpr int64_t kSmallKC = 256;
  static constexpr int64_t kSmallPackedKC = 64;
  static constexpr int64_t kSmallNB = 256;
  static constexpr int kSmallMR = 2;
  static constexpr int kSmallNV = 4;
  // t[q] = (r[0][q], ..., r[7][q]) for q < 8.
  [[gnu::always_inline]] static inline void transpose_lanes(const __m256* r, __m256* t) { transpose8x8_vregs(r, t); }
  // dst[t * ldd + j] = src[j * cs + t] for j, t < 8.
  [[gnu::always_inline]] static inline void transpose8(const float* src, int64_t cs, float* dst,
                                                      int64_t ldd) {
    transpose8x8(src, cs, dst, ldd);
  }
};

}  // namespace

extern const Impl kImplAvx2;
constinit const Impl kImplAvx2 = Driver<Params>::kImpl;

}  // namespace dvm::backends::cube::detail
