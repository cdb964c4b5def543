// The property the JIT's bfloat16 tanh relies on (backends/math/vmath.h,
// tanh_bf16_candidate): wherever tanh_bf16_unsure does not flag the
// candidate, it rounds to the same bfloat16 as tanh itself, because its bits
// are within kTanhBf16Slack of tanh's. Checked through VecScalar, which runs
// the primitive sequence every SIMD type and the JIT run (bit-identical by
// the primitive contract). The sampled test runs always; every float, about
// two minutes, with
//   build/tests/test_backends --gtest_also_run_disabled_tests --gtest_filter='TanhBf16*'
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "backends/math/vmath.h"
#include "backends/simd/vec_scalar.h"

namespace dvm::math {
namespace {

using V = simd::VecScalar;

// torch's float to bfloat16: round to nearest even, every NaN to 0x7fc0.
uint16_t to_bf16(uint32_t u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

struct Sweep {
  uint64_t inputs = 0, unsure = 0, wrong = 0;
  int64_t worst_distance = 0;  // |bits(candidate) - bits(tanh)| where not NaN
  uint32_t worst_at = 0, first_wrong = 0;
};

void check(uint32_t bits, Sweep* s) {
  const V x{std::bit_cast<float>(bits)};
  const uint32_t exact = std::bit_cast<uint32_t>(tanh(x).v);
  const V y = tanh_bf16_candidate(x);
  const uint32_t cand = std::bit_cast<uint32_t>(y.v);
  const bool unsure = tanh_bf16_unsure(y).m;
  ++s->inputs;
  s->unsure += unsure;
  if (!unsure && to_bf16(cand) != to_bf16(exact) && s->wrong++ == 0) s->first_wrong = bits;
  if ((bits & 0x7fffffffu) <= 0x7f800000u) {
    const int64_t d = std::llabs(static_cast<int64_t>(static_cast<int32_t>(cand)) - static_cast<int32_t>(exact));
    if (d > s->worst_distance) {
      s->worst_distance = d;
      s->worst_at = bits;
    }
  }
}

void expect_holds(const Sweep& s, const char* what) {
  std::printf("[ tanh/bf16] %s: %llu inputs, %llu unsure (%.4f%%), candidate within %lld bits of tanh (at %.9g)\n",
              what, static_cast<unsigned long long>(s.inputs), static_cast<unsigned long long>(s.unsure),
              100.0 * static_cast<double>(s.unsure) / static_cast<double>(s.inputs),
              static_cast<long long>(s.worst_distance), std::bit_cast<float>(s.worst_at));
  EXPECT_EQ(s.wrong, 0u) << what << ": first at x = " << std::bit_cast<float>(s.first_wrong) << " (0x" << std::hex
                         << s.first_wrong << ")";
  EXPECT_LE(s.worst_distance, kTanhBf16Slack) << what << " at x = " << std::bit_cast<float>(s.worst_at);
}

// Every 251st bit pattern (both signs, subnormals, NaNs and infinities
// among them), every float of [0.5, 0.5 + 2^-9) where bfloat16 midpoints
// are dense relative to the slack, and the neighbours of 9, the clamp.
TEST(TanhBf16, CandidateRoundsLikeTanhWhereSure) {
  Sweep s;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 251) check(static_cast<uint32_t>(b), &s);
  const uint32_t half = std::bit_cast<uint32_t>(0.5f);
  for (uint32_t b = half; b < half + (1u << 14); ++b) {
    check(b, &s);
    check(b | 0x80000000u, &s);
  }
  const uint32_t nine = std::bit_cast<uint32_t>(9.0f);
  for (uint32_t b = nine - 4096; b < nine + 4096; ++b) check(b, &s);
  expect_holds(s, "sampled");
  EXPECT_GT(s.unsure, 0u) << "no input exercised the fallback";
}

TEST(TanhBf16, DISABLED_CandidateRoundsLikeTanhOnEveryFloat) {
  Sweep s;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); ++b) check(static_cast<uint32_t>(b), &s);
  expect_holds(s, "every float");
}

}  // namespace
}  // namespace dvm::math
