// The cube unit's generated micro-kernels (backends/cube/xbyak/): every
// variant bit for bit against the precompiled tile of its ISA (all rows, both
// tile shapes, K counts around the unrolling, load or not, masked widths with
// guard elements and guard pages), whole GEMMs through the public cube API
// with generated tiles against the precompiled path and a double reference,
// one function for several threads asking at once, and the refusals.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/cube/gemm.h"
#include "backends/cube/xbyak/tile_gen.h"
#include "backends/isa.h"
#include "dvm/error.h"

namespace dvm::backends::cube {
namespace {

constexpr uint32_t kGuardBits = 0x7fbadbadu;  // a NaN pattern no arithmetic makes
constexpr int64_t kGuard = 19;                // guard floats before and after each row of c
constexpr int64_t kKcs[] = {0, 1, 2, 3, 5, 7, 64, 513};

// The x86 ISAs this CPU has, or a reason to skip.
std::vector<Isa> jit_isas(std::string* skip) {
  std::vector<Isa> out;
  for (Isa i : {Isa::Avx2, Isa::Avx512})
    if (gen::available(i, skip)) out.push_back(i);
  return out;
}
#define JIT_ISAS_OR_SKIP(var)                                               \
  std::string skip_reason_;                                                 \
  const std::vector<Isa> var = jit_isas(&skip_reason_);                     \
  if (var.empty()) GTEST_SKIP() << "no generated tiles here: " << skip_reason_

std::vector<float> random_floats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(std::max<size_t>(n, 1));
  for (float& x : v) x = d(rng);
  return v;
}

// R rows of c, each kGuard guards, NR slots, kGuard guards; the first `cols`
// slots of each row hold `init`'s values, every other float the guard.
struct TileC {
  int64_t R, NR, cols, ldc;
  std::vector<float> store;
  TileC(int64_t r, int64_t nr, int64_t c, const std::vector<float>& init)
      : R(r), NR(nr), cols(c), ldc(nr + 2 * kGuard) {
    store.assign(static_cast<size_t>(R * ldc), std::bit_cast<float>(kGuardBits));
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < cols; ++j) store[i * ldc + kGuard + j] = init[i * NR + j];
  }
  float* c() { return store.data() + kGuard; }
  int64_t guards_broken() const {
    int64_t bad = 0;
    for (int64_t p = 0; p < static_cast<int64_t>(store.size()); ++p) {
      const int64_t j = p % ldc - kGuard;
      if ((j < 0 || j >= cols) && std::bit_cast<uint32_t>(store[p]) != kGuardBits) ++bad;
    }
    return bad;
  }
  bool same_values(const TileC& o) const {
    for (int64_t i = 0; i < R; ++i)
      if (std::memcmp(&store[i * ldc + kGuard], &o.store[i * ldc + kGuard],
                      static_cast<size_t>(cols) * sizeof(float)) != 0)
        return false;
    return true;
  }
};

// Generated (full and masked, with and without prefetch) against the
// precompiled tile on the full width, whose first `cols` columns are the
// reference: the generated masked tile must give exactly those.
TEST(CubeJit, TilesMatchPrecompiledBitForBit) {
  JIT_ISAS_OR_SKIP(isas);
  int64_t checked = 0;
  for (Isa isa : isas) {
    for (int shape = 0; shape < 2; ++shape) {
      const TileShape ts = tile_shape(isa, shape);
      const int NR = ts.nv * ts.lanes;
      for (int R = 1; R <= ts.rows; ++R) {
        // The precompiled main shape has no prefetching tile; prefetch does
        // not change the arithmetic, so the plain one is the reference.
        const TileFn ref = precompiled_tile(isa, shape, R, false);
        ASSERT_NE(ref, nullptr);
        for (bool pf : {false, true}) {
          for (int cols = 1; cols <= NR; ++cols) {
            std::string why;
            const TileFn fn = gen::tile({isa, R, ts.nv, pf, cols}, gen::Exec::Allowed, &why);
            ASSERT_NE(fn, nullptr) << isa_name(isa) << " " << R << "x" << cols << ": " << why;
            for (int64_t kc : kKcs) {
              // Widths other than full and the edges get fewer K counts.
              if (cols != NR && cols != 1 && cols != NR - 1 && kc > 7 && kc != 64) continue;
              for (bool load : {false, true}) {
                const uint32_t seed = static_cast<uint32_t>(R * 1000 + cols * 10 + kc);
                const int64_t ldb = NR + 5;
                const std::vector<float> a = random_floats(static_cast<size_t>(kc * R), seed);
                const std::vector<float> b = random_floats(static_cast<size_t>(kc * ldb), seed + 1);
                const std::vector<float> c0 = random_floats(static_cast<size_t>(R * NR), seed + 2);
                TileC want(R, NR, NR, c0), got(R, NR, cols, c0);
                ref(kc, a.data(), b.data(), ldb, want.c(), want.ldc, load);
                fn(kc, a.data(), b.data(), ldb, got.c(), got.ldc, load);
                want.cols = cols;
                const std::string what = std::string(isa_name(isa)) + " shape " +
                                         std::to_string(shape) + " " + std::to_string(R) + "x" +
                                         std::to_string(cols) + " pf " + std::to_string(pf) +
                                         " kc " + std::to_string(kc) + " load " +
                                         std::to_string(load);
                EXPECT_TRUE(got.same_values(want)) << what;
                EXPECT_EQ(got.guards_broken(), 0) << what;
                ++checked;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 0);
}

// A masked tile reads nothing of b or c beyond its columns: the last row of
// each ends exactly where a page without access begins, so a read past it
// faults. (Masked loads and stores suppress faults on masked-off lanes.)
TEST(CubeJit, MaskedTilesReadNothingBeyondTheirColumns) {
  JIT_ISAS_OR_SKIP(isas);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (Isa isa : isas) {
    for (int shape = 0; shape < 2; ++shape) {
      const TileShape ts = tile_shape(isa, shape);
      const int NR = ts.nv * ts.lanes;
      const int R = ts.rows;
      for (int cols : {1, ts.lanes - 1, ts.lanes + 1, NR - 1}) {
        if (cols < 1 || cols >= NR) continue;
        const TileFn fn = gen::tile({isa, R, ts.nv, false, cols}, gen::Exec::Allowed);
        ASSERT_NE(fn, nullptr);
        const int64_t kc = 9;
        // Two regions, each its data then a PROT_NONE page: b (kc x cols,
        // ldb = cols) and c (R x cols, ldc = cols).
        const size_t bbytes = static_cast<size_t>(kc * cols) * sizeof(float);
        const size_t cbytes = static_cast<size_t>(R * cols) * sizeof(float);
        auto region = [&](size_t bytes) {
          const size_t span = (bytes + page - 1) / page * page;
          char* p = static_cast<char*>(
              mmap(nullptr, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
          EXPECT_NE(p, MAP_FAILED);
          EXPECT_EQ(mprotect(p + span, page, PROT_NONE), 0);
          return std::pair<char*, size_t>{p, span + page};
        };
        auto [bmap, blen] = region(bbytes);
        auto [cmap, clen] = region(cbytes);
        float* b = reinterpret_cast<float*>(bmap + (blen - page) - bbytes);
        float* c = reinterpret_cast<float*>(cmap + (clen - page) - cbytes);
        const std::vector<float> a = random_floats(static_cast<size_t>(kc * R), 3);
        const std::vector<float> bv = random_floats(static_cast<size_t>(kc * cols), 4);
        std::memcpy(b, bv.data(), bbytes);
        std::vector<float> c0 = random_floats(static_cast<size_t>(R * cols), 5);
        std::memcpy(c, c0.data(), cbytes);
        fn(kc, a.data(), b, cols, c, cols, true);
        // Against the scalar order (ascending k, fused) from c's start.
        for (int r = 0; r < R; ++r)
          for (int j = 0; j < cols; ++j) {
            float acc = c0[r * cols + j];
            for (int64_t k = 0; k < kc; ++k) acc = std::fmaf(a[k * R + r], bv[k * cols + j], acc);
            EXPECT_EQ(std::bit_cast<uint32_t>(c[r * cols + j]), std::bit_cast<uint32_t>(acc))
                << isa_name(isa) << " " << r << "," << j;
          }
        munmap(bmap, blen);
        munmap(cmap, clen);
      }
    }
  }
}

// --- whole GEMMs -----------------------------------------------------------

struct Problem {
  int64_t M, K, N;
  enum BLayout { RowMajor, Transposed, Strided } b_layout;
};

// C from g's operands with the given kernels, every element outside the
// M x N result a guard (checked).
std::vector<float> run_gemm(Gemm g, Isa isa, Kernels kernels, int64_t ldc) {
  std::vector<float> c(static_cast<size_t>(g.M * ldc + 7), std::bit_cast<float>(kGuardBits));
  g.c = c.data();
  g.ldc = ldc;
  g.kernels = kernels;
  gemm(g, isa);
  int64_t bad = 0;
  for (int64_t p = 0; p < static_cast<int64_t>(c.size()); ++p)
    if (!(p < g.M * ldc && p % ldc < g.N) && std::bit_cast<uint32_t>(c[p]) != kGuardBits) ++bad;
  EXPECT_EQ(bad, 0);
  return c;
}

TEST(CubeJit, GemmWithGeneratedTilesMatchesPrecompiledAndReference) {
  JIT_ISAS_OR_SKIP(isas);
  std::vector<Problem> problems;
  for (int64_t m : {1, 7, 16, 17, 63, 65})
    for (int64_t k : {1, 17, 65})
      for (int64_t n : {1, 7, 63, 65}) problems.push_back({m, k, n, Problem::RowMajor});
  problems.push_back({1003, 129, 997, Problem::RowMajor});
  problems.push_back({7, 1001, 999, Problem::RowMajor});
  problems.push_back({65, 300, 1000, Problem::Transposed});
  problems.push_back({9, 77, 333, Problem::Transposed});
  problems.push_back({70, 63, 129, Problem::Strided});
  problems.push_back({3, 513, 100, Problem::Strided});
  for (Isa isa : isas) {
    for (const Problem& p : problems) {
      const uint32_t seed = static_cast<uint32_t>(p.M * 7 + p.K * 13 + p.N);
      const std::vector<float> a = random_floats(static_cast<size_t>(p.M * p.K), seed);
      const int64_t bcs = p.b_layout == Problem::Strided ? 3 : 1;
      const std::vector<float> b = random_floats(static_cast<size_t>(p.K * p.N * bcs), seed + 1);
      Gemm g;
      g.M = p.M;
      g.K = p.K;
      g.N = p.N;
      g.a = {a.data(), p.K, 1};
      switch (p.b_layout) {
        case Problem::RowMajor: g.b = {b.data(), p.N, 1}; break;
        case Problem::Transposed: g.b = {b.data(), 1, p.K}; break;
        case Problem::Strided: g.b = {b.data(), p.N * bcs, bcs}; break;
      }
      const int64_t ldc = p.N + 3;
      const std::vector<float> want = run_gemm(g, isa, Kernels::Precompiled, ldc);
      const std::vector<float> got = run_gemm(g, isa, Kernels::Generated, ldc);
      const std::string what = std::string(isa_name(isa)) + " " + std::to_string(p.M) + "x" +
                               std::to_string(p.K) + "x" + std::to_string(p.N) + " layout " +
                               std::to_string(p.b_layout);
      ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0) << what;
      // The double reference: each element is K fused multiply-adds in
      // ascending order from +0, each one rounding of at most u = 2^-24
      // relative to a partial sum bounded by sum_k |a_ik||b_kj|, so the
      // error is at most gamma_K * sum_k |a_ik||b_kj|, gamma_K = K u / (1 - K u).
      const double u = std::ldexp(1.0, -24);
      const double gamma = p.K * u / (1.0 - p.K * u);
      int64_t bad = 0;
      for (int64_t i = 0; i < p.M; ++i)
        for (int64_t j = 0; j < p.N; ++j) {
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < p.K; ++k) {
            const double x = a[i * p.K + k];
            const double y = b[k * g.b.rs + j * g.b.cs];
            ref += x * y;
            mag += std::fabs(x * y);
          }
          if (std::fabs(got[i * ldc + j] - ref) > gamma * mag) ++bad;
        }
      EXPECT_EQ(bad, 0) << what;
    }
  }
}

// The hook and item splitting are unaffected by where the tiles come from.
TEST(CubeJit, GeneratedGemmSplitsIntoItemsLikePrecompiled) {
  JIT_ISAS_OR_SKIP(isas);
  for (Isa isa : isas) {
    const int64_t M = 300, K = 70, N = 301;
    const std::vector<float> a = random_floats(M * K, 1), b = random_floats(K * N, 2);
    Gemm g;
    g.M = M;
    g.K = K;
    g.N = N;
    g.a = {a.data(), K, 1};
    g.b = {b.data(), N, 1};
    const std::vector<float> want = run_gemm(g, isa, Kernels::Precompiled, N);
    std::vector<float> got(static_cast<size_t>(M * N));
    g.c = got.data();
    g.ldc = N;
    g.kernels = Kernels::Generated;
    const int64_t n = items(g, isa);
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t)
      threads.emplace_back([&, t] {
        for (int64_t i = t; i < n; i += 3) run(g, isa, i, i + 1);
      });
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(std::memcmp(want.data(), got.data(), got.size() * sizeof(float)), 0) << isa_name(isa);
  }
}

// --- the cache and refusals ---------------------------------------------------

TEST(CubeJit, ThreadsAskingAtOnceGetOneFunction) {
  JIT_ISAS_OR_SKIP(isas);
  // A variant no other test asks for (one vector wide), a new one on each
  // repetition: generated here for the first time.
  static int repetition = 0;
  const int n = repetition++;
  const Isa isa = isas.back();
  const gen::TileKey key{isa, 1 + n % 8, 1, true, 1 + n / 8 % gen::lanes(isa)};
  const gen::Stats before = gen::stats();
  constexpr int kThreads = 8;
  std::vector<TileFn> got(kThreads);
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) {
      }
      got[t] = gen::tile(key, gen::Exec::Allowed);
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_NE(got[t], nullptr);
    EXPECT_EQ(got[t], got[0]);
  }
  const gen::Stats after = gen::stats();
  EXPECT_EQ(after.kernels, before.kernels + 1);
  EXPECT_GT(after.code_bytes, before.code_bytes);
  EXPECT_GE(after.mapped_bytes - before.mapped_bytes, after.code_bytes - before.code_bytes);
}

TEST(CubeJit, RefusesWithReasons) {
  const gen::Stats before = gen::stats();
  std::string why;
  // Interpreter-only: nothing is generated, even for a supported ISA.
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    why.clear();
    EXPECT_EQ(gen::tile({isa, 2, 2, false, 0}, gen::Exec::Forbidden, &why), nullptr);
    EXPECT_NE(why.find("forbidden"), std::string::npos) << why;
    EXPECT_EQ(gen::generate({isa, 2, 2, false, 0}, gen::Exec::Forbidden, &why), nullptr);
  }
  EXPECT_EQ(gen::stats().kernels, before.kernels);
  EXPECT_EQ(gen::tile({Isa::Portable, 1, 1, false, 0}, gen::Exec::Allowed, &why), nullptr);
  EXPECT_NE(why.find("portable"), std::string::npos) << why;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!isa_supported(isa)) {
      EXPECT_EQ(gen::tile({isa, 1, 1, false, 0}, gen::Exec::Allowed, &why), nullptr);
      EXPECT_NE(why.find("not supported"), std::string::npos) << why;
      continue;
    }
    if (!gen::available(isa, &why)) continue;  // built without the generator
    for (gen::TileKey bad : {gen::TileKey{isa, 0, 1, false, 0}, gen::TileKey{isa, 9, 1, false, 0},
                             gen::TileKey{isa, 1, 5, false, 0},
                             gen::TileKey{isa, 1, 1, false, gen::lanes(isa) + 1},
                             gen::TileKey{isa, 8, 4, false, 0}}) {  // too many registers
      why.clear();
      EXPECT_EQ(gen::tile(bad, gen::Exec::Allowed, &why), nullptr);
      EXPECT_FALSE(why.empty());
    }
  }
  // The GEMM entry: generated tiles on Portable are an error naming the ISA.
  std::vector<float> a(4, 1.0f), b(4, 1.0f), c(4);
  Gemm g;
  g.M = g.N = g.K = 2;
  g.a = {a.data(), 2, 1};
  g.b = {b.data(), 2, 1};
  g.c = c.data();
  g.ldc = 2;
  g.kernels = Kernels::Generated;
  try {
    gemm(g, Isa::Portable);
    ADD_FAILURE() << "expected dvm::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("portable"), std::string::npos) << e.what();
  }
}

// generate() bypasses the cache: fresh code each time, freed with it.
TEST(CubeJit, UncachedGenerationOwnsItsCode) {
  JIT_ISAS_OR_SKIP(isas);
  const gen::Stats before = gen::stats();
  for (Isa isa : isas) {
    const TileShape ts = tile_shape(isa, 0);
    std::string why;
    std::unique_ptr<gen::Code> x = gen::generate({isa, ts.rows, ts.nv, false, 0}, gen::Exec::Allowed, &why);
    std::unique_ptr<gen::Code> y = gen::generate({isa, ts.rows, ts.nv, false, 0}, gen::Exec::Allowed, &why);
    ASSERT_TRUE(x && y) << why;
    EXPECT_NE(x->fn(), y->fn());
    EXPECT_EQ(x->bytes(), y->bytes());
    EXPECT_GT(x->bytes(), 0u);
    // It computes: 1 x 1 tile of ones over kc = 3 is 3 in every column.
    const int NR = ts.nv * ts.lanes;
    std::vector<float> a(static_cast<size_t>(3 * ts.rows), 1.0f), b(static_cast<size_t>(3 * NR), 1.0f),
        c(static_cast<size_t>(ts.rows * NR), -1.0f);
    x->fn()(3, a.data(), b.data(), NR, c.data(), NR, false);
    for (float v : c) EXPECT_EQ(v, 3.0f);
  }
  EXPECT_EQ(gen::stats().kernels, before.kernels);
}

}  // namespace
}  // namespace dvm::backends::cube
