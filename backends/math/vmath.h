// The one math library of dvm: every transcendental as a template over a SIMD
// type V (backends/simd/vec_scalar.h documents the primitive contract).
//
// Rules that make the interpreter and the JIT bit-identical: straight-line code
// over V's primitives only (no data-dependent branch: both sides are computed
// and merged with compare + select), constants only via V::splat, the same
// sequence for every V, and no contraction (the build uses -ffp-contract=off;
// every fused multiply-add here is an explicit V::fma). Algorithms, constants
// and measured error bounds are documented in docs/MATH.md.
//
// A note on min/max: V::max(a, b) returns b when either is NaN (x86 maxps), so
// clamps are written max(constant, x): a NaN x passes through the clamp.
#pragma once

#include <cstdint>
#include <limits>

#ifndef DVM_SIMD_INLINE
#define DVM_SIMD_INLINE [[gnu::always_inline]] inline
#endif

namespace dvm::math {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ---- shared helpers ------------------------------------------------------------

// torch.maximum / torch.minimum: NaN if either operand is NaN.
//   r = max(a, b)   (NaN in b, or in both, comes out of here)
//   r = select(unord(a, a), a, r)
template <class V>
DVM_SIMD_INLINE V maximum(V a, V b) {
  return V::select(V::unord(a, a), a, V::max(a, b));
}
template <class V>
DVM_SIMD_INLINE V minimum(V a, V b) {
  return V::select(V::unord(a, a), a, V::min(a, b));
}

// |a| with the sign bit of s (a must be non-negative): a | (s & -0.0f).
template <class V>
DVM_SIMD_INLINE V with_sign_of(V a, V s) {
  return V::bit_or_and(a, s, V::splat(-0.0f));
}

// ---- exp -----------------------------------------------------------------------
// x = n*ln2 + r, |r| <= ln2/2 (Cody-Waite, two-part ln2 with fma), e^r by a
// degree-6 polynomial (dvm's own minimax fit, scripts/fit_exp.py), then scaled by 2^n with one
// rounding (scale_pow2) so results in the subnormal range are rounded once,
// correctly for the polynomial value. Overflow gives +inf, exp(-inf) = +0,
// NaN -> NaN.
template <class V>
DVM_SIMD_INLINE V exp(V x) {
  x = V::max(V::splat(-104.0f), x);  // e^-104 < 2^-150: rounds to 0
  x = V::min(V::splat(89.0f), x);    // e^89 > FLT_MAX: becomes +inf below
  V n = V::round_even(V::mul(x, V::splat(1.44269504088896341f)));
  V r = V::fma(n, V::splat(-0.693359375f), x);  // ln2 hi: 9 bits, n*hi exact
  r = V::fma(n, V::splat(2.12194440e-4f), r);   // -(ln2 lo)
  V p = V::splat(1.3814540580e-3f);
  p = V::fma(p, r, V::splat(8.3687454462e-3f));
  p = V::fma(p, r, V::splat(4.1668388993e-2f));
  p = V::fma(p, r, V::splat(1.6666521132e-1f));
  p = V::fma(p, r, V::splat(4.9999994040e-1f));
  V y = V::add(V::fma(p, V::mul(r, r), r), V::splat(1.0f));
  // n in [-150, 128]: y * 2^n rounded once, so subnormal results are
  // correctly rounded for the polynomial value (one op, or in halves).
  return V::scale_pow2(y, n);
}

// ---- log -----------------------------------------------------------------------
// x = 2^e * m with m in [sqrt(1/2), sqrt(2)) (subnormals pre-scaled by 2^23),
// log(m) = f - f^2/2 + f^3 P(f) with f = m - 1 exact (Cephes logf
// coefficients), plus e*ln2 in two parts. log(0) = -inf, log(x<0) = NaN,
// log(inf) = inf, NaN -> NaN.
template <class V>
DVM_SIMD_INLINE V log(V x) {
  using I = typename V::Int;
  using M = typename V::Mask;
  M tiny = V::lt(x, V::splat(1.17549435e-38f));  // subnormal (or <= 0)
  V xs = V::select(tiny, V::mul(x, V::splat(8388608.0f)), x);
  I bits = V::as_int(xs);
  // exponent with m in [0.5, 1): e = (bits >> 23) - 126
  V e = V::cvt_float(V::isub(V::template shr<23>(bits), V::isplat(126)));
  e = V::sub(e, V::select(tiny, V::splat(23.0f), V::splat(0.0f)));
  V m = V::as_float(V::iadd(V::iand(bits, V::isplat(0x007fffff)), V::isplat(0x3f000000)));
  M low = V::lt(m, V::splat(0.707106781186547524f));
  e = V::sub(e, V::select(low, V::splat(1.0f), V::splat(0.0f)));
  V f = V::sub(V::select(low, V::add(m, m), m), V::splat(1.0f));  // exact
  V z = V::mul(f, f);
  V p = V::splat(7.0376836292e-2f);
  p = V::fma(p, f, V::splat(-1.1514610310e-1f));
  p = V::fma(p, f, V::splat(1.1676998740e-1f));
  p = V::fma(p, f, V::splat(-1.2420140846e-1f));
  p = V::fma(p, f, V::splat(1.4249322787e-1f));
  p = V::fma(p, f, V::splat(-1.6668057665e-1f));
  p = V::fma(p, f, V::splat(2.0000714765e-1f));
  p = V::fma(p, f, V::splat(-2.4999993993e-1f));
  p = V::fma(p, f, V::splat(3.3333331174e-1f));
  V y = V::mul(V::mul(p, f), z);                  // f^3 P(f)
  y = V::fma(e, V::splat(-2.12194440e-4f), y);    // e * ln2 lo
  y = V::fma(z, V::splat(-0.5f), y);              // - f^2/2
  V r = V::add(f, y);
  r = V::fma(e, V::splat(0.693359375f), r);       // e * ln2 hi (exact product)
  r = V::select(V::eq(x, V::splat(0.0f)), V::splat(-kInf), r);
  r = V::select(V::lt(x, V::splat(0.0f)), V::splat(kNaN), r);
  r = V::select(V::eq(x, V::splat(kInf)), V::splat(kInf), r);
  return V::select(V::unord(x, x), x, r);
}

// ---- tanh ----------------------------------------------------------------------
// Double angle on a = min(|x|, 9.5) (NaN passes), sign restored at the end:
// T = 2 tanh(a/2) ~ a + a z r(z)/q(z), z = a^2 (r degree 2, q degree 3,
// q(0) = 1; dvm's own fit, scripts/fit_tanh.py), then tanh = T / (1 + T^2/4)
// evaluated as the correction T - T w, w = T^2 / (4 + T^2): a divide by a
// value just above 1 would cost up to 2.5 ULP for small x, the small w does
// not; at large |x| T's errors are damped by sech(x). No exp, no branch.
// Worst case 1.84 ULP over every float of |x| <= 10 (x = 2.62055516); beyond
// 9.5 the result is exactly +-1.
template <class V>
DVM_SIMD_INLINE V tanh(V x) {
  V a = V::min(V::splat(9.5f), V::abs(x));
  V z = V::mul(a, a);
  V r = V::splat(-2.790039844e-06f);
  r = V::fma(r, z, V::splat(-1.250508009e-03f));
  r = V::fma(r, z, V::splat(-8.333333582e-02f));
  V q = V::splat(2.883853085e-06f);
  q = V::fma(q, z, V::splat(1.415046980e-03f));
  q = V::fma(q, z, V::splat(1.150060818e-01f));
  q = V::fma(q, z, V::splat(1.0f));
  V t = V::fma(V::mul(a, z), V::div(r, q), a);
  V u = V::mul(t, t);
  V w = V::div(u, V::add(u, V::splat(4.0f)));
  return with_sign_of(V::fnma(t, w, t), x);
}

// ---- tanh rounded to bfloat16 ----------------------------------------------------
// For a tanh whose value is only ever stored as bfloat16 (the JIT's fast
// path, docs/MATH.md "tanh stored as bfloat16"): a candidate with one divide,
// y = c P(z) / Q(z) with c = x clamped to [-9, 9] (NaN passes), z = c^2, P
// degree 3 and Q degree 4 with P(0) = Q(0) = 1 (dvm's own fit,
// scripts/fit_tanh_bf16.py). Over every float, y's bit pattern is within
// kTanhBf16Slack of tanh(x)'s (tests/backends/test_math_bf16_tanh.cpp), so
// where y is not within that slack of a bfloat16 rounding midpoint both
// round to the same bfloat16. tanh_bf16_unsure names the other lanes; those
// take tanh(x) itself, which keeps the result bit-identical to the
// interpreter's.
inline constexpr int32_t kTanhBf16Slack = 15;
// The lanes whose low 16 bits lie in [0x8000 - slack, 0x8000 - slack + 32):
// the window is a power of two wide so that one add and one mask test it.
inline constexpr int32_t kTanhBf16Window = 32;
static_assert(kTanhBf16Window >= 2 * kTanhBf16Slack + 1);

template <class V>
DVM_SIMD_INLINE V tanh_bf16_candidate(V x) {
  V c = V::max(V::splat(-9.0f), V::min(V::splat(9.0f), x));
  V z = V::mul(c, c);
  V p = V::splat(1.047553542e-05f);
  p = V::fma(p, z, V::splat(2.860993147e-03f));
  p = V::fma(p, z, V::splat(1.284143180e-01f));
  p = V::fma(p, z, V::splat(1.0f));
  V q = V::splat(2.160028600e-07f);
  q = V::fma(q, z, V::splat(2.260451874e-04f));
  q = V::fma(q, z, V::splat(2.344578877e-02f));
  q = V::fma(q, z, V::splat(4.617457390e-01f));
  q = V::fma(q, z, V::splat(1.0f));
  return V::div(V::mul(c, p), q);
}

template <class V>
DVM_SIMD_INLINE typename V::Mask tanh_bf16_unsure(V y) {
  using I = typename V::Int;
  I v = V::iadd(V::as_int(y), V::isplat(kTanhBf16Slack - 0x8000));
  I low = V::iand(v, V::isplat(0xffff & ~(kTanhBf16Window - 1)));
  return V::ieq(low, V::isplat(0));
}

// ---- sigmoid -------------------------------------------------------------------
// e = exp(-|x|) never overflows; x >= 0: 1 / (1 + e), x < 0: e / (1 + e).
template <class V>
DVM_SIMD_INLINE V sigmoid(V x) {
  V e = exp(V::bit_or(x, V::splat(-0.0f)));  // -|x| in one op: the sign bit set
  V num = V::select(V::ge(x, V::splat(0.0f)), V::splat(1.0f), e);
  return V::div(num, V::add(V::splat(1.0f), e));
}

// ---- erf -----------------------------------------------------------------------
// |x| < 0.875: erf(x) = x + x*P(x^2), P ~ erf(x)/x - 1 (degree 5 in x^2).
// |x| >= 0.875: erfc(|x|) = exp(Q(min(|x|, 4))), Q ~ log(erfc) (degree 10), and
// erf = sign(x) * (1 - erfc). Both are dvm's own Chebyshev fits (docs/MATH.md).
// erfc(4) < 2^-25, so the clamp makes erf exactly +-1 from there on.
template <class V>
struct ErfParts {
  V small;  // valid for |x| < kErfSplit
  V erfc;   // erfc(min(|x|, 4)), valid for |x| >= kErfSplit
};
inline constexpr float kErfSplit = 0.875f;

template <class V>
DVM_SIMD_INLINE ErfParts<V> erf_parts(V x) {
  V s = V::mul(x, x);
  V p = V::splat(-6.214585362e-04f);
  p = V::fma(p, s, V::splat(5.034370663e-03f));
  p = V::fma(p, s, V::splat(-2.679294778e-02f));
  p = V::fma(p, s, V::splat(1.128249660e-01f));
  p = V::fma(p, s, V::splat(-3.761255451e-01f));
  p = V::fma(p, s, V::splat(1.283791581e-01f));
  V small = V::fma(x, p, x);
  V t = V::min(V::splat(4.0f), V::abs(x));  // NaN passes
  V q = V::splat(-5.492606010e-08f);
  q = V::fma(q, t, V::splat(1.316792617e-06f));
  q = V::fma(q, t, V::splat(-1.226121423e-05f));
  q = V::fma(q, t, V::splat(3.890985491e-05f));
  q = V::fma(q, t, V::splat(2.638704461e-04f));
  q = V::fma(q, t, V::splat(-3.886437908e-03f));
  q = V::fma(q, t, V::splat(2.486948507e-02f));
  q = V::fma(q, t, V::splat(-1.082353880e-01f));
  q = V::fma(q, t, V::splat(-6.332303787e-01f));
  q = V::fma(q, t, V::splat(-1.129615074e+00f));
  q = V::fma(q, t, V::splat(2.005018758e-04f));
  return {small, exp(q)};
}

template <class V>
DVM_SIMD_INLINE V erf(V x) {
  ErfParts<V> parts = erf_parts(x);
  V big = with_sign_of(V::sub(V::splat(1.0f), parts.erfc), x);
  return V::select(V::lt(V::abs(x), V::splat(kErfSplit)), parts.small, big);
}

// ---- sin / cos -----------------------------------------------------------------
// On a = |x| (sin is odd: x's sign bit is xor-ed back in; cos is even):
// q = round(a * 2/pi), r = a - q*pi/2 with a three-part pi/2 and fma (the
// first step is exact), then the sin or cos polynomial on r (Cephes sinf/cosf
// coefficients) chosen by q's parity, negated when q & 2.
// Accurate to ~1.5 ULP for |x| <= 1e4 (the tested range) and up to about
// 2e5. Beyond, a*2/pi is rounded too coarsely to pick the nearest q, r leaves
// [-pi/4, pi/4] and is clamped to [-0.8, 0.8]: the result is then inaccurate
// (docs/MATH.md has figures) but always in [-1, 1], never NaN for finite x.
// sin/cos(+-inf) and NaN give NaN.
template <class V>
DVM_SIMD_INLINE V sincos_impl(V x, bool is_cos) {
  using I = typename V::Int;
  V a = V::abs(x);
  V q = V::round_even(V::mul(a, V::splat(0.636619772367581343f)));
  // pi/2 = P1 + P2 + P3 (+1e-23): P1 = fl(pi/2), P2 = fl(pi/2 - P1), P3 = fl(rest)
  V r = V::fma(q, V::splat(-1.57079637050628662109375f), a);
  r = V::fma(q, V::splat(4.371138828673793e-8f), r);
  r = V::fma(q, V::splat(1.7151245100058819e-15f), r);
  r = V::max(V::splat(-0.8f), r);  // NaN passes
  r = V::min(V::splat(0.8f), r);
  I qi = V::cvt_round(q);
  if (is_cos) qi = V::iadd(qi, V::isplat(1));  // cos(a) = sin(a + pi/2); not data-dependent
  V z = V::mul(r, r);
  V ps = V::splat(-1.9515295891e-4f);
  ps = V::fma(ps, z, V::splat(8.3321608736e-3f));
  ps = V::fma(ps, z, V::splat(-1.6666654611e-1f));
  V s = V::fma(ps, V::mul(z, r), r);
  V pc = V::splat(2.443315711809948e-5f);
  pc = V::fma(pc, z, V::splat(-1.388731625493765e-3f));
  pc = V::fma(pc, z, V::splat(4.166664568298827e-2f));
  V c = V::fma(pc, V::mul(z, z), V::fma(z, V::splat(-0.5f), V::splat(1.0f)));
  V res = V::select(V::ieq(V::iand(qi, V::isplat(1)), V::isplat(0)), s, c);
  V sign = V::as_float(V::template shl<30>(V::iand(qi, V::isplat(2))));
  if (!is_cos) sign = V::bit_xor(sign, V::bit_and(x, V::splat(-0.0f)));
  return V::bit_xor(res, sign);
}
template <class V>
DVM_SIMD_INLINE V sin(V x) {
  return sincos_impl(x, false);
}
template <class V>
DVM_SIMD_INLINE V cos(V x) {
  return sincos_impl(x, true);
}

// ---- pow -----------------------------------------------------------------------
// |a|^b = exp(b * log|a|); relative error about (2 + 3|b log|a||) * 2^-24, see
// docs/MATH.md. torch/C99 semantics on top: pow(x, 0) = 1 and pow(1, y) = 1
// (even for NaN), pow(-1, +-inf) = 1, a negative base with an odd integer
// exponent takes the base's sign (also -0 and -inf), a finite negative base
// with a non-integer exponent is NaN, pow(+-0, b<0) = inf.
template <class V>
DVM_SIMD_INLINE V pow(V a, V b) {
  using M = typename V::Mask;
  V r = exp(V::mul(b, log(V::abs(a))));
  M is_int = V::eq(V::trunc(b), b);  // inf counts as an (even) integer
  V half = V::mul(b, V::splat(0.5f));
  M is_odd = V::mask_and(is_int, V::ne(V::trunc(half), half));
  r = V::select(is_odd, with_sign_of(r, a), r);
  M neg_finite = V::mask_and(V::lt(a, V::splat(0.0f)), V::gt(a, V::splat(-kInf)));
  r = V::select(V::mask_and(neg_finite, V::mask_not(is_int)), V::splat(kNaN), r);
  M one = V::mask_or(V::eq(a, V::splat(1.0f)),
                     V::mask_and(V::eq(a, V::splat(-1.0f)), V::eq(V::abs(b), V::splat(kInf))));
  one = V::mask_or(one, V::eq(b, V::splat(0.0f)));
  return V::select(one, V::splat(1.0f), r);
}

// ---- GELU ----------------------------------------------------------------------
// gelu_tanh(x) = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed
// as the identical x * sigmoid(2u), which has no cancellation for x < 0.
template <class V>
DVM_SIMD_INLINE V gelu_tanh(V x) {
  V x3 = V::mul(V::mul(x, x), x);
  V inner = V::fma(V::splat(0.044715f), x3, x);
  return V::mul(x, sigmoid(V::mul(inner, V::splat(1.5957691216057308f))));
}

// gelu_erf(x) = 0.5 x (1 + erf(x / sqrt 2)). For z = x/sqrt2 <= -0.875 the
// factor 1 + erf(z) is erfc(|z|), taken straight from erf's exp(Q) branch (no
// cancellation); below z = -4 (x < -5.657, |result| < 4.4e-8) it is 0.
template <class V>
DVM_SIMD_INLINE V gelu_erf(V x) {
  V z = V::mul(x, V::splat(0.7071067811865476f));
  ErfParts<V> parts = erf_parts(z);
  V one = V::splat(1.0f);
  V big = V::select(V::lt(z, V::splat(0.0f)), parts.erfc, V::sub(V::splat(2.0f), parts.erfc));
  big = V::select(V::lt(z, V::splat(-4.0f)), V::splat(0.0f), big);
  V factor = V::select(V::lt(V::abs(z), V::splat(kErfSplit)), V::add(one, parts.small), big);
  return V::mul(V::mul(x, V::splat(0.5f)), factor);
}

// ---- rsqrt / recip -------------------------------------------------------------
// Two correctly rounded operations (never the vrsqrtps / vrcpps estimates).
template <class V>
DVM_SIMD_INLINE V rsqrt(V x) {
  return V::div(V::splat(1.0f), V::sqrt(x));
}
template <class V>
DVM_SIMD_INLINE V recip(V x) {
  return V::div(V::splat(1.0f), x);
}

}  // namespace dvm::math
