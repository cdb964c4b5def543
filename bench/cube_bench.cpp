// The cube unit's GEMM core on one thread: peak/fma/threads:1 (the machine's
// f32 FMA roof, from a register-only loop) and cube/gemm/<M>x<K>x<N>/<isa>
// (row-major B) and cube/gemm_bt/... (B = W^T, W row-major [N, K], as linear
// reads it), with counters gflops and pct_peak (of peak/fma); <isa>_jit: the
// same with generated micro-kernels. compile/cube/<isa>/<R>x<cols>: one
// generation of a micro-kernel into fresh executable memory, freed within
// the timing (counter code_bytes).
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
// GCC 12 reports its own _mm512_undefined_ps() as uninitialised (bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "backends/cube/gemm.h"
#include "backends/cube/xbyak/tile_gen.h"
#include "backends/isa.h"
#include "bench/common.h"

namespace bench {
namespace {

using dvm::backends::Isa;
namespace cube = dvm::backends::cube;

constexpr int kChains = 12;  // > FMA latency x issue width on every target here
constexpr int64_t kPeakIters = 1 << 16;

// kPeakIters * kChains FMAs per lane; returns a value the loop depends on.
#if defined(__x86_64__)
[[gnu::target("avx512f")]] float fma_loop_avx512() {
  __m512 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm512_set1_ps(1e-3f * i);
  const __m512 m = _mm512_set1_ps(0.9999f), c = _mm512_set1_ps(1e-4f);
  for (int64_t n = 0; n < kPeakIters; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, c);
  __m512 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}
[[gnu::target("avx2,fma")]] float fma_loop_avx2() {
  __m256 acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = _mm256_set1_ps(1e-3f * i);
  const __m256 m = _mm256_set1_ps(0.9999f), c = _mm256_set1_ps(1e-4f);
  for (int64_t n = 0; n < kPeakIters; ++n)
#pragma GCC unroll 12
    for (int i = 0; i < kChains; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, c);
  __m256 s = acc[0];
  for (int i = 1; i < kChains; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}
#endif
float fma_loop_scalar() {
  float acc[kChains];
  for (int i = 0; i < kChains; ++i) acc[i] = 1e-3f * i;
  for (int64_t n = 0; n < kPeakIters; ++n)
    for (int i = 0; i < kChains; ++i) acc[i] = acc[i] * 0.9999f + 1e-4f;
  float s = 0;
  for (float x : acc) s += x;
  return s;
}

// Floats per FMA instruction of the widest ISA here, and that ISA's loop.
int peak_lanes(Isa isa) { return isa == Isa::Avx512 ? 16 : isa == Isa::Avx2 ? 8 : 1; }
float fma_loop(Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512) return fma_loop_avx512();
  if (isa == Isa::Avx2) return fma_loop_avx2();
#endif
  return fma_loop_scalar();
}
double flops_per_loop(Isa isa) { return 2.0 * kPeakIters * kChains * peak_lanes(isa); }

void BM_peak_fma(benchmark::State& state) {
  const Isa isa = dvm::backends::detected_isa();
  for (auto _ : state) benchmark::DoNotOptimize(fma_loop(isa));
  state.counters["gflops"] = benchmark::Counter(flops_per_loop(isa) * 1e-9 * state.iterations(),
                                                benchmark::Counter::kIsRate);
}

// The roof in GFLOP/s, measured once per process (best of a few tries).
double peak_gflops() {
  static const double peak = [] {
    const Isa isa = dvm::backends::detected_isa();
    double best = 0;
    for (int t = 0; t < 20; ++t) {
      const auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(fma_loop(isa));
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, flops_per_loop(isa) / s * 1e-9);
    }
    return best;
  }();
  return peak;
}

struct Shape {
  int64_t M, K, N;
};

void BM_cube_gemm(benchmark::State& state, Shape s, Isa isa, bool b_transposed,
                  cube::Kernels kernels) {
  if (!dvm::backends::isa_supported(isa)) {
    state.SkipWithError("this CPU lacks the ISA");
    return;
  }
  uint64_t seed = 7;
  Floats a(static_cast<size_t>(s.M * s.K)), b(static_cast<size_t>(s.K * s.N)),
      c(static_cast<size_t>(s.M * s.N));
  for (float& x : a) x = uniform01(&seed) - 0.5f;
  for (float& x : b) x = uniform01(&seed) - 0.5f;
  cube::Gemm g;
  g.M = s.M;
  g.N = s.N;
  g.K = s.K;
  g.a = {a.data(), s.K, 1};
  g.b = b_transposed ? cube::Matrix{b.data(), 1, s.K} : cube::Matrix{b.data(), s.N, 1};
  g.c = c.data();
  g.ldc = s.N;
  g.kernels = kernels;
  cube::gemm(g, isa);  // generated tiles: made before the timing
  for (auto _ : state) {
    cube::gemm(g, isa);
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * static_cast<double>(s.M) * s.N * s.K;
  state.counters["gflops"] =
      benchmark::Counter(flops * 1e-9 * state.iterations(), benchmark::Counter::kIsRate);
  // pct_peak: finished from the rate after the run (Counter can't divide);
  // the roof is measured once per process.
  state.counters["peak_gflops"] = peak_gflops();
  state.counters["pct_peak"] = benchmark::Counter(
      100.0 * flops * 1e-9 / peak_gflops() * state.iterations(), benchmark::Counter::kIsRate);
}

// One uncached generation: code made, made executable and freed.
void BM_compile_cube(benchmark::State& state, cube::gen::TileKey key) {
  size_t bytes = 0;
  std::string why;
  for (auto _ : state) {
    std::unique_ptr<cube::gen::Code> code = cube::gen::generate(key, cube::gen::Exec::Allowed, &why);
    if (!code) {
      state.SkipWithError(why.c_str());
      return;
    }
    bytes = code->bytes();
    benchmark::DoNotOptimize(code->fn());
  }
  state.counters["code_bytes"] = static_cast<double>(bytes);
}

int register_cube() {
  benchmark::RegisterBenchmark("peak/fma/threads:1", BM_peak_fma);
  std::vector<Shape> squares = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024},
                                {2048, 2048, 2048}};
  std::vector<Shape> inference;
  for (int64_t m : {1, 8, 32, 128, 512})
    for (auto [k, n] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {3072, 768}})
      inference.push_back({m, k, n});
  for (Isa isa : {Isa::Portable, Isa::Avx2, Isa::Avx512}) {
    if (!dvm::backends::isa_supported(isa)) continue;
    for (cube::Kernels kernels : {cube::Kernels::Precompiled, cube::Kernels::Generated}) {
      const bool jit = kernels == cube::Kernels::Generated;
      if (jit && !cube::gen::available(isa)) continue;
      const std::string suffix = std::string(dvm::backends::isa_name(isa)) + (jit ? "_jit" : "");
      auto add = [&](const char* family, const Shape& s, bool bt) {
        const std::string name = std::string("cube/") + family + "/" + std::to_string(s.M) + "x" +
                                 std::to_string(s.K) + "x" + std::to_string(s.N) + "/" + suffix;
        benchmark::RegisterBenchmark(name.c_str(), [s, isa, bt, kernels](benchmark::State& st) {
          BM_cube_gemm(st, s, isa, bt, kernels);
        })->Unit(benchmark::kMicrosecond);
      };
      for (const Shape& s : squares) add("gemm", s, false);
      for (const Shape& s : inference) add("gemm", s, false);
      for (const Shape& s : inference) add("gemm_bt", s, true);
    }
    if (!cube::gen::available(isa)) continue;
    // The main tile (full and one row), a masked edge, and the small-M tile.
    const cube::TileShape main = cube::tile_shape(isa, 0), small = cube::tile_shape(isa, 1);
    const int nr = main.nv * main.lanes;
    const cube::gen::TileKey keys[] = {{isa, main.rows, main.nv, false, nr},
                                       {isa, 1, main.nv, false, nr},
                                       {isa, main.rows, main.nv, false, nr / 2 + 1},
                                       {isa, small.rows, small.nv, true, small.nv * small.lanes}};
    for (const cube::gen::TileKey& k : keys) {
      const std::string name = std::string("compile/cube/") + dvm::backends::isa_name(isa) + "/" +
                               std::to_string(k.rows) + "x" + std::to_string(k.cols);
      benchmark::RegisterBenchmark(name.c_str(), [k](benchmark::State& st) {
        BM_compile_cube(st, k);
      })->Unit(benchmark::kMicrosecond);
    }
  }
  return 0;
}
const int registered = register_cube();

}  // namespace
}  // namespace bench
