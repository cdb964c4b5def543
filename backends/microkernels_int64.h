// The interpreter's int64-lane micro-kernels (vm::int64_op: itol .. lselect),
// element by element: integer results are exact, so any vectorization the
// compiler finds gives the same bits on every ISA.
//
// Include only from microkernels_impl.h: the kernels are templates over the
// ISA's SIMD type V only so that each ISA-flagged file instantiates its own
// symbols.
#pragma once

#include <cstdint>
#include <limits>

#include "vm/opcodes.h"

namespace dvm::backends::detail {

// Two's-complement arithmetic that wraps: computed in unsigned, where
// overflow is defined.
inline int64_t wrap_add(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
inline int64_t wrap_sub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
inline int64_t wrap_mul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

// Python's floor division and remainder (torch's for integers), defined
// everywhere: x // 0 = 0 and x % 0 = x (a kernel cannot raise), INT64_MIN //
// -1 wraps to INT64_MIN with remainder 0.
struct LongDivMod {
  int64_t q, r;
};
inline LongDivMod long_floor_divmod(int64_t a, int64_t b) {
  if (b == 0) return {0, a};
  if (b == -1) return {wrap_sub(0, a), 0};
  int64_t q = a / b, r = a % b;
  if (r != 0 && (r < 0) != (b < 0)) {
    q -= 1;
    r += b;
  }
  return {q, r};
}

template <vm::Op kOp>
inline int64_t long_unary(int64_t x) {
  using vm::Op;
  if constexpr (kOp == Op::LNEG) return wrap_sub(0, x);
  else if constexpr (kOp == Op::LABS) return x < 0 ? wrap_sub(0, x) : x;
  else if constexpr (kOp == Op::LNOT) return ~x;
  else static_assert(kOp == Op::LNEG, "not an int64 unary op");
}

template <vm::Op kOp>
inline int64_t long_binary(int64_t a, int64_t b) {
  using vm::Op;
  if constexpr (kOp == Op::LADD) return wrap_add(a, b);
  else if constexpr (kOp == Op::LSUB) return wrap_sub(a, b);
  else if constexpr (kOp == Op::LMUL) return wrap_mul(a, b);
  else if constexpr (kOp == Op::LMAX) return a > b ? a : b;
  else if constexpr (kOp == Op::LMIN) return a < b ? a : b;
  else if constexpr (kOp == Op::LAND) return a & b;
  else if constexpr (kOp == Op::LOR) return a | b;
  else if constexpr (kOp == Op::LXOR) return a ^ b;
  else if constexpr (kOp == Op::LFLOORDIV) return long_floor_divmod(a, b).q;
  else if constexpr (kOp == Op::LREM) return long_floor_divmod(a, b).r;
  else static_assert(kOp == Op::LADD, "not an int64 binary op");
}

template <vm::Op kOp>
inline bool long_compare(int64_t a, int64_t b) {
  using vm::Op;
  if constexpr (kOp == Op::LEQ) return a == b;
  else if constexpr (kOp == Op::LNE) return a != b;
  else if constexpr (kOp == Op::LLT) return a < b;
  else if constexpr (kOp == Op::LLE) return a <= b;
  else if constexpr (kOp == Op::LGT) return a > b;
  else if constexpr (kOp == Op::LGE) return a >= b;
  else static_assert(kOp == Op::LEQ, "not an int64 comparison");
}

template <vm::Op kOp>
constexpr bool long_comparison() {
  using vm::Op;
  return kOp == Op::LEQ || kOp == Op::LNE || kOp == Op::LLT || kOp == Op::LLE || kOp == Op::LGT || kOp == Op::LGE;
}

// One int64-lane op over n elements. The operands are typed by the op's
// lanes: int32 for itol's source, f32 for lselect's mask and for comparison
// and ltof results, int32 for ltoi's, int64 otherwise. d may be a source
// only where both have the same lanes (the interpreter sees to it).
template <class V, vm::Op kOp>
void long_kernel(void* dv, const void* av, const void* bv, const void* cv, int64_t n) {
  using vm::Op;
  auto* d = static_cast<int64_t*>(dv);
  const auto* a = static_cast<const int64_t*>(av);
  const auto* b = static_cast<const int64_t*>(bv);
  if constexpr (kOp == Op::ITOL) {
    const auto* x = static_cast<const int32_t*>(av);
    for (int64_t i = 0; i < n; ++i) d[i] = x[i];
  } else if constexpr (kOp == Op::LSELECT) {
    const auto* m = static_cast<const float*>(av);
    const auto* t = static_cast<const int64_t*>(bv);
    const auto* e = static_cast<const int64_t*>(cv);
    for (int64_t i = 0; i < n; ++i) d[i] = m[i] != 0.0f ? t[i] : e[i];  // a NaN mask is true
  } else if constexpr (kOp == Op::LTOI) {
    auto* y = static_cast<int32_t*>(dv);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(a[i])));
  } else if constexpr (kOp == Op::LTOF) {
    auto* y = static_cast<float*>(dv);
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(a[i]);  // nearest even
  } else if constexpr (long_comparison<kOp>()) {
    auto* y = static_cast<float*>(dv);
    for (int64_t i = 0; i < n; ++i) y[i] = long_compare<kOp>(a[i], b[i]) ? 1.0f : 0.0f;
  } else if constexpr (vm::op_class(kOp) == vm::OpClass::Unary) {
    for (int64_t i = 0; i < n; ++i) d[i] = long_unary<kOp>(a[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) d[i] = long_binary<kOp>(a[i], b[i]);
  }
}

// An int64 reduction's fold: acc op a[0] op ... op a[n - 1]. Integer
// results are exact, so every order gives the same value.
template <vm::Op kOp>
constexpr int64_t long_identity() {
  using vm::Op;
  if constexpr (kOp == Op::LRSUM) return 0;
  else if constexpr (kOp == Op::LRMAX) return std::numeric_limits<int64_t>::min();
  else return std::numeric_limits<int64_t>::max();
}
template <class V, vm::Op kOp>
int64_t long_reduce_kernel(int64_t acc, const int64_t* a, int64_t n) {
  using vm::Op;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kOp == Op::LRSUM) acc = wrap_add(acc, a[i]);
    else if constexpr (kOp == Op::LRMAX) acc = a[i] > acc ? a[i] : acc;
    else acc = a[i] < acc ? a[i] : acc;
  }
  return acc;
}

}  // namespace dvm::backends::detail
