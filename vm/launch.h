// A launch: the concrete sizes and argument addresses one run of a kernel
// binds. Bytecode never holds these, so one kernel serves every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "dvm/shape.h"

namespace dvm::vm {

// Addresses are element offsets from the argument's base pointer:
//   element (p, r, c) of the iteration space is at base[p*ps + r*rs + c*cs].
// LD and ST need cs == 1 (or C <= 1); LDB ignores cs. LDG uses the dims
// below instead: each of P, R, C is split into up to kMaxRank dims
// (innermost last) with their own strides.
struct ArgBinding {
  const float* in = nullptr;  // inputs
  float* out = nullptr;       // outputs
  int64_t ps = 0, rs = 0, cs = 0;
  uint8_t ndims[3] = {0, 0, 0};
  int64_t size[3][kMaxRank] = {};
  int64_t stride[3][kMaxRank] = {};
};

struct Launch {
  int64_t P = 1, R = 1, C = 1;
  std::vector<ArgBinding> args;
};

}  // namespace dvm::vm
