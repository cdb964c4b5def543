// Reductions fused with what surrounds them, against a double-precision
// reference: per-row operands that broadcast along kept axes (a row
// reduction's epilogue over a rank >= 3 space), several reductions of one
// value in one column kernel, and seeded random shapes of rank 1-4 with
// size-1 axes for both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "fuser/lower.h"
#include "fuser/partition.h"
#include "tracer/trace.h"
#include "tests/fuser/reference.h"

namespace dvm {
namespace {

using testing::binary;
using testing::numel_of;
using testing::Red;
using testing::Ref;
using testing::ref_of;
using testing::reduce;
using testing::values;


std::string str(const std::vector<int64_t>& s) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < s.size(); ++i) o << (i ? "," : "") << s[i];
  o << "]";
  return o.str();
}

// Inputs lie in [0.5, 1.5], so a reduced sum has no cancellation: float
// summation of n terms is within (n - 1) u of the sum of magnitudes, and an
// epilogue op adds a few roundings. Tolerance: n + 4 roundings of 2^-24,
// doubled, relative to 1 + |ref|.
void expect_near(const Tensor& got, const Ref& want, int64_t n_reduced, const std::string& what) {
  ASSERT_EQ(got.shape().to_vector(), want.shape) << what;
  std::vector<float> g = got.to_vector();
  ASSERT_EQ(g.size(), want.v.size()) << what;
  const double tol = 2.0 * 0x1.0p-24 * static_cast<double>(n_reduced + 4);
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 4; ++i) {
    const double r = want.v[i];
    if (std::fabs(g[i] - r) > tol * (1.0 + std::fabs(r))) {
      ++bad;
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << ", expected " << r;
    }
  }
}

Tensor reduce_t(const Tensor& x, int a0, int a1, bool keepdim, Red op) {
  // Axes [a0, a1): one axis or two adjacent ones.
  auto one = [&](auto f) { return a1 - a0 == 1 ? f({a0}) : f({a0, a0 + 1}); };
  switch (op) {
    case Red::Sum: return one([&](std::initializer_list<int> ax) { return x.sum(ax, keepdim); });
    case Red::Mean: return one([&](std::initializer_list<int> ax) { return x.mean(ax, keepdim); });
    case Red::Max: return one([&](std::initializer_list<int> ax) { return x.max(ax, keepdim); });
    case Red::Min: return one([&](std::initializer_list<int> ax) { return x.min(ax, keepdim); });
  }
  return x;
}

class ReduceFusion : public ::testing::Test {
 protected:
  void SetUp() override { flush(); }
  void TearDown() override { flush(); }
};

// ---------------------------------------------------------------------------
// The cases a new user hit: a row reduction over a rank >= 3 tensor whose
// epilogue reads an operand broadcast along a kept axis.
// ---------------------------------------------------------------------------
TEST_F(ReduceFusion, RowReductionEpilogueBroadcastAlongAKeptAxis) {
  {
    auto xv = values({3, 4, 8}, 1), yv = values({4}, 2);
    Tensor x = Tensor::from_vector(xv, {3, 4, 8}), y = Tensor::from_vector(yv, {4});
    Ref want = binary(reduce(ref_of(xv, {3, 4, 8}), 2, 3, false, Red::Sum), ref_of(yv, {4}),
                      [](double a, double b) { return a + b; });
    expect_near(x.sum(2) + y, want, 8, "x[3,4,8].sum(2) + y[4]");
  }
  {
    auto xv = values({3, 4, 8}, 3), yv = values({1, 4, 1}, 4);
    Tensor x = Tensor::from_vector(xv, {3, 4, 8}), y = Tensor::from_vector(yv, {1, 4, 1});
    Ref want = binary(reduce(ref_of(xv, {3, 4, 8}), 2, 3, true, Red::Mean), ref_of(yv, {1, 4, 1}),
                      [](double a, double b) { return a / b; });
    expect_near(x.mean(2, true) / y, want, 8, "x[3,4,8].mean(2, true) / y[1,4,1]");
  }
  {
    auto xv = values({2, 2, 1}, 5), yv = values({1, 2}, 6);
    Tensor x = Tensor::from_vector(xv, {2, 2, 1}), y = Tensor::from_vector(yv, {1, 2});
    Ref want = binary(reduce(ref_of(xv, {2, 2, 1}), 2, 3, false, Red::Sum), ref_of(yv, {1, 2}),
                      [](double a, double b) { return a + b; });
    expect_near(x.sum(-1) + y, want, 1, "x[2,2,1].sum(-1) + y[1,2]");
  }
  {
    auto xv = values({8, 1, 256}, 7), wv = values({1, 512, 256}, 8), bv = values({512}, 9);
    Tensor x = Tensor::from_vector(xv, {8, 1, 256}), w = Tensor::from_vector(wv, {1, 512, 256});
    Tensor b = Tensor::from_vector(bv, {512});
    Ref xw = binary(ref_of(xv, {8, 1, 256}), ref_of(wv, {1, 512, 256}), [](double p, double q) { return p * q; });
    Ref want = binary(reduce(xw, 2, 3, false, Red::Sum), ref_of(bv, {512}), [](double p, double q) { return p + q; });
    expect_near((x * w).sum(2) + b, want, 256, "(x[8,1,256] * w[1,512,256]).sum(2) + b[512]");
  }
}

// Rank 4 with three kept axes: y[3,1] is linear over no split of [2,3,4]
// into two parts, so the epilogue op cannot read it per row; it must still
// compute (as a separate kernel).
TEST_F(ReduceFusion, PerRowOperandNoSplitKeepsLinearStaysCorrect) {
  auto xv = values({2, 3, 4, 8}, 11), yv = values({3, 1}, 12);
  Tensor x = Tensor::from_vector(xv, {2, 3, 4, 8}), y = Tensor::from_vector(yv, {3, 1});
  Ref want = binary(reduce(ref_of(xv, {2, 3, 4, 8}), 3, 4, false, Red::Max), ref_of(yv, {3, 1}),
                    [](double a, double b) { return a * b; });
  expect_near(x.max(3) * y, want, 8, "x[2,3,4,8].max(3) * y[3,1]");
  // The same operand inside an elementwise group of the reduced shape,
  // which would otherwise merge into the row reduction's epilogue.
  auto zv = values({2, 3, 4}, 13);
  Tensor z = Tensor::from_vector(zv, {2, 3, 4});
  Tensor yz = y + z;
  Ref yzr = binary(ref_of(yv, {3, 1}), ref_of(zv, {2, 3, 4}), [](double a, double b) { return a + b; });
  Ref want2 = binary(reduce(ref_of(xv, {2, 3, 4, 8}), 3, 4, false, Red::Sum), yzr,
                     [](double a, double b) { return a * b; });
  expect_near(x.sum(3) * yz, want2, 10, "x[2,3,4,8].sum(3) * (y[3,1] + z[2,3,4])");
}

// Rows long enough that the launch splits each row into chunks (few rows,
// more than 256K floats each), with the kept axes split into P and R.
TEST_F(ReduceFusion, SplitLongRowsWithPerRowOperand) {
  const std::vector<int64_t> xs{2, 3, 300000};
  auto xv = values(xs, 31), yv = values({3}, 32);
  Tensor x = Tensor::from_vector(xv, Shape(xs)), y = Tensor::from_vector(yv, {3});
  Ref want = binary(reduce(ref_of(xv, xs), 2, 3, false, Red::Sum), ref_of(yv, {3}),
                    [](double a, double b) { return a - b; });
  expect_near(x.sum(2) - y, want, 300000, "x[2,3,300000].sum(2) - y[3]");
  Ref want_max = binary(reduce(ref_of(xv, xs), 2, 3, true, Red::Max), ref_of(yv, {3, 1}),
                        [](double a, double b) { return a * b; });
  expect_near(x.max(2, true) * y.reshape({3, 1}), want_max, 1, "x[2,3,300000].max(2, true) * y[3,1]");
}

// ---------------------------------------------------------------------------
// Several reductions over a leading axis of one value, all alive at the flush.
// ---------------------------------------------------------------------------
TEST_F(ReduceFusion, TwoColumnReductionsOfOneValue) {
  auto xv = values({4, 3}, 21);
  Ref xr = ref_of(xv, {4, 3});
  Ref yr = xr;
  for (double& v : yr.v) v = 1.0 / (1.0 + std::exp(-v));
  Tensor x = Tensor::from_vector(xv, {4, 3});
  {
    Tensor y = sigmoid(x);
    Tensor mn = y.min(0), sm = y.sum(0);
    // sigmoid is within a few ulps: allow 8 more roundings.
    expect_near(mn, reduce(yr, 0, 1, false, Red::Min), 8, "sigmoid(x).min(0)");
    expect_near(sm, reduce(yr, 0, 1, false, Red::Sum), 12, "sigmoid(x).sum(0)");
  }
  {
    Tensor y = sigmoid(x);
    Tensor sm = softmax(y, 0), s = y.sum(0);
    Ref mx = reduce(yr, 0, 1, true, Red::Max);
    Ref e = binary(yr, mx, [](double a, double b) { return std::exp(a - b); });
    Ref want = binary(e, reduce(e, 0, 1, true, Red::Sum), [](double a, double b) { return a / b; });
    expect_near(sm, want, 16, "softmax(sigmoid(x), 0)");
    expect_near(s, reduce(yr, 0, 1, false, Red::Sum), 12, "sigmoid(x).sum(0) beside softmax");
  }
  {
    Ref want = binary(reduce(xr, 0, 1, false, Red::Max), reduce(xr, 0, 1, false, Red::Min),
                      [](double a, double b) { return a - b; });
    expect_near(x.max(0) - x.min(0), want, 1, "x.max(0) - x.min(0)");
  }
  {
    // Reductions of different leaves and of a constant in one column kernel.
    auto zv = values({4, 3}, 22);
    Tensor z = Tensor::from_vector(zv, {4, 3});
    Ref want = binary(reduce(xr, 0, 1, false, Red::Sum), reduce(ref_of(zv, {4, 3}), 0, 1, false, Red::Max),
                      [](double a, double b) { return a * b; });
    expect_near(x.sum(0) * z.max(0), want, 4, "x.sum(0) * z.max(0)");
  }
}

// ---------------------------------------------------------------------------
// Seeded random programs: a prologue broadcast, a reduction over one or two
// adjacent axes (row or column), one or two reductions of the same value,
// and an epilogue operand broadcast onto the result; ranks 1-4 with size-1
// axes.
// ---------------------------------------------------------------------------
TEST_F(ReduceFusion, RandomBroadcastReductionCombinations) {
  std::mt19937 rng(20261124);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const int64_t sizes[] = {1, 1, 2, 3, 4, 5, 8, 17};
  for (int iter = 0; iter < 1000; ++iter) {
    const int rank = 1 + std::max(pick(4), pick(4));
    std::vector<int64_t> full(static_cast<size_t>(rank));
    for (int64_t& d : full) d = sizes[pick(8)];
    // A prologue operand: some axes 1, some leading axes dropped.
    std::vector<int64_t> ws(full.begin() + pick(rank + 1), full.end());
    for (int64_t& d : ws) if (pick(2)) d = 1;
    const int span = (rank >= 2 && pick(3) == 0) ? 2 : 1;
    const int a0 = pick(rank - span + 1), a1 = a0 + span;
    const bool keepdim = pick(2);
    const Red op1 = static_cast<Red>(pick(4)), op2 = static_cast<Red>(pick(4));
    const bool two = pick(2);
    const int epi = pick(4);  // add, mul, div, maximum
    // The epilogue operand: the result's shape with some axes 1 and some
    // leading axes dropped.
    std::vector<int64_t> rshape;
    for (int k = 0; k < rank; ++k) {
      if (k < a0 || k >= a1) rshape.push_back(full[static_cast<size_t>(k)]);
      else if (keepdim) rshape.push_back(1);
    }
    std::vector<int64_t> ys(rshape.begin() + pick(static_cast<int>(rshape.size()) + 1), rshape.end());
    for (int64_t& d : ys) if (pick(2)) d = 1;

    std::ostringstream what;
    what << "iter " << iter << ": x" << str(full) << " * w" << str(ws) << ", reduce axes [" << a0 << "," << a1
         << ") keepdim " << keepdim << " ops " << static_cast<int>(op1) << "/" << static_cast<int>(op2)
         << (two ? " (two)" : "") << ", epilogue " << epi << " with y" << str(ys);
    SCOPED_TRACE(what.str());

    const uint32_t seed = static_cast<uint32_t>(1000 + 3 * iter);
    auto xv = values(full, seed), wv = values(ws, seed + 1), yv = values(ys, seed + 2);
    Tensor x = Tensor::from_vector(xv, Shape(full)), w = Tensor::from_vector(wv, Shape(ws));
    Tensor y = Tensor::from_vector(yv, Shape(ys));
    Ref xw = binary(ref_of(xv, full), ref_of(wv, ws), [](double p, double q) { return p * q; });

    auto epilogue = [&](const Tensor& r) {
      switch (epi) {
        case 0: return r + y;
        case 1: return r * y;
        case 2: return r / y;
        default: return maximum(r, y);
      }
    };
    auto epilogue_ref = [&](const Ref& r) {
      return binary(r, ref_of(yv, ys), [&](double p, double q) {
        return epi == 0 ? p + q : epi == 1 ? p * q : epi == 2 ? p / q : std::max(p, q);
      });
    };
    int64_t n_red = 1;
    for (int k = a0; k < a1; ++k) n_red *= full[static_cast<size_t>(k)];

    Tensor p = x * w;
    Tensor r1 = epilogue(reduce_t(p, a0, a1, keepdim, op1));
    Ref want1 = epilogue_ref(reduce(xw, a0, a1, keepdim, op1));
    if (two) {
      // A second reduction of the same value, alive at the same flush, and
      // the difference of both.
      Tensor r2 = reduce_t(p, a0, a1, keepdim, op2);
      Tensor d = r1 - r2;
      Ref want2 = reduce(xw, a0, a1, keepdim, op2);
      Ref wantd = binary(want1, want2, [](double a, double b) { return a - b; });
      expect_near(r2, want2, n_red, what.str() + " (second)");
      // r1 - r2 may cancel: its tolerance is relative to the operands.
      std::vector<float> got = d.to_vector();
      ASSERT_EQ(got.size(), wantd.v.size());
      const double tol = 2.0 * 0x1.0p-24 * static_cast<double>(n_red + 6);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_LE(std::fabs(got[i] - wantd.v[i]), tol * (1.0 + std::fabs(want1.v[i]) + std::fabs(want2.v[i])))
            << what.str() << " (difference) element " << i;
    }
    expect_near(r1, want1, n_red, what.str());
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

}  // namespace
}  // namespace dvm
