// A launch: the concrete sizes and argument addresses one run of a kernel
// binds. Bytecode never holds these, so one kernel serves every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "dvm/shape.h"
#include "vm/bytecode.h"

namespace dvm::vm {

// Addresses are element offsets from the argument's base pointer:
//   element (p, r, c) of the iteration space is at base[p*ps + r*rs + c*cs].
// LD and ST need cs == 1 (or C <= 1); LDB ignores cs. LDG uses the dims
// below instead: each of P, R, C is split into up to kMaxRank dims
// (innermost last) with their own strides.
//
// Addresses are untyped: the element type is the kernel's (Program::types),
// and only loads and stores read or write through them in that type.
struct ArgBinding {
  const void* in = nullptr;  // inputs
  void* out = nullptr;       // outputs
  int64_t ps = 0, rs = 0, cs = 0;
  uint8_t ndims[3] = {0, 0, 0};
  int64_t size[3][kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
};

// base advanced by `elems` elements of type t.
inline const void* advance(const void* base, int64_t elems, Dtype t) {
  return static_cast<const char*>(base) + elems * static_cast<int64_t>(elem_bytes(t));
}
inline void* advance(void* base, int64_t elems, Dtype t) {
  return static_cast<char*>(base) + elems * static_cast<int64_t>(elem_bytes(t));
}

struct Launch {
  int64_t P = 1, R = 1, C = 1;
  std::vector<ArgBinding> args;
};

}  // namespace dvm::vm
