// The random-program differential test: seeded programs of 1-30 ops over
// every op of the public API, with broadcasting, views, reductions,
// softmax / layer_norm and special values, run on the interpreter and the
// JIT of every ISA the machine has and checked against an interval reference
// in double (tests/random/random_program.h), the tiers bit for bit against
// each other; each program again at other sizes (plan-cache twins).
//
// DVM_RANDOM_PROGRAMS sets the total number of programs over all shards
// (default 10000), DVM_RANDOM_SEED the first seed (default 1). A failure
// prints the shrunk program as C++ code.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "dvm/dvm.h"
#include "tests/random/random_program.h"

namespace dvm::random_programs {
namespace {

constexpr int kShards = 8;

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
  const int64_t total = env_int("DVM_RANDOM_PROGRAMS", 10000);
  const uint64_t first = static_cast<uint64_t>(env_int("DVM_RANDOM_SEED", 1));
  CheckOptions opts;
  opts.isas = available_isas();
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
        ADD_FAILURE() << "seed " << seed << ", twin " << twin << "\n"
                      << shrink_and_reproduce(p, in, opts, o.failure);
        break;
      }
    }
    if (failures >= 3) break;  // enough to act on; each reproducer takes a shrink
  }
  std::string skips;
  for (auto [item, n] : skipped) skips += " item " + std::to_string(item) + ": " + std::to_string(n) + ";";
  const Stats after = dvm::stats();
  std::printf("shard %d: %lld programs, %lld instances on %zu ISAs x %d tiers (%lld kernels compiled, %lld JIT "
              "compiles, %lld launches at new extents); known defects skipped:%s\n",
              shard, static_cast<long long>(programs), static_cast<long long>(runs), opts.isas.size(), opts.jit ? 2 : 1,
              static_cast<long long>(after.kernels_compiled - before.kernels_compiled),
              static_cast<long long>(after.jit_compiles - before.jit_compiles),
              static_cast<long long>(after.new_shapes - before.new_shapes), skips.empty() ? " none" : skips.c_str());
}

INSTANTIATE_TEST_SUITE_P(Shards, RandomPrograms, ::testing::Range(0, kShards));

}  // namespace
}  // namespace dvm::random_programs
