// The interpreter's micro-kernels: one table of plain functions per ISA, each
// running one vector-unit instruction over a run of n floats with SIMD inside.
#pragma once

#include <cstdint>

#include "backends/isa.h"
#include "vm/opcodes.h"

namespace dvm::backends {

// Pointers may be unaligned; d may alias any source. n may be 0.
using UnaryFn = void (*)(float* d, const float* a, int64_t n);
using BinaryFn = void (*)(float* d, const float* a, const float* b, int64_t n);
using BinaryVsFn = void (*)(float* d, const float* a, float b, int64_t n);
using BinarySvFn = void (*)(float* d, float a, const float* b, int64_t n);
using TernaryFn = void (*)(float* d, const float* a, const float* b, const float* c, int64_t n);
// Row reduction: acc holds `lanes` partial results; element i of the run goes
// to lane (i mod lanes) so long runs may be fed in pieces whose lengths are
// multiples of `lanes`. finish folds the lanes in a fixed tree order.
using ReduceAccFn = void (*)(float* acc, const float* a, int64_t n);
using ReduceFinishFn = float (*)(const float* acc);

struct MicroKernels {
  Isa isa;
  int lanes;  // floats per SIMD register (1 for the portable table)
  UnaryFn unary[vm::kNumOps];        // set for OpClass::Unary
  BinaryFn binary[vm::kNumOps];      // set for OpClass::Binary
  BinaryVsFn binary_vs[vm::kNumOps]; // b is one value for all i
  BinarySvFn binary_sv[vm::kNumOps]; // a is one value for all i
  TernaryFn ternary[vm::kNumOps];    // set for OpClass::Ternary
  float reduce_identity[vm::kNumOps];      // set for OpClass::Reduce
  ReduceAccFn reduce_acc[vm::kNumOps];     // set for OpClass::Reduce
  ReduceFinishFn reduce_finish[vm::kNumOps];
  void (*fill)(float* d, float v, int64_t n);
  // d[i] = base[i * stride] (stride in elements, may be negative or 0).
  void (*gather_strided)(float* d, const float* base, int64_t stride, int64_t n);
};

// The table for one ISA; nullptr when that ISA was not compiled in or the CPU
// lacks it.
const MicroKernels* microkernels_for(Isa isa);
// The table for active_isa().
const MicroKernels& active_microkernels();

}  // namespace dvm::backends
