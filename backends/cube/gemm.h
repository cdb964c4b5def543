// The cube unit's GEMM core for the interpreter tier: a packed, blocked
// single-precision C = A * B with precompiled per-ISA micro-kernels (no
// executable memory), cut into output blocks that threads can share out.
//
// Numerics (what makes tiers, ISAs and thread counts bit-identical): every
// C[i][j] is the sum over k in ascending order starting from +0.0f:
//   Avx2, Avx512: acc = fma(a_ik, b_kj, acc)   (one rounding per step, so the
//                 two ISAs give the same bits);
//   Portable:     acc = acc + a_ik * b_kj      (two roundings, never fused).
// Blocking over K keeps that order: a K panel after the first continues from
// the partial sum stored in c. Nothing depends on how the items of run() are
// split across calls or threads. M = 0 or N = 0 does nothing; K = 0 writes
// zeros (then calls the hook).
#pragma once

#include <cstdint>

#include "backends/isa.h"

namespace dvm::backends::cube {

// A strided matrix operand: element (i, j) is data[i * rs + j * cs]. Any
// strides (transposed views, 0 for broadcast, negative) are read by the
// packing; nothing is copied first.
struct Matrix {
  const float* data;
  int64_t rs, cs;
};

// The finished-tile hook: called once per output block [i0, i0+rows) x
// [j0, j0+cols) after its full K sum is in C (still in cache), so a
// vector-unit epilogue can run on it before the next block. `c` and `ldc` are
// Gemm::c and Gemm::ldc (the whole output's base): element (i, j) of the
// block is c[i * ldc + j] for i0 <= i < i0+rows, j0 <= j < j0+cols.
using TileHook = void (*)(void* ctx, float* c, int64_t ldc, int64_t i0, int64_t j0,
                          int64_t rows, int64_t cols);

struct Gemm {
  int64_t M, N, K;
  Matrix a;  // M x K
  Matrix b;  // K x N
  // C[i][j] for i < M, j < N is written at c[i * ldc + j] (ldc >= N; nothing
  // else is written).
  float* c;
  int64_t ldc;
  TileHook hook = nullptr;  // may be null
  void* hook_ctx = nullptr;
  // True: blocks shrink until a mid-size product has several items for
  // threads to share. False: they keep their full size (a caller that cuts
  // the work into items itself runs each as one product).
  bool split_for_threads = true;
};

// Work items: the M x N output is cut into blocks whose sizes depend on the
// ISA and the shape only (never on the thread count): a few hundred rows and
// columns, smaller where that gives a mid-size product at least 8 items; K is
// never split.
// items(g, isa) says how many (0 when M or N is 0). run(g, isa, begin, end)
// computes items [begin, end); it may be called concurrently from several
// threads for disjoint ranges (packing buffers are per thread). `isa` must be
// supported by this CPU (isa_supported); otherwise dvm::Error.
int64_t items(const Gemm& g, Isa isa);
void run(const Gemm& g, Isa isa, int64_t begin, int64_t end);
// Convenience: all items on the calling thread.
void gemm(const Gemm& g, Isa isa);

// The block of item `item` (for a caller that wants to know which part of C
// an item covers, e.g. to schedule by cost).
struct Block {
  int64_t i0, j0, rows, cols;
};
Block item_block(const Gemm& g, Isa isa, int64_t item);

}  // namespace dvm::backends::cube
