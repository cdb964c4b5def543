// The cube unit's GEMM core: a packed, blocked single-precision C = A * B
// with per-ISA register-tile micro-kernels, cut into output blocks that
// threads can share out. The micro-kernels are precompiled (the interpreter
// tier: no executable memory) or, on request, generated at run time for the
// tile shape at hand (backends/cube/xbyak/: same arithmetic, same bits).
//
// Numerics (what makes tiers, ISAs and thread counts bit-identical): every
// C[i][j] is the sum over k in ascending order starting from +0.0f:
//   Avx2, Avx512: acc = fma(a_ik, b_kj, acc)   (one rounding per step, so the
//                 two ISAs give the same bits);
//   Portable:     acc = acc + a_ik * b_kj      (two roundings, never fused).
// Blocking over K keeps that order: a K panel after the first continues from
// the partial sum stored in c. Nothing depends on how the items of run() are
// split across calls or threads. M = 0 or N = 0 does nothing; K = 0 writes
// zeros (then calls the hook), unless Gemm::accumulate.
#pragma once

#include <cstdint>
#include <string>

#include "backends/isa.h"
#include "dvm/dtype.h"

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

// A register-tile micro-kernel for R rows and `width` columns (both fixed per
// function): c[r * ldc + j] (r < R, j < width) continues (load) or starts
// from +0 the sum over k < kc, in ascending k with one fused multiply-add per
// step, of a[k * R + r] * b[k * ldb + j]. Nothing beyond `width` columns of b
// or c is read or written.
using TileFn = void (*)(int64_t kc, const float* a, const float* b, int64_t ldb, float* c,
                        int64_t ldc, bool load);

// Where the micro-kernels come from. Generated needs an x86 ISA (not
// Portable) and a build with DVM_JIT, else dvm::Error; selecting it is the
// caller's consent to executable memory. Both give the same bits.
enum class Kernels : uint8_t { Precompiled, Generated };

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
  Kernels kernels = Kernels::Precompiled;
  // True: every sum continues from the value already in C (a product cut
  // along K by the caller: the same ascending-k steps, so the same bits as
  // one call over the whole K); K = 0 then leaves C as it is.
  bool accumulate = false;
  // When set, B's elements are these 16-bit floats, element (k, j) at
  // b16[k * b.rs + j * b.cs] (b.data is not read), widened exactly as they
  // are read: the same sums as on a widened f32 copy, with B's bytes read
  // once. Only a product of one row (M <= 1) whose B rows are contiguous
  // (b.cs == 1), or whose B columns are (b.rs == 1) where
  // one_row_reads_columns(isa), takes them, and b16_type is BF16 or F16;
  // otherwise run() throws dvm::Error.
  const uint16_t* b16 = nullptr;
  Dtype b16_type = Dtype::BF16;
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

// Batches of tiny products (bmm of 4 x 4 matrices), where packing and the
// per-product set-up of run() would cost more than the arithmetic: `count`
// products of g's shape, product q reading A at g.a.data + q * sa, B at
// g.b.data + q * sb and writing C at g.c + q * sc (in floats), each with the
// sums run() makes (the same bits), nothing packed. Takes g when tiny(g):
// M, N and K at most kTinyDim, B's rows contiguous (b.cs == 1, or N <= 1),
// no hook, no 16-bit B, not accumulate; otherwise dvm::Error. `isa` as for
// run(). tiny_products() counts the products it has computed.
inline constexpr int64_t kTinyDim = 16;
bool tiny(const Gemm& g);
void tiny_batch(const Gemm& g, Isa isa, int64_t count, int64_t sa, int64_t sb, int64_t sc);
int64_t tiny_products();

// dst[k * ld + n] = src[n * cs + k] for k < K, n < N (ld >= N): a K x N
// matrix stored by columns (cs apart, each contiguous in k) copied into
// rows, with the ISA's transposes. `isa` as for run().
void transpose_to_rows(Isa isa, const float* src, int64_t cs, int64_t K, int64_t N, float* dst,
                       int64_t ld);

// Whether a product of one row reads a B stored by columns (b.rs == 1, as
// x @ W^T reads W) in place on `isa`, transposing small blocks in registers,
// rather than packing it into panels on every call (the ISAs that do also
// read it so for products of up to 16 rows).
bool one_row_reads_columns(Isa isa);

// Makes the generated micro-kernels of `isa` now (a machine-code tier's
// compile), so that no product waits for them; false with the reason in
// *why where they cannot be made (Portable, no DVM_JIT, the CPU).
bool prepare_generated(Isa isa, std::string* why);

// The block of item `item` (for a caller that wants to know which part of C
// an item covers, e.g. to schedule by cost).
struct Block {
  int64_t i0, j0, rows, cols;
};
Block item_block(const Gemm& g, Isa isa, int64_t item);

// The driver's two tile shapes on `isa` (shape 0: the main tile, 1: the
// small-M tile for M <= 16): rows x (nv * lanes) columns each.
struct TileShape {
  int rows, nv, lanes;
};
TileShape tile_shape(Isa isa, int shape);
// The precompiled micro-kernel of `isa` for that shape, 1 <= rows <= its
// rows, with B prefetch (pf) or not; null where the driver has none (the
// main shape never prefetches). For comparing tiers.
TileFn precompiled_tile(Isa isa, int shape, int rows, bool pf);

}  // namespace dvm::backends::cube
