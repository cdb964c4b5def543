// The blocked GEMM driver shared by every ISA (Goto/BLIS style): per output
// block, per K panel, pack A into row panels and B into column panels (or read
// B in place), and run an MR x NR register-tile micro-kernel over them.
// Included by one translation unit per ISA, each compiled with that ISA's
// flags and supplying the vector primitives V:
//   V::T, V::kLanes, V::zero(), V::load(p), V::store(p, x), V::bcast(p),
//   V::load_n(p, n), V::store_n(p, x, n)   (the first n < kLanes lanes only),
//   V::madd(a, b, acc)   (acc + a * b in the ISA's rounding: fused or not),
//   V::load_bf16(p), V::load_f16(p)   (kLanes 16-bit floats at p, widened).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#include "backends/cube/gemm.h"

namespace dvm::backends::cube::detail {

// The micro-kernels a driver runs, by tile shape S (0: the main MR x NR
// tile, 1: the small-M tile), prefetch PF and rows R: full[S][PF][R] covers
// the tile's whole width (full[0][1] is never used). edge, where not null,
// gives a tile for nc < the shape's width columns that reads and writes only
// those (nv: the shape's vectors per row), or null; without one a partial
// tile runs on a scratch tile. Precompiled tables come from each ISA's TU,
// generated ones from gemm.cpp: one driver serves both.
inline constexpr int kMaxTileRows = 8;
struct TileSet {
  TileFn full[2][2][kMaxTileRows + 1] = {};
  TileFn (*edge)(Isa isa, int nv, bool pf, int rows, int nc) = nullptr;
  Isa isa = Isa::Portable;
};

// One ISA's entry points (gemm.cpp dispatches to them) and its tile shapes.
struct Impl {
  int64_t (*items)(const Gemm& g);
  Block (*block)(const Gemm& g, int64_t item);
  void (*run)(const Gemm& g, int64_t begin, int64_t end, const TileSet& tiles);
  void (*transpose)(const float* src, int64_t cs, int64_t K, int64_t N, float* dst, int64_t ld);
  void (*tiny_batch)(const Gemm& g, int64_t count, int64_t sa, int64_t sb, int64_t sc);
  const TileSet* precompiled;
  int mr, nv, small_mr, small_nv;  // rows and vectors per row of the two tile shapes
  bool one_row_by_columns;         // one row times B stored by columns reads B in place (col_times)
};

// The micro-kernel: c[r][j] (r < R, j < NV * lanes) continues (load) or
// starts from +0 the sum over k < kc of a[k * R + r] * b[k * ldb + j]. With
// PF, each step also prefetches the next NV * lanes floats of b's row (the
// next strip of a B read in place: its rows are far apart, which the
// hardware prefetchers do not follow).
template <class V, int R, int NV, bool PF>
void tile(int64_t kc, const float* __restrict a, const float* __restrict b, int64_t ldb,
          float* __restrict c, int64_t ldc, bool load) {
  constexpr int W = V::kLanes;
  typename V::T acc[R][NV];
  if (load) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V::load(c + r * ldc + v * W);
  } else {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V::zero();
  }
  for (int64_t k = 0; k < kc; ++k) {
    typename V::T bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) bv[v] = V::load(b + v * W);
    if constexpr (PF) {
#pragma GCC unroll 8
      for (int v = 0; v < NV * W; v += 16) __builtin_prefetch(b + NV * W + v, 0, 3);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const typename V::T av = V::bcast(a + r);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V::madd(av, bv[v], acc[r][v]);
    }
    a += R;
    b += ldb;
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) V::store(c + r * ldc + v * W, acc[r][v]);
}

// fns[R]: the micro-kernel for R rows (1 <= R <= sizeof...(R)).
template <class V, int NV, bool PF, class S>
struct TileTable;
template <class V, int NV, bool PF, size_t... R>
struct TileTable<V, NV, PF, std::index_sequence<R...>> {
  static constexpr TileFn fns[sizeof...(R) + 1] = {nullptr,
                                                   &tile<V, static_cast<int>(R) + 1, NV, PF>...};
};

// Tiny products (gemm.h: tiny_batch), one after another, with vectors V:
// per strip of kLanes columns (the last one masked: V::load_n, V::store_n)
// and group of up to kRows rows, each row's sum in a register, one V::madd
// per k in ascending order from +0, as a tile does; B's rows and A's
// elements read in place, nothing packed.
template <class V>
struct Tiny {
  static constexpr int kRows = 4;
  // The operands' strides as values: stores through c cannot change them.
  struct Shape {
    int64_t K, ars, acs, brs, ldc;
  };
  template <int R>
  static void rows(const Shape& t, const float* a, const float* b, float* c, int64_t nc) {
    constexpr int W = V::kLanes;
    typename V::T acc[R];
    const float* ar[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      acc[r] = V::zero();
      ar[r] = a + r * t.ars;
    }
    for (int64_t k = 0; k < t.K; ++k, b += t.brs) {
      const typename V::T bk = nc == W ? V::load(b) : V::load_n(b, nc);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        acc[r] = V::madd(V::bcast(ar[r]), bk, acc[r]);
        ar[r] += t.acs;
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (nc == W) V::store(c + r * t.ldc, acc[r]);
      else V::store_n(c + r * t.ldc, acc[r], nc);
    }
  }
  static void batch(const Gemm& g, int64_t count, int64_t sa, int64_t sb, int64_t sc) {
    constexpr int W = V::kLanes;
    const Shape t{g.K, g.a.rs, g.a.cs, g.b.rs, g.ldc};
    const int64_t M = g.M, N = g.N;
    const float* a = g.a.data;
    const float* b = g.b.data;
    float* c = g.c;
    for (int64_t q = 0; q < count; ++q, a += sa, b += sb, c += sc) {
      for (int64_t j = 0; j < N; j += W) {
        const int64_t nc = N - j < W ? N - j : W;
        int64_t i = 0;
        for (; i + kRows <= M; i += kRows) rows<kRows>(t, a + i * t.ars, b + j, c + i * t.ldc + j, nc);
        switch (M - i) {
          case 3: rows<3>(t, a + i * t.ars, b + j, c + i * t.ldc + j, nc); break;
          case 2: rows<2>(t, a + i * t.ars, b + j, c + i * t.ldc + j, nc); break;
          case 1: rows<1>(t, a + i * t.ars, b + j, c + i * t.ldc + j, nc); break;
          default: break;
        }
      }
    }
  }
};

// P: the ISA's parameters: V, MR, NV (NR = NV * lanes), KC, MB, NB (block
// sizes, multiples of MR and NR), kSmallM (up to this many rows: one block
// row of kSmallNB columns, kSmallMR x kSmallNV tiles, B read in place in K
// panels of kSmallKC when its rows are contiguous, else packed in panels of
// kSmallPackedKC, short so that a panel stays in L1 from packing to use),
// madd1(a, b, acc) (one scalar step of V::madd, for column tails), and
// optionally transpose8(src, cs, dst, ldd) (dst[t * ldd + j] =
// src[j * cs + t], j, t < 8) for packing B stored by columns, and
// optionally NarrowV (vectors for tiny products at most its width wide).
template <class P>
struct Driver {
  using V = typename P::V;
  static constexpr int MR = P::MR;
  static constexpr int NR = P::NV * V::kLanes;
  static constexpr int64_t KC = P::KC;
  static_assert(P::MB % MR == 0 && P::NB % NR == 0 && P::kSmallNB % (P::kSmallNV * V::kLanes) == 0);

  // Everything here is a member of a template over the TU-local P, so no
  // inline function compiled with one ISA's flags can be picked by the linker
  // for another TU (std::min and friends are avoided for the same reason).
  static constexpr int64_t mn(int64_t a, int64_t b) { return a < b ? a : b; }
  static constexpr int64_t mx(int64_t a, int64_t b) { return a > b ? a : b; }

  // Per-thread packing buffers, 64-byte aligned, grown on demand and kept.
  struct Buffer {
    float* p = nullptr;
    size_t n = 0;
    Buffer() = default;
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() { ::operator delete[](p, std::align_val_t{64}); }
    float* get(size_t want) {
      if (want > n) {
        ::operator delete[](p, std::align_val_t{64});
        p = static_cast<float*>(::operator new[](want * sizeof(float), std::align_val_t{64}));
        n = want;
      }
      return p;
    }
  };

  struct Plan {
    int64_t mb, nb, nblocks;
  };
  // Block sizes from the shape alone. Blocks shrink (halving, columns first,
  // down to four tiles wide, then rows down to two tiles tall) until there
  // are kMinItems, so that a mid-size product still has work for several
  // threads (unless Gemm::split_for_threads is off); narrower blocks would
  // re-pack A too often.
  static constexpr int64_t kMinItems = 8;
  static Plan plan(const Gemm& g) {
    Plan p;
    const int64_t M = g.M > 0 ? g.M : 1, N = g.N > 0 ? g.N : 1;
    auto count = [&] { return (M + p.mb - 1) / p.mb * ((N + p.nb - 1) / p.nb); };
    if (g.M <= P::kSmallM) {
      constexpr int64_t nr = P::kSmallNV * V::kLanes;
      p.mb = M;
      p.nb = P::kSmallNB;
      while (g.split_for_threads && count() < kMinItems && p.nb / 2 >= 2 * nr && (p.nb / 2) % nr == 0) p.nb /= 2;
    } else {
      p.mb = P::MB;
      p.nb = P::NB;
      while (g.split_for_threads && count() < kMinItems) {
        if (p.nb / 2 >= 4 * NR && (p.nb / 2) % NR == 0 && p.nb / 2 < N) {
          p.nb /= 2;
        } else if (p.mb / 2 >= 2 * MR && (p.mb / 2) % MR == 0 && p.mb / 2 < M) {
          p.mb /= 2;
        } else {
          break;
        }
      }
    }
    p.nblocks = (N + p.nb - 1) / p.nb;
    return p;
  }

  static int64_t items(const Gemm& g) {
    if (g.M <= 0 || g.N <= 0) return 0;
    const Plan p = plan(g);
    return (g.M + p.mb - 1) / p.mb * p.nblocks;
  }

  static Block block_of(const Gemm& g, const Plan& p, int64_t item) {
    Block b;
    b.i0 = item / p.nblocks * p.mb;
    b.j0 = item % p.nblocks * p.nb;
    b.rows = mn(p.mb, g.M - b.i0);
    b.cols = mn(p.nb, g.N - b.j0);
    return b;
  }
  static Block block(const Gemm& g, int64_t item) { return block_of(g, plan(g), item); }

  // Rows [i0, i0+rows) x K range [k0, k0+kc) of A into panels of GMR rows
  // (the last one `rows % GMR` rows): a panel of R rows holds a[k * R + r].
  template <int GMR>
  static void pack_a(const Matrix& a, int64_t i0, int64_t rows, int64_t k0, int64_t kc,
                     float* dst) {
    for (int64_t ir = 0; ir < rows; ir += GMR) {
      const int64_t R = mn(GMR, rows - ir);
      const float* src = a.data + (i0 + ir) * a.rs + k0 * a.cs;
      if (R == GMR) {
        pack_a_panel<GMR>(src, a.rs, a.cs, kc, dst);
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t r = 0; r < R; ++r) dst[k * R + r] = src[r * a.rs + k * a.cs];
      }
      dst += R * kc;
    }
  }
  // A full panel: reads R row streams, writes contiguously.
  template <int R>
  static void pack_a_panel(const float* src, int64_t rs, int64_t cs, int64_t kc, float* dst) {
    if (cs == 1) {
      for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) dst[k * R + r] = src[r * rs + k];
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) dst[k * R + r] = src[r * rs + k * cs];
      }
    }
  }

  // Columns [j0, j0+cols) (cols <= GNR) x K range of B into one kc x GNR
  // panel, zero beyond cols.
  template <int GNV>
  static void pack_b_panel(const Matrix& b, int64_t k0, int64_t kc, int64_t j0, int64_t cols,
                           float* dst) {
    constexpr int GNR = GNV * V::kLanes;
    const float* base = b.data + k0 * b.rs + j0 * b.cs;
    if (b.cs == 1 && cols == GNR) {
      // Vector row copies (a variable-size memcpy becomes rep movs). The
      // rows of the next panel are fetched into L2 meanwhile: rows far apart
      // defeat the hardware prefetchers.
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = base + k * b.rs;
#pragma GCC unroll 8
        for (int j = 0; j < GNR; j += 16) __builtin_prefetch(src + GNR + j, 0, 2);
#pragma GCC unroll 8
        for (int v = 0; v < GNV; ++v)
          V::store(dst + k * GNR + v * V::kLanes, V::load(src + v * V::kLanes));
      }
    } else if (b.cs == 1) {
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t j = 0; j < cols; ++j) dst[k * GNR + j] = base[k * b.rs + j];
        for (int64_t j = cols; j < GNR; ++j) dst[k * GNR + j] = 0.0f;
      }
    } else if (b.rs == 1) {
      // Transposed B (x @ W^T): each column is contiguous in k. The ISA's
      // 8 x 8 transposes where it has them (P::transpose8).
      int64_t j0t = 0;
      if constexpr (requires { P::transpose8(base, b.cs, dst, int64_t{GNR}); }) {
        for (; j0t + 8 <= cols; j0t += 8) {
          int64_t k = 0;
          for (; k + 8 <= kc; k += 8) {
            // The next 8 columns, a group ahead: 8 short runs side by side
            // are more streams than the hardware prefetchers follow.
#pragma GCC unroll 8
            for (int q = 0; q < 8; ++q) __builtin_prefetch(base + (j0t + 8 + q) * b.cs + k, 0, 2);
            P::transpose8(base + j0t * b.cs + k, b.cs, dst + k * GNR + j0t, GNR);
          }
          for (; k < kc; ++k)
            for (int64_t j = j0t; j < j0t + 8; ++j) dst[k * GNR + j] = base[j * b.cs + k];
        }
      }
      for (int64_t j = j0t; j < cols; ++j) {
        const float* src = base + j * b.cs;
        for (int64_t k = 0; k < kc; ++k) dst[k * GNR + j] = src[k];
      }
      if (cols < GNR)
        for (int64_t k = 0; k < kc; ++k)
          for (int64_t j = cols; j < GNR; ++j) dst[k * GNR + j] = 0.0f;
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        const float* src = base + k * b.rs;
        for (int64_t j = 0; j < cols; ++j) dst[k * GNR + j] = src[j * b.cs];
        for (int64_t j = cols; j < GNR; ++j) dst[k * GNR + j] = 0.0f;
      }
    }
  }

  // The two tile shapes: rows and vectors per row of shape S.
  template <int S>
  static constexpr int kRows = S == 0 ? MR : P::kSmallMR;
  template <int S>
  static constexpr int kNV = S == 0 ? P::NV : P::kSmallNV;

  // This ISA's precompiled micro-kernels.
  static constexpr TileSet kPrecompiled = [] {
    static_assert(MR <= kMaxTileRows && P::kSmallMR <= kMaxTileRows);
    TileSet t;
    for (int r = 1; r <= MR; ++r)
      t.full[0][0][r] = TileTable<V, P::NV, false, std::make_index_sequence<MR>>::fns[r];
    for (int r = 1; r <= P::kSmallMR; ++r) {
      t.full[1][0][r] =
          TileTable<V, P::kSmallNV, false, std::make_index_sequence<P::kSmallMR>>::fns[r];
      t.full[1][1][r] =
          TileTable<V, P::kSmallNV, true, std::make_index_sequence<P::kSmallMR>>::fns[r];
    }
    return t;
  }();

  // One micro-tile of shape S; a partial one (nc < its width) runs on the
  // set's edge tile, or else on a scratch tile.
  template <int S, bool PF>
  static void run_tile(const TileSet& ts, int64_t R, int64_t nc, int64_t kc, const float* ap,
                       const float* bp, int64_t ldb, float* c, int64_t ldc, bool load) {
    constexpr int GMR = kRows<S>;
    constexpr int GNR = kNV<S> * V::kLanes;
    if (nc == GNR) {
      ts.full[S][PF][R](kc, ap, bp, ldb, c, ldc, load);
      return;
    }
    if (ts.edge) {
      if (const TileFn f = ts.edge(ts.isa, kNV<S>, PF, static_cast<int>(R), static_cast<int>(nc))) {
        f(kc, ap, bp, ldb, c, ldc, load);
        return;
      }
    }
    alignas(64) float t[GMR * GNR];
    if (load)
      for (int64_t r = 0; r < R; ++r)
        std::memcpy(t + r * GNR, c + r * ldc, static_cast<size_t>(nc) * sizeof(float));
    ts.full[S][PF][R](kc, ap, bp, GNR, t, GNR, load);
    for (int64_t r = 0; r < R; ++r)
      std::memcpy(c + r * ldc, t + r * GNR, static_cast<size_t>(nc) * sizeof(float));
  }

  // One block, all K panels, with GMR x (GNV * lanes) tiles. kDirect: full
  // strips of B are read in place (rows contiguous), the next one prefetched.
  // A's panels are packed at apack one at a time, or with a_all at
  // apack + rows * k0, all of them, so that the next block of the same rows
  // reuses them (a_ready: already there).
  template <int S, int64_t GKC, bool kDirect>
  static void block_body(const TileSet& ts, const Gemm& g, const Block& blk, float* apack,
                         float* bpack, bool a_all = false, bool a_ready = false) {
    constexpr int GMR = kRows<S>;
    constexpr int GNV = kNV<S>;
    constexpr int GNR = GNV * V::kLanes;
    float* cblk = g.c + blk.i0 * g.ldc + blk.j0;
    for (int64_t k0 = 0; k0 < g.K; k0 += GKC) {
      const int64_t kc = mn(GKC, g.K - k0);
      const bool load = k0 > 0 || g.accumulate;
      float* apanel = a_all ? apack + blk.rows * k0 : apack;
      if (!a_ready) pack_a<GMR>(g.a, blk.i0, blk.rows, k0, kc, apanel);
      for (int64_t jr = 0; jr < blk.cols; jr += GNR) {
        const int64_t nc = mn(GNR, blk.cols - jr);
        const float* ap = apanel;
        if (kDirect && nc == GNR) {
          const float* bp = g.b.data + k0 * g.b.rs + (blk.j0 + jr);
          for (int64_t ir = 0; ir < blk.rows; ir += GMR) {
            const int64_t R = mn(GMR, blk.rows - ir);
            // Only the first row group streams B from memory: it prefetches.
            if (ir == 0)
              run_tile<S, true>(ts, R, nc, kc, ap, bp, g.b.rs, cblk + jr, g.ldc, load);
            else
              run_tile<S, false>(ts, R, nc, kc, ap, bp, g.b.rs, cblk + ir * g.ldc + jr, g.ldc,
                                 load);
            ap += R * kc;
          }
          continue;
        }
        pack_b_panel<GNV>(g.b, k0, kc, blk.j0 + jr, nc, bpack);  // one panel: stays in L1
        for (int64_t ir = 0; ir < blk.rows; ir += GMR) {
          const int64_t R = mn(GMR, blk.rows - ir);
          run_tile<S, false>(ts, R, nc, kc, ap, bpack, GNR, cblk + ir * g.ldc + jr, g.ldc,
                             load);
          ap += R * kc;
        }
      }
    }
  }

  // One row of A times B whose rows are contiguous: a vector-matrix product.
  // Per panel of kRowKC rows of B, strips of S vectors of C stay in
  // registers while the panel's rows stream by, S vectors of each; the
  // strips of one panel read its rows side by side, so a panel is read as one
  // contiguous run of memory. Each element still sums ascending k from +0
  // (or the stored partial sum), one V::madd per step, as the tiles do. B's
  // elements are L::E, a vector of them widened by L::vec (column tails
  // too, from a padded copy: no scalar conversion of this ISA's build is
  // shared with another's).
  static constexpr int64_t kRowKC = 256;
  struct RowsF32 {
    using E = float;
    static typename V::T vec(const float* p) { return V::load(p); }
  };
  struct RowsBf16 {
    using E = uint16_t;
    static typename V::T vec(const uint16_t* p) { return V::load_bf16(p); }
  };
  struct RowsF16 {
    using E = uint16_t;
    static typename V::T vec(const uint16_t* p) { return V::load_f16(p); }
  };
  template <class L, int S>
  static int64_t row_strips(const Gemm& g, float* c, const float* a, const typename L::E* b, int64_t j,
                            int64_t n, int64_t k0, int64_t k1) {
    constexpr int W = V::kLanes;
    const bool first = k0 == 0 && !g.accumulate;
    for (; j + S * W <= n; j += S * W) {
      typename V::T acc[S];
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) acc[s] = first ? V::zero() : V::load(c + j + s * W);
      const typename L::E* bk = b + k0 * g.b.rs + j;
      for (int64_t k = k0; k < k1; ++k, bk += g.b.rs) {
        const typename V::T ak = V::bcast(a + k * g.a.cs);
#pragma GCC unroll 8
        for (int s = 0; s < S; ++s) acc[s] = V::madd(ak, L::vec(bk + s * W), acc[s]);
      }
#pragma GCC unroll 8
      for (int s = 0; s < S; ++s) V::store(c + j + s * W, acc[s]);
    }
    return j;
  }
  template <class L>
  static void row_times(const Gemm& g, const Block& blk, const typename L::E* b) {
    float* c = g.c + blk.i0 * g.ldc + blk.j0;
    const float* a = g.a.data + blk.i0 * g.a.rs;
    const int64_t n = blk.cols;
    for (int64_t k0 = 0; k0 < g.K; k0 += kRowKC) {
      const int64_t k1 = mn(g.K, k0 + kRowKC);
      int64_t j = row_strips<L, 8>(g, c, a, b, 0, n, k0, k1);
      j = row_strips<L, 4>(g, c, a, b, j, n, k0, k1);
      j = row_strips<L, 2>(g, c, a, b, j, n, k0, k1);
      j = row_strips<L, 1>(g, c, a, b, j, n, k0, k1);
      if (j < n) {
        constexpr int W = V::kLanes;
        const int64_t t = n - j;  // < W
        typename L::E raw[W] = {};
        alignas(64) float wide[W], acc[W];
        for (int64_t q = 0; q < t; ++q) acc[q] = k0 == 0 && !g.accumulate ? 0.0f : c[j + q];
        for (int64_t k = k0; k < k1; ++k) {
          const float* bk = wide;
          if constexpr (std::is_same_v<typename L::E, float>) {
            bk = b + k * g.b.rs + j;
          } else {
            std::memcpy(raw, b + k * g.b.rs + j, static_cast<size_t>(t) * sizeof(raw[0]));
            V::store(wide, L::vec(raw));
          }
          for (int64_t q = 0; q < t; ++q) acc[q] = P::madd1(a[k * g.a.cs], bk[q], acc[q]);
        }
        for (int64_t q = 0; q < t; ++q) c[j + q] = acc[q];
      }
    }
  }
  // Rows of A times B stored by columns (x @ W^T with W row-major: column j
  // of B is W's row j, contiguous in k), where the ISA has
  // P::transpose_lanes (kLanes vectors, one per row, transposed: vector t
  // holding element t of each). Strips of kLanes columns: kLanes of W's rows
  // stream side by side, each long run read whole (a vector of L::E widened
  // by L::vec per row and block), and each kLanes x kLanes block is
  // transposed in registers and used by up to kColRows rows of A, so each
  // element of C gets one V::madd per k in ascending order, as from a packed
  // panel; nothing is packed, so a product of a few rows reads the weight's
  // bytes once (a strip's later row groups find it in L1). Tails along k
  // and j widen through a padded copy, as row_times does.
  static constexpr bool kColTimes = requires(const typename V::T* r, typename V::T* t) { P::transpose_lanes(r, t); };
  // Rows of A per pass over a strip: their sums and the transposed block
  // fit the vector registers.
  static constexpr int kColRows = V::kLanes >= 16 ? 8 : 4;
  template <class L>
  static void col_times(const Gemm& g, const Block& blk, const typename L::E* b) {
    if constexpr (kColTimes) col_times_impl<L>(g, blk, b);
  }
  // `count` (<= kLanes) elements from p, a step apart, widened into wide[].
  template <class L>
  static void widen(const typename L::E* p, int64_t step, int64_t count, float* wide) {
    typename L::E raw[V::kLanes] = {};
    for (int64_t q = 0; q < count; ++q) raw[q] = p[q * step];
    V::store(wide, L::vec(raw));
  }
  // `rows` (1..R) rows of A (from a, g.a's strides) times the kLanes
  // columns of B from bj (g.b.cs apart) into c (rows g.ldc apart). Rows past
  // `rows` repeat the last one and are not stored: the block's transpose,
  // not the multiplies, is what a pass costs. `ahead`: fetch the next
  // strip's columns meanwhile (the first row group of a strip does).
  // kTail: only the first `ncols` (< kLanes) columns exist; the others are
  // zeros in the transpose and their lanes are neither read from nor
  // stored to C (a column tail keeps the vector sums, not a scalar chain per
  // column of K dependent steps).
  template <class L, int R, bool kTail = false>
  static void col_strip(const Gemm& g, float* c, const float* a, int64_t rows, const typename L::E* bj,
                        bool ahead, int64_t ncols = V::kLanes) {
    using E = typename L::E;
    constexpr int W = V::kLanes;
    const int64_t K = g.K, cs = g.b.cs;
    const float* ar[R];
    typename V::T acc[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      ar[r] = a + mn(r, rows - 1) * g.a.rs;
      if (!g.accumulate || r >= rows) {
        acc[r] = V::zero();
      } else if constexpr (kTail) {
        alignas(64) float part[W] = {};
        for (int64_t q = 0; q < ncols; ++q) part[q] = c[r * g.ldc + q];
        acc[r] = V::load(part);
      } else {
        acc[r] = V::load(c + r * g.ldc);
      }
    }
    int64_t k = 0;
    for (; k + W <= K; k += W) {
      typename V::T cols[W], t[W];
      // The next strip's columns, a strip ahead (only the first one's start
      // is found by the hardware's prefetchers).
      if (!kTail && ahead) {
#pragma GCC unroll 16
        for (int q = 0; q < W; ++q) __builtin_prefetch(bj + (W + q) * cs + k, 0, 1);
      }
#pragma GCC unroll 16
      for (int q = 0; q < W; ++q) cols[q] = !kTail || q < ncols ? L::vec(bj + q * cs + k) : V::zero();
      P::transpose_lanes(cols, t);
#pragma GCC unroll 16
      for (int q = 0; q < W; ++q) {
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r) acc[r] = V::madd(V::bcast(ar[r] + (k + q) * g.a.cs), t[q], acc[r]);
      }
    }
    for (; k < K; ++k) {
      alignas(64) float col[W] = {};
      if constexpr (std::is_same_v<E, float>) {
        for (int q = 0; q < ncols; ++q) col[q] = bj[q * cs + k];
      } else {
        widen<L>(bj + k, cs, ncols, col);
      }
      const typename V::T bk = V::load(col);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r] = V::madd(V::bcast(ar[r] + k * g.a.cs), bk, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      if (r >= rows) continue;
      if constexpr (kTail) {
        alignas(64) float part[W];
        V::store(part, acc[r]);
        for (int64_t q = 0; q < ncols; ++q) c[r * g.ldc + q] = part[q];
      } else {
        V::store(c + r * g.ldc, acc[r]);
      }
    }
  }
  template <class L>
  static void col_times_impl(const Gemm& g, const Block& blk, const typename L::E* b) {
    using E = typename L::E;
    constexpr int W = V::kLanes;
    float* c = g.c + blk.i0 * g.ldc + blk.j0;
    const float* a = g.a.data + blk.i0 * g.a.rs;
    const int64_t n = blk.cols, cs = g.b.cs;
    int64_t j = 0;
    for (; j + W <= n; j += W) {
      const E* bj = b + j * cs;
      for (int64_t r = 0; r < blk.rows; r += kColRows) {
        const int64_t rows = mn(kColRows, blk.rows - r);
        float* cr = c + r * g.ldc + j;
        const float* ar = a + r * g.a.rs;
        if (rows == 1) col_strip<L, 1>(g, cr, ar, rows, bj, r == 0);
        else if (rows <= kColRows / 2) col_strip<L, kColRows / 2>(g, cr, ar, rows, bj, r == 0);
        else col_strip<L, kColRows>(g, cr, ar, rows, bj, r == 0);
      }
    }
    if (j == n) return;
    const E* bj = b + j * cs;
    for (int64_t r = 0; r < blk.rows; r += kColRows) {
      const int64_t rows = mn(kColRows, blk.rows - r);
      float* cr = c + r * g.ldc + j;
      const float* ar = a + r * g.a.rs;
      if (rows == 1) col_strip<L, 1, true>(g, cr, ar, rows, bj, false, n - j);
      else if (rows <= kColRows / 2) col_strip<L, kColRows / 2, true>(g, cr, ar, rows, bj, false, n - j);
      else col_strip<L, kColRows, true>(g, cr, ar, rows, bj, false, n - j);
    }
  }
  // One row times B read in place, by rows (b.cs == 1) or by columns, its
  // elements f32 or the 16-bit g.b16.
  static void one_row_times(const Gemm& g, const Block& blk) {
    if (g.b.cs == 1) {
      if (!g.b16) return row_times<RowsF32>(g, blk, g.b.data + blk.j0);
      if (g.b16_type == Dtype::F16) return row_times<RowsF16>(g, blk, g.b16 + blk.j0);
      return row_times<RowsBf16>(g, blk, g.b16 + blk.j0);
    }
    if (!g.b16) return col_times<RowsF32>(g, blk, g.b.data + blk.j0 * g.b.cs);
    if (g.b16_type == Dtype::F16) return col_times<RowsF16>(g, blk, g.b16 + blk.j0 * g.b.cs);
    col_times<RowsBf16>(g, blk, g.b16 + blk.j0 * g.b.cs);
  }

  // Tiny products (gemm.h: tiny_batch): Tiny<V>, or Tiny<P::NarrowV> for
  // products at most its width wide where the ISA has one (a masked load of
  // a few floats from a wide vector can cost more than the narrow one; each
  // lane's sums are the same, so the bits are).
  static void tiny_batch(const Gemm& g, int64_t count, int64_t sa, int64_t sb, int64_t sc) {
    if constexpr (requires { typename P::NarrowV; }) {
      if (g.N <= P::NarrowV::kLanes) return Tiny<typename P::NarrowV>::batch(g, count, sa, sb, sc);
    }
    Tiny<V>::batch(g, count, sa, sb, sc);
  }

  static constexpr int64_t kKeepA = int64_t{1} << 18;
  static void run(const Gemm& g, int64_t begin, int64_t end, const TileSet& ts) {
    if (begin >= end) return;
    const Plan p = plan(g);
    const bool by_columns = kColTimes && g.b.rs == 1 && g.b.cs != 1;
    if (g.M == 1 && (g.b.cs == 1 || by_columns) && g.K > 0) {
      // One row of C, so the run's blocks lie side by side in it: one pass
      // over all their columns reads B's rows (or columns) as long runs
      // (nothing is packed). The epilogue still sees each block.
      Block row = block_of(g, p, begin);
      const Block last = block_of(g, p, end - 1);
      row.cols = last.j0 + last.cols - row.j0;
      one_row_times(g, row);
      if (g.hook)
        for (int64_t item = begin; item < end; ++item) {
          const Block blk = block_of(g, p, item);
          g.hook(g.hook_ctx, g.c, g.ldc, blk.i0, blk.j0, blk.rows, blk.cols);
        }
      return;
    }
    thread_local Buffer abuf, bbuf;
    constexpr int64_t kMaxKC = mx(KC, mx(P::kSmallKC, P::kSmallPackedKC));
    const int64_t kcmax = mn(kMaxKC, g.K > 0 ? g.K : 1);
    constexpr int64_t kMaxNR = NR > P::kSmallNV * V::kLanes ? NR : P::kSmallNV * V::kLanes;
    // A block's packed rows of A for every K panel fit kKeepA floats: they
    // stay packed for the run's next blocks of the same rows.
    const bool keep_a = g.M > P::kSmallM && p.mb * g.K <= kKeepA;
    float* apack = abuf.get(static_cast<size_t>(p.mb * (keep_a ? g.K : kcmax)));
    int64_t packed_i0 = -1;
    float* bpack = bbuf.get(static_cast<size_t>(kMaxNR * kcmax));
    const bool small = g.M <= P::kSmallM;
    for (int64_t item = begin; item < end; ++item) {
      const Block blk = block_of(g, p, item);
      if (g.K == 0 && !g.accumulate) {
        float* cblk = g.c + blk.i0 * g.ldc + blk.j0;
        for (int64_t r = 0; r < blk.rows; ++r)
          for (int64_t j = 0; j < blk.cols; ++j) cblk[r * g.ldc + j] = 0.0f;
      } else if (blk.rows == 1 && (g.b.cs == 1 || g.b16)) {
        one_row_times(g, blk);
      } else if (small && by_columns && !g.b16) {
        // A few rows times B stored by columns: read in place, each block
        // of columns transposed in registers once for several rows.
        col_times<RowsF32>(g, blk, g.b.data + blk.j0 * g.b.cs);
      } else if (small && g.b.cs == 1) {
        // Small M streams B once: its rows read in place beat a packed copy.
        block_body<1, P::kSmallKC, true>(ts, g, blk, apack, bpack);
      } else if (small) {
        block_body<1, P::kSmallPackedKC, false>(ts, g, blk, apack, bpack);
      } else {
        block_body<0, KC, false>(ts, g, blk, apack, bpack, keep_a, keep_a && blk.i0 == packed_i0);
        packed_i0 = blk.i0;
      }
      if (g.hook) g.hook(g.hook_ctx, g.c, g.ldc, blk.i0, blk.j0, blk.rows, blk.cols);
    }
  }

  // dst[k * ld + n] = src[n * cs + k]: 8 x 8 blocks through P::transpose8
  // where the ISA has it, the edges one element at a time.
  static void transpose(const float* src, int64_t cs, int64_t K, int64_t N, float* dst, int64_t ld) {
    int64_t n0 = 0;
    if constexpr (requires { P::transpose8(src, cs, dst, ld); }) {
      for (; n0 + 8 <= N; n0 += 8) {
        int64_t k = 0;
        for (; k + 8 <= K; k += 8) P::transpose8(src + n0 * cs + k, cs, dst + k * ld + n0, ld);
        for (; k < K; ++k)
          for (int64_t n = n0; n < n0 + 8; ++n) dst[k * ld + n] = src[n * cs + k];
      }
    }
    // Columns in groups of 16: each of the group's rows is written once per
    // k, as one short contiguous run.
    for (; n0 < N; n0 += 16) {
      const int64_t n1 = mn(N, n0 + 16);
      for (int64_t k = 0; k < K; ++k)
        for (int64_t n = n0; n < n1; ++n) dst[k * ld + n] = src[n * cs + k];
    }
  }

  static constexpr Impl kImpl = {&items, &block,        &run,         &transpose, &tiny_batch, &kPrecompiled,
                                 MR,     P::NV,         P::kSmallMR, P::kSmallNV, kColTimes};
};

}  // namespace dvm::backends::cube::detail
