// Ordinary programs whose one fused group would be over the encoder's
// per-kernel limits (vm/bytecode.h: kMaxArgs arguments, kMaxRegs live
// registers, 65535 instructions) run as several smaller kernels and compute
// the values of a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tests/fuser/reference.h"
#include "vm/bytecode.h"

namespace dvm {
namespace {

class KernelLimits : public ::testing::Test {
 protected:
  void SetUp() override {
    flush();
    limit_ = trace_limit();
  }
  void TearDown() override {
    flush();
    set_trace_limit(limit_);
  }
  int64_t limit_ = 0;
};

std::vector<float> ramp(int64_t n, float a, float b) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = a + b * static_cast<float>(i % 7);
  return v;
}

// Each check's tolerance: `ops` roundings of 2^-24 relative to `mag`, the
// sum of the magnitudes the result was accumulated from (every term is
// positive in these programs, so that is the result's own size).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, double ops,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(got[i] - want[i]), ops * 0x1.0p-24 * (1.0 + std::fabs(want[i])))
        << what << ": element " << i << " is " << got[i] << ", expected " << want[i];
}

TEST_F(KernelLimits, SumOfManyDistinctInputs) {
  constexpr int kInputs = 100;  // more than kMaxArgs
  static_assert(kInputs > vm::kMaxArgs);
  const int64_t n = 37;
  std::vector<Tensor> in;
  std::vector<double> want(static_cast<size_t>(n), 0.0);
  for (int k = 0; k < kInputs; ++k) {
    std::vector<float> v = ramp(n, 0.25f + 0.01f * static_cast<float>(k), 0.125f);
    for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(i)] += v[static_cast<size_t>(i)];
    in.push_back(Tensor::from_vector(v, {n}));
  }
  // Twice: the second flush replays the split plan from the plan cache.
  for (int run = 0; run < 2; ++run) {
    Tensor s = in[0];
    for (int k = 1; k < kInputs; ++k) s = s + in[static_cast<size_t>(k)];
    expect_close(s.to_vector(), want, kInputs, "sum of 100 inputs");
  }
}

TEST_F(KernelLimits, ManyInputsIntoRowAndColumnReductions) {
  constexpr int kInputs = 90;
  const int64_t rows = 5, cols = 6;
  std::vector<Tensor> in;
  std::vector<double> acc(static_cast<size_t>(rows * cols), 0.0);
  for (int k = 0; k < kInputs; ++k) {
    std::vector<float> v = ramp(rows * cols, 0.5f + 0.002f * static_cast<float>(k), 0.0625f);
    for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
    in.push_back(Tensor::from_vector(v, {rows, cols}));
  }
  auto total = [&] {
    Tensor s = in[0];
    for (int k = 1; k < kInputs; ++k) s = s + in[static_cast<size_t>(k)];
    return s;
  };
  std::vector<double> want_row(static_cast<size_t>(rows), 0.0), want_col(static_cast<size_t>(cols), -INFINITY);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      want_row[static_cast<size_t>(r)] += acc[static_cast<size_t>(r * cols + c)];
      want_col[static_cast<size_t>(c)] = std::max(want_col[static_cast<size_t>(c)], acc[static_cast<size_t>(r * cols + c)]);
    }
  // Each in its own flush, so the 90 inputs fuse into that reduction's group.
  expect_close(total().sum(1).to_vector(), want_row, kInputs + cols, "row sums of a 90-input sum");
  expect_close(total().max(0).to_vector(), want_col, kInputs, "column maxima of a 90-input sum");
}

// A softmax-like multi-phase row kernel with 80 inputs: the cut falls
// between its two reductions, so each piece is a row reduction of its own.
TEST_F(KernelLimits, MultiPhaseRowKernelWithManyInputs) {
  const int64_t rows = 3, cols = 10;
  std::vector<std::vector<float>> v;
  std::vector<Tensor> in;
  for (int k = 0; k < 80; ++k) {
    v.push_back(ramp(rows * cols, 0.9f + 0.001f * static_cast<float>(k), 0.03125f));
    in.push_back(Tensor::from_vector(v.back(), {rows, cols}));
  }
  Tensor x = in[0];
  for (int k = 1; k < 20; ++k) x = x + in[static_cast<size_t>(k)];
  Tensor e = exp((x - x.max(-1, true)) * 0.25f);
  for (int k = 20; k < 80; ++k) e = e * in[static_cast<size_t>(k)];
  Tensor out = e / e.sum(-1, true);

  std::vector<double> want(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> xr(static_cast<size_t>(cols), 0.0), er(static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c)
      for (int k = 0; k < 20; ++k) xr[static_cast<size_t>(c)] += v[static_cast<size_t>(k)][static_cast<size_t>(r * cols + c)];
    double mx = -INFINITY, sum = 0.0;
    for (double t : xr) mx = std::max(mx, t);
    for (int64_t c = 0; c < cols; ++c) {
      double t = std::exp((xr[static_cast<size_t>(c)] - mx) * 0.25);
      for (int k = 20; k < 80; ++k) t *= v[static_cast<size_t>(k)][static_cast<size_t>(r * cols + c)];
      er[static_cast<size_t>(c)] = t;
      sum += t;
    }
    for (int64_t c = 0; c < cols; ++c) want[static_cast<size_t>(r * cols + c)] = er[static_cast<size_t>(c)] / sum;
  }
  // exp's argument carries ~20 roundings of x (times |x| <= 40, scaled by
  // 0.25) and exp a few ulps; 60 products and the normalization add ~80.
  expect_close(out.to_vector(), want, 20 * 40 + 100, "softmax-like kernel over 80 inputs");
}

// 300 values each alive until the end: one kernel would need 300 live
// registers (more than kMaxRegs), and with the handles kept, 300 outputs.
TEST_F(KernelLimits, LongChainKeepingEarlierValuesAlive) {
  constexpr int kOps = 300;
  static_assert(kOps > vm::kMaxRegs);
  const int64_t n = 19;
  std::vector<float> xv = ramp(n, 1.0f, 0.5f);
  for (bool keep_handles : {false, true}) {
    Tensor x = Tensor::from_vector(xv, {n});
    std::vector<Tensor> v{x};
    std::vector<std::vector<double>> ref{std::vector<double>(xv.begin(), xv.end())};
    for (int i = 1; i <= kOps; ++i) {
      const size_t back = static_cast<size_t>(i / 2);
      v.push_back(v.back() * 0.5f + v[back]);
      std::vector<double> r(static_cast<size_t>(n));
      for (int64_t e = 0; e < n; ++e) r[static_cast<size_t>(e)] = ref.back()[static_cast<size_t>(e)] * 0.5 + ref[back][static_cast<size_t>(e)];
      ref.push_back(r);
    }
    // Every value is read once more at the end.
    Tensor s = v[0];
    std::vector<double> want = ref[0];
    for (int i = 1; i <= kOps; ++i) {
      s = s + v[static_cast<size_t>(i)];
      for (int64_t e = 0; e < n; ++e) want[static_cast<size_t>(e)] += ref[static_cast<size_t>(i)][static_cast<size_t>(e)];
    }
    if (!keep_handles) v.clear();
    // Each v_i carries at most ~2i roundings into a sum of positive terms.
    expect_close(s.to_vector(), want, 4.0 * kOps, keep_handles ? "chain (handles kept)" : "chain");
    if (keep_handles) {
      std::vector<float> last = v.back().to_vector();
      expect_close(last, ref.back(), 4.0 * kOps, "last value of the chain");
    }
  }
}

TEST_F(KernelLimits, ElementwiseChainLongerThanOneKernelsInstructions) {
  constexpr int kOps = 70000;  // each op is at least one instruction
  set_trace_limit(2 * kOps);
  const int64_t n = 21;
  std::vector<float> xv = ramp(n, -1.0f, 0.25f);
  Tensor y = Tensor::from_vector(xv, {n});
  std::vector<double> want(xv.begin(), xv.end());
  for (int i = 0; i < kOps; ++i) {
    // Alternating exact steps keep the reference simple: y + 1 then y - 1
    // return the same float whenever |y| < 2^23.
    y = (i % 2 == 0) ? y + 1.0f : y - 1.0f;
  }
  std::vector<float> got = y.to_vector();
  for (size_t e = 0; e < got.size(); ++e) ASSERT_EQ(got[e], static_cast<float>(want[e])) << "element " << e;
}

// Seeded random programs of 150-450 ops in one flush, most of them one
// fused group before the split: new inputs (arguments), averages, maxima and
// minima of earlier values (broadcasting a row- or column-reduced value over
// the full shape), row means and column maxima with keepdim (the group's
// reductions; a third of the programs only the first, a third only the
// second), every value alive until a final sum (registers). Values stay
// in [0.5, 1.5]: no cancellation, so the error is the rounding count.
TEST_F(KernelLimits, RandomLargeProgramsMatchTheReference) {
  using testing::Red;
  using testing::Ref;
  std::mt19937 rng(14);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const int64_t sizes[] = {1, 2, 3, 5, 16};
  for (int prog = 0; prog < 36; ++prog) {
    const int rank = 2 + pick(2);
    std::vector<int64_t> full(static_cast<size_t>(rank));
    for (int64_t& d : full) d = sizes[pick(5)];
    std::vector<int64_t> row = full, col = full;
    row.back() = 1;
    col.front() = 1;
    const int ops = 150 + pick(300);
    std::ostringstream what;
    what << "program " << prog << " over " << testing::numel_of(full) << " elements, rank " << rank << ", " << ops
         << " ops";
    SCOPED_TRACE(what.str());

    std::vector<Tensor> t;
    std::vector<Ref> r;
    auto input = [&](const std::vector<int64_t>& shape) {
      std::vector<float> v = testing::values(shape, static_cast<uint32_t>(rng()));
      t.push_back(Tensor::from_vector(v, Shape(shape)));
      r.push_back(testing::ref_of(v, shape));
    };
    input(full);
    for (int i = 0; i < ops; ++i) {
      const int kind = pick(10);
      const size_t a = static_cast<size_t>(pick(static_cast<int>(t.size())));
      const size_t b = static_cast<size_t>(pick(static_cast<int>(t.size())));
      const bool a_full = r[a].shape == full;
      if (kind < 2) {
        input(kind == 0 ? full : pick(2) ? row : col);
      } else if (kind < 5) {
        t.push_back((t[a] + t[b]) * 0.5f);
        r.push_back(testing::binary(r[a], r[b], [](double x, double y) { return (x + y) * 0.5; }));
      } else if (kind < 7) {
        t.push_back(kind == 5 ? maximum(t[a], t[b]) : minimum(t[a], t[b]));
        r.push_back(testing::binary(r[a], r[b], [&](double x, double y) { return kind == 5 ? std::max(x, y) : std::min(x, y); }));
      } else if (kind < 9 && a_full && prog % 3 != 2) {
        t.push_back(t[a].mean(rank - 1, true));
        r.push_back(testing::reduce(r[a], rank - 1, rank, true, Red::Mean));
      } else if (a_full && prog % 3 != 1) {
        t.push_back(t[a].max(0, true));
        r.push_back(testing::reduce(r[a], 0, 1, true, Red::Max));
      } else {
        input(full);
      }
    }
    // Every value is read again at the end; a few are observed.
    Tensor total = t[0];
    Ref want = r[0];
    for (size_t i = 1; i < t.size(); ++i) {
      total = (total + t[i]) * 0.5f;
      want = testing::binary(want, r[i], [](double x, double y) { return (x + y) * 0.5; });
    }
    std::vector<size_t> observed;
    for (int k = 0; k < 5; ++k) observed.push_back(static_cast<size_t>(pick(static_cast<int>(t.size()))));
    std::vector<Tensor> keep;
    for (size_t i : observed) keep.push_back(t[i]);
    t.clear();
    // Each value is at most ~3 roundings per op deep (a mean over 16 adds
    // 16); 3 * 450 + 16 roundings of 2^-24 bound every result here.
    const double ops_bound = 3.0 * 450 + 16;
    std::vector<double> want_total(want.v.begin(), want.v.end());
    expect_close(total.to_vector(), want_total, ops_bound, "final sum");
    for (size_t k = 0; k < keep.size(); ++k)
      expect_close(keep[k].to_vector(), r[observed[k]].v, ops_bound, "value " + std::to_string(observed[k]));
  }
}

}  // namespace
}  // namespace dvm
