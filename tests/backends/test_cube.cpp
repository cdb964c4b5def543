// The cube unit's GEMM core (backends/cube/gemm.h) on every ISA this CPU has:
// against a double-precision reference and, bit for bit, against a scalar
// loop in the documented summation order; odd sizes, transposed, strided,
// broadcast and negative-stride operands; guard elements around C; results
// independent of how the items are split; the finished-tile hook.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/convert.h"
#include "backends/cube/gemm.h"
#include "backends/isa.h"
#include "dvm/error.h"

namespace dvm::backends::cube {
namespace {

constexpr uint32_t kGuardBits = 0x7fbadbadu;  // a NaN pattern no arithmetic makes
constexpr int64_t kGuards = 37;               // after the last row: > 2 zmm

std::vector<Isa> isas() {
  std::vector<Isa> out;
  for (Isa i : {Isa::Portable, Isa::Avx2, Isa::Avx512})
    if (isa_supported(i)) out.push_back(i);
  return out;
}

enum class Layout { RowMajor, ColMajor, Strided, BcastRows, BcastCols, Negative };
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::RowMajor: return "row-major";
    case Layout::ColMajor: return "col-major";
    case Layout::Strided: return "strided";
    case Layout::BcastRows: return "bcast-rows";
    case Layout::BcastCols: return "bcast-cols";
    case Layout::Negative: return "negative";
  }
  return "?";
}
constexpr Layout kLayouts[] = {Layout::RowMajor,  Layout::ColMajor,  Layout::Strided,
                               Layout::BcastRows, Layout::BcastCols, Layout::Negative};

// An R x C operand stored in `store` with the given layout.
struct Operand {
  std::vector<float> store;
  Matrix m{};
  int64_t rows = 0, cols = 0;
  float at(int64_t i, int64_t j) const { return m.data[i * m.rs + j * m.cs]; }
};

Operand make_operand(int64_t R, int64_t C, Layout l, uint32_t seed) {
  Operand o;
  o.rows = R;
  o.cols = C;
  size_t n = 0;
  int64_t rs = 0, cs = 0, offset = 0;
  switch (l) {
    case Layout::RowMajor: n = R * C; rs = C; cs = 1; break;
    case Layout::ColMajor: n = R * C; rs = 1; cs = R; break;
    case Layout::Strided: rs = 2 * C + 3; cs = 2; n = (R - 1) * rs + (C - 1) * cs + 1; break;
    case Layout::BcastRows: n = C; rs = 0; cs = 1; break;
    case Layout::BcastCols: n = R; rs = 1; cs = 0; break;
    case Layout::Negative: n = R * C; rs = -C; cs = -1; offset = R * C - 1; break;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  o.store.resize(std::max<size_t>(n, 1));
  for (float& x : o.store) x = d(rng);
  o.m = Matrix{o.store.data() + offset, rs, cs};
  return o;
}

// C with ldc = N + gap, every element outside the M x N result a guard.
struct Output {
  std::vector<float> store;
  int64_t M, N, ldc;
  Output(int64_t m, int64_t n, int64_t gap) : M(m), N(n), ldc(n + gap) {
    store.assign(static_cast<size_t>(M * ldc + kGuards), std::bit_cast<float>(kGuardBits));
  }
  float* c() { return store.data(); }
  float at(int64_t i, int64_t j) const { return store[i * ldc + j]; }
  // Every element outside the result still holds the guard pattern.
  int64_t guards_broken() const {
    int64_t bad = 0;
    for (int64_t p = 0; p < static_cast<int64_t>(store.size()); ++p) {
      const bool inside = p < M * ldc && p % ldc < N;
      if (!inside && std::bit_cast<uint32_t>(store[p]) != kGuardBits) ++bad;
    }
    return bad;
  }
};

Gemm make_gemm(const Operand& a, const Operand& b, Output& c) {
  Gemm g;
  g.M = a.rows;
  g.K = a.cols;
  g.N = b.cols;
  g.a = a.m;
  g.b = b.m;
  g.c = c.c();
  g.ldc = c.ldc;
  return g;
}

// The documented order, written out: ascending k from +0, fused on the SIMD
// ISAs, multiply-then-add (two roundings) on Portable. This file is compiled
// with -ffp-contract=off, so `acc + x * y` is never fused here.
float scalar_order(const Operand& a, const Operand& b, int64_t i, int64_t j, Isa isa) {
  float acc = 0.0f;
  for (int64_t k = 0; k < a.cols; ++k) {
    const float x = a.at(i, k), y = b.at(k, j);
    acc = isa == Isa::Portable ? acc + x * y : std::fmaf(x, y, acc);
  }
  return acc;
}

// Checks every element of c: bit-equal to the scalar loop, and within the
// rounding-error bound of the double-precision reference: recursive
// summation of K products with unit roundoff u = 2^-24 has error at most
// gamma_{K+1} * sum_k |a_ik||b_kj|, gamma_n = n u / (1 - n u) (one more
// rounding than K for the unfused products).
void check_result(const Operand& a, const Operand& b, const Output& c, Isa isa,
                  const std::string& what) {
  const int64_t K = a.cols;
  const double u = std::ldexp(1.0, -24);
  const double gamma = (K + 1) * u / (1.0 - (K + 1) * u);
  int64_t bits_bad = 0, tol_bad = 0;
  for (int64_t i = 0; i < c.M; ++i) {
    for (int64_t j = 0; j < c.N; ++j) {
      double ref = 0.0, mag = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(a.at(i, k)) * b.at(k, j);
        ref += p;
        mag += std::fabs(p);
      }
      const float got = c.at(i, j);
      const float want = scalar_order(a, b, i, j, isa);
      if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want) && bits_bad++ < 3)
        ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << got
                      << " differs in bits from the ordered scalar sum " << want;
      if (!(std::fabs(got - ref) <= gamma * mag) && tol_bad++ < 3)
        ADD_FAILURE() << what << ": C[" << i << "][" << j << "] = " << got << ", reference "
                      << ref << ", bound " << gamma * mag;
    }
  }
  EXPECT_EQ(bits_bad, 0) << what;
  EXPECT_EQ(tol_bad, 0) << what;
  EXPECT_EQ(c.guards_broken(), 0) << what << ": elements outside C[M][N] were written";
}

struct Shape {
  int64_t M, K, N;
};

std::string describe(Isa isa, const Shape& s, Layout la, Layout lb) {
  return std::string(isa_name(isa)) + " " + std::to_string(s.M) + "x" + std::to_string(s.K) +
         "x" + std::to_string(s.N) + " A " + layout_name(la) + " B " + layout_name(lb);
}

// ---- numerics ------------------------------------------------------------------

TEST(CubeGemm, OddSizesAllLayouts) {
  // One row: panels of 256 k and a partial one; strips of 8, 4, 2 and 1
  // vectors and a column tail (247 = 16 * (8 + 4 + 2) + 23 on AVX-512,
  // 123 = 8 * (8 + 4 + 2 + 1) + 3 on AVX2).
  const Shape shapes[] = {{1, 1, 1},    {7, 17, 63},  {17, 65, 7},    {63, 7, 65},
                          {65, 63, 17}, {1, 300, 65}, {1, 20, 48},    {1, 9, 40},
                          {1, 600, 247}, {1, 513, 123}, {16, 129, 33}, {100, 257, 130}};
  uint32_t seed = 1;
  for (Isa isa : isas()) {
    for (const Shape& s : shapes) {
      for (Layout la : kLayouts) {
        for (Layout lb : kLayouts) {
          const Operand a = make_operand(s.M, s.K, la, seed++);
          const Operand b = make_operand(s.K, s.N, lb, seed++);
          Output c(s.M, s.N, 3);
          gemm(make_gemm(a, b, c), isa);
          check_result(a, b, c, isa, describe(isa, s, la, lb));
        }
      }
    }
  }
}

// Batches of tiny products: generated shapes up to kTinyDim (1s, odd sizes,
// K = 0), every layout of A, B's rows contiguous (row-major or broadcast),
// a gap after each row of C; each product of the batch bit-equal to the
// ordered scalar sum and within the rounding bound, guards intact.
TEST(CubeGemm, TinyBatchesKeepTheDocumentedOrder) {
  std::mt19937 gen(77);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  uint32_t seed = 500;
  for (Isa isa : isas()) {
    for (int c = 0; c < 24; ++c) {
      const Shape s{c == 0 ? 1 : pick(1, kTinyDim), c == 1 ? 0 : pick(1, kTinyDim), c == 2 ? 1 : pick(1, kTinyDim)};
      const Layout la = kLayouts[c % 6], lb = c % 5 == 4 ? Layout::BcastRows : Layout::RowMajor;
      const int64_t count = pick(1, 5);
      std::vector<Operand> as, bs;
      std::vector<Output> cs;
      for (int64_t q = 0; q < count; ++q) {
        as.push_back(make_operand(s.M, s.K, la, seed++));
        bs.push_back(make_operand(s.K, s.N, lb, seed++));
        cs.emplace_back(s.M, s.N, c % 3);
      }
      // The batch reads product q at q times the stride from product 0's
      // pointers: one pointer difference per operand, as a launch's stride.
      Gemm g = make_gemm(as[0], bs[0], cs[0]);
      ASSERT_TRUE(tiny(g)) << describe(isa, s, la, lb);
      const int64_t before = tiny_products();
      for (int64_t q = 0; q < count; ++q) {
        Gemm one = make_gemm(as[static_cast<size_t>(q)], bs[static_cast<size_t>(q)], cs[static_cast<size_t>(q)]);
        tiny_batch(one, isa, 1, 0, 0, 0);
      }
      EXPECT_EQ(tiny_products() - before, count);
      for (int64_t q = 0; q < count; ++q)
        check_result(as[static_cast<size_t>(q)], bs[static_cast<size_t>(q)], cs[static_cast<size_t>(q)], isa,
                     describe(isa, s, la, lb) + " tiny, product " + std::to_string(q));
      // One call over products laid out a fixed stride apart.
      const int64_t sa = 3 * s.M * s.K + 5, sb = lb == Layout::BcastRows ? 0 : 2 * s.K * s.N + 3,
                    ldc = s.N + c % 3, sc = s.M * ldc + 7;
      std::vector<float> abuf(static_cast<size_t>(count * sa + 1)), bbuf(static_cast<size_t>(count * sb + s.K * s.N + 1)),
          cbuf(static_cast<size_t>(count * sc + kGuards), std::bit_cast<float>(kGuardBits));
      for (int64_t q = 0; q < count; ++q)
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t k = 0; k < s.K; ++k)
            abuf[static_cast<size_t>(q * sa + i * s.K + k)] = as[static_cast<size_t>(q)].at(i, k);
      for (int64_t q = 0; q < count; ++q)
        for (int64_t k = 0; k < s.K; ++k)
          for (int64_t j = 0; j < s.N; ++j)
            bbuf[static_cast<size_t>(q * sb + k * s.N + j)] = bs[static_cast<size_t>(sb == 0 ? 0 : q)].at(k, j);
      Gemm b = g;
      b.a = {abuf.data(), s.K, 1};
      b.b = {bbuf.data(), s.N, 1};
      b.c = cbuf.data();
      b.ldc = ldc;
      tiny_batch(b, isa, count, sa, sb, sc);
      int64_t bad = 0;
      for (int64_t q = 0; q < count; ++q)
        for (int64_t i = 0; i < s.M; ++i)
          for (int64_t j = 0; j < s.N; ++j) {
            const float want = scalar_order(as[static_cast<size_t>(q)], bs[static_cast<size_t>(sb == 0 ? 0 : q)], i, j, isa);
            const float got = cbuf[static_cast<size_t>(q * sc + i * ldc + j)];
            if (std::bit_cast<uint32_t>(got) != std::bit_cast<uint32_t>(want)) ++bad;
          }
      EXPECT_EQ(bad, 0) << describe(isa, s, la, lb) << ": a strided batch of " << count;
      int64_t written = 0;
      for (size_t e = 0; e < cbuf.size(); ++e) written += std::bit_cast<uint32_t>(cbuf[e]) != kGuardBits;
      EXPECT_EQ(written, count * s.M * s.N) << describe(isa, s, la, lb) << ": writes outside the products";
    }
    Gemm big{};
    big.M = big.N = big.K = kTinyDim + 1;
    big.b = {nullptr, 1, 1};
    EXPECT_FALSE(tiny(big));
    EXPECT_THROW(tiny_batch(big, isa, 1, 0, 0, 0), Error);
  }
}

// Sizes that cross every blocking boundary (K panels, block rows and columns,
// the small-M path's limit) with the common layouts.
TEST(CubeGemm, LargeSizes) {
  const Shape shapes[] = {{1000, 1000, 33}, {20, 1000, 1000}, {300, 600, 257}, {16, 3000, 97}};
  uint32_t seed = 100;
  for (Isa isa : isas()) {
    for (const Shape& s : shapes) {
      for (Layout lb : {Layout::RowMajor, Layout::ColMajor}) {
        const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
        const Operand b = make_operand(s.K, s.N, lb, seed++);
        Output c(s.M, s.N, 5);
        gemm(make_gemm(a, b, c), isa);
        check_result(a, b, c, isa, describe(isa, s, Layout::RowMajor, lb));
      }
    }
  }
}

// Cancellation to exactly zero and signed zeros: the sum starts from +0, so
// products that are all -0 give +0, in every ISA.
TEST(CubeGemm, SignedZerosAndSpecials) {
  for (Isa isa : isas()) {
    Operand a = make_operand(9, 5, Layout::RowMajor, 7);
    Operand b = make_operand(5, 40, Layout::RowMajor, 8);
    for (int64_t k = 0; k < 5; ++k) a.store[0 * 5 + k] = -0.0f;  // row 0: all -0
    a.store[1 * 5 + 2] = std::numeric_limits<float>::infinity();
    a.store[2 * 5 + 1] = std::nanf("");
    Output c(9, 40, 0);
    gemm(make_gemm(a, b, c), isa);
    for (int64_t j = 0; j < 40; ++j) {
      EXPECT_EQ(std::bit_cast<uint32_t>(c.at(0, j)), 0u) << isa_name(isa) << " j " << j;
      EXPECT_TRUE(std::isnan(c.at(2, j))) << isa_name(isa);
      EXPECT_FALSE(std::isfinite(c.at(1, j))) << isa_name(isa);
    }
  }
}

// ---- bit-identity --------------------------------------------------------------

TEST(CubeGemm, SimdIsasAgreeBitForBit) {
  if (!isa_supported(Isa::Avx2) || !isa_supported(Isa::Avx512))
    GTEST_SKIP() << "needs AVX2 and AVX-512 to compare";
  const Shape shapes[] = {{5, 77, 300}, {130, 513, 70}, {300, 200, 517}};
  uint32_t seed = 500;
  for (const Shape& s : shapes) {
    const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
    const Operand b = make_operand(s.K, s.N, Layout::ColMajor, seed++);
    Output c2(s.M, s.N, 1), c5(s.M, s.N, 1);
    gemm(make_gemm(a, b, c2), Isa::Avx2);
    gemm(make_gemm(a, b, c5), Isa::Avx512);
    EXPECT_EQ(std::memcmp(c2.store.data(), c5.store.data(), c2.store.size() * sizeof(float)), 0)
        << s.M << "x" << s.K << "x" << s.N;
  }
}

// run() over random ranges of items, in random order, gives gemm()'s bits.
TEST(CubeGemm, ItemSplitsDoNotChangeBits) {
  const Shape shapes[] = {{3, 300, 1000}, {16, 700, 300}, {250, 600, 700}, {37, 41, 43}};
  std::mt19937 rng(42);
  uint32_t seed = 900;
  for (Isa isa : isas()) {
    for (const Shape& s : shapes) {
      const Operand a = make_operand(s.M, s.K, Layout::Strided, seed++);
      const Operand b = make_operand(s.K, s.N, Layout::RowMajor, seed++);
      Output whole(s.M, s.N, 2), split(s.M, s.N, 2);
      gemm(make_gemm(a, b, whole), isa);
      const Gemm g = make_gemm(a, b, split);
      const int64_t n = items(g, isa);
      ASSERT_GT(n, 0);
      std::vector<std::pair<int64_t, int64_t>> ranges;
      for (int64_t b0 = 0; b0 < n;) {
        const int64_t len = std::uniform_int_distribution<int64_t>(1, 3)(rng);
        ranges.push_back({b0, std::min(n, b0 + len)});
        b0 += len;
      }
      std::shuffle(ranges.begin(), ranges.end(), rng);
      for (auto [b0, e0] : ranges) run(g, isa, b0, e0);
      EXPECT_EQ(std::memcmp(whole.store.data(), split.store.data(),
                            whole.store.size() * sizeof(float)),
                0)
          << isa_name(isa) << " " << s.M << "x" << s.K << "x" << s.N << " in " << n << " items";
    }
  }
}

// Several threads running disjoint ranges at once (each with its own
// packing buffers) give gemm()'s bits.
TEST(CubeGemm, ConcurrentRunsMatchOneThread) {
  uint32_t seed = 1200;
  for (Isa isa : isas()) {
    for (Shape s : {Shape{700, 300, 900}, Shape{9, 2000, 1500}}) {
      const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
      const Operand b = make_operand(s.K, s.N, Layout::ColMajor, seed++);
      Output whole(s.M, s.N, 1), split(s.M, s.N, 1);
      gemm(make_gemm(a, b, whole), isa);
      const Gemm g = make_gemm(a, b, split);
      const int64_t n = items(g, isa);
      constexpr int kThreads = 4;
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&, t] { run(g, isa, n * t / kThreads, n * (t + 1) / kThreads); });
      for (std::thread& t : threads) t.join();
      EXPECT_EQ(std::memcmp(whole.store.data(), split.store.data(),
                            whole.store.size() * sizeof(float)),
                0)
          << isa_name(isa) << " " << s.M << "x" << s.K << "x" << s.N << " in " << n << " items";
    }
  }
}

// ---- edges, blocks and the hook ------------------------------------------------

TEST(CubeGemm, EmptyAndZeroK) {
  for (Isa isa : isas()) {
    Operand a = make_operand(5, 3, Layout::RowMajor, 1);
    Operand b = make_operand(3, 6, Layout::RowMajor, 2);
    for (auto [M, N] : {std::pair<int64_t, int64_t>{0, 6}, {5, 0}}) {
      Output c(M, N, 2);
      Gemm g = make_gemm(a, b, c);
      g.M = M;
      g.N = N;
      EXPECT_EQ(items(g, isa), 0);
      gemm(g, isa);
      EXPECT_EQ(c.guards_broken(), 0);
    }
    // K = 0: zeros, and the hook still runs on every block.
    Output c(5, 6, 2);
    Gemm g = make_gemm(a, b, c);
    g.K = 0;
    int64_t seen = 0;
    g.hook = [](void* ctx, float*, int64_t, int64_t, int64_t, int64_t rows, int64_t cols) {
      *static_cast<int64_t*>(ctx) += rows * cols;
    };
    g.hook_ctx = &seen;
    gemm(g, isa);
    EXPECT_EQ(seen, 30);
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(std::bit_cast<uint32_t>(c.at(i, j)), 0u);
    EXPECT_EQ(c.guards_broken(), 0);
  }
}

struct HookLog {
  const Output* expected;  // the finished result, computed beforehand
  std::vector<int> covered;
  int64_t calls = 0, stale = 0, bad_args = 0;
  float* c;
  int64_t ldc;
};

void log_hook(void* ctx, float* c, int64_t ldc, int64_t i0, int64_t j0, int64_t rows,
              int64_t cols) {
  auto* log = static_cast<HookLog*>(ctx);
  ++log->calls;
  if (c != log->c || ldc != log->ldc || rows <= 0 || cols <= 0 || i0 < 0 || j0 < 0 ||
      i0 + rows > log->expected->M || j0 + cols > log->expected->N) {
    ++log->bad_args;
    return;
  }
  for (int64_t i = i0; i < i0 + rows; ++i) {
    for (int64_t j = j0; j < j0 + cols; ++j) {
      ++log->covered[i * log->expected->N + j];
      // The block's values are final when its hook runs.
      if (std::bit_cast<uint32_t>(c[i * ldc + j]) !=
          std::bit_cast<uint32_t>(log->expected->at(i, j)))
        ++log->stale;
      c[i * ldc + j] *= 2.0f;  // an epilogue: must not be overwritten later
    }
  }
}

TEST(CubeGemm, HookOncePerBlockAfterFinalValues) {
  const Shape shapes[] = {{1, 900, 300}, {16, 300, 129}, {17, 600, 300}, {300, 520, 600}};
  uint32_t seed = 1300;
  for (Isa isa : isas()) {
    for (const Shape& s : shapes) {
      const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
      const Operand b = make_operand(s.K, s.N, Layout::ColMajor, seed++);
      Output want(s.M, s.N, 4), got(s.M, s.N, 4);
      gemm(make_gemm(a, b, want), isa);
      Gemm g = make_gemm(a, b, got);
      HookLog log{&want, std::vector<int>(s.M * s.N, 0), 0, 0, 0, got.c(), got.ldc};
      g.hook = &log_hook;
      g.hook_ctx = &log;
      const int64_t n = items(g, isa);
      // Items in reverse, one per call: order must not matter.
      for (int64_t it = n - 1; it >= 0; --it) {
        const Block blk = item_block(g, isa, it);
        const int64_t before = log.calls;
        run(g, isa, it, it + 1);
        EXPECT_EQ(log.calls, before + 1);
        EXPECT_GT(blk.rows, 0);
        EXPECT_GT(blk.cols, 0);
      }
      const std::string what = describe(isa, s, Layout::RowMajor, Layout::ColMajor);
      EXPECT_EQ(log.calls, n) << what;
      EXPECT_EQ(log.bad_args, 0) << what;
      EXPECT_EQ(log.stale, 0) << what;
      EXPECT_TRUE(std::all_of(log.covered.begin(), log.covered.end(), [](int x) { return x == 1; }))
          << what << ": some element covered by no block or by several";
      int64_t wrong = 0;
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t j = 0; j < s.N; ++j) wrong += got.at(i, j) != 2.0f * want.at(i, j);
      EXPECT_EQ(wrong, 0) << what << ": the epilogue's writes were overwritten";
      EXPECT_EQ(got.guards_broken(), 0) << what;
    }
  }
}

// One row of C with B's rows contiguous: a run of several blocks computes
// them in one pass, then calls the hook once per block, each with its final
// values. Runs of every length cover the row exactly once.
TEST(CubeGemm, OneRowRunsOfSeveralBlocks) {
  uint32_t seed = 1400;
  for (Isa isa : isas()) {
    for (Shape s : {Shape{1, 700, 1000}, Shape{1, 40, 300}}) {
      const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
      const Operand b = make_operand(s.K, s.N, Layout::RowMajor, seed++);
      Output want(s.M, s.N, 4);
      gemm(make_gemm(a, b, want), isa);
      Gemm probe = make_gemm(a, b, want);
      const int64_t n = items(probe, isa);
      ASSERT_GE(n, 3) << "the shape must give several blocks";
      for (int64_t len = 1; len <= n; ++len) {
        Output got(s.M, s.N, 4);
        Gemm g = make_gemm(a, b, got);
        HookLog log{&want, std::vector<int>(s.M * s.N, 0), 0, 0, 0, got.c(), got.ldc};
        g.hook = &log_hook;
        g.hook_ctx = &log;
        for (int64_t it = 0; it < n; it += len) run(g, isa, it, std::min(n, it + len));
        const std::string what = describe(isa, s, Layout::RowMajor, Layout::RowMajor) + " runs of " +
                                 std::to_string(len);
        EXPECT_EQ(log.calls, n) << what;
        EXPECT_EQ(log.bad_args, 0) << what;
        EXPECT_EQ(log.stale, 0) << what;
        EXPECT_TRUE(std::all_of(log.covered.begin(), log.covered.end(), [](int x) { return x == 1; })) << what;
        int64_t wrong = 0;
        for (int64_t j = 0; j < s.N; ++j) wrong += got.at(0, j) != 2.0f * want.at(0, j);
        EXPECT_EQ(wrong, 0) << what;
        EXPECT_EQ(got.guards_broken(), 0) << what;
      }
    }
  }
}

// One row times B stored by columns (x @ W^T) is read in place, each block
// of columns transposed in registers; a product cut along K (Gemm::accumulate)
// must continue each sum exactly: the same bits as one call.
TEST(CubeGemm, OneRowByColumnsContinuesAcrossKSplits) {
  uint32_t seed = 1700;
  for (Isa isa : isas()) {
    for (Shape s : {Shape{1, 37, 53}, Shape{1, 300, 130}, Shape{1, 16, 16}}) {
      const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
      const Operand b = make_operand(s.K, s.N, Layout::ColMajor, seed++);
      Output want(s.M, s.N, 2);
      gemm(make_gemm(a, b, want), isa);
      check_result(a, b, want, isa, describe(isa, s, Layout::RowMajor, Layout::ColMajor));
      for (int64_t k1 : {int64_t{1}, s.K / 3, s.K - 1}) {
        Output got(s.M, s.N, 2);
        Gemm g = make_gemm(a, b, got);
        g.K = k1;
        gemm(g, isa);
        g.K = s.K - k1;
        g.a.data += k1 * a.m.cs;
        g.b.data += k1 * b.m.rs;
        g.accumulate = true;
        gemm(g, isa);
        int64_t wrong = 0;
        for (int64_t j = 0; j < s.N; ++j)
          wrong += std::bit_cast<uint32_t>(got.at(0, j)) != std::bit_cast<uint32_t>(want.at(0, j));
        EXPECT_EQ(wrong, 0) << describe(isa, s, Layout::RowMajor, Layout::ColMajor) << " cut at k " << k1;
        EXPECT_EQ(got.guards_broken(), 0);
      }
    }
  }
}

// Products of 2 to 16 rows whose B is stored by columns (x @ W^T) read B in
// place in groups of rows (one block transpose per group, rows past the
// group's end repeating its last): every row count, k and column tails,
// columns further apart than K, and a product cut along K continuing its
// sums, each element bit-equal to the ordered scalar sum.
TEST(CubeGemm, FewRowsByColumns) {
  uint32_t seed = 1800;
  for (Isa isa : isas()) {
    for (int64_t M = 2; M <= 16; ++M) {
      for (int64_t K : {int64_t{1}, int64_t{15}, int64_t{17}, int64_t{100}}) {
        for (int64_t N : {int64_t{1}, int64_t{16}, int64_t{33}}) {
          const Operand a = make_operand(M, K, Layout::RowMajor, seed++);
          Operand b = make_operand(K, N, Layout::ColMajor, seed++);
          // Columns K + 5 apart: the gap holds values a wrong read would pick up.
          std::vector<float> spread(static_cast<size_t>(N * (K + 5)), 7.0f);
          for (int64_t j = 0; j < N; ++j)
            for (int64_t k = 0; k < K; ++k) spread[static_cast<size_t>(j * (K + 5) + k)] = b.at(k, j);
          b.store = spread;
          b.m = Matrix{b.store.data(), 1, K + 5};
          Output c(M, N, 3);
          gemm(make_gemm(a, b, c), isa);
          const std::string what = describe(isa, {M, K, N}, Layout::RowMajor, Layout::ColMajor);
          check_result(a, b, c, isa, what);
          if (K < 2) continue;
          Output cut(M, N, 3);
          Gemm g = make_gemm(a, b, cut);
          const int64_t k1 = K / 2;
          g.K = k1;
          gemm(g, isa);
          g.K = K - k1;
          g.a.data += k1 * a.m.cs;
          g.b.data += k1 * b.m.rs;
          g.accumulate = true;
          gemm(g, isa);
          EXPECT_EQ(std::memcmp(cut.store.data(), c.store.data(), c.store.size() * sizeof(float)), 0)
              << what << " cut at k " << k1;
        }
      }
    }
  }
}

// One row times a 16-bit B (Gemm::b16): the cube widens B as it reads it,
// which must give the bits of the same product on B widened to f32 first
// (subnormal 16-bit values included), on every ISA, with panels, strips and
// column and k tails, B rows (or columns, where the ISA reads B by columns)
// further apart than the product needs, and guards intact.
TEST(CubeGemm, OneRowTimesSixteenBitB) {
  uint32_t seed = 1500;
  for (Isa isa : isas()) {
    for (Dtype type : {Dtype::BF16, Dtype::F16}) {
      for (bool by_columns : {false, true}) {
        if (by_columns && !one_row_reads_columns(isa)) continue;
        for (Shape s : {Shape{1, 600, 247}, Shape{1, 513, 123}, Shape{1, 9, 5}, Shape{1, 300, 1}, Shape{1, 16, 32},
                        Shape{1, 37, 17}}) {
          const Operand a = make_operand(s.M, s.K, Layout::RowMajor, seed++);
          // Element (k, j) at k * rs + j * cs: rows ldb apart, or columns.
          const int64_t ldb = (by_columns ? s.K : s.N) + 3;
          const int64_t rs = by_columns ? 1 : ldb, cs = by_columns ? ldb : 1;
          std::vector<uint16_t> b16(static_cast<size_t>((by_columns ? s.N : s.K) * ldb), 0);
          std::vector<float> wide(b16.size(), 0.0f);
          std::mt19937 rng(seed++);
          std::uniform_real_distribution<float> d(-2.0f, 2.0f);
          for (size_t i = 0; i < b16.size(); ++i) {
            const float x = i % 97 == 5 ? 1e-6f : d(rng);  // 1e-6: a float16 subnormal
            b16[i] = type == Dtype::F16 ? f32_to_f16(x) : f32_to_bf16(i % 89 == 3 ? 1e-39f : x);
            wide[i] = type == Dtype::F16 ? f16_to_f32(b16[i]) : bf16_to_f32(b16[i]);
          }
          Output want(s.M, s.N, 2), got(s.M, s.N, 2);
          Gemm gw = make_gemm(a, a, want);
          gw.N = s.N;
          gw.b = Matrix{wide.data(), rs, cs};
          gemm(gw, isa);
          const std::string what = std::string(isa_name(isa)) + (type == Dtype::F16 ? " f16 " : " bf16 ") +
                                   (by_columns ? "by columns " : "by rows ") + std::to_string(s.K) + "x" +
                                   std::to_string(s.N);
          // The widened product itself against a double-precision sum.
          double worst = 0;
          for (int64_t j = 0; j < s.N; ++j) {
            double ref = 0, mag = 0;
            for (int64_t k = 0; k < s.K; ++k) {
              const double t = static_cast<double>(a.m.data[k * a.m.cs]) * wide[static_cast<size_t>(k * rs + j * cs)];
              ref += t;
              mag += std::fabs(t);
            }
            worst = std::max(worst, std::fabs(want.at(0, j) - ref) / (mag + 1e-30));
          }
          EXPECT_LT(worst, 1e-6 * static_cast<double>(s.K)) << what;
          Gemm g = make_gemm(a, a, got);
          g.N = s.N;
          g.b = Matrix{nullptr, rs, cs};
          g.b16 = b16.data();
          g.b16_type = type;
          gemm(g, isa);
          int64_t diff = 0;
          for (int64_t j = 0; j < s.N; ++j)
            diff += std::bit_cast<uint32_t>(got.at(0, j)) != std::bit_cast<uint32_t>(want.at(0, j));
          EXPECT_EQ(diff, 0) << what;
          EXPECT_EQ(got.guards_broken(), 0) << what;
          // Cut along K (Gemm::accumulate): the same bits as one call.
          if (s.K > 2) {
            Output cut(s.M, s.N, 2);
            Gemm g1 = make_gemm(a, a, cut);
            g1.N = s.N;
            g1.b = Matrix{nullptr, rs, cs};
            g1.b16 = b16.data();
            g1.b16_type = type;
            g1.K = s.K / 3;
            gemm(g1, isa);
            g1.a.data += g1.K * a.m.cs;
            g1.b16 += g1.K * rs;
            g1.K = s.K - g1.K;
            g1.accumulate = true;
            gemm(g1, isa);
            int64_t wrong = 0;
            for (int64_t j = 0; j < s.N; ++j)
              wrong += std::bit_cast<uint32_t>(cut.at(0, j)) != std::bit_cast<uint32_t>(want.at(0, j));
            EXPECT_EQ(wrong, 0) << what << " cut at k " << s.K / 3;
          }
        }
      }
    }
  }
  // Anything but one row read by rows (or by columns, where the ISA can) is refused.
  const Operand a = make_operand(2, 4, Layout::RowMajor, 1);
  std::vector<uint16_t> b16(32, 0);
  Output c(2, 8, 0);
  Gemm g = make_gemm(a, a, c);
  g.N = 8;
  g.b = Matrix{nullptr, 8, 1};
  g.b16 = b16.data();
  EXPECT_THROW(gemm(g, Isa::Portable), Error);
  g.M = 1;
  g.b = Matrix{nullptr, 1, 4};  // by columns: only where the ISA reads columns in place
  EXPECT_THROW(gemm(g, Isa::Portable), Error);
  for (Isa isa : isas()) {
    if (one_row_reads_columns(isa)) {
      EXPECT_NO_THROW(gemm(g, isa)) << isa_name(isa);
    }
  }
  g.b = Matrix{nullptr, 2, 4};  // neither rows nor columns contiguous
  for (Isa isa : isas()) EXPECT_THROW(gemm(g, isa), Error) << isa_name(isa);
  g.b = Matrix{nullptr, 8, 1};
  g.b16_type = Dtype::I32;
  EXPECT_THROW(gemm(g, Isa::Portable), Error);
  g.b16_type = Dtype::F16;
  EXPECT_NO_THROW(gemm(g, Isa::Portable));
}

// Block sizes depend on the shape and ISA only: the same Gemm gives the same
// items and blocks every time (nothing reads the thread count).
TEST(CubeGemm, BlocksCoverTheOutput) {
  for (Isa isa : isas()) {
    for (Shape s : {Shape{1, 10, 1000}, Shape{16, 10, 77}, Shape{1000, 10, 1000}}) {
      const Operand a = make_operand(s.M, s.K, Layout::RowMajor, 3);
      const Operand b = make_operand(s.K, s.N, Layout::RowMajor, 4);
      Output c(s.M, s.N, 0);
      const Gemm g = make_gemm(a, b, c);
      std::vector<int> cover(s.M * s.N, 0);
      for (int64_t it = 0; it < items(g, isa); ++it) {
        const Block blk = item_block(g, isa, it);
        for (int64_t i = blk.i0; i < blk.i0 + blk.rows; ++i)
          for (int64_t j = blk.j0; j < blk.j0 + blk.cols; ++j) ++cover[i * s.N + j];
      }
      EXPECT_TRUE(std::all_of(cover.begin(), cover.end(), [](int x) { return x == 1; }))
          << isa_name(isa) << " " << s.M << "x" << s.N;
    }
  }
}

}  // namespace
}  // namespace dvm::backends::cube
