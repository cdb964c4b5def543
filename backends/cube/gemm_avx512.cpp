// The cube GEMM's AVX-512 micro-kernels (8 x 32 register tile, fused
// multiply-add). Compiled with the AVX-512 flags; gemm.cpp calls in only after
// isa.h says the CPU has AVX-512.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include "backends/cube/gemm_driver.h"
#include "backends/cube/transpose_avx2.h"

namespace dvm::backends::cube::detail {
namespace {

struct V512 {
  using T = __m512;
  static constexpr int kLanes = 16;
  [[gnu::always_inline]] static inline T zero() { return _mm512_setzero_ps(); }
  [[gnu::always_inline]] static inline T load(const float* p) { return _mm512_loadu_ps(p); }
  [[gnu::always_inline]] static inline void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  [[gnu::always_inline]] static inline T bcast(const float* p) { return _mm512_set1_ps(*p); }
  [[gnu::always_inline]] static inline T load_n(const float* p, int64_t n) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
  }
  [[gnu::always_inline]] static inline void store_n(float* p, T x, int64_t n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), x);
  }
  [[gnu::always_inline]] static inline T madd(T a, T b, T acc) { return _mm512_fmadd_ps(a, b, acc); }
  [[gnu::always_inline]] static inline T load_bf16(const uint16_t* p) {
    const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
  }
  [[gnu::always_inline]] static inline T load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

// Eight lanes (AVX-512VL masks) for tiny products at most eight wide.
struct V256 {
  using T = __m256;
  static constexpr int kLanes = 8;
  [[gnu::always_inline]] static inline T zero() { return _mm256_setzero_ps(); }
  [[gnu::always_inline]] static inline T load(const float* p) { return _mm256_loadu_ps(p); }
  [[gnu::always_inline]] static inline void store(float* p, T x) { _mm256_storeu_ps(p, x); }
  [[gnu::always_inline]] static inline T bcast(const float* p) { return _mm256_set1_ps(*p); }
  [[gnu::always_inline]] static inline T madd(T a, T b, T acc) { return _mm256_fmadd_ps(a, b, acc); }
  [[gnu::always_inline]] static inline T load_n(const float* p, int64_t n) {
    return _mm256_maskz_loadu_ps(static_cast<__mmask8>((1u << n) - 1), p);
  }
  [[gnu::always_inline]] static inline void store_n(float* p, T x, int64_t n) {
    _mm256_mask_storeu_ps(p, static_cast<__mmask8>((1u << n) - 1), x);
  }
};

struct Params {
  using V = V512;
  using NarrowV = V256;
  // One scalar step of V::madd (one fused rounding).
  [[gnu::always_inline]] static inline float madd1(float a, float b, float acc) {
    return _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(acc)));
  }
  static constexpr int MR = 8;
  static constexpr int NV = 2;
  static constexpr int64_t KC = 512;
  static constexpr int64_t MB = 256;
  static constexpr int64_t NB = 256;
  static constexpr int64_t kSmallM = 16;
  static constexpr int64_t kSmallKC = 256;
  static constexpr int64_t kSmallPackedKC = 64;
  static constexpr int64_t kSmallNB = 512;
  static constexpr int kSmallMR = 4;
  static constexpr int kSmallNV = 4;
  // t[q] = (rows[0][q], rows[1][q], ..., rows[15][q]) for q < 16: a 16 x 16
  // block transposed in registers (4 shuffle stages).
  [[gnu::always_inline]] static inline void transpose_lanes(const __m512* rows, __m512* t) {
    __m512 r[16], u[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) r[i] = rows[i];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {  // per 128-bit lane: rows 2i, 2i+1 interleaved
      u[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      u[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {  // r[4i + m], lane L: rows 4i..4i+3 at column 4L + m
      r[4 * i + 0] = _mm512_shuffle_ps(u[4 * i], u[4 * i + 2], 0x44);
      r[4 * i + 1] = _mm512_shuffle_ps(u[4 * i], u[4 * i + 2], 0xEE);
      r[4 * i + 2] = _mm512_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0x44);
      r[4 * i + 3] = _mm512_shuffle_ps(u[4 * i + 1], u[4 * i + 3], 0xEE);
    }
#pragma GCC unroll 4
    for (int m = 0; m < 4; ++m) {  // gather lane L of r[m], r[4+m], r[8+m], r[12+m]
      const __m512 p = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x88), q = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xDD);
      const __m512 p2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x88),
                   q2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xDD);
      t[m] = _mm512_shuffle_f32x4(p, p2, 0x88);
      t[8 + m] = _mm512_shuffle_f32x4(p, p2, 0xDD);
      t[4 + m] = _mm512_shuffle_f32x4(q, q2, 0x88);
      t[12 + m] = _mm512_shuffle_f32x4(q, q2, 0xDD);
    }
  }
  // dst[t * ldd + j] = src[j * cs + t] for j, t < 8.
  [[gnu::always_inline]] static inline void transpose8(const float* src, int64_t cs, float* dst,
                                                      int64_t ldd) {
    transpose8x8(src, cs, dst, ldd);
  }
};

}  // namespace

extern const Impl kImplAvx512;
constinit const Impl kImplAvx512 = Driver<Params>::kImpl;

}  // namespace dvm::backends::cube::detail
