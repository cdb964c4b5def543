// Split column reductions: x.mean(0) of a tall [262144, 64] tensor (16M
// floats) folds in row chunks combined in chunk order (vm/interpreter.h:
// splits_rows), on the JIT through the kernel's fold kernel or on the
// interpreter. Names: split/col_mean/<system>/262144x64/threads:<N>.
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common.h"
#include "dvm/dvm.h"

namespace bench {
namespace {

constexpr int64_t kRows = 262144, kCols = 64;

void BM_col_mean(benchmark::State& state, const System& sys, int threads) {
  apply_system(sys, threads);
  const float* xp = pools().x.data();
  auto once = [&] { return dvm::Tensor::from_blob(xp, {kRows, kCols}).mean(0); };
  for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) (void)once().to_vector();
  dvm::wait_for_jit();
  const LoopStats loop_stats;
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data());
  }
  loop_stats.set_counters(state);
  set_bandwidth_counters(state, static_cast<double>(kRows * kCols + kCols) * sizeof(float), threads);
}

int register_split() {
  const System systems[] = {{"dvm_jit", Tier::Eager}, {"dvm_interp", Tier::Off}};
  for (int threads : thread_counts())
    for (const System& sys : systems) {
      const std::string name = std::string("split/col_mean/") + sys.name + "/" + std::to_string(kRows) + "x" +
                               std::to_string(kCols) + "/threads:" + std::to_string(threads);
      benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
          name.c_str(), [=](benchmark::State& st) { BM_col_mean(st, sys, threads); });
      b->Unit(benchmark::kMicrosecond);
      if (threads > 1) b->UseRealTime();
    }
  return 0;
}
const int registered = register_split();

}  // namespace
}  // namespace bench
