// Element conversions between storage types and the vector unit's f32, one
// element at a time: the definition every tier and ISA follows bit for bit
// (the SIMD loads and stores in kernels_avx2.cpp, kernels_avx512.cpp and the
// JIT are tested against these over every f16 and bf16 value).
//
// To f32 (loads): f16 and bf16 exactly (an f16 signaling NaN comes back
// quiet, as F16C's vcvtph2ps gives it); int32 and int64 rounded to nearest
// even; uint8 exactly; bool as 0 or 1 (any nonzero byte is true).
// From f32 (stores): f16 rounded to nearest even (overflow to infinity, NaN
// kept quiet with its sign and top payload bits: F16C's vcvtps2ph); bf16
// rounded to nearest even with every NaN as 0x7fc0 (torch's rule); int32 and
// int64 truncated toward zero, NaN and out-of-range values giving the most
// negative value (x86's cvtt "integer indefinite"); uint8 the low 8 bits of
// the int32 conversion (so -1 stores 255, as integer wrap-around); bool
// nonzero (NaN is true, as in C++ and torch).
#pragma once

#include <cstdint>
#include <cstring>

#include "dvm/dtype.h"

namespace dvm::backends {

inline uint32_t f32_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float f32_from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return f32_from_bits(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  if (exp != 0) return f32_from_bits(sign | ((exp + 112) << 23) | (man << 13));
  if (man == 0) return f32_from_bits(sign);
  // Subnormal: normalize (exact in f32).
  int e = -1;
  do {
    man <<= 1;
    ++e;
  } while ((man & 0x400u) == 0);
  return f32_from_bits(sign | static_cast<uint32_t>(112 - e) << 23 | ((man & 0x3ffu) << 13));
}

inline uint16_t f32_to_f16(float f) {
  const uint32_t u = f32_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));  // NaN, quiet
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65536: infinity
  if (a >= 0x38800000u) {  // normal f16 (>= 2^-14)
    const uint32_t r = a - 0x38000000u;  // rebias 127 -> 15, still 13 extra mantissa bits
    const uint32_t rounded = r + 0xfffu + ((r >> 13) & 1u);
    return static_cast<uint16_t>(sign | (rounded >> 13));
  }
  if (a < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest subnormal (2^-25): 0
  // Subnormal f16: the value in units of 2^-24, rounded to nearest even.
  const uint32_t e = a >> 23;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126 - e;  // 2^-24 units: m * 2^(e-127-23) / 2^-24 = m >> (126 - e)
  const uint32_t q = m >> shift;
  const uint32_t rem = m & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  const uint32_t up = rem > half || (rem == half && (q & 1u));
  return static_cast<uint16_t>(sign | (q + up));
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits(static_cast<uint32_t>(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  const uint32_t u = f32_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0u;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

inline int32_t f32_to_i32(float f) {
  if (!(f >= -2147483648.0f && f < 2147483648.0f)) return INT32_MIN;
  return static_cast<int32_t>(f);
}
inline int64_t f32_to_i64(float f) {
  if (!(f >= -9223372036854775808.0f && f < 9223372036854775808.0f)) return INT64_MIN;
  return static_cast<int64_t>(f);
}
inline uint8_t f32_to_u8(float f) { return static_cast<uint8_t>(static_cast<uint32_t>(f32_to_i32(f)) & 0xffu); }
inline uint8_t f32_to_bool(float f) { return f != 0.0f || f != f ? 1 : 0; }

// Element i of a buffer of type t (aligned to the element size, as every
// tensor's data is), as f32.
inline float load_elem(Dtype t, const void* p, int64_t i) {
  switch (t) {
    case Dtype::F32: return static_cast<const float*>(p)[i];
    case Dtype::F16: return f16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case Dtype::BF16: return bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
    case Dtype::I32: return static_cast<float>(static_cast<const int32_t*>(p)[i]);
    case Dtype::I64: return static_cast<float>(static_cast<const int64_t*>(p)[i]);
    case Dtype::U8: return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
    case Dtype::Bool: return static_cast<const uint8_t*>(p)[i] != 0 ? 1.0f : 0.0f;
  }
  return 0.0f;
}

// Writes v as element i of a buffer of type t.
inline void store_elem(Dtype t, void* p, int64_t i, float v) {
  switch (t) {
    case Dtype::F32: static_cast<float*>(p)[i] = v; return;
    case Dtype::F16: static_cast<uint16_t*>(p)[i] = f32_to_f16(v); return;
    case Dtype::BF16: static_cast<uint16_t*>(p)[i] = f32_to_bf16(v); return;
    case Dtype::I32: static_cast<int32_t*>(p)[i] = f32_to_i32(v); return;
    case Dtype::I64: static_cast<int64_t*>(p)[i] = f32_to_i64(v); return;
    case Dtype::U8: static_cast<uint8_t*>(p)[i] = f32_to_u8(v); return;
    case Dtype::Bool: static_cast<uint8_t*>(p)[i] = f32_to_bool(v); return;
  }
}

// int32 lanes (arguments with vm::kIntLanes): element i of a buffer of type
// t as an int32 lane, its bits in a float: int32 as is, uint8 zero-extended,
// bool 0 or 1 (any nonzero byte is true). Floating types and int64 have no
// int32 lanes to load (the verifier refuses them); they give 0.
inline float load_int_elem(Dtype t, const void* p, int64_t i) {
  uint32_t u = 0;
  switch (t) {
    case Dtype::I32: std::memcpy(&u, static_cast<const char*>(p) + 4 * i, 4); break;
    case Dtype::U8: u = static_cast<const uint8_t*>(p)[i]; break;
    case Dtype::Bool: u = static_cast<const uint8_t*>(p)[i] != 0 ? 1u : 0u; break;
    default: break;
  }
  return f32_from_bits(u);
}

// Writes the int32 lane v (its bits in a float) as element i of a buffer of
// type t: int32 as is, uint8 the low 8 bits (wraps), bool nonzero, a
// floating type as the lane converted to f32 to nearest even, then stored as
// store_elem stores an f32; int64 sign-extended (the verifier refuses int64).
inline void store_int_elem(Dtype t, void* p, int64_t i, float v) {
  const uint32_t u = f32_bits(v);
  switch (t) {
    case Dtype::I32: std::memcpy(static_cast<char*>(p) + 4 * i, &u, 4); return;
    case Dtype::U8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(u & 0xffu); return;
    case Dtype::Bool: static_cast<uint8_t*>(p)[i] = u != 0 ? 1 : 0; return;
    case Dtype::I64: {
      const int64_t w = static_cast<int32_t>(u);
      std::memcpy(static_cast<char*>(p) + 8 * i, &w, 8);
      return;
    }
    default: store_elem(t, p, i, static_cast<float>(static_cast<int32_t>(u))); return;
  }
}

}  // namespace dvm::backends
