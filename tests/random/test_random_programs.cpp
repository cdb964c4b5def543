// The random-program differential test: seeded programs of 1-30 ops over
// every op of the public API, with broadcasting, views, reductions,
// softmax / layer_norm and special values, run on the interpreter and the
// JIT of every ISA the machine has and checked against an interval reference
// in double (tests/random/random_program.h), the tiers bit for bit against
// each other; each program again at other sizes (plan-cache twins).
//
// DVM_RANDOM_PROGRAMS sets the total number of programs over all shards
// (default 10000; 2000 under the sanitizers), DVM_RANDOM_SEED the first seed
// (default 1); with DVM_ISA set only that ISA runs. A failure prints the
// shrunk program as C++ code. DVM_RANDOM_VERBOSE=1 prints each skipped known
// defect's error, DVM_RANDOM_DUMP=1 the reference around a mismatch.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tests/random/random_program.h"
#include "tracer/ops.h"

namespace dvm::random_programs {
namespace {

constexpr int kShards = 8;
// Programs per run over all shards: fewer under the sanitizers, which run
// every program several times slower.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int64_t kDefaultPrograms = 2000;
#else
constexpr int64_t kDefaultPrograms = 10000;
#endif

// Every op of the tracer's table has a generator case: a new op fails this
// until the generator (and its reference) know it. None is no op; the
// reductions are sum, max and min (mean is sum / n); MatMul is the product
// (matmul, bmm, linear, addmm); floor_divide and remainder are binary ops;
// the bitwise ops are the first kNumBitwise Logic ops (the logical ops and
// bool + / * are recorded with other op kinds). The generator's values are
// float32 and bool: int32 and uint8 operands of floor_divide, remainder and
// the bitwise ops are left to tests/tracer/test_int_ops.cpp, which checks
// them against a scalar reference on every type they take.
static_assert(detail::kNumOpKinds == 1 + kNumUnary + kNumBinary + kNumCmp + 1 + 3 + 1 + kNumBitwise,
              "tests/random: the generator does not cover tracer/ops.h's op table");

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoll(v, nullptr, 10) : fallback;
}

struct SettingsGuard {
  std::string isa = dvm::isa();
  TierMode tier = dvm::tier_mode();
  ~SettingsGuard() {
    dvm::wait_for_jit();
    dvm::set_isa(isa);
    dvm::set_tier_mode(tier);
  }
};

class RandomPrograms : public ::testing::TestWithParam<int> {};

TEST_P(RandomPrograms, MatchReferenceOnEveryTierAndIsa) {
  SettingsGuard guard;
  const int64_t total = env_int("DVM_RANDOM_PROGRAMS", kDefaultPrograms);
  const uint64_t first = static_cast<uint64_t>(env_int("DVM_RANDOM_SEED", 1));
  CheckOptions opts;
  opts.isas = available_isas();
  // A run with the ISA forced (scripts/ci_isas.sh) checks that ISA only; the
  // default run checks them all.
  if (const char* forced = std::getenv("DVM_ISA"); forced && *forced) {
    std::vector<std::string> only;
    for (const std::string& isa : opts.isas)
      if (isa == forced) only.push_back(isa);
    if (!only.empty()) opts.isas = only;
  }
  opts.jit = DVM_HAS_JIT;
  const int shard = GetParam();
  std::map<int, int64_t> skipped;  // issue 14 item -> programs
  int64_t programs = 0, runs = 0, failures = 0;
  const Stats before = dvm::stats();
  for (int64_t k = shard; k < total; k += kShards) {
    const uint64_t seed = first + static_cast<uint64_t>(k);
    const Program p = generate(seed);
    ++programs;
    // Twin 0 is the program; twins 1.. replay its plans at other sizes.
    const int twins = 1 + static_cast<int>(seed % 2);
    for (int twin = 0; twin <= twins; ++twin) {
      const Instance in = instantiate(p, twin);
      const Outcome o = check(p, in, opts);
      ++runs;
      if (o.known_defect) {
        ++skipped[o.known_defect];
        break;
      }
      if (!o.failure.empty()) {
        ++failures;
        // A later twin replays the plans the earlier ones cached: its
        // failure may need them first, so all of them, unshrunk, come along.
        std::string before;
        for (int t = 0; twin > 0 && t <= twin; ++t)
          before += "// twin " + std::to_string(t) + " (each on every ISA and tier, in this order):\n" +
                    to_cpp(p, instantiate(p, t));
        ADD_FAILURE() << "seed " << seed << ", twin " << twin << "\n"
                      << shrink_and_reproduce(p, in, opts, o.failure)
                      << (before.empty() ? ""
                                         : "if that passes alone, twins 0.." + std::to_string(twin) + " unshrunk:\n" +
                                               before);
        break;
      }
    }
    if (failures >= 3) break;  // enough to act on; each reproducer takes a shrink
  }
  std::string skips;
  for (auto [item, n] : skipped) skips += " item " + std::to_string(item) + ": " + std::to_string(n) + ";";
  const Stats after = dvm::stats();
  const std::array<int64_t, 5> t = tightness();
  const double all = static_cast<double>(t[0] + t[1] + t[2] + t[3] + t[4]) / 100;
  std::printf("shard %d: elements checked: %.1f%% NaN, %.1f%% exact, %.1f%% within 16 ULPs, %.1f%% wider, %.1f%% "
              "unbounded\n",
              shard, t[0] / all, t[1] / all, t[2] / all, t[3] / all, t[4] / all);
  std::printf("shard %d: %lld programs, %lld instances on %zu ISAs x %d tiers (%lld kernels compiled, %lld JIT "
              "compiles, %lld launches at new extents); known defects skipped:%s\n",
              shard, static_cast<long long>(programs), static_cast<long long>(runs), opts.isas.size(), opts.jit ? 2 : 1,
              static_cast<long long>(after.kernels_compiled - before.kernels_compiled),
              static_cast<long long>(after.jit_compiles - before.jit_compiles),
              static_cast<long long>(after.new_shapes - before.new_shapes), skips.empty() ? " none" : skips.c_str());
}

// Over a CI run's seeds the generator emits every op, every view and every
// API spelling it knows.
TEST(RandomProgramsGenerator, CoversEveryOpAndView) {
  std::map<std::pair<int, int>, int64_t> seen;  // (kind, sub; products: form) -> count
  std::map<int, int64_t> kinds;
  for (uint64_t seed = 1; seed <= 2000; ++seed)
    for (const Op& o : generate(seed).ops) {
      ++kinds[static_cast<int>(o.kind)];
      ++seen[{static_cast<int>(o.kind), o.kind == OpK::MatMul ? o.form : o.sub}];
    }
  for (int k = 0; k <= static_cast<int>(OpK::Logic); ++k) EXPECT_GT(kinds[k], 0) << "op kind " << k;
  for (int u = 0; u < kNumUnary; ++u) EXPECT_GT((seen[{static_cast<int>(OpK::Unary), u}]), 0) << "unary " << u;
  for (int b = 0; b < kNumBinary; ++b) {
    EXPECT_GT((seen[{static_cast<int>(OpK::Binary), b}]), 0) << "binary " << b;
    EXPECT_GT((seen[{static_cast<int>(OpK::Scalar), b}]), 0) << "binary with a scalar " << b;
  }
  for (int c = 0; c < kNumCmp; ++c) EXPECT_GT((seen[{static_cast<int>(OpK::Compare), c}]), 0) << "compare " << c;
  for (int r = 0; r < kNumRed; ++r) EXPECT_GT((seen[{static_cast<int>(OpK::Reduce), r}]), 0) << "reduction " << r;
  for (int l = 0; l < kNumLogic; ++l) {
    EXPECT_GT((seen[{static_cast<int>(OpK::Logic), l}]), 0) << "bool op " << l;
  }
  for (int s = 0; s < 2; ++s) EXPECT_GT((seen[{static_cast<int>(OpK::Softmax), s}]), 0) << "softmax " << s;
  // matmul, bmm, linear, addmm
  for (int f = 0; f < 4; ++f) EXPECT_GT((seen[{static_cast<int>(OpK::MatMul), f}]), 0) << "product spelling " << f;
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomPrograms, ::testing::Range(0, kShards));

}  // namespace
}  // namespace dvm::random_programs
