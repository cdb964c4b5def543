// Plan cache: a structure seen before reuses its plan (no partition, no
// encoding) with the new sizes bound at launch; any structural difference
// misses. Results are checked against a reference either way.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/executor.h"
#include "fuser/plan_cache.h"
#include "tracer/trace.h"

namespace dvm {
namespace {

std::vector<float> ramp(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(scale * static_cast<float>(i));
  return v;
}

// W1 with a row-broadcast bias, checked element by element.
void run_chain(int64_t rows, int64_t cols) {
  auto xv = ramp(rows * cols, 0.37f), bv = ramp(cols, 1.1f);
  Tensor x = Tensor::from_blob(xv.data(), {rows, cols});
  Tensor b = Tensor::from_blob(bv.data(), {cols});
  Tensor y = relu(x * 2.0f + b) * 0.5f + x;
  std::vector<float> got = y.to_vector();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      float xi = xv[static_cast<size_t>(r * cols + c)];
      float t = xi * 2.0f + bv[static_cast<size_t>(c)];  // the same float ops, the same order
      float want = (t > 0 ? t : 0) * 0.5f + xi;
      ASSERT_EQ(got[static_cast<size_t>(r * cols + c)], want) << rows << "x" << cols;
    }
}

TEST(PlanCache, NewSizesHitTheSamePlan) {
  fuser::PlanCache& cache = fuser::PlanCache::current();
  run_chain(3, 17);  // first sight of this structure
  const int64_t misses = cache.misses, hits = cache.hits;
  reset_stats();
  for (auto [r, c] : {std::pair<int64_t, int64_t>{5, 33}, {2, 1000}, {64, 65}, {7, 4099}}) run_chain(r, c);
  EXPECT_EQ(cache.misses, misses);
  EXPECT_EQ(cache.hits, hits + 4);
  EXPECT_EQ(stats().kernels_compiled, 0);
  // Equal extents are part of the structure (fusion may rely on them): a
  // square input is a new plan, but still no new kernel.
  run_chain(64, 64);
  EXPECT_EQ(cache.misses, misses + 1);
  EXPECT_EQ(stats().kernels_compiled, 0);
}

// An observed scalar constant used again: each flush's value, never the
// value of the flush that recorded the plan (found by held-out testing: the
// replay ran the first flush's constant).
TEST(PlanCache, ObservedScalarConstantsReplayTheirOwnValue) {
  for (float v : {0.0f, 1.5f, -2.25f, 1e30f}) {
    Tensor s = Tensor::scalar(v);
    EXPECT_EQ(s.item(), v);
    Tensor one = Tensor::from_vector({1.0f}, Shape{});
    EXPECT_EQ((s / one).item(), v);
    EXPECT_EQ((one * s + s).item(), v + v);
  }
}

TEST(PlanCache, StructureChangesMiss) {
  fuser::PlanCache& cache = fuser::PlanCache::current();
  run_chain(4, 8);
  int64_t misses = cache.misses;
  // Same ops, but the bias now broadcasts along rows and columns (size 1).
  auto xv = ramp(32, 0.5f);
  Tensor x = Tensor::from_blob(xv.data(), {4, 8});
  Tensor b = Tensor::full({1}, 0.25f);
  Tensor y = relu(x * 2.0f + b) * 0.5f + x;
  y.sync();
  EXPECT_EQ(cache.misses, misses + 1);
  // A different user scalar is the same structure: the plan replays and
  // binds the new value (DVM_PLAN_CHECK, set by ctest, lowers it again and
  // compares both the kernel and the values).
  misses = cache.misses;
  Tensor z = relu(x * 3.0f + b) * 0.5f + x;
  z.sync();
  EXPECT_EQ(cache.misses, misses);
  std::vector<float> zv = z.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    float zi = xv[i] * 3.0f + 0.25f;
    EXPECT_EQ(zv[i], (zi > 0 ? zi : 0) * 0.5f + xv[i]);
  }
  // Observing an intermediate changes what must be stored.
  misses = cache.misses;
  Tensor t = x * 3.0f + b;
  Tensor w = relu(t) * 0.5f + x;
  w.sync();
  EXPECT_EQ(cache.misses, misses + 1);
  std::vector<float> tv = t.to_vector(), wv = w.to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    float ti = xv[i] * 3.0f + 0.25f;
    EXPECT_EQ(tv[i], ti);
    EXPECT_EQ(wv[i], (ti > 0 ? ti : 0) * 0.5f + xv[i]);
  }
}

// Which inputs are the same tensor is structure, however many leaves a
// flush has (past a few, make_signature finds them through a table): 20
// leaves, the first ten each added to itself, the last ten paired by a
// rotation. New tensors in the same pairing replay the plan; another
// rotation, which differs only among leaves found through the table,
// misses; every value is the sum of the right two.
TEST(PlanCache, ManyLeavesKeepTheirIdentity) {
  constexpr int n = 20, half = 10;
  std::vector<std::vector<float>> vals;
  for (int i = 0; i < n; ++i) vals.push_back(ramp(16, 0.1f * static_cast<float>(i + 1)));
  fuser::PlanCache& cache = fuser::PlanCache::current();
  auto partner = [&](int i, int shift) { return i < half ? i : half + (i - half + shift) % half; };
  auto run = [&](int shift) {
    std::vector<Tensor> xs, ys;
    for (int i = 0; i < n; ++i) xs.push_back(Tensor::from_blob(vals[static_cast<size_t>(i)].data(), {16}));
    for (int i = 0; i < n; ++i) ys.push_back(xs[static_cast<size_t>(i)] + xs[static_cast<size_t>(partner(i, shift))]);
    flush();
    for (int i = 0; i < n; ++i) {
      const std::vector<float> got = ys[static_cast<size_t>(i)].to_vector();
      const std::vector<float>& a = vals[static_cast<size_t>(i)];
      const std::vector<float>& b = vals[static_cast<size_t>(partner(i, shift))];
      for (size_t j = 0; j < got.size(); ++j) ASSERT_EQ(got[j], a[j] + b[j]) << "shift " << shift << " y" << i;
    }
  };
  run(1);
  int64_t misses = cache.misses;
  run(1);
  EXPECT_EQ(cache.misses, misses);
  run(3);
  EXPECT_EQ(cache.misses, misses + 1);
  misses = cache.misses;
  run(3);
  run(1);
  EXPECT_EQ(cache.misses, misses);
}

// Views of padded buffers keep their literal strides while their extents
// change within one class pattern, so whether a view's axes continue each
// other linearly can flip between two flushes of one signature (X below:
// axis 0 continues axis 1 only when its extent is 6). A replay that kept
// the old access pattern read the wrong elements; the plan must miss.
TEST(PlanCache, ViewsWhoseAxesStopBeingLinearMiss) {
  const Shape xs{2, 6, 6, 7}, ys{2, 7, 6, 7};  // strides (252, 42, 7, 1) and (294, 42, 7, 1)
  const std::vector<float> xb = ramp(xs.numel(), 0.37f), yb = ramp(ys.numel(), 1.3f);
  const int64_t xst[] = {252, 42, 7, 1}, yst[] = {294, 42, 7, 1};
  const int64_t choices[] = {3, 4, 6};  // extents 2 and 5 are taken by axes 0 and 3
  const bool was_checking = fuser::plan_check();
  for (bool check : {true, false}) {
    fuser::set_plan_check(check);  // false: what a user's process runs
    for (int64_t e1 : choices)
      for (int64_t e2 : choices) {
        if (e1 == e2) continue;
        SCOPED_TRACE("extents [2, " + std::to_string(e1) + ", " + std::to_string(e2) + ", 5]");
        Tensor x = Tensor::from_blob(xb.data(), xs).slice(1, 0, e1).slice(2, 0, e2).slice(3, 0, 5);
        Tensor y = Tensor::from_blob(yb.data(), ys).slice(1, 0, e1).slice(2, 0, e2).slice(3, 0, 5);
        Tensor z = x * 2.0f + y;
        Tensor r = (x - y).sum(-1);
        const std::vector<float> zv = z.to_vector(), rv = r.to_vector();
        for (int64_t i0 = 0; i0 < 2; ++i0)
          for (int64_t i1 = 0; i1 < e1; ++i1)
            for (int64_t i2 = 0; i2 < e2; ++i2) {
              double sum = 0;
              for (int64_t i3 = 0; i3 < 5; ++i3) {
                const float a = xb[static_cast<size_t>(i0 * xst[0] + i1 * xst[1] + i2 * xst[2] + i3)];
                const float b = yb[static_cast<size_t>(i0 * yst[0] + i1 * yst[1] + i2 * yst[2] + i3)];
                ASSERT_EQ(zv[static_cast<size_t>(((i0 * e1 + i1) * e2 + i2) * 5 + i3)], a * 2.0f + b);
                sum += static_cast<double>(a - b);
              }
              // Five terms of magnitude <= 2 summed in float: within 8 ulp of 10.
              ASSERT_NEAR(rv[static_cast<size_t>((i0 * e1 + i1) * e2 + i2)], sum, 8 * 10 * 0x1p-24);
            }
      }
  }
  fuser::set_plan_check(was_checking);
}

TEST(PlanCache, SoftmaxAcrossRowLengthsIncludingMultiPass) {
  for (int64_t cols : {int64_t{16}, int64_t{1024}, int64_t{5000}, int64_t{300}}) {
    auto xv = ramp(3 * cols, 0.013f);
    Tensor x = Tensor::from_blob(xv.data(), {3, cols});
    std::vector<float> got = softmax(x, -1).to_vector();
    for (int64_t r = 0; r < 3; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < cols; ++c) m = std::max<double>(m, xv[static_cast<size_t>(r * cols + c)]);
      for (int64_t c = 0; c < cols; ++c) s += std::exp(xv[static_cast<size_t>(r * cols + c)] - m);
      for (int64_t c = 0; c < cols; ++c) {
        double want = std::exp(xv[static_cast<size_t>(r * cols + c)] - m) / s;
        // exp <= 1.5 ULP (docs/MATH.md); a float sum of `cols` terms; one division.
        ASSERT_NEAR(got[static_cast<size_t>(r * cols + c)], want, (4.0 + static_cast<double>(cols)) * 0x1p-24 * want);
      }
    }
  }
}

}  // namespace
}  // namespace dvm
