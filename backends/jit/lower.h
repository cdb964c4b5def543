// The JIT's first stage: lower() turns a verified kernel into the
// target-neutral vector IR of ir.h (one straight-line body per loop, math ops
// expanded through the shared templates, fused ops as the target's
// TargetCaps allow); codegen.h takes it from there.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "backends/jit/ir.h"
#include "vm/verifier.h"

namespace dvm::backends::jit {

// How a call's base address of each argument is found (see run_items).
// kArgGathered (LDG): the row's base from the gather dims of P and R, then
// contiguous along C as LD; launches whose gather is not (can_run in jit.h)
// run on the interpreter.
enum : uint8_t { kArgUnused = 0, kArgContiguous = 1, kArgStrided = 2, kArgPerRow = 3, kArgGathered = 4 };

// One access pattern per argument; false (with *reason) for an argument
// read with two patterns.
bool arg_patterns(const vm::Program& p, std::vector<uint8_t>* out, std::string* reason);

// Code-shape choices compile() makes. Zero fields mean "decide per kernel";
// tests and benchmarks set them to force one shape (every shape computes the
// same bits).
struct Tuning {
  int unroll = 0;        // Elementwise: vectors per main-loop iteration (1, 2 or 4)
  int interleave = -1;   // Elementwise unroll: 1 interleave the copies, 0 one after another
  int col_block = 0;     // ColReduce: column vectors per pass over the rows (1..16)
};
// ColReduce blocks have at most this many column vectors: a masked block keeps
// a tail mask and a count per copy in the frame (the emitter).
inline constexpr int kMaxColBlock = 16;
// The process-wide tuning (not synchronised: set it before compiling).
Tuning& tuning();

// Lowers vp into *ir. Returns false with *reason for what the JIT leaves to
// the interpreter. `unroll` (Elementwise) is the number of body copies in the
// main loop; `interleave` interleaves them per bytecode instruction.
// `col_block` (ColReduce) is the number of column vectors per row pass.
// `one_vector_rows` (RowReduce): the variant for rows of at most one vector,
// whose folding passes keep one accumulator instead of kReduceAccs. With one
// vector the canonical order folds it into accumulator 0 and the others
// stay the identity, which their combine leaves exactly as it is; so the
// bits are the same without the other accumulators, their combine and the
// row's checks for more vectors.
bool lower(const vm::VerifiedProgram& vp, IrBuilder* ir, std::string* reason, int unroll = 1,
           bool interleave = true, int col_block = 1, bool one_vector_rows = false);

}  // namespace dvm::backends::jit
