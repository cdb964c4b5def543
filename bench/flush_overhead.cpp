// flush/overhead/<W>/<n>: one flush of a tiny workload on a plan-cache hit
// with its kernel on machine code, everything a user's call costs (record,
// flush, replay, launch, observe) when the data is small enough not to
// matter; counter ns_per_flush. W1 is relu(x*a + b)*0.5 + x over n
// elements; W4 is layer_norm over rows of min(n, 1024) (W4's rows are 1024
// wide; 64 elements make one row of 64). n = 64 and 4096.
#include <cmath>
#include <string>
#include <vector>

#include "bench/common.h"

namespace bench {
namespace {

int64_t w4_cols(int64_t n) { return n < kRowWidth ? n : kRowWidth; }

dvm::Tensor record(W w, int64_t n) {
  const Pools& p = pools();
  if (w == W::W1) return w_record(W::W1, n);
  const int64_t cols = w4_cols(n);
  const dvm::Shape row{cols};
  return dvm::layer_norm(dvm::Tensor::from_blob(p.x.data(), {n / cols, cols}), row,
                         dvm::Tensor::from_blob(p.w.data(), row), dvm::Tensor::from_blob(p.bias.data(), row), 1e-5f);
}

// The double-precision result, for the check.
std::vector<float> reference(W w, int64_t n) {
  const Pools& p = pools();
  std::vector<float> y(static_cast<size_t>(n));
  if (w == W::W1) {
    for (int64_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(p.x[i]) * p.a[i] + p.b[i];
      y[static_cast<size_t>(i)] = static_cast<float>((t > 0 ? t : 0) * 0.5 + p.x[i]);
    }
    return y;
  }
  const int64_t cols = w4_cols(n);
  for (int64_t r = 0; r < n / cols; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += p.x[r * cols + c];
    mean /= static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) var += (p.x[r * cols + c] - mean) * (p.x[r * cols + c] - mean);
    const double inv = 1.0 / std::sqrt(var / static_cast<double>(cols) + 1e-5);
    for (int64_t c = 0; c < cols; ++c)
      y[static_cast<size_t>(r * cols + c)] = static_cast<float>((p.x[r * cols + c] - mean) * inv * p.w[c] + p.bias[c]);
  }
  return y;
}

void BM_flush_overhead(benchmark::State& state, W w, int64_t n, const std::string& name) {
  apply_system(kDvm, 1);
  dvm::flush();
  if (first_time(name)) {
    const dvm::Tensor y = record(w, n);
    check_close(name, y.data(), reference(w, n).data(), n);
  }
  // Past the JIT threshold, background compiles done, the plan cached.
  for (int64_t i = 0; i <= dvm::jit_threshold() + 1; ++i) record(w, n).data();
  dvm::wait_for_jit();
  const int64_t flushes_before = dvm::stats().flushes;
  for (auto _ : state) {
    dvm::Tensor y = record(w, n);
    benchmark::DoNotOptimize(y.data());
  }
  // One flush per iteration: the figure is per flush.
  const double flushes = static_cast<double>(dvm::stats().flushes - flushes_before);
  state.counters["flushes_per_iteration"] = flushes / static_cast<double>(state.iterations());
  set_ns_per_item_counter(state, "ns_per_flush", 1);
}

int register_flush_overhead() {
  for (W w : {W::W1, W::W4})
    for (int64_t n : {int64_t{64}, int64_t{4096}}) {
      const std::string name = "flush/overhead/" + std::string(w_id(w)) + "/" + std::to_string(n);
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { BM_flush_overhead(st, w, n, name); })
          ->Unit(benchmark::kNanosecond);
    }
  return 0;
}
const int registered = register_flush_overhead();

}  // namespace
}  // namespace bench
