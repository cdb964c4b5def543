// The ymm 8 x 8 transposes the AVX2 and AVX-512 cube drivers share, into
// registers and into memory. Static (internal linkage): each
// including file compiles its own copy with its own ISA flags, so no copy
// made for AVX-512 can stand in for the AVX2 one.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace dvm::backends::cube::detail {

// t[q] = (r[0][q], ..., r[7][q]) for q < 8: the 8 x 8 block of rows r
// transposed in registers.
[[gnu::always_inline]] static inline void transpose8x8_vregs(const __m256* r, __m256* t) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]),
               t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]),
               t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]),
               t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  t[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  t[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  t[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  t[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  t[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  t[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  t[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  t[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// t[q] = (src[0 * cs + q], ..., src[7 * cs + q]) for q < 8: an 8 x 8 block
// transposed in registers.
[[gnu::always_inline]] static inline void transpose8x8_regs(const float* src, int64_t cs, __m256* t) {
  __m256 r[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(src + i * cs);
  transpose8x8_vregs(r, t);
}

// dst[t * ldd + j] = src[j * cs + t] for j, t < 8.
[[gnu::always_inline]] static inline void transpose8x8(const float* src, int64_t cs, float* dst, int64_t ldd) {
  __m256 t[8];
  transpose8x8_regs(src, cs, t);
#pragma GCC unroll 8
  for (int q = 0; q < 8; ++q) _mm256_storeu_ps(dst + q * ldd, t[q]);
}

}  // namespace dvm::backends::cube::detail
