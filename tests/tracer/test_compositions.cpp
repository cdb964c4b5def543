// var, std, clamp, silu, masked_fill, tril and triu on generated shapes and
// values against double-precision references (exact where the op is exact),
// every floating type where they take one, and their errors.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm {
namespace {

using testing::expect_error;
using testing::kInf;
using testing::kNaN;

int64_t index_at(int64_t flat, const Shape& s, int axis) {
  return flat / testing::row_major_strides(s)[static_cast<size_t>(axis)] % s[axis];
}

std::vector<float> random_values(int64_t n, std::mt19937& rng, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

Shape random_shape(std::mt19937& rng, int min_rank, int max_rank, int64_t max_extent) {
  Shape s;
  const int rank = min_rank + static_cast<int>(rng() % static_cast<uint32_t>(max_rank - min_rank + 1));
  for (int i = 0; i < rank; ++i) s.push_back(static_cast<int64_t>(rng() % static_cast<uint32_t>(max_extent + 1)));
  return s;
}

// var and std over generated axes, corrections and keepdim, against a
// two-pass double reference. The float32 two-pass computation errs by at
// most about (count + 4) u of sum(x^2) / dof (the mean's error enters every
// deviation; the sum of squares adds count roundings); 16-bit results are
// that value rounded once more (one unit of the type, relative).
TEST(Compositions, VarAndStdMatchATwoPassReference) {
  std::mt19937 rng(77);
  for (int iter = 0; iter < 160; ++iter) {
    Shape s = random_shape(rng, 0, 3, 40);
    const int rank = s.rank();
    std::vector<int> axes;
    for (int i = 0; i < rank; ++i)
      if (rng() % 2) axes.push_back(rng() % 2 ? i : i - rank);
    const int64_t correction = static_cast<int64_t>(rng() % 3);
    const bool keepdim = rng() % 2;
    const Dtype types[] = {Dtype::F32, Dtype::F16, Dtype::BF16};
    const Dtype t = types[rng() % 3];
    const float offset = rng() % 2 ? 3.0f : 0.0f;
    const std::vector<float> values = random_values(s.numel(), rng, offset - 1.0f, offset + 1.0f);
    Tensor x = Tensor::from_vector(values, s);
    if (t != Dtype::F32) x = x.to(t);
    const std::vector<float> xv = x.to_vector();  // the values as the type holds them
    // Reference: which axes reduce (an empty list: all).
    std::vector<bool> red(static_cast<size_t>(rank), axes.empty());
    for (int a : axes) red[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
    Shape out;
    for (int i = 0; i < rank; ++i)
      if (!red[static_cast<size_t>(i)]) out.push_back(s[i]);
      else if (keepdim) out.push_back(1);
    const std::vector<int64_t> st = testing::row_major_strides(s);
    auto out_index = [&](int64_t flat) {
      int64_t o = 0;
      for (int i = 0; i < rank; ++i)
        if (!red[static_cast<size_t>(i)]) o = o * s[i] + flat / st[static_cast<size_t>(i)] % s[i];
      return o;
    };
    int64_t groups = 1, count = 1;
    for (int i = 0; i < rank; ++i) (red[static_cast<size_t>(i)] ? count : groups) *= s[i];
    std::vector<double> sum(static_cast<size_t>(groups)), sq(static_cast<size_t>(groups)), mag(static_cast<size_t>(groups));
    for (int64_t f = 0; f < s.numel(); ++f) sum[static_cast<size_t>(out_index(f))] += xv[static_cast<size_t>(f)];
    for (int64_t f = 0; f < s.numel(); ++f) {
      const size_t o = static_cast<size_t>(out_index(f));
      const double d = xv[static_cast<size_t>(f)] - sum[o] / static_cast<double>(count);
      sq[o] += d * d;
      mag[o] += static_cast<double>(xv[static_cast<size_t>(f)]) * xv[static_cast<size_t>(f)];
    }
    const double dof = static_cast<double>(std::max<int64_t>(0, count - correction));
    const std::string what = "iteration " + std::to_string(iter) + ": " + std::string(dtype_name(t)) + s.to_string() +
                             " axes " + std::to_string(axes.size()) + " correction " + std::to_string(correction) +
                             (keepdim ? " keepdim" : "");
    const Tensor v = x.var(axes, correction, keepdim), sd = x.std(axes, correction, keepdim);
    ASSERT_EQ(v.shape(), out) << what;
    ASSERT_EQ(sd.shape(), out) << what;
    EXPECT_EQ(v.dtype(), t) << what;
    const std::vector<float> gv = v.to_vector(), gs = sd.to_vector();
    const double unit = t == Dtype::F32 ? 0.0 : (t == Dtype::F16 ? 0x1p-10 : 0x1p-7);
    for (size_t o = 0; o < static_cast<size_t>(groups); ++o) {
      if (dof == 0) {  // x / 0: inf, or NaN for 0 / 0 (torch)
        EXPECT_TRUE(std::isnan(gv[o]) || (std::isinf(gv[o]) && gv[o] > 0)) << what << " group " << o << ": " << gv[o];
        if (sq[o] == 0) {
          EXPECT_TRUE(std::isnan(gv[o])) << what << " group " << o;
        }
        continue;
      }
      const double want = sq[o] / dof;
      const double tol = (static_cast<double>(count) + 4) * 0x1p-24 * mag[o] / dof * 4 + unit * want + 1e-37;
      EXPECT_NEAR(gv[o], want, tol) << what << " var group " << o;
      // sqrt halves the relative error and adds half a unit.
      const double ws = std::sqrt(want);
      EXPECT_NEAR(gs[o], ws, (want > 0 ? tol / (2 * ws) : std::sqrt(tol)) + (0x1p-24 + unit) * ws) << what << " std group " << o;
    }
  }
}

// Values far from zero (a mean of 1e6 and a spread of 1): the float32 mean
// is off by up to half its ulp (1/32), which would add n * e^2 to the sum of
// squares; the variance must still be within the sum's own rounding, about
// (count + 4) u of the variance itself, as torch's is.
TEST(Compositions, VarOfValuesFarFromZeroKeepsItsDigits) {
  std::mt19937 rng(1606);
  for (int iter = 0; iter < 24; ++iter) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 4), count = 100 + static_cast<int64_t>(rng() % 4000);
    const float center = (iter % 2 ? 1.0f : -1.0f) * std::ldexp(1.0f, 14 + static_cast<int>(rng() % 8));
    const std::vector<float> values = random_values(rows * count, rng, center - 1.0f, center + 1.0f);
    const bool along_rows = iter % 3 == 0;  // a column reduction too
    const Tensor x = along_rows ? Tensor::from_vector(values, {count, rows}) : Tensor::from_vector(values, {rows, count});
    const std::vector<float> got = x.var(along_rows ? 0 : 1).to_vector();
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, sq = 0;
      auto at = [&](int64_t i) { return static_cast<double>(values[static_cast<size_t>(along_rows ? i * rows + r : r * count + i)]); };
      for (int64_t i = 0; i < count; ++i) sum += at(i);
      for (int64_t i = 0; i < count; ++i) sq += (at(i) - sum / count) * (at(i) - sum / count);
      const double want = sq / static_cast<double>(count - 1);
      EXPECT_NEAR(got[static_cast<size_t>(r)], want, (static_cast<double>(count) + 4) * 0x1p-24 * want * 2)
          << "iteration " << iter << " center " << center << " count " << count << " row " << r;
    }
  }
}

// Equal values have variance 0 exactly, whatever their count or size (a
// mean a few ulps off made 70001 copies of 0.1f negative, and 1e30 ones
// NaN); a variance is never negative; squares past float32's range give
// inf, not NaN; a NaN stays NaN.
TEST(Compositions, VarOfEqualValuesIsZeroAndNeverNegative) {
  std::mt19937 rng(77);
  for (int64_t n : {2, 3, 1025, 4097, 70001}) {
    for (int k = 0; k < 6; ++k) {
      const float v = k == 0 ? 0.1f : k == 1 ? 1e30f : k == 2 ? -3e38f : std::uniform_real_distribution<float>(-9, 9)(rng);
      const Tensor row = Tensor::from_vector(std::vector<float>(static_cast<size_t>(n), v), {1, n});
      const Tensor col = Tensor::from_vector(std::vector<float>(static_cast<size_t>(n) * 3, v), {n, 3});
      EXPECT_EQ(row.var(1).item(), 0.0f) << n << " x " << v;
      EXPECT_EQ(row.std(1, 0).item(), 0.0f) << n << " x " << v;
      for (float g : col.var(0).to_vector()) EXPECT_EQ(g, 0.0f) << n << " x " << v << " by columns";
    }
    // One element an ulp above the rest: a tiny variance, never below zero.
    std::vector<float> near(static_cast<size_t>(n), 3.3f);
    near[static_cast<size_t>(n / 2)] = std::nextafter(3.3f, 4.0f);
    const float g = Tensor::from_vector(near, {n}).var().item();
    EXPECT_GE(g, 0.0f) << n;
    EXPECT_FALSE(std::isnan(Tensor::from_vector(near, {n}).std().item())) << n;
  }
  EXPECT_EQ(Tensor::from_vector({-1e30f, 3e20f, 1e30f}).var().item(), kInf);
  EXPECT_EQ(Tensor::from_vector({1e30f, 1e30f, -1e30f}).std().item(), kInf);
  EXPECT_TRUE(std::isnan(Tensor::from_vector({1.0f, kNaN, 2.0f}).var().item()));
  EXPECT_TRUE(std::isnan(Tensor::from_vector({kInf, kInf}).var().item()));  // inf - inf, as torch
}

TEST(Compositions, VarOverTheLastAxisIsOneKernel) {
  const Tensor x = Tensor::from_vector(std::vector<float>(64 * 33, 1.5f), {64, 33});
  x.sync();
  const int64_t before = dvm::stats().kernels_run;
  const Tensor v = x.var(-1);
  v.sync();
  EXPECT_EQ(dvm::stats().kernels_run - before, 1);
  for (float g : v.to_vector()) EXPECT_EQ(g, 0.0f);
}

// clamp is exact: min(max(x, lo), hi) with NaN propagated (also from a
// bound), lo > hi giving hi.
TEST(Compositions, ClampIsExactAndPropagatesNaN) {
  std::mt19937 rng(5);
  std::vector<float> xv = random_values(1000, rng, -4.0f, 4.0f);
  xv[0] = kNaN;
  xv[1] = kInf;
  xv[2] = -kInf;
  xv[3] = -0.0f;
  const Tensor x = Tensor::from_vector(xv);
  const float bounds[][2] = {{-1.0f, 1.0f}, {0.5f, 0.25f}, {-kInf, 2.0f}, {kNaN, 1.0f}, {-1.0f, kNaN}, {0.0f, 0.0f}};
  for (const auto& b : bounds) {
    const std::vector<float> c = clamp(x, b[0], b[1]).to_vector(), lo = clamp_min(x, b[0]).to_vector(),
                             hi = clamp_max(x, b[1]).to_vector();
    for (size_t i = 0; i < xv.size(); ++i) {
      const bool nan = std::isnan(xv[i]) || std::isnan(b[0]) || std::isnan(b[1]);
      const double want = nan ? NAN : std::min<double>(std::max<double>(xv[i], b[0]), b[1]);
      if (nan) {
        EXPECT_TRUE(std::isnan(c[i])) << i << " clamp " << b[0] << " " << b[1];
      } else {
        EXPECT_EQ(c[i], want) << i << " clamp " << b[0] << " " << b[1];
      }
      if (std::isnan(xv[i]) || std::isnan(b[0])) {
        EXPECT_TRUE(std::isnan(lo[i])) << i;
      } else {
        EXPECT_EQ(lo[i], std::max(xv[i], b[0])) << i;
      }
      if (std::isnan(xv[i]) || std::isnan(b[1])) {
        EXPECT_TRUE(std::isnan(hi[i])) << i;
      } else {
        EXPECT_EQ(hi[i], std::min(xv[i], b[1])) << i;
      }
    }
  }
}

// silu = x * sigmoid(x): sigmoid's documented 2.5 ULP, one more rounding.
TEST(Compositions, SiluIsWithinItsBoundOfDouble) {
  std::mt19937 rng(9);
  std::vector<float> xv = random_values(4000, rng, -30.0f, 30.0f);
  for (float& v : random_values(1000, rng, -1.0f, 1.0f)) xv.push_back(v);
  xv.push_back(kInf);
  xv.push_back(kNaN);
  xv.push_back(0.0f);
  const std::vector<float> got = silu(Tensor::from_vector(xv)).to_vector();
  for (size_t i = 0; i < xv.size(); ++i) {
    const double x = xv[i];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(got[i]));
      continue;
    }
    const double want = std::isinf(x) ? x : x / (1.0 + std::exp(-x));
    if (std::isinf(want) || want == 0) {
      EXPECT_EQ(got[i], want) << "x = " << x;
      continue;
    }
    EXPECT_LE(testing::ulp_error(got[i], want), 3.5) << "x = " << x;
  }
}

// masked_fill: exact, x's type kept, the value converted as to() converts,
// the mask broadcast.
TEST(Compositions, MaskedFillKeepsTheTypeAndBroadcastsTheMask) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 60; ++iter) {
    const Shape s = random_shape(rng, 1, 3, 6);
    const Dtype types[] = {Dtype::F32, Dtype::BF16, Dtype::I32, Dtype::U8, Dtype::Bool};
    const Dtype t = types[rng() % 5];
    const std::vector<float> values = random_values(s.numel(), rng, 0.0f, 9.0f);
    std::vector<float> rounded(values.size());
    for (size_t i = 0; i < values.size(); ++i) rounded[i] = std::floor(values[i]);
    const Tensor x = Tensor::from_vector(rounded, s).to(t);
    // The mask: full, one row broadcast, or a column.
    Shape ms = s;
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 1) ms = Shape{s[s.rank() - 1]};
    if (kind == 2) ms[s.rank() - 1] = 1;
    std::vector<float> mv(static_cast<size_t>(ms.numel()));
    for (float& m : mv) m = static_cast<float>(rng() % 2);
    const Tensor mask = Tensor::from_vector(mv, ms).to(Dtype::Bool);
    const float value = t == Dtype::Bool ? 0.5f : (rng() % 2 || t == Dtype::U8 ? 2.75f : -1.5f);
    const Tensor y = masked_fill(x, mask, value);
    const std::string what = "iteration " + std::to_string(iter) + " " + dtype_name(t) + s.to_string() + " mask " + ms.to_string();
    ASSERT_EQ(y.dtype(), t) << what;
    ASSERT_EQ(y.shape(), s) << what;
    const std::vector<float> xs = x.to_vector(), got = y.to_vector();
    const float filled = Tensor::full(Shape{}, static_cast<double>(value), t).to_vector()[0];
    for (int64_t f = 0; f < s.numel(); ++f) {
      int64_t mi = 0;
      if (kind == 0) mi = f;
      if (kind == 1) mi = index_at(f, s, s.rank() - 1);
      if (kind == 2) mi = f / s[s.rank() - 1];
      const float want = mv[static_cast<size_t>(mi)] != 0 ? filled : xs[static_cast<size_t>(f)];
      ASSERT_EQ(got[static_cast<size_t>(f)], want) << what << " element " << f;
    }
  }
}

// tril and triu: exact, over batches, every diagonal (also far outside the
// matrix), for float, integer and bool values.
TEST(Compositions, TrilAndTriuKeepTheirTriangle) {
  std::mt19937 rng(13);
  for (int iter = 0; iter < 80; ++iter) {
    const Shape s = random_shape(rng, 2, 4, 7);
    const Dtype types[] = {Dtype::F32, Dtype::F16, Dtype::I32, Dtype::Bool};
    const Dtype t = types[rng() % 4];
    int64_t diag = static_cast<int64_t>(rng() % 19) - 9;
    if (rng() % 10 == 0) diag = rng() % 2 ? (int64_t{1} << 40) : -(int64_t{1} << 40);
    std::vector<float> values = random_values(s.numel(), rng, 1.0f, 9.0f);
    for (float& v : values) v = std::floor(v);
    const Tensor x = Tensor::from_vector(values, s).to(t);
    const std::vector<float> xs = x.to_vector();
    const std::vector<float> lo = tril(x, diag).to_vector(), up = triu(x, diag).to_vector();
    const std::string what = "iteration " + std::to_string(iter) + " " + dtype_name(t) + s.to_string() + " diagonal " + std::to_string(diag);
    ASSERT_EQ(tril(x, diag).dtype(), t) << what;
    for (int64_t f = 0; f < s.numel(); ++f) {
      const int64_t r = index_at(f, s, s.rank() - 2), c = index_at(f, s, s.rank() - 1);
      ASSERT_EQ(lo[static_cast<size_t>(f)], c - r <= diag ? xs[static_cast<size_t>(f)] : 0.0f) << what << " element " << f;
      ASSERT_EQ(up[static_cast<size_t>(f)], c - r >= diag ? xs[static_cast<size_t>(f)] : 0.0f) << what << " element " << f;
    }
  }
}

TEST(Compositions, BadArgumentsAreErrors) {
  const Tensor x = Tensor::from_vector(std::vector<float>(6, 1.0f), {2, 3}), v = Tensor::from_vector({1.0f, 2.0f, 3.0f});
  const Tensor i = x.to(Dtype::I32), b = x.to(Dtype::U8), m = gt(x, 0.0f), m2 = gt(Tensor::from_vector({1.0f, 2.0f}), 0.0f),
               s = Tensor::scalar(1.0f), u;
  for (const Tensor& t : {i, b, m, m2}) t.sync();
  expect_error("var of int", [&] { (void)i.var(); }, {"var", "int32[2, 3]", "floating"});
  expect_error("std of int", [&] { (void)i.std(0); }, {"std", "int32[2, 3]"});
  expect_error("var axis", [&] { (void)x.var(2); }, {"var", "axis", "[2, 3]"});
  expect_error("silu of int", [&] { (void)silu(i); }, {"silu", "int32[2, 3]", "floating"});
  expect_error("mask type", [&] { (void)masked_fill(x, x, 0.0f); }, {"masked_fill", "float32[2, 3]", "bool"});
  expect_error("mask shape", [&] { (void)masked_fill(v, m, 0.0f); }, {"masked_fill", "bool[2, 3]", "float32[3]"});
  expect_error("mask shape", [&] { (void)masked_fill(x, m2, 0.0f); }, {"masked_fill", "bool[2]", "[2, 3]"});
  expect_error("value range", [&] { (void)masked_fill(b, m, -1.5f); }, {"masked_fill", "-1.5", "uint8"});
  expect_error("tril rank", [&] { (void)tril(v); }, {"tril", "float32[3]", "2 dimensions"});
  expect_error("triu rank", [&] { (void)triu(s); }, {"triu", "float32[]"});
  expect_error("undefined", [&] { (void)clamp(u, 0.0f, 1.0f); }, {"clamp", "undefined"});
  expect_error("undefined", [&] { (void)u.var(); }, {"var", "undefined"});
}

}  // namespace
}  // namespace dvm
