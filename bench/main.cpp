// bench_dvm's entry point. It applies the environment's settings first (some
// benchmarks drive the vm directly). libtorch (PyTorch eager in C++) is a
// comparison system where the Debian package libtorch-dev was found at
// configure time (bench/CMakeLists.txt); elsewhere the benchmark builds
// without it and says once at start that it skipped those comparisons.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "bench/common.h"
#include "runtime/environment.h"

namespace {
const bool announced = [] {
#ifdef DVM_BENCH_HAVE_LIBTORCH
  const std::string torch = bench::libtorch_description();
  std::fprintf(stderr, "bench_dvm: libtorch comparisons on: libtorch %s\n", torch.c_str());
  benchmark::AddCustomContext("libtorch", torch);
#else
  std::fprintf(stderr,
               "bench_dvm: libtorch comparisons skipped (libtorch-dev not found, or "
               "-DDVM_BENCH_LIBTORCH=OFF)\n");
  benchmark::AddCustomContext("libtorch", "skipped (libtorch-dev not found, or -DDVM_BENCH_LIBTORCH=OFF)");
#endif
  std::string counts;
  for (int t : bench::thread_counts()) {
    if (!counts.empty()) counts += ',';
    counts += std::to_string(t);
  }
  benchmark::AddCustomContext("thread_counts", counts);
  char fault[32];
  std::snprintf(fault, sizeof fault, "%.0f", bench::page_fault_ns());
  benchmark::AddCustomContext("page_fault_ns", fault);
  return true;
}();
}  // namespace

int main(int argc, char** argv) {
  dvm::runtime::apply_environment();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
