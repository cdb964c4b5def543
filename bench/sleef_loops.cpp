// sleef_loop's run-time choice: the AVX-512 loops where the CPU has
// AVX-512F (and DQ, VL, BW, which their build flags allow the compiler to
// use), else the AVX2 loops where it has AVX2 and FMA, else none (the
// system is then not registered). Built without libsleef-dev, there are none.
#include "bench/fused_loops.h"

namespace bench {

#ifdef DVM_BENCH_HAVE_SLEEF
const RefLoops& sleef_loops_avx2();
const RefLoops& sleef_loops_avx512();

namespace {
bool has_avx512() {
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
}
bool has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
}  // namespace

const RefLoops* sleef_loops() {
  if (has_avx512()) return &sleef_loops_avx512();
  if (has_avx2()) return &sleef_loops_avx2();
  return nullptr;
}

const char* sleef_loops_isa() {
  if (has_avx512()) return "avx512 (Sleef_expf16_u10, Sleef_tanhf16_u10)";
  if (has_avx2()) return "avx2 (Sleef_expf8_u10, Sleef_tanhf8_u10)";
  return "none: the CPU has neither AVX2+FMA nor AVX-512";
}
#else
const RefLoops* sleef_loops() { return nullptr; }
const char* sleef_loops_isa() { return "skipped (libsleef-dev not found)"; }
#endif

}  // namespace bench
