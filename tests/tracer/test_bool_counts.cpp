// Sums of bool (torch's int64 count of the trues) over one run of axes of
// at most 2^24 elements fold their ones in float32 lanes (exact there), in
// the reduction's kernel, which AVX-512's JIT runs as machine code; longer
// counts and counts over separate runs of axes fold in int64 lanes. Against
// a count made here, over generated shapes, on every target.
#include <algorithm>
#include <map>
#include <random>
#include <string>

#include "tests/tracer/int_testing.h"

namespace dvm::testing {
namespace {

class BoolCounts : public IsaTest {};

// Per output of a sum over `axes` of shape s (row-major), the count of
// nonzero bytes.
std::vector<int64_t> counts(const std::vector<uint8_t>& b, const Shape& s, const std::vector<int>& axes) {
  std::map<std::vector<int64_t>, int64_t> acc;
  std::vector<int64_t> idx(static_cast<size_t>(s.rank()));
  for (int64_t i = 0; i < s.numel(); ++i) {
    int64_t rest = i;
    for (int d = s.rank() - 1; d >= 0; --d) {
      idx[static_cast<size_t>(d)] = rest % s[d];
      rest /= s[d];
    }
    std::vector<int64_t> key;
    for (int d = 0; d < s.rank(); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end()) key.push_back(idx[static_cast<size_t>(d)]);
    acc[key] += b[static_cast<size_t>(i)] != 0;
  }
  std::vector<int64_t> out;
  for (const auto& [key, c] : acc) out.push_back(c);
  return out;
}

// Generated shapes of rank 1-3 (extents 1 and odd ones among them), a run
// of axes (the innermost, an outer one, all), masks stored with any
// nonzero byte for true and masks a comparison makes in the counting
// kernel; the sum() of every element too.
TEST_P(BoolCounts, OneRunOfAxesCountsInFloatLanesOnMachineCode) {
  const bool want_jit = std::string(GetParam().name) == "avx512_jit";
  std::mt19937 rng(99);
  int failures = 0;
  for (int iter = 0; iter < 60 && failures < 3; ++iter) {
    const int rank = 1 + iter % 3;
    std::vector<int64_t> ext;
    for (int d = 0; d < rank; ++d) {
      const uint32_t k = rng() % 4;
      ext.push_back(k == 0 ? 1 : k == 1 ? 1 + rng() % 17 : 1 + rng() % 300);
    }
    const Shape s(ext);
    const int64_t n = s.numel();
    // A run [a, b] of axes.
    const int a = static_cast<int>(rng() % static_cast<uint32_t>(rank));
    const int b = a + static_cast<int>(rng() % static_cast<uint32_t>(rank - a));
    std::vector<int> axes;
    for (int d = a; d <= b; ++d) axes.push_back(d);
    const bool keepdim = rng() % 2;
    std::vector<float> v(static_cast<size_t>(n));
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    const uint32_t density = rng() % 4;  // none, some, most, all true
    for (int64_t i = 0; i < n; ++i) {
      const bool on = density == 3 || (density == 2 && rng() % 2 == 0) || (density == 1 && rng() % 5 == 0);
      bytes[static_cast<size_t>(i)] = on ? static_cast<uint8_t>(1 + rng() % 255) : 0;
      v[static_cast<size_t>(i)] = on ? 0.25f * static_cast<float>(1 + rng() % 8) : -static_cast<float>(rng() % 3);
    }
    if (n > 0 && rng() % 3 == 0) v[static_cast<size_t>(rng() % n)] = NAN;  // NaN > 0 is false
    std::vector<uint8_t> positive(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) positive[static_cast<size_t>(i)] = v[static_cast<size_t>(i)] > 0.0f;
    const Tensor stored = Tensor::from_blob(bytes.data(), s, Dtype::Bool);
    const Tensor x = Tensor::from_vector(v, s);
    x.sync();
    const std::string what = cat(s.to_string(), " axes ", a, "..", b, keepdim ? " keepdim" : "");
    struct Case {
      std::string name;
      Tensor y;
      std::vector<int64_t> want;
    };
    std::vector<int> all;
    for (int d = 0; d < rank; ++d) all.push_back(d);
    const std::vector<Case> cases = {
        {"mask.sum(axes)", stored.sum(axes, keepdim), counts(bytes, s, axes)},
        {"gt(x, 0).sum(axes)", dvm::gt(x, 0.0f).sum(axes, keepdim), counts(positive, s, axes)},
        {"mask.sum()", stored.sum(), counts(bytes, s, all)},
        {"gt(x, 0).sum()", dvm::gt(x, 0.0f).sum(), counts(positive, s, all)},
    };
    for (const Case& c : cases) {
      const std::string w = c.name + " of " + what;
      EXPECT_EQ(c.y.dtype(), Dtype::I64) << w;
      for (const KernelRun& k : run_logged(c.y))
        if (want_jit && k.tier != "jit") {
          ADD_FAILURE() << w << ": a " << k.form << " kernel ran on the " << k.tier << " tier";
          ++failures;
        }
      const std::vector<int64_t> got = read(c.y);
      if (got != c.want) {
        ADD_FAILURE() << w << ": counts differ (" << got.size() << " results, " << c.want.size() << " expected)";
        ++failures;
      }
    }
  }
}

// Separate runs of axes (two reductions) and counts past 2^24 fold in
// int64 lanes, exactly as before: a count one past 2^24 + 2^23 of ones,
// and a column count over a transposed mask.
TEST_P(BoolCounts, PastTwoToTheTwentyFourAndSeparateRunsStayExact) {
  const int64_t n = (int64_t{1} << 24) + (int64_t{1} << 23) + 1;
  std::vector<uint8_t> ones(static_cast<size_t>(n), 1);
  ones[5] = 0;
  const Tensor mask = Tensor::from_blob(ones.data(), {n}, Dtype::Bool);
  EXPECT_EQ(read(mask.sum()), (std::vector<int64_t>{n - 1}));
  EXPECT_EQ(read(mask.reshape({n, 1}).sum({0}, true)), (std::vector<int64_t>{n - 1}));
  std::mt19937 rng(5);
  const Shape s{3, 7, 5};
  std::vector<uint8_t> bytes(static_cast<size_t>(s.numel()));
  for (uint8_t& b : bytes) b = rng() % 2 ? 0 : 3;
  const Tensor m = Tensor::from_blob(bytes.data(), s, Dtype::Bool);
  EXPECT_EQ(read(m.sum({0, 2})), counts(bytes, s, {0, 2}));
  EXPECT_EQ(read(m.sum({0, 2}, true)), counts(bytes, s, {0, 2}));
  // m.transpose(0, 2) [5, 7, 3] summed over its axis 2 counts m over axis 0.
  EXPECT_EQ(read(m.transpose(0, 2).sum({2})), read(m.sum({0}).transpose(0, 1).contiguous()));
}

INSTANTIATE_TEST_SUITE_P(Target, BoolCounts, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
