// The one-lane SIMD value type: plain scalar C++ whose IEEE single-precision
// semantics define, lane by lane, what every SIMD type computes.
//
// ===========================================================================
// The SIMD primitive contract (shared by VecScalar, VecAvx2, VecAvx512 and the
// JIT's IR-recording type)
// ===========================================================================
// Style: a type V is a small value struct (one register); every operation is a
// STATIC MEMBER FUNCTION of V, called as V::add(a, b). Math templates in
// backends/math/vmath.h use nothing else, so the JIT can instantiate them with
// a V whose static members record IR instead of executing, and the
// interpreter and the JIT then compute bit-identical results by construction.
// Each primitive below is one IEEE operation per lane with one rounding
// (round to nearest even) unless it says otherwise; which instruction
// implements it is the implementing type's business (the x86 mapping is in
// vec_avx2.h).
//
// Every V provides:
//   static constexpr int kLanes;         floats per register
//   struct Mask;                         one predicate per lane
//   struct Int;                          kLanes int32 lanes (same register)
//
//   float lanes
//   splat(float)                         every lane = the value
//   load(p) / store(p, v)                kLanes consecutive floats, unaligned
//   load_partial(p, n)                   lanes < n from p; lanes >= n read as 0
//                                        and never touch memory there
//   store_partial(p, v, n)               writes lanes < n only
//   tail_mask(n)                         Mask of lanes < n (0 <= n <= kLanes)
//   add sub mul div sqrt                 IEEE, correctly rounded
//   fma(a, b, c)                         a*b+c, one rounding
//   fnma(a, b, c)                        c-a*b, one rounding (the same bits as
//                                        fma(neg(a), b, c))
//   min(a, b) / max(a, b)                a<b?a:b / a>b?a:b, so b is returned if
//                                        either is NaN and for +0/-0 ties. Put
//                                        the value whose NaN must survive
//                                        SECOND.
//   abs(a)                               clears the sign bit (andnot -0.0f)
//   neg(a)                               flips the sign bit (xor -0.0f)
//   bit_and bit_or bit_xor               bitwise on the 32-bit patterns
//   bit_andnot(a, b) = ~a & b            first operand inverted
//   bit_or_and(a, b, c) = a | (b & c)    one op where the target fuses it, else
//                                        bit_and then bit_or (same bits)
//   round_even floor ceil trunc          to an integral float: nearest with
//                                        ties to even, down, up, toward zero;
//                                        NaN stays NaN, no exceptions raised
//   eq ne lt le gt ge unord -> Mask      IEEE comparisons: eq lt le gt ge are
//                                        false when either is NaN, ne is true
//                                        then (not equal or unordered), unord
//                                        is true exactly when either is NaN;
//                                        -0 == +0
//   mask_and mask_or mask_not            per-lane logic on masks
//   select(m, a, b) = m ? a : b          per lane
//   scale_pow2(y, n) = y * 2^n           n an integral float in [-150, 128], one
//                                        rounding (subnormal results included):
//                                        one op where the target has it, else
//                                        in halves (scale_pow2.h)
//
//   int32 lanes
//   isplat(int32_t)                      every lane = the value
//   as_int(V) / as_float(Int)            bit reinterpretation (no operation)
//   cvt_round(V) -> Int                  nearest-even; NaN / out of range ->
//                                        INT32_MIN
//   cvt_float(Int) -> V                  nearest-even
//   iadd isub iand                       wrapping add and subtract, bitwise and
//   imul                                 wrapping multiply (the low 32 bits)
//   cvt_trunc(V) -> Int                  toward zero; NaN / out of range ->
//                                        INT32_MIN (convert.h's f32_to_i32)
//   shl<k> shr<k> sra<k>                 shift left, logical right, arithmetic
//                                        right
//   ieq igt -> Mask                      equal, greater (signed)
//   ifloordiv(a, b) -> Int               floor(a / b), exact: both converted to
//                                        double, divided, floored, truncated
//                                        back; a quotient outside int32
//                                        (INT32_MIN / -1, b = 0) gives
//                                        INT32_MIN
//
//   horizontal reductions (fixed tree; the JIT must mirror it exactly)
//   hsum hmax hmin -> float              16 lanes: lane j (+) lane j+8, j<8;
//                                        then j (+) j+4, j<4; then j (+) j+2,
//                                        j<2; then lane 0 (+) lane 1. 8 lanes
//                                        start at the second step; 1 lane is
//                                        the value itself. "(+)" is add for
//                                        hsum; for hmax/hmin it is the
//                                        NaN-propagating torch.maximum /
//                                        torch.minimum step:
//                                          r = max(lo, hi)   (min)
//                                          r = select(unord(lo, lo), lo, r)
//                                        with lo the lower-lane half.
//
// Assumptions: the floating-point environment in its default state (round to
// nearest even, subnormals neither flushed nor treated as zero, exceptions
// masked) — exactly what std::nearbyint & co. see in VecScalar.
// Alias rule for kernels built on these types: a destination may be the same
// pointer as a source, but must not partially overlap it.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "backends/simd/scale_pow2.h"

#ifndef DVM_SIMD_INLINE
#define DVM_SIMD_INLINE [[gnu::always_inline]] inline
#endif

namespace dvm::simd {

struct VecScalar {
  static constexpr int kLanes = 1;
  struct Mask {
    bool m;
  };
  struct Int {
    int32_t i;
  };

  float v;

  // ---- memory ---------------------------------------------------------------
  DVM_SIMD_INLINE static VecScalar splat(float x) { return {x}; }
  DVM_SIMD_INLINE static VecScalar load(const float* p) { return {*p}; }
  DVM_SIMD_INLINE static void store(float* p, VecScalar a) { *p = a.v; }
  DVM_SIMD_INLINE static VecScalar load_partial(const float* p, int n) {
    return {n > 0 ? *p : 0.0f};
  }
  DVM_SIMD_INLINE static void store_partial(float* p, VecScalar a, int n) {
    if (n > 0) *p = a.v;
  }
  DVM_SIMD_INLINE static Mask tail_mask(int n) { return {n > 0}; }

  // ---- arithmetic -----------------------------------------------------------
  DVM_SIMD_INLINE static VecScalar add(VecScalar a, VecScalar b) { return {a.v + b.v}; }
  DVM_SIMD_INLINE static VecScalar sub(VecScalar a, VecScalar b) { return {a.v - b.v}; }
  DVM_SIMD_INLINE static VecScalar mul(VecScalar a, VecScalar b) { return {a.v * b.v}; }
  DVM_SIMD_INLINE static VecScalar div(VecScalar a, VecScalar b) { return {a.v / b.v}; }
  DVM_SIMD_INLINE static VecScalar fma(VecScalar a, VecScalar b, VecScalar c) {
    return {std::fma(a.v, b.v, c.v)};
  }
  DVM_SIMD_INLINE static VecScalar fnma(VecScalar a, VecScalar b, VecScalar c) {
    return {std::fma(-a.v, b.v, c.v)};
  }
  // The second operand unless the comparison is true.
  DVM_SIMD_INLINE static VecScalar min(VecScalar a, VecScalar b) { return {a.v < b.v ? a.v : b.v}; }
  DVM_SIMD_INLINE static VecScalar max(VecScalar a, VecScalar b) { return {a.v > b.v ? a.v : b.v}; }
  DVM_SIMD_INLINE static VecScalar sqrt(VecScalar a) { return {std::sqrt(a.v)}; }
  DVM_SIMD_INLINE static VecScalar abs(VecScalar a) { return bit_andnot(splat(-0.0f), a); }
  DVM_SIMD_INLINE static VecScalar neg(VecScalar a) { return bit_xor(a, splat(-0.0f)); }

  // ---- bits -----------------------------------------------------------------
  DVM_SIMD_INLINE static VecScalar bit_and(VecScalar a, VecScalar b) {
    return as_float({as_int(a).i & as_int(b).i});
  }
  DVM_SIMD_INLINE static VecScalar bit_or(VecScalar a, VecScalar b) {
    return as_float({as_int(a).i | as_int(b).i});
  }
  DVM_SIMD_INLINE static VecScalar bit_xor(VecScalar a, VecScalar b) {
    return as_float({as_int(a).i ^ as_int(b).i});
  }
  DVM_SIMD_INLINE static VecScalar bit_andnot(VecScalar a, VecScalar b) {
    return as_float({~as_int(a).i & as_int(b).i});
  }
  DVM_SIMD_INLINE static VecScalar bit_or_and(VecScalar a, VecScalar b, VecScalar c) {
    return bit_or(a, bit_and(b, c));
  }

  // ---- rounding -------------------------------------------------------------
  // nearbyint honours the current rounding mode, which the contract assumes is
  // the default round-to-nearest-even.
  DVM_SIMD_INLINE static VecScalar round_even(VecScalar a) { return {std::nearbyint(a.v)}; }
  DVM_SIMD_INLINE static VecScalar floor(VecScalar a) { return {std::floor(a.v)}; }
  DVM_SIMD_INLINE static VecScalar ceil(VecScalar a) { return {std::ceil(a.v)}; }
  DVM_SIMD_INLINE static VecScalar trunc(VecScalar a) { return {std::trunc(a.v)}; }

  // ---- comparisons and masks ------------------------------------------------
  DVM_SIMD_INLINE static Mask eq(VecScalar a, VecScalar b) { return {a.v == b.v}; }
  DVM_SIMD_INLINE static Mask ne(VecScalar a, VecScalar b) { return {!(a.v == b.v)}; }
  DVM_SIMD_INLINE static Mask lt(VecScalar a, VecScalar b) { return {a.v < b.v}; }
  DVM_SIMD_INLINE static Mask le(VecScalar a, VecScalar b) { return {a.v <= b.v}; }
  DVM_SIMD_INLINE static Mask gt(VecScalar a, VecScalar b) { return {a.v > b.v}; }
  DVM_SIMD_INLINE static Mask ge(VecScalar a, VecScalar b) { return {a.v >= b.v}; }
  DVM_SIMD_INLINE static Mask unord(VecScalar a, VecScalar b) {
    return {std::isnan(a.v) || std::isnan(b.v)};
  }
  DVM_SIMD_INLINE static Mask mask_and(Mask a, Mask b) { return {a.m && b.m}; }
  DVM_SIMD_INLINE static Mask mask_or(Mask a, Mask b) { return {a.m || b.m}; }
  DVM_SIMD_INLINE static Mask mask_not(Mask a) { return {!a.m}; }
  DVM_SIMD_INLINE static VecScalar select(Mask m, VecScalar a, VecScalar b) {
    return m.m ? a : b;
  }
  DVM_SIMD_INLINE static VecScalar scale_pow2(VecScalar y, VecScalar n) {
    return scale_pow2_halves(y, n);
  }

  // ---- int32 lanes ----------------------------------------------------------
  DVM_SIMD_INLINE static Int isplat(int32_t x) { return {x}; }
  DVM_SIMD_INLINE static Int as_int(VecScalar a) { return {std::bit_cast<int32_t>(a.v)}; }
  DVM_SIMD_INLINE static VecScalar as_float(Int a) { return {std::bit_cast<float>(a.i)}; }
  // Nearest-even; NaN and out-of-range give INT32_MIN.
  DVM_SIMD_INLINE static Int cvt_round(VecScalar a) {
    float r = std::nearbyint(a.v);
    if (!(r >= -2147483648.0f && r < 2147483648.0f)) return {INT32_MIN};
    return {static_cast<int32_t>(r)};
  }
  DVM_SIMD_INLINE static VecScalar cvt_float(Int a) { return {static_cast<float>(a.i)}; }
  // Wrapping arithmetic.
  DVM_SIMD_INLINE static Int iadd(Int a, Int b) {
    return {static_cast<int32_t>(static_cast<uint32_t>(a.i) + static_cast<uint32_t>(b.i))};
  }
  DVM_SIMD_INLINE static Int isub(Int a, Int b) {
    return {static_cast<int32_t>(static_cast<uint32_t>(a.i) - static_cast<uint32_t>(b.i))};
  }
  DVM_SIMD_INLINE static Int iand(Int a, Int b) { return {a.i & b.i}; }
  DVM_SIMD_INLINE static Int imul(Int a, Int b) {
    return {static_cast<int32_t>(static_cast<uint32_t>(a.i) * static_cast<uint32_t>(b.i))};
  }
  // Toward zero; NaN and out-of-range give INT32_MIN.
  DVM_SIMD_INLINE static Int cvt_trunc(VecScalar a) {
    if (!(a.v >= -2147483648.0f && a.v < 2147483648.0f)) return {INT32_MIN};
    return {static_cast<int32_t>(a.v)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int shl(Int a) {
    return {static_cast<int32_t>(static_cast<uint32_t>(a.i) << k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int shr(Int a) {
    return {static_cast<int32_t>(static_cast<uint32_t>(a.i) >> k)};
  }
  template <int k>
  DVM_SIMD_INLINE static Int sra(Int a) {
    return {a.i >> k};  // arithmetic in C++20
  }
  DVM_SIMD_INLINE static Mask ieq(Int a, Int b) { return {a.i == b.i}; }
  DVM_SIMD_INLINE static Mask igt(Int a, Int b) { return {a.i > b.i}; }
  // |fl(a/b) - a/b| <= |a/b| 2^-53 < 2^-22/|b| < 1/|b|, the distance from a
  // non-integer a/b to the nearest integer: floor sees the exact quotient.
  DVM_SIMD_INLINE static Int ifloordiv(Int a, Int b) {
    if (b.i == 0) return {INT32_MIN};  // the SIMD types' division gives +-inf or NaN
    const double q = std::floor(static_cast<double>(a.i) / static_cast<double>(b.i));
    if (!(q >= -2147483648.0 && q < 2147483648.0)) return {INT32_MIN};
    return {static_cast<int32_t>(q)};
  }

  // ---- horizontal reductions (one lane: the value itself) --------------------
  DVM_SIMD_INLINE static float hsum(VecScalar a) { return a.v; }
  DVM_SIMD_INLINE static float hmax(VecScalar a) { return a.v; }
  DVM_SIMD_INLINE static float hmin(VecScalar a) { return a.v; }
};

}  // namespace dvm::simd
