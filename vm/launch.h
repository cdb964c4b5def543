// A launch: the concrete sizes, argument addresses and scalar values one run
// of a kernel binds. Bytecode never holds these, so one kernel serves every shape.
#pragma once

#include <cstdint>
#include <vector>

#include "dvm/shape.h"
#include "vm/bytecode.h"

namespace dvm::vm {

// The iteration space has up to kMaxParts parts, outermost first; a form
// says how many it uses and what they mean (vm/forms.h: FormRow::parts).
// The vector forms use three, [P, R, C] with C innermost; Contraction adds
// K, the axis its MMA sums over (its inputs' addresses step along it; its
// epilogue runs over [P, R, C]). The extents of parts a form does not use
// are 1.
inline constexpr int kMaxParts = 4;
enum Part : int { kP = 0, kR = 1, kC = 2, kK = 3 };

// Addresses are element offsets from the argument's base pointer: element
// (i0, i1, ...) of the iteration space is at base[sum of ik * stride[k]];
// for [P, R, C], base[p*stride[kP] + r*stride[kR] + c*stride[kC]]. LD and ST
// need stride[kC] == 1 (or C <= 1); LDS and STS take any; LDB ignores stride[kC]. LDG uses the
// dims below instead: each part is split into up to kMaxRank dims
// (innermost last) with their own sizes and strides.
//
// Addresses are untyped: the element type is the kernel's (Program::types),
// and only loads and stores read or write through them in that type.
struct ArgBinding {
  const void* in = nullptr;  // inputs
  void* out = nullptr;       // outputs
  int64_t stride[kMaxParts] = {};
  uint8_t ndims[kMaxParts] = {};
  int64_t dim_size[kMaxParts][kMaxRank] = {};
  int64_t dim_stride[kMaxParts][kMaxRank] = {};
};

// base advanced by `elems` elements of type t.
inline const void* advance(const void* base, int64_t elems, Dtype t) {
  return static_cast<const char*>(base) + elems * static_cast<int64_t>(elem_bytes(t));
}
inline void* advance(void* base, int64_t elems, Dtype t) {
  return static_cast<char*>(base) + elems * static_cast<int64_t>(elem_bytes(t));
}

struct Launch {
  int64_t extent[kMaxParts] = {1, 1, 1, 1};
  std::vector<ArgBinding> args;
  // The values of the kernel's scalar parameters (Program::nscalars of
  // them), read by PARAM: user scalars are bound here like sizes, so a new
  // value runs the same kernel.
  std::vector<float> scalars;
  // The thread count a Contraction's items are cut for (vm::mma_blocks),
  // read once when the launch is bound: the items a launch counts and the
  // items it runs must be the same blocks even if set_num_threads() changes
  // meanwhile. The sums do not depend on it.
  int32_t item_threads = 1;

  // The extents of the three-part forms.
  int64_t P() const { return extent[kP]; }
  int64_t R() const { return extent[kR]; }
  int64_t C() const { return extent[kC]; }
  int64_t K() const { return extent[kK]; }
};

}  // namespace dvm::vm
