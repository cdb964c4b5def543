// The 8-lane AVX2+FMA SIMD value type (one ymm register), implementing the
// primitive contract of vec_scalar.h.
//
// The x86 instructions of each primitive (AVX2 / AVX-512 where they differ;
// the JIT's x86 emitter uses the same ones):
//   splat                      vbroadcastss
//   load store                 vmovups
//   load_partial store_partial vmaskmovps / vmovups{k}{z}, vmovups{k}
//   add sub mul div sqrt       vaddps vsubps vmulps vdivps vsqrtps
//   fma fnma                   vfmadd213ps vfnmadd213ps
//   min max                    vminps vmaxps (the second operand unless true)
//   abs neg                    vandnps / vxorps with -0.0f
//   bit_and bit_or bit_xor     vandps vorps vxorps
//   bit_andnot                 vandnps
//   bit_or_and                 vandps + vorps / vpternlogd 0xF8
//   round_even floor ceil trunc  vroundps / vrndscaleps imm 8 9 10 11
//   eq ne lt le gt ge unord    vcmpps EQ_OQ NEQ_UQ LT_OQ LE_OQ GT_OQ GE_OQ UNORD_Q
//   mask_and mask_or mask_not  vandps vorps vxorps-all-ones / kandw korw knotw
//   select                     vblendvps / vblendmps
//   scale_pow2                 in halves (scale_pow2.h) / vscalefps
//   isplat                     vpbroadcastd
//   cvt_round cvt_float        vcvtps2dq (MXCSR default: nearest-even) vcvtdq2ps
//   iadd isub iand             vpaddd vpsubd vpand / vpandd
//   imul cvt_trunc             vpmulld vcvttps2dq
//   shl shr sra                vpslld vpsrld vpsrad
//   ieq igt                    vpcmpeqd vpcmpgtd
//   ifloordiv                  per half: vcvtdq2pd, vdivpd, vroundpd /
//                              vrndscalepd imm 9, vcvttpd2dq; vinserti128 /
//                              vinserti64x4
//   hmax hmin step             vmaxps / vminps, vcmpps UNORD_Q, vblendvps
//
// Include only from a translation unit compiled with -mavx2 -mfma (today:
// backends/kernels_avx2.cpp and kernels_avx512.cpp), and call its code only
// after isa.h says the CPU has AVX2.
#pragma once

#if !defined(__x86_64__)
#error "vec_avx2.h is x86-64 only; other targets build the portable table"
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

#include "backends/simd/scale_pow2.h"

#ifndef DVM_SIMD_INLINE
#define DVM_SIMD_INLINE [[gnu::always_inline]] inline
#endif

namespace dvm::simd {

struct VecAvx2 {
  static constexpr int kLanes = 8;
  struct Mask {
    __m256 m;  // all-ones / all-zeros per lane, as vcmpps produces
  };
  struct Int {
    __m256i i;
  };

  __m256 v;

  // ---- memory ---------------------------------------------------------------
  DVM_SIMD_INLINE static VecAvx2 splat(float x) { return {_mm256_set1_ps(x)}; }
  DVM_SIMD_INLINE static VecAvx2 load(const float* p) { return {_mm256_loadu_ps(p)}; }
  DVM_SIMD_INLINE static void store(float* p, VecAvx2 a) { _mm256_storeu_ps(p, a.v); }
  // vpcmpgtd(broadcast(n), [0..7]) -> lane mask.
  DVM_SIMD_INLINE static __m256i lane_mask_bits(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  // vmaskmovps load: masked lanes read 0 and cannot fault.
  DVM_SIMD_INLINE static VecAvx2 load_partial(const float* p, int n) {
    return {_mm256_maskload_ps(p, lane_mask_bits(n))};
  }
  // vmaskmovps store: masked lanes are not written.
  DVM_SIMD_INLINE static void store_partial(float* p, VecAvx2 a, int n) {
    _mm256_maskstore_ps(p, lane_mask_bits(n), a.v);
  }
  DVM_SIMD_INLINE static Mask tail_mask(int n) { return {_mm256_castsi256_ps(lane_mask_bits(n))}; }

  // ---- arithmetic -----------------------------------------------------------
  DVM_SIMD_INLINE static VecAvx2 add(VecAvx2 a, VecAvx2 b) { return {_mm256_add_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 sub(VecAvx2 a, VecAvx2 b) { return {_mm256_sub_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 mul(VecAvx2 a, VecAvx2 b) { return {_mm256_mul_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 div(VecAvx2 a, VecAvx2 b) { return {_mm256_div_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 fma(VecAvx2 a, VecAvx2 b, VecAvx2 c) {
    return {_mm256_fmadd_ps(a.v, b.v, c.v)};
  }
  DVM_SIMD_INLINE static VecAvx2 fnma(VecAvx2 a, VecAvx2 b, VecAvx2 c) {
    return {_mm256_fnmadd_ps(a.v, b.v, c.v)};
  }
  DVM_SIMD_INLINE static VecAvx2 min(VecAvx2 a, VecAvx2 b) { return {_mm256_min_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 max(VecAvx2 a, VecAvx2 b) { return {_mm256_max_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 sqrt(VecAvx2 a) { return {_mm256_sqrt_ps(a.v)}; }
  DVM_SIMD_INLINE static VecAvx2 abs(VecAvx2 a) { return bit_andnot(splat(-0.0f), a); }
  DVM_SIMD_INLINE static VecAvx2 neg(VecAvx2 a) { return bit_xor(a, splat(-0.0f)); }

  // ---- bits -----------------------------------------------------------------
  DVM_SIMD_INLINE static VecAvx2 bit_and(VecAvx2 a, VecAvx2 b) { return {_mm256_and_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 bit_or(VecAvx2 a, VecAvx2 b) { return {_mm256_or_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 bit_xor(VecAvx2 a, VecAvx2 b) { return {_mm256_xor_ps(a.v, b.v)}; }
  DVM_SIMD_INLINE static VecAvx2 bit_andnot(VecAvx2 a, VecAvx2 b) {
    return {_mm256_andnot_ps(a.v, b.v)};
  }
  DVM_SIMD_INLINE static VecAvx2 bit_or_and(VecAvx2 a, VecAvx2 b, VecAvx2 c) {
    return bit_or(a, bit_and(b, c));
  }

  // ---- rounding (vroundps) --------------------------------------------------
  DVM_SIMD_INLINE static VecAvx2 round_even(VecAvx2 a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx2 floor(VecAvx2 a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx2 ceil(VecAvx2 a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_POS_INF | _MM_FROUND_NO_EXC)};
  }
  DVM_SIMD_INLINE static VecAvx2 trunc(VecAvx2 a) {
    return {_mm256_round_ps(a.v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)};
  }

  // ---- comparisons and masks ------------------------------------------------
  DVM_SIMD_INLINE static Mask eq(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ)}; }
  DVM_SIMD_INLINE static Mask ne(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_NEQ_UQ)}; }
  DVM_SIMD_INLINE static Mask lt(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
  DVM_SIMD_INLINE static Mask le(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LE_OQ)}; }
  DVM_SIMD_INLINE static Mask gt(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)}; }
  DVM_SIMD_INLINE static Mask ge(VecAvx2 a, VecAvx2 b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GE_OQ)}; }
  DVM_SIMD_INLINE static Mask unord(VecAvx2 a, VecAvx2 b) {
    return {_mm256_cmp_ps(a.v, b.v, _CMP_UNORD_Q)};
  }
  DVM_SIMD_INLINE static Mask mask_and(Mask a, Mask b) { return {_mm256_and_ps(a.m, b.m)}; }
  DVM_SIMD_INLINE static Mask mask_or(Mask a, Mask b) { return {_mm256_or_ps(a.m, b.m)}; }
  // vxorps with all-ones (vcmpps TRUE_UQ of any register makes them).
  DVM_SIMD_INLINE static Mask mask_not(Mask a) {
    return {_mm256_xor_ps(a.m, _mm256_castsi256_ps(_mm256_set1_epi32(-1)))};
  }
  // vblendvps: a where the mask lane's sign bit is set, else b.
  DVM_SIMD_INLINE static VecAvx2 select(Mask m, VecAvx2 a, VecAvx2 b) {
    return {_mm256_blendv_ps(b.v, a.v, m.m)};
  }
  DVM_SIMD_INLINE static VecAvx2 scale_pow2(VecAvx2 y, VecAvx2 n) {
    return scale_pow2_halves(y, n);
  }

  // ---- int32 lanes ----------------------------------------------------------
  DVM_SIMD_INLINE static Int isplat(int32_t x) { return {_mm256_set1_epi32(x)}; }
  DVM_SIMD_INLINE static Int as_int(VecAvx2 a) { return {_mm256_castps_si256(a.v)}; }
  DVM_SIMD_INLINE static VecAvx2 as_float(Int a) { return {_mm256_castsi256_ps(a.i)}; }
  DVM_SIMD_INLINE static Int cvt_round(VecAvx2 a) { return {_mm256_cvtps_epi32(a.v)}; }
  DVM_SIMD_INLINE static VecAvx2 cvt_float(Int a) { return {_mm256_cvtepi32_ps(a.i)}; }
  DVM_SIMD_INLINE static Int iadd(Int a, Int b) { return {_mm256_add_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int isub(Int a, Int b) { return {_mm256_sub_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int iand(Int a, Int b) { return {_mm256_and_si256(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int imul(Int a, Int b) { return {_mm256_mullo_epi32(a.i, b.i)}; }
  DVM_SIMD_INLINE static Int cvt_trunc(VecAvx2 a) { return {_mm256_cvttps_epi32(a.v)}; }
  template <int k>
  DVM_SIMD_INLINE static Int shl(Int a) {
    return {_mm256_slli_epi32(a.i, k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int shr(Int a) {
    return {_mm256_srli_epi32(a.i, k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int sra(Int a) {
    return {_mm256_srai_epi32(a.i, k)};
  }
  DVM_SIMD_INLINE static Mask ieq(Int a, Int b) {
    return {_mm256_castsi256_ps(_mm256_cmpeq_epi32(a.i, b.i))};
  }
  DVM_SIMD_INLINE static Mask igt(Int a, Int b) {
    return {_mm256_castsi256_ps(_mm256_cmpgt_epi32(a.i, b.i))};
  }
  // Four lanes at a time in double (vec_scalar.h says why it is exact).
  DVM_SIMD_INLINE static __m128i floordiv4(__m128i a, __m128i b) {
    const __m256d q = _mm256_div_pd(_mm256_cvtepi32_pd(a), _mm256_cvtepi32_pd(b));
    return _mm256_cvttpd_epi32(_mm256_round_pd(q, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC));
  }
  DVM_SIMD_INLINE static Int ifloordiv(Int a, Int b) {
    const __m128i lo = floordiv4(_mm256_castsi256_si128(a.i), _mm256_castsi256_si128(b.i));
    const __m128i hi = floordiv4(_mm256_extracti128_si256(a.i, 1), _mm256_extracti128_si256(b.i, 1));
    return {_mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1)};
  }

  // ---- horizontal reductions ------------------------------------------------
  // 8 -> 4: vextractf128 hi, op(lo, hi); 4 -> 2: vmovhlps, op; 2 -> 1:
  // vmovshdup, op (scalar op on lane 0 is fine: only lane 0 is used).
  DVM_SIMD_INLINE static __m128 max4(__m128 lo, __m128 hi) {  // NaN-propagating
    __m128 r = _mm_max_ps(lo, hi);
    return _mm_blendv_ps(r, lo, _mm_cmp_ps(lo, lo, _CMP_UNORD_Q));
  }
  DVM_SIMD_INLINE static __m128 min4(__m128 lo, __m128 hi) {  // NaN-propagating
    __m128 r = _mm_min_ps(lo, hi);
    return _mm_blendv_ps(r, lo, _mm_cmp_ps(lo, lo, _CMP_UNORD_Q));
  }
  DVM_SIMD_INLINE static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ps(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  DVM_SIMD_INLINE static float hmax8(__m256 v) {
    __m128 s = max4(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = max4(s, _mm_movehl_ps(s, s));
    s = max4(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  DVM_SIMD_INLINE static float hmin8(__m256 v) {
    __m128 s = min4(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = min4(s, _mm_movehl_ps(s, s));
    s = min4(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  DVM_SIMD_INLINE static float hsum(VecAvx2 a) { return hsum8(a.v); }
  DVM_SIMD_INLINE static float hmax(VecAvx2 a) { return hmax8(a.v); }
  DVM_SIMD_INLINE static float hmin(VecAvx2 a) { return hmin8(a.v); }
};

}  // namespace dvm::simd
