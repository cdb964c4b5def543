// A program of its own (run by CTest with DVM_TIER=eager and
// DVM_TRACE_LIMIT=77; under the sanitizers in CI): a host calls dvm from
// its own static initializers, which the linker runs before the library's.
// dvm must work there, and what it reads then must hold after the
// library's own initializers ran: the environment's settings, the launch
// clock. Any crash, a wrong value, or an exception fails the test.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dvm/dvm.h"

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "dvm_before_main: %s\n", what.c_str());
  std::_Exit(1);
}

// sum over i < n of exp(i / 8) * 2, in double.
double reference_sum(int n) {
  double s = 0.0;
  for (int i = 0; i < n; ++i) s += std::exp(i / 8.0) * 2.0;
  return s;
}

void check_sum(const char* where, float got, int n) {
  const double want = reference_sum(n);
  // exp within 2 ULP, a float sum of n terms: a relative 1e-5 is ample.
  if (!(std::fabs(got - want) <= 1e-5 * want))
    fail(std::string(where) + ": sum " + std::to_string(got) + ", expected " + std::to_string(want));
}

float lazy_sum(int n) {
  const dvm::Tensor x = dvm::Tensor::arange(0.0, static_cast<double>(n), 1.0, dvm::Dtype::F32) / 8.0f;
  return (dvm::exp(x) * 2.0f).sum().item();
}

float graph_sum(int n) {
  dvm::Graph g;
  const dvm::Tensor x = g.input("x", {g.symbol("N")});
  g.output("y", (dvm::exp(x / 8.0f) * 2.0f).sum());
  const dvm::Executable exe = g.compile();
  std::vector<float> in(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) in[static_cast<size_t>(i)] = static_cast<float>(i);
  float y = 0.0f;
  exe.run({{"x", in.data()}}, {{"y", &y}}, {{"N", n}});
  return y;
}

struct BeforeMain {
  dvm::Tensor kept;  // a pooled buffer made before the library's statics
  BeforeMain() {
    check_sum("a static initializer (lazy)", lazy_sum(300), 300);
    check_sum("a static initializer (graph)", graph_sum(200), 200);
    kept = dvm::Tensor::arange(1000) * 3.0f;
    kept.sync();
  }
} g_before_main;

}  // namespace

int main() {
  // The environment read before main still holds.
  if (dvm::tier_mode() != dvm::TierMode::Eager) fail("DVM_TIER=eager read before main was lost");
  if (dvm::trace_limit() != 77) fail("DVM_TRACE_LIMIT=77 read before main was lost: " + std::to_string(dvm::trace_limit()));
  check_sum("main (lazy)", lazy_sum(300), 300);
  check_sum("main (graph)", graph_sum(200), 200);
  if (g_before_main.kept.to_vector()[999] != 2997.0f) fail("a tensor made before main lost its values");
  // Launch times span the library's initializers: none may be negative.
  for (const dvm::KernelStats& k : dvm::kernel_stats())
    if (k.calls > 0 && k.total_ns < 0) fail("a kernel's launch time is negative: " + std::to_string(k.total_ns));
  return 0;
}
