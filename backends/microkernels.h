// The interpreter's micro-kernels: one table of plain functions per ISA, each
// running one vector-unit instruction over a run of n floats with SIMD inside.
#pragma once

#include <cstdint>

#include "backends/isa.h"
#include "dvm/dtype.h"
#include "vm/opcodes.h"

namespace dvm::backends {

// Pointers may be unaligned; d may alias any source. n may be 0.
using UnaryFn = void (*)(float* d, const float* a, int64_t n);
using BinaryFn = void (*)(float* d, const float* a, const float* b, int64_t n);
using BinaryVsFn = void (*)(float* d, const float* a, float b, int64_t n);
using BinarySvFn = void (*)(float* d, float a, const float* b, int64_t n);
using TernaryFn = void (*)(float* d, const float* a, const float* b, const float* c, int64_t n);
// Row reduction (the canonical order, shared bit for bit by the JIT): acc
// holds `reduce_lanes` = kReduceAccs * lanes partial results, kReduceAccs
// SIMD accumulators a0..a3 of W = lanes floats each. Element i of the run goes
// to accumulator (i / W) mod 4, lane i mod W, folded in order of i; a partial
// last vector is filled with the identity beyond the run and folds into the
// accumulator its position implies. A run may be fed in pieces whose lengths
// are multiples of reduce_lanes (the interpreter's 512-float tiles are).
// finish combines t = op(op(a0, a1), op(a2, a3)) lane-wise, in that order,
// then folds t's W lanes in the fixed horizontal tree of vec_*.h (hsum / hmax
// / hmin). The portable table follows the same order with W = 1.
inline constexpr int kReduceAccs = 4;
using ReduceAccFn = void (*)(float* acc, const float* a, int64_t n);
using ReduceFinishFn = float (*)(const float* acc);
// Contiguous conversions between a storage type and f32, by the rules of
// backends/convert.h (the same bits on every ISA).
using LoadCvtFn = void (*)(float* d, const void* src, int64_t n);
using StoreCvtFn = void (*)(void* d, const float* src, int64_t n);
// An int64-lane op (vm::int64_op) over n elements; its operands' element
// types are the op's lanes (backends/microkernels_int64.h). c is lselect's
// third operand; unused ones may be null.
using LongFn = void (*)(void* d, const void* a, const void* b, const void* c, int64_t n);
// An int64 reduction (lrsum, lrmax, lrmin): acc folded with a[0 .. n).
using LongReduceFn = int64_t (*)(int64_t acc, const int64_t* a, int64_t n);

struct MicroKernels {
  Isa isa;
  int lanes;  // floats per SIMD register (1 for the portable table)
  // Floats of accumulator state per row reduction: kReduceAccs * lanes. Size
  // and identity-fill reduce_acc's acc with this many floats.
  int reduce_lanes;
  UnaryFn unary[vm::kNumOps];        // set for OpClass::Unary
  BinaryFn binary[vm::kNumOps];      // set for OpClass::Binary
  BinaryVsFn binary_vs[vm::kNumOps]; // b is one value for all i
  BinarySvFn binary_sv[vm::kNumOps]; // a is one value for all i
  TernaryFn ternary[vm::kNumOps];    // set for OpClass::Ternary
  LongFn wide[vm::kNumOps];          // set for vm::int64_op, instead of the above
  LongReduceFn long_reduce[vm::kNumOps];    // the int64 reductions
  int64_t long_identity[vm::kNumOps];
  float reduce_identity[vm::kNumOps];      // set for OpClass::Reduce
  ReduceAccFn reduce_acc[vm::kNumOps];     // set for OpClass::Reduce
  ReduceFinishFn reduce_finish[vm::kNumOps];
  void (*fill)(float* d, float v, int64_t n);
  // d[i] = base[i * stride] (stride in elements, may be negative or 0).
  void (*gather_strided)(float* d, const float* base, int64_t stride, int64_t n);
  LoadCvtFn load_cvt[kNumDtypes];    // indexed by Dtype (F32 included: a copy)
  StoreCvtFn store_cvt[kNumDtypes];
  // The same for int32 lanes (vm::kIntLanes; convert.h's load_int_elem and
  // store_int_elem): the float* holds int32 bits.
  LoadCvtFn load_int[kNumDtypes];
  StoreCvtFn store_int[kNumDtypes];
};

// The table for one ISA; nullptr when that ISA was not compiled in or the CPU
// lacks it.
const MicroKernels* microkernels_for(Isa isa);
// The table for active_isa().
const MicroKernels& active_microkernels();

}  // namespace dvm::backends
