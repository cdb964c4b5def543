// Element types. Only float32 computes today; bool masks (comparison results)
// are stored as 32-bit floats holding 0 or 1. The other names are reserved so
// later versions only add cases.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dvm {

enum class Dtype : uint8_t { F32, F16, BF16, I32, Bool };

constexpr const char* dtype_name(Dtype t) {
  switch (t) {
    case Dtype::F32: return "float32";
    case Dtype::F16: return "float16";
    case Dtype::BF16: return "bfloat16";
    case Dtype::I32: return "int32";
    case Dtype::Bool: return "bool";
  }
  return "?";
}

}  // namespace dvm
