// y * 2^n in one rounding, for SIMD types and JIT targets without a one-op
// scale (VecScalar, VecAvx2, TargetCaps::scale_exp false): n is an integral
// float in [-150, 128] (exp's range). 2^n is not representable near the ends,
// so it is applied in halves: n1 = n >> 1 and n2 = n - n1 both lie in
// [-75, 64]; y * 2^n1 is exact for y near 1 (the only use: exp's polynomial
// value in [0.7, 1.5]) and the second product rounds once, exactly as y * 2^n
// rounded once (subnormal results included).
#pragma once

namespace dvm::simd {

template <class V>
[[gnu::always_inline]] inline V scale_pow2_halves(V y, V n) {
  using I = typename V::Int;
  I ni = V::cvt_round(n);
  I n1 = V::template sra<1>(ni);
  I n2 = V::isub(ni, n1);
  V p1 = V::as_float(V::template shl<23>(V::iadd(n1, V::isplat(127))));
  V p2 = V::as_float(V::template shl<23>(V::iadd(n2, V::isplat(127))));
  return V::mul(V::mul(y, p1), p2);
}

}  // namespace dvm::simd
