// Split reductions (16M floats each) fold in row chunks combined in chunk
// order (vm/schedule.h: splits_rows), on the JIT (a ColReduce's fold
// kernel, a RowReduce's split passes) or on the interpreter:
//   split/col_mean/<system>/262144x64/threads:<N>      x.mean(0), 1 column tile
//   split/col_sum/<system>/16x10000x100/threads:<N>    x.sum(1), 16 tiles of 100
//   split/row_sum/<system>/16777216/threads:<N>        x.sum(), one row
//   split/row_softmax/<system>/4x4194304/threads:<N>   softmax(x, -1), 4 rows
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common.h"
#include "dvm/dvm.h"

namespace bench {
namespace {

enum class Reduce { Sum, Mean, Softmax };

struct SplitCase {
  const char* name;
  dvm::Shape shape;
  int axis;
  Reduce op;
};

void BM_split(benchmark::State& state, const SplitCase& c, const System& sys, int threads) {
  apply_system(sys, threads);
  const float* xp = pools().x.data();
  auto once = [&] {
    dvm::Tensor x = dvm::Tensor::from_blob(xp, c.shape);
    switch (c.op) {
      case Reduce::Sum: return x.sum(c.axis);
      case Reduce::Mean: return x.mean(c.axis);
      default: return dvm::softmax(x, c.axis);
    }
  };
  for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) (void)once().to_vector();
  dvm::wait_for_jit();
  const LoopStats loop_stats;
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data());
  }
  loop_stats.set_counters(state);
  const int64_t out = c.op == Reduce::Softmax ? c.shape.numel() : c.shape.numel() / c.shape[c.axis];
  set_bandwidth_counters(state, static_cast<double>(c.shape.numel() + out) * sizeof(float), threads);
}

int register_split() {
  static const SplitCase cases[] = {{"col_mean", {262144, 64}, 0, Reduce::Mean},
                                    {"col_sum", {16, 10000, 100}, 1, Reduce::Sum},
                                    {"row_sum", {16777216}, 0, Reduce::Sum},
                                    {"row_softmax", {4, 4194304}, 1, Reduce::Softmax}};
  const System systems[] = {{"dvm_jit", Tier::Eager}, {"dvm_interp", Tier::Off}};
  for (const SplitCase& c : cases)
    for (int threads : thread_counts())
      for (const System& sys : systems) {
        std::string dims;
        for (int d = 0; d < c.shape.rank(); ++d) {
          if (d) dims += 'x';
          dims += std::to_string(c.shape[d]);
        }
        const std::string name = std::string("split/") + c.name + "/" + sys.name + "/" + dims +
                                 "/threads:" + std::to_string(threads);
        benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(
            name.c_str(), [=, &c](benchmark::State& st) { BM_split(st, c, sys, threads); });
        b->Unit(benchmark::kMicrosecond);
        if (threads > 1) b->UseRealTime();
      }
  return 0;
}
const int registered = register_split();

}  // namespace
}  // namespace bench
