// `bench_dvm --accuracy`: the float error of each system's exp- and
// tanh-based results against double, in ULPs, instead of running the
// benchmarks (docs/PERFORMANCE.md, "Reference loops"). Two reports:
//   - W2 (gelu), W3 (softmax) and W5 (bias_tanh) at 1M on the benchmark's own
//     inputs, against w_reference_double;
//   - tanh alone over every 97th float of |x| <= 10 (both signs), through W5
//     with a zero bias (dvm: dvm::tanh), against std::tanh in double.
// The ULP is the spacing of floats at the reference value (2^(e-23) for a
// value in [2^e, 2^(e+1)), 2^-149 below FLT_MIN). libtorch is not measured.
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "bench/common.h"

namespace bench {
namespace {

double ulp_of(double ref) {
  const double a = std::fabs(ref);
  if (a < static_cast<double>(std::numeric_limits<float>::min())) return std::ldexp(1.0, -149);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

struct Worst {
  double ulps = 0;
  double at_ref = 0;
  float got = 0;
  void see(float g, double ref) {
    const double u = std::fabs(static_cast<double>(g) - ref) / ulp_of(ref);
    if (!(u <= ulps)) {  // NaN counts as the worst
      ulps = std::isnan(u) ? INFINITY : u;
      at_ref = ref;
      got = g;
    }
  }
};

// dvm at its steady state: the default tiering, past the JIT threshold.
void dvm_steady(W w, int64_t n, float* y) {
  apply_system(kDvm, 1);
  for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) {
    dvm::Tensor t = w_record(w, n);
    (void)t.data();
  }
  dvm::wait_for_jit();
  dvm::Tensor t = w_record(w, n);
  std::memcpy(y, t.data(), static_cast<size_t>(w_out_elems(w, n)) * sizeof(float));
}

struct RefSystem {
  const char* name;
  const RefLoops* loops;
};

std::vector<RefSystem> ref_systems() {
  std::vector<RefSystem> out;
  for (const System& s : kRefSystems)
    if (const RefLoops* l = ref_loops(s)) out.push_back({s.name, l});
  return out;
}

void workload_report() {
  const int64_t n = kMedium;
  std::printf("Max error in float ULPs against double, 1M elements of the benchmark inputs\n");
  std::printf("%-12s %-12s %12s %16s %16s\n", "workload", "system", "max ULP", "at reference", "got");
  for (W w : {W::W2, W::W3, W::W5}) {
    const int64_t out = w_out_elems(w, n);
    std::vector<double> ref(static_cast<size_t>(out));
    w_reference_double(w, n, ref.data());
    std::vector<float> y(static_cast<size_t>(out));
    auto report = [&](const char* system) {
      Worst worst;
      for (int64_t i = 0; i < out; ++i) worst.see(y[static_cast<size_t>(i)], ref[static_cast<size_t>(i)]);
      std::printf("%-12s %-12s %12.3f %16.9g %16.9g\n", w_name(w), system, worst.ulps, worst.at_ref,
                  static_cast<double>(worst.got));
    };
    dvm_steady(w, n, y.data());
    report("dvm");
    for (const RefSystem& s : ref_systems()) {
      w_loop(*s.loops, w, n, y.data());
      report(s.name);
    }
  }
}

void tanh_report() {
  // Every 97th float bit pattern of (0, 10], both signs, padded to whole rows.
  std::vector<float> xs;
  const uint32_t top = std::bit_cast<uint32_t>(10.0f);
  for (uint32_t b = 1; b <= top; b += 97) {
    const float v = std::bit_cast<float>(b);
    xs.push_back(v);
    xs.push_back(-v);
  }
  while (xs.size() % kRowWidth) xs.push_back(0.0f);
  const int64_t n = static_cast<int64_t>(xs.size());
  Floats x(xs.begin(), xs.end()), zeros(kRowWidth, 0.0f), y(static_cast<size_t>(n));
  std::printf("\ntanh alone: every 97th float of 0 < |x| <= 10, both signs (%lld inputs)\n",
              static_cast<long long>(n));
  std::printf("%-12s %12s %16s %16s\n", "system", "max ULP", "at reference", "got");
  auto report = [&](const char* system) {
    Worst worst;
    for (int64_t i = 0; i < n; ++i) worst.see(y[static_cast<size_t>(i)], std::tanh(static_cast<double>(x[static_cast<size_t>(i)])));
    std::printf("%-12s %12.3f %16.9g %16.9g\n", system, worst.ulps, worst.at_ref, static_cast<double>(worst.got));
  };
  {
    apply_system(kDvm, 1);
    auto once = [&] { return dvm::tanh(dvm::Tensor::from_blob(x.data(), {n})); };
    for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) (void)once().data();
    dvm::wait_for_jit();
    dvm::Tensor t = once();
    std::memcpy(y.data(), t.data(), static_cast<size_t>(n) * sizeof(float));
    report("dvm");
  }
  for (const RefSystem& s : ref_systems()) {
    s.loops->w5_bias_tanh(x.data(), zeros.data(), y.data(), n / kRowWidth, kRowWidth);
    report(s.name);
  }
}

}  // namespace

int run_accuracy_report() {
  workload_report();
  tanh_report();
  return 0;
}

}  // namespace bench
