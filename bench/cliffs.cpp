// cliffs/<case>: programs that once ran far slower than their work needs
// (docs/PERFORMANCE.md, "Performance cliffs fixed ..."), kept as benchmarks
// so a regression shows. One thread, the active ISA (DVM_ISA=avx2 forces
// AVX2), kernels hot (past the JIT threshold, background compiles done):
//   cliffs/argmax_rows/<R>x<C>        x [R, C].argmax(1)
//   cliffs/argmax_all/<n>             x [n].argmax()
//   cliffs/i64_to_f32/<n>             i64 [n].to(F32) * 2
//   cliffs/f32_to_i64/<n>             (x [n] * 3).to(I64)
//   cliffs/stack_last/3x<n>           stack({3 x [n]}, 1) * 2
//   cliffs/sum_trailing_one/<n>x1     x [n, 1].sum(0)
//   cliffs/softmax_trailing_one/<n>x3x1  softmax(x [n, 3, 1], 1)
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/common.h"
#include "dvm/dvm.h"

namespace bench {
namespace {

struct Cliff {
  std::string name;
  std::function<dvm::Tensor()> once;
};

void BM_cliff(benchmark::State& state, const Cliff& c) {
  apply_system(kDvm, 1);
  for (int64_t i = 0; i <= dvm::jit_threshold() + 1; ++i) c.once().sync();
  dvm::wait_for_jit();
  for (auto _ : state) {
    dvm::Tensor y = c.once();
    y.sync();
  }
}

// kMedium int64 values in [-50000, 50003).
const std::vector<int64_t>& ids() {
  static const std::vector<int64_t> v = [] {
    std::vector<int64_t> r(static_cast<size_t>(kMedium));
    for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int64_t>((i * 7919) % 100003) - 50000;
    return r;
  }();
  return v;
}

int register_cliffs() {
  const float* x = pools().x.data();
  const float* a = pools().a.data();
  const float* b = pools().b.data();
  std::vector<Cliff> cases;
  for (auto [r, c] : {std::pair<int64_t, int64_t>{4096, 1000}, {65536, 64}, {1, 128256}, {1, 262144}})
    cases.push_back({"argmax_rows/" + std::to_string(r) + "x" + std::to_string(c),
                     [=] { return dvm::Tensor::from_blob(x, {r, c}).argmax(1); }});
  for (int64_t n : {int64_t{100000}, kMedium})
    cases.push_back({"argmax_all/" + std::to_string(n), [=] { return dvm::Tensor::from_blob(x, {n}).argmax(); }});
  cases.push_back({"i64_to_f32/" + std::to_string(kMedium), [] {
                     return dvm::Tensor::from_blob(ids().data(), {kMedium}).to(dvm::Dtype::F32) * 2.0f;
                   }});
  cases.push_back({"f32_to_i64/" + std::to_string(kMedium),
                   [=] { return (dvm::Tensor::from_blob(x, {kMedium}) * 3.0f).to(dvm::Dtype::I64); }});
  cases.push_back({"stack_last/3x" + std::to_string(kMedium), [=] {
                     const dvm::Shape s{kMedium};
                     return dvm::stack({dvm::Tensor::from_blob(x, s), dvm::Tensor::from_blob(a, s),
                                        dvm::Tensor::from_blob(b, s)},
                                       1) *
                            2.0f;
                   }});
  cases.push_back({"sum_trailing_one/" + std::to_string(kMedium) + "x1",
                   [=] { return dvm::Tensor::from_blob(x, {kMedium, 1}).sum(0); }});
  cases.push_back({"softmax_trailing_one/262144x3x1",
                   [=] { return dvm::softmax(dvm::Tensor::from_blob(x, {262144, 3, 1}), 1); }});
  for (const Cliff& c : cases) {
    const std::string name = "cliffs/" + c.name;
    benchmark::RegisterBenchmark(name.c_str(), [c](benchmark::State& st) { BM_cliff(st, c); })
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}
const int registered = register_cliffs();

}  // namespace
}  // namespace bench
