// Builds a MicroKernels table from a SIMD type V: one loop template per op
// class, each op's vector body taken from backends/math/vmath.h.
//
// Include only from the per-ISA kernel files (kernels_portable.cpp,
// kernels_avx2.cpp, kernels_avx512.cpp). Everything here is a template over V,
// so the code instantiated in an ISA-flagged file never shares a symbol with
// baseline code. The table is built by a constexpr function, so defining it
// `constinit` runs no ISA-specific code at start-up.
//
// Loop shape of every element-wise kernel: full vectors, unrolled by two, then
// at most one more full vector, then ONE masked tail (load_partial /
// store_partial) — no scalar per-element remainder.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

#include "backends/convert.h"
#include "backends/math/vmath.h"
#include "backends/microkernels.h"
#include "backends/microkernels_int64.h"

namespace dvm::backends {

// The three tables, defined constinit in kernels_<isa>.cpp; handed out only by
// microkernels_for() in isa.cpp, after CPU detection.
extern const MicroKernels kMicroKernelsPortable;
extern const MicroKernels kMicroKernelsAvx2;
extern const MicroKernels kMicroKernelsAvx512;

}  // namespace dvm::backends

namespace dvm::backends::detail {

using vm::Op;

// ---- per-op vector bodies ------------------------------------------------------

// int32 lanes (the I* opcodes): a register's bits are an int32; two's
// complement arithmetic that wraps (no signed overflow: the primitives
// compute in unsigned), comparisons as 1.0f / 0.0f like the float ones.
template <class V>
DVM_SIMD_INLINE V int_lanes(typename V::Int x) { return V::as_float(x); }
template <class V>
DVM_SIMD_INLINE typename V::Int ineg(typename V::Int x) { return V::isub(V::isplat(0), x); }
template <class V>
DVM_SIMD_INLINE V iselect_gt(V a, V b, V if_gt, V else_) {  // a > b (signed) ? if_gt : else_
  return V::select(V::igt(V::as_int(a), V::as_int(b)), if_gt, else_);
}

template <class V, Op kOp>
DVM_SIMD_INLINE V unary_op(V x) {
  if constexpr (kOp == Op::NEG) return V::neg(x);
  else if constexpr (kOp == Op::ABS) return V::abs(x);
  else if constexpr (kOp == Op::EXP) return math::exp(x);
  else if constexpr (kOp == Op::LOG) return math::log(x);
  else if constexpr (kOp == Op::SQRT) return V::sqrt(x);
  else if constexpr (kOp == Op::RSQRT) return math::rsqrt(x);
  else if constexpr (kOp == Op::RECIP) return math::recip(x);
  else if constexpr (kOp == Op::TANH) return math::tanh(x);
  else if constexpr (kOp == Op::SIGMOID) return math::sigmoid(x);
  else if constexpr (kOp == Op::RELU) return V::max(V::splat(0.0f), x);  // NaN x passes
  else if constexpr (kOp == Op::GELU_TANH) return math::gelu_tanh(x);
  else if constexpr (kOp == Op::GELU_ERF) return math::gelu_erf(x);
  else if constexpr (kOp == Op::ERF) return math::erf(x);
  else if constexpr (kOp == Op::SIN) return math::sin(x);
  else if constexpr (kOp == Op::COS) return math::cos(x);
  else if constexpr (kOp == Op::FLOOR) return V::floor(x);
  else if constexpr (kOp == Op::CEIL) return V::ceil(x);
  else if constexpr (kOp == Op::ROUND) return V::round_even(x);
  else if constexpr (kOp == Op::ITOF) return V::cvt_float(V::as_int(x));
  else if constexpr (kOp == Op::FTOI) return int_lanes<V>(V::cvt_trunc(x));
  else if constexpr (kOp == Op::INEG) return int_lanes<V>(ineg<V>(V::as_int(x)));
  else if constexpr (kOp == Op::IABS)  // 0 > x ? -x : x (-INT32_MIN wraps to itself)
    return iselect_gt<V>(V::as_float(V::isplat(0)), x, int_lanes<V>(ineg<V>(V::as_int(x))), x);
  else if constexpr (kOp == Op::INOT) return V::bit_xor(x, V::as_float(V::isplat(-1)));
  else static_assert(kOp == Op::NEG, "not a unary op");
}

// Python's floor division of int32 lanes: x // 0 = 0 (ifloordiv's INT32_MIN
// replaced), INT32_MIN // -1 wraps to INT32_MIN (ifloordiv gives it).
template <class V>
DVM_SIMD_INLINE typename V::Int ifloordiv(V a, V b) {
  const typename V::Int q = V::ifloordiv(V::as_int(a), V::as_int(b));
  return V::as_int(V::select(V::ieq(V::as_int(b), V::isplat(0)), V::as_float(V::isplat(0)), V::as_float(q)));
}
// a - (a // b) * b, wrapping: the true remainder fits int32, so the low 32
// bits are it (x % 0 = x).
template <class V>
DVM_SIMD_INLINE typename V::Int irem(V a, V b) {
  return V::isub(V::as_int(a), V::imul(ifloordiv<V>(a, b), V::as_int(b)));
}

// Python's floor division and remainder of floats (torch.floor_divide and
// torch.remainder): q0 = floor(a / b), r0 = a - b * q0 in one rounding (exact
// while |a / b| < 2^24: q0 is then the true floor or one above it, and the
// residual is representable), then the true floor is q0 - 1 where r0 is
// nonzero with the sign opposite b's, and the remainder r0 + b (torch's fmod
// + b, rounded once). Beyond 2^24 the rounded quotient is used as it is.
// Specials as torch: x % 0, inf % y and NaN give NaN, x % inf = x (or inf
// with the signs apart), x // 0 = x / 0, inf // y = NaN; a zero remainder
// has a's sign (fmod's).
template <class V>
struct FloorDivMod {
  V q, r;
};
template <class V>
DVM_SIMD_INLINE FloorDivMod<V> floor_divmod(V a, V b) {
  const V zero = V::splat(0.0f);
  const V q0 = V::floor(V::div(a, b));
  const V r0 = V::select(V::eq(q0, zero), a, V::fnma(b, q0, a));  // b = inf: no inf * 0
  // r0's sign bit differs from b's (a NaN r0 takes either path: NaN stays).
  const typename V::Mask apart = V::igt(V::isplat(0), V::as_int(V::bit_xor(r0, b)));
  const typename V::Mask fix = V::mask_and(V::ne(r0, zero), apart);
  const V r1 = V::select(fix, V::add(r0, b), r0);
  const V r = V::select(V::eq(r1, zero), V::bit_and(a, V::splat(-0.0f)), r1);
  // The quotient: a / 0 as it is; NaN where the residual is (inf // y).
  const V q1 = V::select(V::unord(r0, r0), r0, V::select(fix, V::sub(q0, V::splat(1.0f)), q0));
  return {V::select(V::eq(b, zero), q0, q1), r};
}

// Comparisons give 1.0f / 0.0f: select(m, 1, 0).
template <class V>
DVM_SIMD_INLINE V bool_to_float(typename V::Mask m) {
  return V::select(m, V::splat(1.0f), V::splat(0.0f));
}

template <class V, Op kOp>
DVM_SIMD_INLINE V binary_op(V a, V b) {
  if constexpr (kOp == Op::ADD) return V::add(a, b);
  else if constexpr (kOp == Op::SUB) return V::sub(a, b);
  else if constexpr (kOp == Op::MUL) return V::mul(a, b);
  else if constexpr (kOp == Op::DIV) return V::div(a, b);
  else if constexpr (kOp == Op::MAX) return math::maximum(a, b);
  else if constexpr (kOp == Op::MIN) return math::minimum(a, b);
  else if constexpr (kOp == Op::POW) return math::pow(a, b);
  else if constexpr (kOp == Op::EQ) return bool_to_float<V>(V::eq(a, b));
  else if constexpr (kOp == Op::NE) return bool_to_float<V>(V::ne(a, b));
  else if constexpr (kOp == Op::LT) return bool_to_float<V>(V::lt(a, b));
  else if constexpr (kOp == Op::LE) return bool_to_float<V>(V::le(a, b));
  else if constexpr (kOp == Op::GT) return bool_to_float<V>(V::gt(a, b));
  else if constexpr (kOp == Op::GE) return bool_to_float<V>(V::ge(a, b));
  else if constexpr (kOp == Op::IADD) return int_lanes<V>(V::iadd(V::as_int(a), V::as_int(b)));
  else if constexpr (kOp == Op::ISUB) return int_lanes<V>(V::isub(V::as_int(a), V::as_int(b)));
  else if constexpr (kOp == Op::IMUL) return int_lanes<V>(V::imul(V::as_int(a), V::as_int(b)));
  else if constexpr (kOp == Op::IMAX) return iselect_gt<V>(a, b, a, b);
  else if constexpr (kOp == Op::IMIN) return iselect_gt<V>(a, b, b, a);
  else if constexpr (kOp == Op::IEQ) return bool_to_float<V>(V::ieq(V::as_int(a), V::as_int(b)));
  else if constexpr (kOp == Op::INE) return bool_to_float<V>(V::mask_not(V::ieq(V::as_int(a), V::as_int(b))));
  else if constexpr (kOp == Op::ILT) return bool_to_float<V>(V::igt(V::as_int(b), V::as_int(a)));
  else if constexpr (kOp == Op::ILE) return bool_to_float<V>(V::mask_not(V::igt(V::as_int(a), V::as_int(b))));
  else if constexpr (kOp == Op::IGT) return bool_to_float<V>(V::igt(V::as_int(a), V::as_int(b)));
  else if constexpr (kOp == Op::IGE) return bool_to_float<V>(V::mask_not(V::igt(V::as_int(b), V::as_int(a))));
  else if constexpr (kOp == Op::IAND) return V::bit_and(a, b);
  else if constexpr (kOp == Op::IOR) return V::bit_or(a, b);
  else if constexpr (kOp == Op::IXOR) return V::bit_xor(a, b);
  else if constexpr (kOp == Op::FLOORDIV) return floor_divmod<V>(a, b).q;
  else if constexpr (kOp == Op::REM) return floor_divmod<V>(a, b).r;
  else if constexpr (kOp == Op::IFLOORDIV) return int_lanes<V>(ifloordiv<V>(a, b));
  else if constexpr (kOp == Op::IREM) return int_lanes<V>(irem<V>(a, b));
  else static_assert(kOp == Op::ADD, "not a binary op");
}

template <class V, Op kOp>
DVM_SIMD_INLINE V ternary_op(V a, V b, V c) {
  // SELECT: (a != 0) ? b : c, with NEQ_UQ so a NaN mask counts as true.
  if constexpr (kOp == Op::SELECT) return V::select(V::ne(a, V::splat(0.0f)), b, c);
  else if constexpr (kOp == Op::FMA) return V::fma(a, b, c);
  else static_assert(kOp == Op::FMA, "not a ternary op");
}

// Reduction step acc = op(acc, x); max/min propagate NaN (torch semantics).
template <class V, Op kOp>
DVM_SIMD_INLINE V reduce_op(V acc, V x) {
  if constexpr (kOp == Op::RSUM) return V::add(acc, x);
  else if constexpr (kOp == Op::RMAX) return math::maximum(acc, x);
  else if constexpr (kOp == Op::RMIN) return math::minimum(acc, x);
  else static_assert(kOp == Op::RSUM, "not a reduction");
}

// (Templated on V too, so no symbol is shared between ISA-flagged files.)
template <class V, Op kOp>
constexpr float reduce_identity() {
  if constexpr (kOp == Op::RSUM) return 0.0f;
  else if constexpr (kOp == Op::RMAX) return -std::numeric_limits<float>::infinity();
  else return std::numeric_limits<float>::infinity();
}

// ---- loops ---------------------------------------------------------------------

// The shared loop: f(i-th vector) stored at d + i. f loads its own operands
// so that vs/sv variants share the loop with splatted scalars.
template <class V, class Body>
DVM_SIMD_INLINE void elementwise_loop(float* d, int64_t n, Body body) {
  constexpr int L = V::kLanes;
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    V y0 = body.full(i);
    V y1 = body.full(i + L);
    V::store(d + i, y0);
    V::store(d + i + L, y1);
  }
  if (i + L <= n) {
    V::store(d + i, body.full(i));
    i += L;
  }
  if constexpr (L > 1) {
    if (i < n) {
      int rem = static_cast<int>(n - i);
      V::store_partial(d + i, body.partial(i, rem), rem);
    }
  }
}

template <class V, Op kOp>
void unary_kernel(float* d, const float* a, int64_t n) {
  struct Body {
    const float* a;
    DVM_SIMD_INLINE V full(int64_t i) const { return unary_op<V, kOp>(V::load(a + i)); }
    DVM_SIMD_INLINE V partial(int64_t i, int r) const {
      return unary_op<V, kOp>(V::load_partial(a + i, r));
    }
  };
  elementwise_loop<V>(d, n, Body{a});
}

template <class V, Op kOp>
void binary_kernel(float* d, const float* a, const float* b, int64_t n) {
  struct Body {
    const float* a;
    const float* b;
    DVM_SIMD_INLINE V full(int64_t i) const {
      return binary_op<V, kOp>(V::load(a + i), V::load(b + i));
    }
    DVM_SIMD_INLINE V partial(int64_t i, int r) const {
      return binary_op<V, kOp>(V::load_partial(a + i, r), V::load_partial(b + i, r));
    }
  };
  elementwise_loop<V>(d, n, Body{a, b});
}

template <class V, Op kOp>
void binary_vs_kernel(float* d, const float* a, float b, int64_t n) {
  struct Body {
    const float* a;
    V b;
    DVM_SIMD_INLINE V full(int64_t i) const { return binary_op<V, kOp>(V::load(a + i), b); }
    DVM_SIMD_INLINE V partial(int64_t i, int r) const {
      return binary_op<V, kOp>(V::load_partial(a + i, r), b);
    }
  };
  elementwise_loop<V>(d, n, Body{a, V::splat(b)});
}

template <class V, Op kOp>
void binary_sv_kernel(float* d, float a, const float* b, int64_t n) {
  struct Body {
    V a;
    const float* b;
    DVM_SIMD_INLINE V full(int64_t i) const { return binary_op<V, kOp>(a, V::load(b + i)); }
    DVM_SIMD_INLINE V partial(int64_t i, int r) const {
      return binary_op<V, kOp>(a, V::load_partial(b + i, r));
    }
  };
  elementwise_loop<V>(d, n, Body{V::splat(a), b});
}

template <class V, Op kOp>
void ternary_kernel(float* d, const float* a, const float* b, const float* c, int64_t n) {
  struct Body {
    const float* a;
    const float* b;
    const float* c;
    DVM_SIMD_INLINE V full(int64_t i) const {
      return ternary_op<V, kOp>(V::load(a + i), V::load(b + i), V::load(c + i));
    }
    DVM_SIMD_INLINE V partial(int64_t i, int r) const {
      return ternary_op<V, kOp>(V::load_partial(a + i, r), V::load_partial(b + i, r),
                                V::load_partial(c + i, r));
    }
  };
  elementwise_loop<V>(d, n, Body{a, b, c});
}

// The canonical row-reduction order (microkernels.h): four accumulators
// s0..s3 (acc + k * L), vector v of the run (elements v*L .. v*L + L - 1)
// folds into s(v mod 4). The main loop takes four vectors per step; up to
// three more full vectors then go to s0, s1, s2 in turn, and the partial last
// vector (lanes beyond n = identity, not 0: matters for max/min) to the next
// one. Runs fed in pieces of multiples of 4 * L keep every element's place.
template <class V, Op kOp>
DVM_SIMD_INLINE void reduce_fold_tail(V& s, const float* a, int64_t i, int64_t n) {
  if constexpr (V::kLanes > 1) {
    if (i < n) {
      const int rem = static_cast<int>(n - i);
      V x = V::select(V::tail_mask(rem), V::load_partial(a + i, rem),
                      V::splat(reduce_identity<V, kOp>()));
      s = reduce_op<V, kOp>(s, x);
    }
  } else {
    (void)s, (void)a, (void)i, (void)n;  // one lane: no partial vector
  }
}

template <class V, Op kOp>
void reduce_acc_kernel(float* acc, const float* a, int64_t n) {
  static_assert(kReduceAccs == 4, "the loop below is written for four accumulators");
  constexpr int L = V::kLanes;
  V s0 = V::load(acc), s1 = V::load(acc + L), s2 = V::load(acc + 2 * L), s3 = V::load(acc + 3 * L);
  int64_t i = 0;
  for (; i + 4 * L <= n; i += 4 * L) {
    s0 = reduce_op<V, kOp>(s0, V::load(a + i));
    s1 = reduce_op<V, kOp>(s1, V::load(a + i + L));
    s2 = reduce_op<V, kOp>(s2, V::load(a + i + 2 * L));
    s3 = reduce_op<V, kOp>(s3, V::load(a + i + 3 * L));
  }
  if (i + L > n) {
    reduce_fold_tail<V, kOp>(s0, a, i, n);
  } else {
    s0 = reduce_op<V, kOp>(s0, V::load(a + i));
    i += L;
    if (i + L > n) {
      reduce_fold_tail<V, kOp>(s1, a, i, n);
    } else {
      s1 = reduce_op<V, kOp>(s1, V::load(a + i));
      i += L;
      if (i + L > n) {
        reduce_fold_tail<V, kOp>(s2, a, i, n);
      } else {
        s2 = reduce_op<V, kOp>(s2, V::load(a + i));
        reduce_fold_tail<V, kOp>(s3, a, i + L, n);
      }
    }
  }
  V::store(acc, s0);
  V::store(acc + L, s1);
  V::store(acc + 2 * L, s2);
  V::store(acc + 3 * L, s3);
}

// t = op(op(s0, s1), op(s2, s3)), then the horizontal tree over t's lanes.
template <class V, Op kOp>
float reduce_finish_kernel(const float* acc) {
  constexpr int L = V::kLanes;
  const V t0 = reduce_op<V, kOp>(V::load(acc), V::load(acc + L));
  const V t1 = reduce_op<V, kOp>(V::load(acc + 2 * L), V::load(acc + 3 * L));
  const V s = reduce_op<V, kOp>(t0, t1);
  if constexpr (kOp == Op::RSUM) return V::hsum(s);
  else if constexpr (kOp == Op::RMAX) return V::hmax(s);
  else return V::hmin(s);
}

template <class V>
void fill_kernel(float* d, float v, int64_t n) {
  struct Body {
    V v;
    DVM_SIMD_INLINE V full(int64_t) const { return v; }
    DVM_SIMD_INLINE V partial(int64_t, int) const { return v; }
  };
  elementwise_loop<V>(d, n, Body{V::splat(v)});
}

// d[i] = base[i * stride]. Contiguous runs use vector copies; other strides a
// plain scalar loop (x86 gathers are no faster than scalar loads on Zen 4 and
// need 32-bit indices, which an int64 stride can overflow).
template <class V>
void gather_strided_kernel(float* d, const float* base, int64_t stride, int64_t n) {
  if (stride == 1) {
    struct Body {
      const float* a;
      DVM_SIMD_INLINE V full(int64_t i) const { return V::load(a + i); }
      DVM_SIMD_INLINE V partial(int64_t i, int r) const { return V::load_partial(a + i, r); }
    };
    elementwise_loop<V>(d, n, Body{base});
  } else if (stride == 0) {
    fill_kernel<V>(d, n > 0 ? base[0] : 0.0f, n);
  } else {
    const float* p = base;
    for (int64_t i = 0; i < n; ++i, p += stride) d[i] = *p;
  }
}

// Conversions, one element at a time (vectorized per ISA where it matters:
// kernels_avx2.cpp, kernels_avx512.cpp override the 16-bit float types).
template <Dtype kT>
void load_cvt_kernel(float* d, const void* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = load_elem(kT, src, i);
}
template <Dtype kT>
void store_cvt_kernel(void* d, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; ++i) store_elem(kT, d, i, src[i]);
}

template <Dtype kT>
void load_int_kernel(float* d, const void* src, int64_t n) {
  if constexpr (kT == Dtype::I32) {
    if (n > 0) std::memcpy(d, src, static_cast<size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = load_int_elem(kT, src, i);
  }
}
template <Dtype kT>
void store_int_kernel(void* d, const float* src, int64_t n) {
  if constexpr (kT == Dtype::I32) {
    if (n > 0) std::memcpy(d, src, static_cast<size_t>(n) * 4);
  } else {
    for (int64_t i = 0; i < n; ++i) store_int_elem(kT, d, i, src[i]);
  }
}

template <Dtype kT>
constexpr void set_convert(MicroKernels& t) {
  t.load_cvt[static_cast<int>(kT)] = &load_cvt_kernel<kT>;
  t.store_cvt[static_cast<int>(kT)] = &store_cvt_kernel<kT>;
  t.load_int[static_cast<int>(kT)] = &load_int_kernel<kT>;
  t.store_int[static_cast<int>(kT)] = &store_int_kernel<kT>;
}

// A table with its 16-bit float conversions replaced by an ISA's vector
// ones (kernels_avx2.cpp, kernels_avx512.cpp).
constexpr MicroKernels with_16bit_floats(MicroKernels t, LoadCvtFn load_f16, StoreCvtFn store_f16,
                                         LoadCvtFn load_bf16, StoreCvtFn store_bf16) {
  t.load_cvt[static_cast<int>(Dtype::F16)] = load_f16;
  t.store_cvt[static_cast<int>(Dtype::F16)] = store_f16;
  t.load_cvt[static_cast<int>(Dtype::BF16)] = load_bf16;
  t.store_cvt[static_cast<int>(Dtype::BF16)] = store_bf16;
  return t;
}

// ---- the table -----------------------------------------------------------------

template <class V, Op kOp, vm::OpClass kCls>
constexpr void set_entry(MicroKernels& t) {
  constexpr int i = static_cast<int>(kOp);
  if constexpr (vm::int64_op(kOp) && kCls == vm::OpClass::Reduce) {
    t.long_reduce[i] = &long_reduce_kernel<V, kOp>;
    t.long_identity[i] = long_identity<kOp>();
  } else if constexpr (vm::int64_op(kOp)) {
    t.wide[i] = &long_kernel<V, kOp>;
  } else if constexpr (kCls == vm::OpClass::Unary) {
    t.unary[i] = &unary_kernel<V, kOp>;
  } else if constexpr (kCls == vm::OpClass::Binary) {
    t.binary[i] = &binary_kernel<V, kOp>;
    t.binary_vs[i] = &binary_vs_kernel<V, kOp>;
    t.binary_sv[i] = &binary_sv_kernel<V, kOp>;
  } else if constexpr (kCls == vm::OpClass::Ternary) {
    t.ternary[i] = &ternary_kernel<V, kOp>;
  } else if constexpr (kCls == vm::OpClass::Reduce) {
    t.reduce_identity[i] = reduce_identity<V, kOp>();
    t.reduce_acc[i] = &reduce_acc_kernel<V, kOp>;
    t.reduce_finish[i] = &reduce_finish_kernel<V, kOp>;
  }
  // Load / Store / Const are the interpreter's own business.
}

template <class V>
constexpr MicroKernels make_microkernels(Isa isa) {
  MicroKernels t{};
  t.isa = isa;
  t.lanes = V::kLanes;
  t.reduce_lanes = kReduceAccs * V::kLanes;
#define DVM_X(name, mn, cls, sig) set_entry<V, Op::name, vm::OpClass::cls>(t);
  DVM_OPCODES(DVM_X)
#undef DVM_X
  t.fill = &fill_kernel<V>;
  t.gather_strided = &gather_strided_kernel<V>;
  set_convert<Dtype::F32>(t);
  set_convert<Dtype::F16>(t);
  set_convert<Dtype::BF16>(t);
  set_convert<Dtype::I32>(t);
  set_convert<Dtype::Bool>(t);
  set_convert<Dtype::I64>(t);
  set_convert<Dtype::U8>(t);
  static_assert(kNumDtypes == 7, "a conversion per element type");
  return t;
}

}  // namespace dvm::backends::detail
