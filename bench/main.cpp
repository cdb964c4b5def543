// bench_dvm's entry point. libtorch (PyTorch eager in C++) is a comparison
// system only where the Debian package libtorch-dev is installed; this build
// does not use it, and says so once at start.
#include <benchmark/benchmark.h>

#include <cstdio>

namespace {
const bool announced = [] {
#ifdef DVM_BENCH_HAVE_LIBTORCH
  std::fprintf(stderr, "bench_dvm: libtorch comparisons not built yet (libtorch-dev found; they come with a later change)\n");
  benchmark::AddCustomContext("libtorch", "libtorch-dev found; comparisons not built yet");
#else
  std::fprintf(stderr, "bench_dvm: libtorch comparisons skipped (libtorch-dev not found)\n");
  benchmark::AddCustomContext("libtorch", "skipped (libtorch-dev not found)");
#endif
  return true;
}();
}  // namespace

BENCHMARK_MAIN();
