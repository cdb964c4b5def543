// bench_dvm's entry point. It applies the environment's settings first (some
// benchmarks drive the vm directly). libtorch (PyTorch eager in C++) is a
// comparison system where the Debian package libtorch-dev was found at
// configure time (bench/CMakeLists.txt); elsewhere the benchmark builds
// without it and says once at start that it skipped those comparisons; so
// are sleef_loop (libsleef-dev) and eigen (libeigen3-dev). `bench_dvm
// --accuracy` prints the systems' errors in ULPs instead (accuracy.cpp).
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
#ifdef DVM_BENCH_HAVE_SLEEF
  std::fprintf(stderr, "bench_dvm: sleef_loop comparisons on: %s\n", bench::sleef_loops_isa());
#else
  std::fprintf(stderr, "bench_dvm: sleef_loop comparisons skipped (libsleef-dev not found, not x86-64, or "
                       "-DDVM_BENCH_SLEEF=OFF)\n");
#endif
  benchmark::AddCustomContext("sleef_loop", bench::sleef_loops_isa());
  std::fprintf(stderr, "bench_dvm: eigen comparisons %s\n", bench::eigen_loops_description());
  benchmark::AddCustomContext("eigen", bench::eigen_loops_description());
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
  // --accuracy: the systems' errors against double instead of the benchmarks.
  if (argc == 2 && std::string(argv[1]) == "--accuracy") return bench::run_accuracy_report();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
