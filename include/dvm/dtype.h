// Element types, their sizes and names, and torch's type promotion.
//
// Storage may be any of these types. The vector unit computes floats in f32:
// loads convert an argument's elements to f32 and stores convert back,
// rounding once (docs/DTYPES.md has every conversion's rule). Integer
// arithmetic runs exactly on integer lanes (int32 lanes for int32, uint8 and
// bool, int64 lanes for int64), wrapping as torch's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dvm {

// The values are part of the bytecode format: new types are appended.
enum class Dtype : uint8_t { F32, F16, BF16, I32, Bool, I64, U8 };
inline constexpr int kNumDtypes = 7;

constexpr const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::F32: return "float32";
    case Dtype::F16: return "float16";
    case Dtype::BF16: return "bfloat16";
    case Dtype::I32: return "int32";
    case Dtype::Bool: return "bool";
    case Dtype::I64: return "int64";
    case Dtype::U8: return "uint8";
  }
  return "?";
}

constexpr size_t dtype_size(Dtype t) {
  switch (t) {
    case Dtype::F32: case Dtype::I32: return 4;
    case Dtype::F16: case Dtype::BF16: return 2;
    case Dtype::Bool: case Dtype::U8: return 1;
    case Dtype::I64: return 8;
  }
  return 0;
}

constexpr bool is_floating(Dtype t) { return t == Dtype::F32 || t == Dtype::F16 || t == Dtype::BF16; }
constexpr bool is_integral(Dtype t) { return t == Dtype::I32 || t == Dtype::I64 || t == Dtype::U8; }

// torch.promote_types: the type two tensor operands compute and store in.
// bool < integers < floating; among integers the wider (uint8 with a signed
// type gives the signed one); float16 with bfloat16 gives float32.
constexpr Dtype promote_types(Dtype a, Dtype b) {
  if (a == b) return a;
  if (a == Dtype::Bool) return b;
  if (b == Dtype::Bool) return a;
  if (is_floating(a) != is_floating(b)) return is_floating(a) ? a : b;
  if (is_floating(a)) return Dtype::F32;  // f16 with bf16, or either with f32
  if (a == Dtype::I64 || b == Dtype::I64) return Dtype::I64;
  return Dtype::I32;  // i32 with u8
}

// float16 and bfloat16 as bits: what from_blob and to_vector<T> exchange for
// the 16-bit float types. Conversions round to nearest even (float16 as
// x86's F16C does; bfloat16 as torch does, every NaN to 0x7fc0).
struct Half {
  uint16_t bits = 0;
};
struct BFloat16 {
  uint16_t bits = 0;
};
float to_float(Half h);
float to_float(BFloat16 h);
Half to_half(float f);
BFloat16 to_bfloat16(float f);

// The element type of a C++ type, for the typed creation and observer
// templates (from_blob, to_vector<T>, data<T>).
template <class T>
struct dtype_of;
template <> struct dtype_of<float> { static constexpr Dtype value = Dtype::F32; };
template <> struct dtype_of<Half> { static constexpr Dtype value = Dtype::F16; };
template <> struct dtype_of<BFloat16> { static constexpr Dtype value = Dtype::BF16; };
template <> struct dtype_of<int32_t> { static constexpr Dtype value = Dtype::I32; };
template <> struct dtype_of<int64_t> { static constexpr Dtype value = Dtype::I64; };
template <> struct dtype_of<uint8_t> { static constexpr Dtype value = Dtype::U8; };
template <> struct dtype_of<bool> { static constexpr Dtype value = Dtype::Bool; };

}  // namespace dvm
