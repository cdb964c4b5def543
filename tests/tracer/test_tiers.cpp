// Tier and thread invariance seen through the public API: for one ISA the
// interpreter and the JIT give the same bits for every op (docs/MATH.md,
// DESIGN.md "Invariants"), also when a kernel tiers up between calls; launches
// split across threads, and callers on several threads at once, get the bits
// one thread gets.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "dvm/dvm.h"
#include "tests/jit_built.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm::testing {
namespace {

const std::vector<float> kSpecials = {0.0f, -0.0f, kInf, -kInf, kNaN, 1.0f, -1.0f, 0.5f, -104.5f, 89.0f};

// Every op of the API on n-element data (with special values), returning
// each result's values. One flush for all of them.
std::vector<std::pair<std::string, std::vector<float>>> run_programs(int64_t n) {
  const int64_t r = 5, c = n / r;
  Tensor x = Tensor::from_vector(make_values(r * c, 1, uniform_gen(-6, 6), kSpecials), {r, c});
  Tensor p = Tensor::from_vector(make_values(r * c, 2, uniform_gen(0.01f, 8), kSpecials), {r, c});
  Tensor b = Tensor::from_vector(make_values(c, 3, uniform_gen(-3, 3), kSpecials), {c});
  Tensor e = Tensor::from_vector(make_values(r, 4, uniform_gen(-3, 3), kSpecials), {r, 1});
  Tensor f = Tensor::from_vector(make_values(r * c, 5, uniform_gen(-3, 3)), {r, c});  // finite, for row ops
  Tensor w = Tensor::from_vector(make_values(37 * c, 6, uniform_gen(-1, 1)), {37, c});  // a linear layer's weight
  Tensor wb = Tensor::from_vector(make_values(37, 7, uniform_gen(-1, 1)), {37});
  std::vector<std::pair<std::string, Tensor>> outs = {
      {"neg", dvm::neg(x)},
      {"abs", dvm::abs(x)},
      {"exp", dvm::exp(x)},
      {"log", dvm::log(p)},
      {"sqrt", dvm::sqrt(p)},
      {"rsqrt", dvm::rsqrt(p)},
      {"reciprocal", dvm::reciprocal(x)},
      {"tanh", dvm::tanh(x)},
      {"sigmoid", dvm::sigmoid(x)},
      {"relu", dvm::relu(x)},
      {"gelu", dvm::gelu(x)},
      {"gelu tanh", dvm::gelu(x, GeluApprox::Tanh)},
      {"erf", dvm::erf(x)},
      {"sin", dvm::sin(x)},
      {"cos", dvm::cos(x)},
      {"floor", dvm::floor(x)},
      {"ceil", dvm::ceil(x)},
      {"round", dvm::round(x)},
      {"add row", x + b},
      {"sub col", x - e},
      {"mul outer", e * b},
      {"div", x / p},
      {"maximum", dvm::maximum(x, b)},
      {"minimum", dvm::minimum(e, x)},
      {"pow", dvm::pow(p, x)},
      {"pow scalar", dvm::pow(x, 3.0f)},
      {"compares", dvm::eq(x, b) + dvm::ne(x, e) + dvm::lt(x, p) + dvm::le(b, x) + dvm::gt(x, 0.5f) + dvm::ge(e, x)},
      {"where", dvm::where(dvm::gt(x, b), p, e)},
      {"strided", x.transpose(0, 1).contiguous() * 2.0f},
      {"sum rows", x.sum(1)},
      {"sum columns", f.sum(0)},
      {"mean", f.mean(-1)},
      {"max rows", x.max(1)},
      {"min columns", x.min(0)},
      {"sum all", f.sum()},
      {"softmax", dvm::softmax(f, -1)},
      {"log_softmax", dvm::log_softmax(f, -1)},
      {"softmax columns", dvm::softmax(f, 0)},
      {"layer_norm", dvm::layer_norm(f, {c}, b, b)},
      {"chain", dvm::relu(f * p + b) * 0.5f + f},
      // The cube unit: the product stored as it is, and with an epilogue.
      {"matmul", dvm::matmul(x, w.transpose(0, 1))},
      {"linear gelu", dvm::gelu(dvm::linear(f, w, wb), GeluApprox::Tanh) * 2.0f},
      {"bmm", dvm::bmm(f.reshape({1, r, c}), w.reshape({1, 37, c}).transpose(1, 2)) + e.reshape({1, r, 1})},
      // Operand prologues, computed while the cube packs each operand.
      {"prologues", dvm::matmul(dvm::exp(x) * 0.5f, dvm::relu(w.transpose(0, 1)) - 0.125f) * 2.0f},
  };
  std::vector<std::pair<std::string, std::vector<float>>> vals;
  for (auto& [name, t] : outs) vals.emplace_back(name, t.to_vector());
  return vals;
}

void expect_same_bits(const std::vector<std::pair<std::string, std::vector<float>>>& a,
                      const std::vector<std::pair<std::string, std::vector<float>>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    Checker chk(cat(what, " ", a[k].first));
    ASSERT_EQ(a[k].second.size(), b[k].second.size()) << a[k].first;
    for (size_t i = 0; i < a[k].second.size(); ++i)
      if (!same_float(a[k].second[i], b[k].second[i]))
        chk.fail(cat("[", i, "]"), cat(fstr(a[k].second[i]), " vs ", fstr(b[k].second[i])));
  }
}

TEST(Tiers, InterpreterAndJitAgreeBitForBit) {
  DVM_SKIP_WITHOUT_JIT();
  SettingsGuard guard;
  int tested = 0;
  for (const char* isa : testing::machine_code_isas()) {
    dvm::set_isa(isa);
    for (int64_t n : {int64_t{5 * 33}, int64_t{5 * 4099}}) {
      dvm::set_tier_mode(TierMode::Off);
      const auto interp = run_programs(n);
      dvm::set_tier_mode(TierMode::Eager);
      const auto jit = run_programs(n);
      expect_same_bits(interp, jit, cat(isa, " n=", n, " interp vs jit"));
    }
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 (no JIT)";
}

// In Auto mode a kernel switches to machine code after jit_threshold calls;
// the switch changes no bit of any result.
TEST(Tiers, TieringUpIsInvisible) {
  DVM_SKIP_WITHOUT_JIT();
  SettingsGuard guard;
  dvm::set_tier_mode(TierMode::Auto);
  dvm::set_jit_threshold(2);
  // Constants no other test uses (new on every repeat): fresh kernels, whose
  // first calls must run on the interpreter.
  static int invocation = 0;
  const float k = 1.0f + static_cast<float>(++invocation) * 0x1.0p-12f;
  Tensor x = Tensor::from_vector(make_values(7 * 1001, 9, uniform_gen(-4, 4), kSpecials), {7, 1001});
  auto run = [&](std::vector<std::string>* tiers) {
    std::vector<Tensor> outs = {dvm::exp(x * k) - k, dvm::softmax(x * k, -1), (x * k).sum(0),
                                dvm::layer_norm(x * k, {1001}, Tensor(), Tensor()),
                                dvm::where(dvm::gt(x, k), dvm::sin(x), dvm::gelu(x * k)),
                                dvm::tanh(dvm::matmul(x, x.transpose(0, 1)) * k)};
    dvm::set_kernel_log(true);
    (void)dvm::take_kernel_log();
    std::vector<std::pair<std::string, std::vector<float>>> vals;
    for (size_t i = 0; i < outs.size(); ++i) vals.emplace_back(cat("output ", i), outs[i].to_vector());
    for (const KernelRun& r : dvm::take_kernel_log()) tiers->push_back(r.tier);
    dvm::set_kernel_log(false);
    return vals;
  };
  std::vector<std::string> first_tiers, last_tiers;
  const auto first = run(&first_tiers);
  for (const std::string& t : first_tiers) EXPECT_EQ(t, "interp") << "a fresh kernel's first call";
  for (int r = 1; r < 6; ++r) {
    if (r == 3) dvm::wait_for_jit();
    last_tiers.clear();
    expect_same_bits(first, run(&last_tiers), cat("run ", r, " vs run 0"));
  }
  if (dvm::isa() != "portable") {
    int jit = 0;
    for (const std::string& t : last_tiers) jit += t == "jit";
    EXPECT_EQ(jit, static_cast<int>(last_tiers.size())) << "the last run was not all machine code";
  }
}

// Threads calling dvm at the same time (each with its own trace, sharing the
// kernel cache and background compiles) get the bits a lone caller gets.
TEST(Tiers, ConcurrentCallersAgreeBitForBit) {
  SettingsGuard guard;
  dvm::set_tier_mode(TierMode::Auto);
  dvm::set_jit_threshold(3);
  const auto alone = run_programs(5 * 2003);
  std::vector<std::vector<std::pair<std::string, std::vector<float>>>> got[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t)
    threads.emplace_back([&got, t] {
      for (int run = 0; run < 6; ++run) got[t].push_back(run_programs(5 * 2003));
    });
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < 2; ++t)
    for (size_t run = 0; run < got[t].size(); ++run)
      expect_same_bits(alone, got[t][run], cat("thread ", t, " run ", run));
  dvm::wait_for_jit();
}

// Launches above ~64K elements split across threads; results must not
// depend on how many.
TEST(Tiers, ThreadCountsAgreeBitForBit) {
  SettingsGuard guard;
  for (TierMode tier : {TierMode::Off, TierMode::Eager}) {
    dvm::set_tier_mode(tier);
    dvm::set_num_threads(1);
    const auto one = run_programs(5 * 40001);
    for (int threads : {2, 0}) {
      dvm::set_num_threads(threads);
      expect_same_bits(one, run_programs(5 * 40001),
                       cat(tier == TierMode::Off ? "interp" : "jit", " 1 thread vs ", threads));
    }
  }
}

}  // namespace
}  // namespace dvm::testing
