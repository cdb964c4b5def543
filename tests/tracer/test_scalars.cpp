// Scalars are not identity (DESIGN.md): a value the user passes is a scalar
// parameter of the kernel, bound at launch like a size. A new value compiles
// nothing, runs the same kernel (which goes hot and reaches the JIT as
// usual), and a replayed plan binds the new value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/plan_cache.h"
#include "tests/jit_built.h"
#include "tests/tracer/tracer_testing.h"
#include "vm/kernel_cache.h"

namespace dvm::testing {
namespace {

// Starts from empty kernel and plan caches, so the cache's size is this
// test's kernels.
void clear_caches() {
  dvm::wait_for_jit();
  fuser::PlanCache::current().clear();  // plans hold their kernels too
  vm::KernelCache::global().clear();
}

// Error bound of fl(fl(x * t) + y) against the exact value: two roundings,
// each at most u of its result's magnitude (|x t| and |x t + y| <= |x t| + |y|).
double fma_free_bound(double x, double t, double y) {
  const double xt = std::fabs(x * t);
  return kU * (xt + (xt + std::fabs(y))) + 0x1.0p-149;
}

// A game loop: every frame computes x * dt + y with that frame's dt.
TEST(Scalars, AFrameLoopRunsOneKernelThatReachesTheJit) {
  SettingsGuard guard;
  dvm::set_tier_mode(TierMode::Auto);
  dvm::set_jit_threshold(4);
  clear_caches();
  const int64_t n = 1000;
  const std::vector<float> xv = make_values(n, 11, uniform_gen(-50, 50));
  const std::vector<float> yv = make_values(n, 12, uniform_gen(-5, 5));
  Tensor x = Tensor::from_vector(xv), y = Tensor::from_vector(yv);
  const int64_t compiled_before = dvm::stats().kernels_compiled;
  constexpr int kFrames = 2000;
  for (int f = 0; f < kFrames; ++f) {
    const float dt = 1.0f / 60.0f + 1e-5f * static_cast<float>(f % 613) - 3e-7f * static_cast<float>(f);
    const std::vector<float> got = (x * dt + y).to_vector();
    ASSERT_EQ(got.size(), static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double want = static_cast<double>(xv[static_cast<size_t>(i)]) * dt + yv[static_cast<size_t>(i)];
      ASSERT_LE(std::fabs(got[static_cast<size_t>(i)] - want),
                fma_free_bound(xv[static_cast<size_t>(i)], dt, yv[static_cast<size_t>(i)]))
          << "frame " << f << " dt " << dt << " element " << i;
    }
  }
  // One kernel for every frame: 2000 values compiled nothing after the first.
  EXPECT_EQ(dvm::stats().kernels_compiled - compiled_before, 1);
  EXPECT_EQ(vm::KernelCache::global().size(), 1);
  dvm::wait_for_jit();
  const std::vector<KernelStats> ks = dvm::kernel_stats();
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_EQ(ks[0].calls, kFrames);
  if (DVM_HAS_JIT && dvm::isa() != "portable") {
    EXPECT_EQ(ks[0].tier, "jit") << ks[0].jit_failure;
    EXPECT_GT(ks[0].compile_ns, 0);
    // And the next frame, with yet another dt, runs on machine code.
    dvm::set_kernel_log(true);
    const float dt = 0.0123f;
    const std::vector<float> got = (x * dt + y).to_vector();
    dvm::set_kernel_log(false);
    const std::vector<KernelRun> runs = dvm::take_kernel_log();
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(runs[0].tier, "jit");
    EXPECT_EQ(runs[0].hash, ks[0].hash);
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      EXPECT_LE(std::fabs(got[k] - (static_cast<double>(xv[k]) * dt + yv[k])), fma_free_bound(xv[k], dt, yv[k]));
    }
  }
}

// Every way a user's float enters an op: inline operands of arithmetic,
// comparisons and pow, a Tensor(float) in where, full() and maximum. Two
// values on the same program: the second compiles nothing and replays the
// plan, and both match the double reference.
TEST(Scalars, EveryUserScalarIsBoundAtLaunch) {
  SettingsGuard guard;
  const int64_t n = 257;
  const std::vector<float> xv = make_values(n, 21, uniform_gen(-4, 4), {0.0f, -0.0f, 1.0f, -1.0f, 2.0f});
  const std::vector<float> pv = make_values(n, 22, uniform_gen(0.1f, 3));
  Tensor x = Tensor::from_vector(xv), p = Tensor::from_vector(pv);
  struct Case {
    std::string name;
    std::function<Tensor(float)> op;
    std::function<double(double, double, double)> ref;  // (x, p, t)
    double rel;                                          // relative bound (0: exact)
  };
  const std::vector<Case> cases = {
      {"t - x", [&](float t) { return t - x; }, [](double a, double, double t) { return t - a; }, kU},
      {"x / t", [&](float t) { return x / t; }, [](double a, double, double t) { return a / t; }, kU},
      {"x > t", [&](float t) { return gt(x, Tensor(t)); }, [](double a, double, double t) { return a > t ? 1 : 0; }, 0},
      {"x <= t", [&](float t) { return le(x, t); }, [](double a, double, double t) { return a <= t ? 1 : 0; }, 0},
      {"where(x > 0, x, t)", [&](float t) { return where(gt(x, 0.0f), x, Tensor(t)); },
       [](double a, double, double t) { return a > 0 ? a : t; }, 0},
      {"maximum(x, t)", [&](float t) { return maximum(x, Tensor(t)); },
       [](double a, double, double t) { return std::max(a, t); }, 0},
      {"full(t) + x", [&](float t) { return Tensor::full({n}, t) + x; },
       [](double a, double, double t) { return t + a; }, kU},
      {"pow(p, t)", [&](float t) { return pow(p, t); }, [](double, double b, double t) { return std::pow(b, t); },
       8e-7},
      {"clamp via minimum(maximum)", [&](float t) { return minimum(maximum(x, Tensor(-t)), Tensor(t)); },
       [](double a, double, double t) { return std::min(std::max(a, -t), t); }, 0},
  };
  for (const Case& c : cases) {
    for (int round = 0; round < 2; ++round) {
      const float t = round == 0 ? 1.25f : 2.75f;
      const int64_t compiled = dvm::stats().kernels_compiled;
      const int64_t hits = fuser::PlanCache::current().hits;
      const std::vector<float> got = c.op(t).to_vector();
      if (round == 1) {
        EXPECT_EQ(dvm::stats().kernels_compiled, compiled) << c.name << ": a new value compiled a kernel";
        EXPECT_EQ(fuser::PlanCache::current().hits, hits + 1) << c.name << ": the plan did not replay";
      }
      for (int64_t i = 0; i < n; ++i) {
        const size_t k = static_cast<size_t>(i);
        const double want = c.ref(xv[k], pv[k], t);
        ASSERT_LE(std::fabs(got[k] - want), c.rel * std::fabs(want)) << c.name << " t=" << t << " i=" << i;
      }
    }
  }
}

// A replayed plan with reductions: scalars in a row reduction's prologue and
// a column reduction's epilogue, bound anew on each replay.
TEST(Scalars, ReplayedPlansBindNewValuesInEveryForm) {
  const int64_t r = 6, c = 40;
  const std::vector<float> xv = make_values(r * c, 31, uniform_gen(-2, 2));
  Tensor x = Tensor::from_vector(xv, {r, c});
  for (int round = 0; round < 3; ++round) {
    const float a = 0.5f + static_cast<float>(round), b = -1.0f - 0.25f * static_cast<float>(round);
    const int64_t compiled = dvm::stats().kernels_compiled;
    Tensor rows = (x * a).sum({1}) + b;  // row reduction
    Tensor cols = x.sum({0}) * b - a;    // column reduction
    Tensor filled = Tensor::full({r, c}, a).sum({0});  // a reduction of a user's constant
    const std::vector<float> rv = rows.to_vector(), cv = cols.to_vector(), fv = filled.to_vector();
    for (int64_t j = 0; j < c; ++j) EXPECT_EQ(fv[static_cast<size_t>(j)], static_cast<float>(r) * a) << "column " << j;
    if (round > 0) {
      EXPECT_EQ(dvm::stats().kernels_compiled, compiled);
    }
    for (int64_t i = 0; i < r; ++i) {
      double s = 0, sa = 0;
      for (int64_t j = 0; j < c; ++j) {
        s += static_cast<double>(xv[static_cast<size_t>(i * c + j)]) * a;
        sa += std::fabs(static_cast<double>(xv[static_cast<size_t>(i * c + j)]) * a);
      }
      EXPECT_NEAR(rv[static_cast<size_t>(i)], s + b, (c + 2) * kU * (sa + std::fabs(b))) << "row " << i;
    }
    for (int64_t j = 0; j < c; ++j) {
      double s = 0, sa = 0;
      for (int64_t i = 0; i < r; ++i) {
        s += xv[static_cast<size_t>(i * c + j)];
        sa += std::fabs(xv[static_cast<size_t>(i * c + j)]);
      }
      EXPECT_NEAR(cv[static_cast<size_t>(j)], s * b - a, (r + 3) * kU * (sa * std::fabs(b) + std::fabs(a)))
          << "column " << j;
    }
  }
}

// Interpreter and JIT give the same bits for a program with several scalar
// parameters, whichever values they bind.
TEST(Scalars, InterpreterAndJitAgreeBitForBit) {
  if (dvm::isa() == "portable") GTEST_SKIP() << "the active ISA (portable) has no JIT";
  DVM_SKIP_WITHOUT_JIT();
  SettingsGuard guard;
  const int64_t n = 1031;
  const std::vector<float> xv = make_values(n, 41, uniform_gen(-6, 6), {0.0f, -0.0f, kInf, -kInf, kNaN});
  Tensor x = Tensor::from_vector(xv);
  auto program = [&](float s, float t) {
    // The mask dies before the flush: one kernel, f32 in and out.
    Tensor y = where(gt(x, s), exp(x * t) - s, tanh(x) / t);
    return y.to_vector();
  };
  for (float s : {0.5f, -1.75f, kNaN})
    for (float t : {3.0f, -0.125f, 1e-30f}) {
      dvm::set_tier_mode(TierMode::Off);
      const std::vector<float> interp = program(s, t);
      dvm::set_tier_mode(TierMode::Eager);
      dvm::set_kernel_log(true);
      const std::vector<float> jit = program(s, t);
      dvm::set_kernel_log(false);
      for (const KernelRun& run : dvm::take_kernel_log()) EXPECT_EQ(run.tier, "jit");
      for (int64_t i = 0; i < n; ++i)
        ASSERT_TRUE(same_float(jit[static_cast<size_t>(i)], interp[static_cast<size_t>(i)]))
            << "s=" << s << " t=" << t << " i=" << i << ": jit " << jit[static_cast<size_t>(i)] << " interp "
            << interp[static_cast<size_t>(i)];
    }
}

// A long unobserved chain with a scalar per op: one group of 600 scalar
// parameters (more than one byte indexes, more than the JIT keeps), still
// one kernel whatever the values, on the interpreter.
TEST(Scalars, ALongChainOfScalarsIsOneKernel) {
  const std::vector<float> xv = make_values(100, 61, uniform_gen(-1, 1));
  Tensor x = Tensor::from_vector(xv);
  for (int round = 0; round < 2; ++round) {
    const float a = round == 0 ? 0.999f : 1.001f, b = round == 0 ? 0.001f : -0.002f;
    const int64_t compiled = dvm::stats().kernels_compiled;
    Tensor y = x;
    for (int k = 0; k < 300; ++k) y = y * a + b;
    const std::vector<float> got = y.to_vector();
    if (round == 1) {
      EXPECT_EQ(dvm::stats().kernels_compiled, compiled);
    }
    int widest = 0;
    for (const auto& k : vm::KernelCache::global().snapshot()) widest = std::max(widest, k->program().nscalars);
    EXPECT_EQ(widest, 600);
    for (size_t i = 0; i < xv.size(); ++i) {
      double want = xv[i], mag = std::fabs(want);
      for (int k = 0; k < 300; ++k) {
        want = want * a + b;
        mag = mag * std::fabs(a) + std::fabs(b);
      }
      // 600 roundings, each at most u of a value bounded by mag's running bound.
      EXPECT_NEAR(got[i], want, 600 * kU * mag * 1.5) << "i=" << i;
    }
  }
}

// Reductions long enough to split (a row of 2^20 floats; a [2^17, 64]
// column sum): their split passes and fold kernels are kernels of their own
// that inherit the parent's scalar parameters and launch values. The same
// bits on the interpreter and the JIT, and near the double reference.
TEST(Scalars, SplitReductionsBindScalarsOnEveryTier) {
  SettingsGuard guard;
  const int64_t n = int64_t{1} << 20, cols = 64, rows = n / cols;
  const std::vector<float> xv = make_values(n, 51, uniform_gen(-1, 1));
  Tensor x = Tensor::from_vector(xv);
  Tensor m = Tensor::from_vector(xv, {rows, cols});
  const bool jit = DVM_HAS_JIT && dvm::isa() != "portable";
  for (float a : {0.5f, -3.25f}) {
    std::vector<std::vector<float>> results;
    for (TierMode mode : {TierMode::Off, TierMode::Eager}) {
      if (mode == TierMode::Eager && !jit) continue;
      dvm::set_tier_mode(mode);
      std::vector<float> r = ((x * a).sum() + a).to_vector();
      const std::vector<float> c = ((m * a).sum({0}) - a).to_vector();
      r.insert(r.end(), c.begin(), c.end());
      results.push_back(r);
    }
    double s = 0, sa = 0;
    for (float v : xv) {
      s += static_cast<double>(v) * a;
      sa += std::fabs(static_cast<double>(v) * a);
    }
    // Blocked sums: error well under sqrt(n)-scaled bounds; 64 u * sum |x a| is loose but independent.
    EXPECT_NEAR(results[0][0], s + a, 64 * kU * (sa + std::fabs(a)));
    for (int64_t j = 0; j < cols; ++j) {
      double cs = 0, ca = 0;
      for (int64_t i = 0; i < rows; ++i) {
        cs += static_cast<double>(xv[static_cast<size_t>(i * cols + j)]) * a;
        ca += std::fabs(static_cast<double>(xv[static_cast<size_t>(i * cols + j)]) * a);
      }
      EXPECT_NEAR(results[0][static_cast<size_t>(1 + j)], cs - a, 64 * kU * (ca + std::fabs(a))) << "column " << j;
    }
    if (results.size() == 2) {
      for (size_t i = 0; i < results[0].size(); ++i)
        ASSERT_TRUE(same_float(results[1][i], results[0][i])) << "a=" << a << " result " << i;
    }
  }
}

}  // namespace
}  // namespace dvm::testing
