// Permutes whose innermost axis stays innermost (attention's head shuffle,
// x.permute({0, 2, 1, 3})): past three axes that do not merge, no [P, R, C]
// split reads the input linearly, so it is a gather (LDG) whose rows are
// contiguous. Generated shapes of rank 3 to 5 (extents of 1 and odd sizes),
// copies and ops on them, exact against an index-walking reference on every
// target; on the machine-code targets the gather runs as machine code
// (kernel log) and no launch of it is left to the interpreter.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/tracer/tracer_testing.h"
#if DVM_HAS_JIT
#include "backends/jit/jit.h"
#endif

namespace dvm::testing {
namespace {

class PermutedRows : public IsaTest {
 protected:
  bool machine_code() const { return GetParam().tier != TierMode::Off && std::string(GetParam().isa) != "portable"; }
};

int64_t declined_gathers() {
#if DVM_HAS_JIT
  return backends::jit::gather_runs_declined();
#else
  return 0;
#endif
}

// x's values read through permutation perm (axis k of the result is axis
// perm[k] of x), row-major.
std::vector<float> permuted(const std::vector<float>& x, const std::vector<int64_t>& shape,
                            const std::vector<int>& perm) {
  const size_t r = shape.size();
  std::vector<int64_t> out_shape(r), in_strides = row_major_strides(Shape(shape));
  for (size_t k = 0; k < r; ++k) out_shape[k] = shape[static_cast<size_t>(perm[k])];
  std::vector<float> out(x.size());
  int64_t idx[kMaxRank];
  for (size_t i = 0; i < out.size(); ++i) {
    unravel(static_cast<int64_t>(i), out_shape, idx);
    int64_t off = 0;
    for (size_t k = 0; k < r; ++k) off += idx[k] * in_strides[static_cast<size_t>(perm[k])];
    out[i] = x[static_cast<size_t>(off)];
  }
  return out;
}

// Runs the permute cases of x [shape] through perm; expects the reference's
// bits. On machine code every kernel is expected on the JIT, and, when
// `inner_stays`, no launch declined.
void check_permute(const std::vector<int64_t>& shape, const std::vector<int>& perm, uint32_t seed,
                   bool machine_code, bool inner_stays) {
  const int64_t n = numel_of(shape);
  const std::vector<float> xv = make_values(n, seed, uniform_gen(-4, 4));
  const std::vector<float> yv = make_values(n, seed + 1, uniform_gen(-4, 4));
  const std::vector<float> px = permuted(xv, shape, perm);
  std::vector<int64_t> out_shape;
  for (int a : perm) out_shape.push_back(shape[static_cast<size_t>(a)]);
  Tensor x = Tensor::from_vector(xv, Shape(shape));
  Tensor y = Tensor::from_vector(yv, Shape(out_shape));
  const std::string what = shape_str(shape) + " permuted by (" +
                           std::accumulate(perm.begin(), perm.end(), std::string(),
                                           [](std::string s, int a) { return s + std::to_string(a) + ","; }) +
                           ")";
  const int64_t declined = declined_gathers();
  dvm::set_kernel_log(true);
  (void)dvm::take_kernel_log();
  const std::vector<float> copy = x.permute(perm).contiguous().to_vector();
  const std::vector<float> plus = (x.permute(perm) + 1.0f).to_vector();
  const std::vector<float> times = (x.permute(perm) * y).to_vector();
  const std::vector<KernelRun> log = dvm::take_kernel_log();
  dvm::set_kernel_log(false);
  ASSERT_EQ(copy.size(), px.size()) << what;
  ASSERT_EQ(plus.size(), px.size()) << what;
  ASSERT_EQ(times.size(), px.size()) << what;
  for (size_t i = 0; i < px.size(); ++i) {
    ASSERT_EQ(bits_of(copy[i]), bits_of(px[i])) << what << " contiguous(), element " << i;
    ASSERT_EQ(bits_of(plus[i]), bits_of(px[i] + 1.0f)) << what << " + 1, element " << i;
    ASSERT_EQ(bits_of(times[i]), bits_of(px[i] * yv[i])) << what << " * y, element " << i;
  }
  if (!machine_code) return;
  for (const KernelRun& k : log) EXPECT_EQ(k.tier, "jit") << what << ": a " << k.form << " kernel";
  if (inner_stays) {
    EXPECT_EQ(declined_gathers(), declined) << what;
  }
}

// The attention head shuffle and two fixed permutes of four and five axes
// that no three parts read linearly: they run as machine code.
TEST_P(PermutedRows, HeadShuffleRunsOnMachineCode) {
  check_permute({2, 3, 4, 5}, {0, 2, 1, 3}, 1, machine_code(), true);
  check_permute({3, 4, 5, 6, 7}, {2, 0, 3, 1, 4}, 2, machine_code(), true);
  check_permute({4, 16, 8, 64}, {0, 2, 1, 3}, 3, machine_code(), true);
}

TEST_P(PermutedRows, GeneratedShapesAndPermutes) {
  std::mt19937 rng(20261129);
  const int64_t sizes[] = {1, 1, 2, 3, 5, 7, 8, 16, 17, 33};
  for (int round = 0; round < 60; ++round) {
    const int rank = 3 + static_cast<int>(rng() % 3);
    std::vector<int64_t> shape;
    for (int k = 0; k < rank; ++k) shape.push_back(sizes[rng() % std::size(sizes)]);
    if (round % 4 == 0) shape.back() = 65;  // longer than a vector, with a tail
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end() - 1, rng);  // the innermost axis stays innermost
    check_permute(shape, perm, static_cast<uint32_t>(round), machine_code(), true);
    if (::testing::Test::HasFailure()) return;
  }
}

// A permute that moves the innermost axis too gathers along C with a
// stride: the machine code declines such launches at run time and the
// interpreter computes them, with the same bits.
TEST_P(PermutedRows, InnerAxisMovedStaysExact) {
  const int64_t declined = declined_gathers();
  check_permute({2, 3, 4, 5}, {2, 0, 3, 1}, 4, false, false);
  if (machine_code()) {
    EXPECT_GT(declined_gathers(), declined);
  }
  std::mt19937 rng(11);
  const int64_t sizes[] = {1, 2, 3, 5, 9};
  for (int round = 0; round < 20; ++round) {
    const int rank = 3 + static_cast<int>(rng() % 3);
    std::vector<int64_t> shape;
    for (int k = 0; k < rank; ++k) shape.push_back(sizes[rng() % std::size(sizes)]);
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    check_permute(shape, perm, static_cast<uint32_t>(100 + round), false, false);
    if (::testing::Test::HasFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(Target, PermutedRows, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
