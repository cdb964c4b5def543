// Tiering through the public API: modes, background compiles, stats, JIT
// refusals, cache eviction freeing code, and tiers agreeing bit for bit on
// whole programs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "dvm/dvm.h"
#include "tests/jit_built.h"
#include "fuser/plan_cache.h"
#include "vm/kernel_cache.h"

#include "tests/vm/vm_testing.h"

namespace dvm {
namespace {

std::vector<float> ramp(int64_t n, float k) { return testing::ramp(n, k, 2.0f); }

// A program touching every kernel form and a spread of ops.
std::vector<std::vector<float>> program(const std::vector<float>& xv, int64_t rows, int64_t cols) {
  Tensor x = Tensor::from_blob(xv.data(), {rows, cols});
  Tensor bias = Tensor::arange(0.0f, static_cast<float>(cols)) * 0.01f;
  Tensor a = gelu(x + bias, GeluApprox::Tanh) * sigmoid(x);
  Tensor b = layer_norm(tanh(x), {cols}, Tensor(), Tensor());
  Tensor c = softmax(x * 3.0f, -1);
  Tensor d = where(gt(x, 0.5f), exp(x), log(abs(x) + 1.0f)).mean(0);
  Tensor e = pow(abs(x) + 0.5f, 1.7f).sum(-1) + cos(x).max(-1);
  return {a.to_vector(), b.to_vector(), c.to_vector(), d.to_vector(), e.to_vector()};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class Tiering : public ::testing::Test {
 protected:
  void SetUp() override {
    flush();
    saved_ = tier_mode();
  }
  void TearDown() override {
    wait_for_jit();
    set_tier_mode(saved_);
    set_isa(backends::isa_name(backends::detected_isa()));
  }
  TierMode saved_ = TierMode::Auto;
};

TEST_F(Tiering, InterpreterAndJitAgreeBitForBitOnEveryIsa) {
  DVM_SKIP_WITHOUT_JIT();
  for (const char* isa : {"avx2", "avx512"}) {
    backends::Isa i;
    ASSERT_TRUE(backends::parse_isa(isa, &i));
    if (!backends::isa_supported(i)) continue;
    set_isa(isa);
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{3, 7}, {17, 1024}, {4, 5003}}) {
      const auto xv = ramp(rows * cols, 0.0137f);
      set_tier_mode(TierMode::Off);
      const auto interp = program(xv, rows, cols);
      set_tier_mode(TierMode::Eager);
      const auto jit = program(xv, rows, cols);
      for (size_t k = 0; k < interp.size(); ++k)
        EXPECT_TRUE(same_bits(interp[k], jit[k])) << isa << " result " << k << " " << rows << "x" << cols;
    }
  }
}

TEST_F(Tiering, EagerCompilesBeforeTheFirstRunAndStatsSayJit) {
  if (backends::active_isa() == backends::Isa::Portable) GTEST_SKIP() << "no JIT for the portable ISA (DVM_ISA or the CPU)";
  DVM_SKIP_WITHOUT_JIT();
  set_tier_mode(TierMode::Eager);
  reset_stats();
  const auto xv = ramp(4096, 0.1f);
  Tensor x = Tensor::from_blob(xv.data(), {4096});
  set_kernel_log(true);
  std::vector<float> y = (relu(x * 1.25f + 0.5f) * 0.5f + x).to_vector();
  set_kernel_log(false);
  auto log = take_kernel_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].tier, "jit");
  EXPECT_GE(stats().jit_compiles, 1);
  EXPECT_GT(stats().jit_code_bytes, 0);
  bool found = false;
  for (const KernelStats& k : kernel_stats())
    if (k.hash == log[0].hash) {
      found = true;
      EXPECT_EQ(k.tier, "jit");
      EXPECT_GT(k.compile_ns, 0);
      EXPECT_GE(k.calls, 1);
    }
  EXPECT_TRUE(found);
  for (size_t i = 0; i < xv.size(); ++i) {
    float t = xv[i] * 1.25f + 0.5f;
    ASSERT_EQ(y[i], (t > 0 ? t : 0) * 0.5f + xv[i]);
  }
}

TEST_F(Tiering, AutoSwitchesAfterTheThresholdWithoutWaiting) {
  if (backends::active_isa() == backends::Isa::Portable) GTEST_SKIP() << "no JIT for the portable ISA (DVM_ISA or the CPU)";
  DVM_SKIP_WITHOUT_JIT();
  set_tier_mode(TierMode::Auto);
  set_jit_threshold(3);
  const auto xv = ramp(1000, 0.3f);
  Tensor x = Tensor::from_blob(xv.data(), {1000});
  set_kernel_log(true);
  // A fresh kernel (an immediate no other test uses).
  for (int i = 0; i < 3; ++i) (x * 0.123456f + 7.0f).sync();
  auto log = take_kernel_log();
  ASSERT_EQ(log.size(), 3u);
  for (const auto& r : log) EXPECT_EQ(r.tier, "interp");  // the first runs never wait
  wait_for_jit();
  (x * 0.123456f + 7.0f).sync();
  log = take_kernel_log();
  set_kernel_log(false);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].tier, "jit");
  set_jit_threshold(4);
}

TEST_F(Tiering, OffNeverMakesExecutableMemory) {
  set_tier_mode(TierMode::Off);
  vm::KernelCache::global().clear();
  wait_for_jit();
  reset_stats();
  const int64_t before = stats().jit_code_bytes;  // code earlier tests' plans still hold
  const auto xv = ramp(2048, 0.2f);
  Tensor x = Tensor::from_blob(xv.data(), {2, 1024});
  for (int i = 0; i < 10; ++i) softmax(x * 0.777f, -1).sync();
  wait_for_jit();
  EXPECT_EQ(stats().jit_compiles, 0);
  EXPECT_EQ(stats().jit_code_bytes, before);
}

TEST_F(Tiering, JitRefusalStaysOnTheInterpreterWithAReason) {
  if (backends::active_isa() == backends::Isa::Portable) GTEST_SKIP() << "no JIT for the portable ISA (DVM_ISA or the CPU)";
  DVM_SKIP_WITHOUT_JIT();
  set_tier_mode(TierMode::Eager);
  // An int32 row sum folds in int64 lanes (torch's int64 result), which machine code has no registers for.
  std::vector<int32_t> xv(3 * 40);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<int32_t>((i * 37) % 101) * 20000000;
  Tensor x = Tensor::from_blob(xv.data(), {3, 40});
  Tensor y = x.sum(1);
  std::vector<int64_t> got = y.to_vector<int64_t>();
  bool refused = false;
  for (const KernelStats& k : kernel_stats())
    if (k.jit_failure.find("int64 lanes") != std::string::npos) refused = true;
  EXPECT_TRUE(refused);
  // Values are right all the same: each row's exact sum.
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    int64_t want = 0;
    for (int k = 0; k < 40; ++k) want += xv[static_cast<size_t>(i * 40 + k)];
    EXPECT_EQ(got[static_cast<size_t>(i)], want) << i;
  }
}

// Exiting while compiles are queued and one runs must not crash: static
// destructors run while the compile thread still works. The child process
// queues many fresh kernels (each a background compile) and exits at once.
TEST(TieringExitDeathTest, ExitingWithCompilesQueuedIsClean) {
  if (backends::active_isa() == backends::Isa::Portable) GTEST_SKIP() << "no JIT for the portable ISA (DVM_ISA or the CPU)";
  DVM_SKIP_WITHOUT_JIT();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  for (int round = 0; round < 3; ++round)
    EXPECT_EXIT(
        {
          set_tier_mode(TierMode::Auto);
          set_jit_threshold(1);
          const auto xv = ramp(64, 0.3f);
          Tensor x = Tensor::from_blob(xv.data(), {64});
          (x * 1.5f).sync();
          wait_for_jit();  // the JIT's runtime exists before what follows
          // Kernels differ by structure (a user's scalar would not make a new
          // one): bit b of i picks the b-th op of the chain.
          for (int i = 0; i < 200; ++i) {
            Tensor y = x;
            for (int b = 0; b < 8; ++b) y = (i >> b & 1) ? exp(y * 0.5f) : sin(y);
            tanh(y + sin(x) * cos(x)).sync();
          }
          std::exit(0);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST_F(Tiering, EvictedKernelsFreeTheirCode) {
  if (backends::active_isa() == backends::Isa::Portable) GTEST_SKIP() << "no JIT for the portable ISA (DVM_ISA or the CPU)";
  DVM_SKIP_WITHOUT_JIT();
  set_tier_mode(TierMode::Eager);
  vm::KernelCache& cache = vm::KernelCache::global();
  const int64_t old_capacity = cache.capacity();
  cache.clear();
  fuser::PlanCache::current().clear();  // plans keep their kernels alive too
  wait_for_jit();
  flush();
  const int64_t base = stats().jit_code_bytes;
  cache.set_capacity(2);
  const auto xv = ramp(256, 0.4f);
  Tensor x = Tensor::from_blob(xv.data(), {256});
  for (int i = 0; i < 6; ++i) {  // six kernels: chains of 1..6 multiplies
    Tensor y = x;
    for (int k = 0; k <= i; ++k) y = y * 2.0f;
    (y + 1.0f).sync();
  }
  EXPECT_EQ(cache.size(), 2);
  EXPECT_EQ(cache.evictions() > 0, true);
  EXPECT_GT(stats().jit_code_bytes, base);
  // Once neither the cache nor a plan holds them, their code is gone.
  cache.set_capacity(old_capacity);
  cache.clear();
  fuser::PlanCache::current().clear();
  EXPECT_EQ(stats().jit_code_bytes, base);
}

}  // namespace
}  // namespace dvm
