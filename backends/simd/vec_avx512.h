// The 16-lane AVX-512 (F+DQ+BW+VL) SIMD value type (one zmm register, masks in
// k registers), implementing the primitive contract of vec_scalar.h; the x86
// instruction of each primitive is listed in vec_avx2.h.
//
// Include only from a translation unit compiled with the AVX-512 flags (today:
// backends/kernels_avx512.cpp), and call its code only after isa.h says the
// CPU and OS support AVX-512.
#pragma once

#if !defined(__x86_64__)
#error "vec_avx512.h is x86-64 only; other targets build the portable table"
#endif

// GCC 12 reports its own _mm512_undefined_ps() (`__m512 __Y = __Y;`) as
// uninitialised when AVX-512 intrinsics are inlined at -O2 (GCC bug 105593);
// silence that false positive for the intrinsic headers only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop

#include <cstdint>

#include "backends/simd/vec_avx2.h"

#ifndef DVM_SIMD_INLINE
#define DVM_SIMD_INLINE [[gnu::always_inline]] inline
#endif

namespace dvm::simd {

struct VecAvx512 {
  static constexpr int kLanes = 16;
  struct Mask {
    __mmask16 k;
  };
  struct Int {
    __m512i i;
  };

  __m512 v;

  // ---- memory ---------------------------------------------------------------
  DVM_SIMD_INLINE static VecAvx512 splat(float x) { return {_mm512_set1_ps(x)}; }
  DVM_SIMD_INLINE static VecAvx512 load(const float* p) { return {_mm512_loadu_ps(p)}; }
  DVM_SIMD_INLINE static void store(float* p, VecAvx512 a) { _mm512_storeu_ps(p, a.v); }
  // k = (1 << n) - 1 (kmovw from a GPR); 0 <= n <= 16.
  DVM_SIMD_INLINE static Mask tail_mask(int n) {
    return {static_cast<__mmask16>((1u << n) - 1u)};
  }
  // vmovups zmm{k}{z}: masked lanes read 0 and cannot fault.
  DVM_SIMD_INLINE static VecAvx512 load_partial(const float* p, int n) {
    return {_mm512_maskz_loadu_ps(tail_mask(n).k, p)};
  }
  // vmovups [p]{k}: masked lanes are not written.
  DVM_SIMD_INLINE static void store_partial(float* p, VecAvx512 a, int n) {
    _mm512_mask_storeu_ps(p, tail_mask(n).k, a.v);
  }

  // ---- arithmetic -----------------------------------------------------------
  DVM_SIMD_INLINE static VecAvx512 add(VecAvx512 a, VecAvx512 b) { return {_mm512_add_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 sub(VecAvx512 a, VecAvx512 b) { return {_mm512_sub_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 mul(VecAvx512 a, VecAvx512 b) { return {_mm512_mul_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 div(VecAvx512 a, VecAvx512 b) { return {_mm512_div_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 fma(VecAvx512 a, VecAvx512 b, VecAvx512 c) {
    return {_mm512_fmadd_ps(a.v, b.v, c.v)};
  }
  DVM_SIMD_INLINE static VecAvx512 fnma(VecAvx512 a, VecAvx512 b, VecAvx512 c) {
    return {_mm512_fnmadd_ps(a.v, b.v, c.v)};
  }
  DVM_SIMD_INLINE static VecAvx512 min(VecAvx512 a, VecAvx512 b) { return {_mm512_min_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 max(VecAvx512 a, VecAvx512 b) { return {_mm512_max_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 sqrt(VecAvx512 a) { return {_mm512_sqrt_ps(a.v)}; }
  DVM_SIMD_INLINE static VecAvx512 abs(VecAvx512 a) { return bit_andnot(splat(-0.0f), a); }
  DVM_SIMD_INLINE static VecAvx512 neg(VecAvx512 a) { return bit_xor(a, splat(-0.0f)); }

  // ---- bits (AVX512DQ vandps & co.) -----------------------------------------
  DVM_SIMD_INLINE static VecAvx512 bit_and(VecAvx512 a, VecAvx512 b) { return {_mm512_and_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 bit_or(VecAvx512 a, VecAvx512 b) { return {_mm512_or_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 bit_xor(VecAvx512 a, VecAvx512 b) { return {_mm512_xor_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx512 bit_andnot(VecAvx512 a, VecAvx512 b) {
    return {_mm512_andnot_ps(a.v, b.v)};
  }
  // One vpternlogd: truth table 0xF8 is a | (b & c) (a the destination operand).
  DVM_SIMD_INLINE static VecAvx512 bit_or_and(VecAvx512 a, VecAvx512 b, VecAvx512 c) {
    return {_mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(a.v), _mm512_castps_si512(b.v), _mm512_castps_si512(c.v), 0xF8))};
  }

  // ---- rounding (vrndscaleps, scale 0) -----------------------------------------
  DVM_SIMD_INLINE static VecAvx512 round_even(VecAvx512 a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx512 floor(VecAvx512 a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx512 ceil(VecAvx512 a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx512 trunc(VecAvx512 a) {
    return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)};
  }

  // ---- comparisons and masks (vcmpps -> k) ----------------------------------
  DVM_SIMD_INLINE static Mask eq(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ)}; }
  DVM_SIMD_INLINE static Mask ne(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_NEQ_UQ)}; }
  DVM_SIMD_INLINE static Mask lt(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)}; }
  DVM_SIMD_INLINE static Mask le(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LE_OQ)}; }
  DVM_SIMD_INLINE static Mask gt(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)}; }
  DVM_SIMD_INLINE static Mask ge(VecAvx512 a, VecAvx512 b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GE_OQ)}; }
  DVM_SIMD_INLINE static Mask unord(VecAvx512 a, VecAvx512 b) {
    return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_UNORD_Q)};
  }
  DVM_SIMD_INLINE static Mask mask_and(Mask a, Mask b) { return {_kand_mask16(a.k, b.k)}; }
  DVM_SIMD_INLINE static Mask mask_or(Mask a, Mask b) { return {_kor_mask16(a.k, b.k)}; }
  DVM_SIMD_INLINE static Mask mask_not(Mask a) { return {_knot_mask16(a.k)}; }
  // vblendmps zmm{k}: a where k is set, else b.
  DVM_SIMD_INLINE static VecAvx512 select(Mask m, VecAvx512 a, VecAvx512 b) {
    return {_mm512_mask_blend_ps(m.k, b.v, a.v)};
  }
  // vscalefps: y * 2^floor(n), rounded once (subnormal results too).
  DVM_SIMD_INLINE static VecAvx512 scale_pow2(VecAvx512 y, VecAvx512 n) {
    return {_mm512_scalef_ps(y.v, n.v)};
  }

  // ---- int32 lanes ----------------------------------------------------------
  DVM_SIMD_INLINE static Int isplat(int32_t x) { return {_mm512_set1_epi32(x)}; }
  DVM_SIMD_INLINE static Int as_int(VecAvx512 a) { return {_mm512_castps_si512(a.v)}; }
  DVM_SIMD_INLINE static VecAvx512 as_float(Int a) { return {_mm512_castsi512_ps(a.i)}; }
  DVM_SIMD_INLINE static Int cvt_round(VecAvx512 a) { return {_mm512_cvtps_epi32(a.v)}; }
  DVM_SIMD_INLINE static VecAvx512 cvt_float(Int a) { return {_mm512_cvtepi32_ps(a.i)}; }
  DVM_SIMD_INLINE static Int iadd(Int a, Int b) { return {_mm512_add_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int isub(Int a, Int b) { return {_mm512_sub_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int iand(Int a, Int b) { return {_mm512_and_si512(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int imul(Int a, Int b) { return {_mm512_mullo_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int cvt_trunc(VecAvx512 a) { return {_mm512_cvttps_epi32(a.v)}; }
  template <int k>
  DVM_SIMD_INLINE static Int shl(Int a) {
    return {_mm512_slli_epi32(a.i, k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int shr(Int a) {
    return {_mm512_srli_epi32(a.i, k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int sra(Int a) {
    return {_mm512_srai_epi32(a.i, k)};
  }
  DVM_SIMD_INLINE static Mask ieq(Int a, Int b) { return {_mm512_cmpeq_epi32_mask(a.i, b.i)}; }
  DVM_SIMD_INLINE static Mask igt(Int a, Int b) { return {_mm512_cmpgt_epi32_mask(a.i, b.i)}; }
  // Eight lanes at a time in double (vec_scalar.h says why it is exact).
  DVM_SIMD_INLINE static __m256i floordiv8(__m256i a, __m256i b) {
    const __m512d q = _mm512_div_pd(_mm512_cvtepi32_pd(a), _mm512_cvtepi32_pd(b));
    return _mm512_cvttpd_epi32(_mm512_roundscale_pd(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
  }
  DVM_SIMD_INLINE static Int ifloordiv(Int a, Int b) {
    const __m256i lo = floordiv8(_mm512_castsi512_si256(a.i), _mm512_castsi512_si256(b.i));
    const __m256i hi = floordiv8(_mm512_extracti64x4_epi64(a.i, 1), _mm512_extracti64x4_epi64(b.i, 1));
    return {_mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1)};
  }

  // ---- horizontal reductions ------------------------------------------------
  // 16 -> 8: vextractf32x8 hi, op(lo ymm, hi ymm); then the 8-lane tree of
  // VecAvx2 (vextractf128, vmovhlps, vmovshdup).
  DVM_SIMD_INLINE static float hsum(VecAvx512 a) {
    return VecAvx2::hsum8(_mm256_add_ps(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1)));
  }
  DVM_SIMD_INLINE static __m256 max8(__m256 lo, __m256 hi) {  // NaN-propagating
    __m256 r = _mm256_max_ps(lo, hi);
    return _mm256_blendv_ps(r, lo, _mm256_cmp_ps(lo, lo, _CMP_UNORD_Q));
  }
  DVM_SIMD_INLINE static __m256 min8(__m256 lo, __m256 hi) {  // NaN-propagating
    __m256 r = _mm256_min_ps(lo, hi);
    return _mm256_blendv_ps(r, lo, _mm256_cmp_ps(lo, lo, _CMP_UNORD_Q));
  }
  DVM_SIMD_INLINE static float hmax(VecAvx512 a) {
    return VecAvx2::hmax8(max8(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1)));
  }
  DVM_SIMD_INLINE static float hmin(VecAvx512 a) {
    return VecAvx2::hmin8(min8(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1)));
  }
};

}  // namespace dvm::simd
