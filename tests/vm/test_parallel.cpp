// Parallel launches: results are bit-identical for every thread count, a
// host's task_arena bounds dvm, and small launches stay on the caller.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <tbb/task_arena.h>

#include "dvm/dvm.h"
#include "tests/jit_built.h"
#include "vm/interpreter.h"
#include "vm/parallel.h"

#include "tests/vm/vm_testing.h"

namespace dvm {
namespace {

// |x| <= 3.0 (the bounds below use it).
std::vector<float> ramp(int64_t n, float k) { return testing::ramp(n, k, 3.0f); }

// Every workload shape in one program: elementwise, row softmax, row sum,
// column mean.
std::vector<std::vector<float>> run_all(const std::vector<float>& xv) {
  const int64_t rows = static_cast<int64_t>(xv.size()) / 1024;
  Tensor x = Tensor::from_blob(xv.data(), {rows, 1024});
  Tensor w1 = relu(x * 1.5f + 0.25f) * 0.5f + x;
  Tensor w3 = softmax(x, -1);
  Tensor w6 = x.sum(-1);
  Tensor col = x.mean(0);
  return {w1.to_vector(), w3.to_vector(), w6.to_vector(), col.to_vector()};
}

TEST(Parallel, BitIdenticalForEveryThreadCount) {
  const std::vector<float> xv = ramp(300 * 1024, 0.001f);
  set_num_threads(1);
  const auto ref = run_all(xv);
  for (int threads : {2, 3, 7}) {
    set_num_threads(threads);
    EXPECT_EQ(num_threads(), threads);
    const auto got = run_all(xv);
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].size(), ref[k].size());
      EXPECT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].size() * sizeof(float)), 0)
          << "result " << k << " differs with " << threads << " threads";
    }
  }
  set_num_threads(0);
}

// Rows longer than vm::kSplitRowMin fold in fixed chunks of vm::kRowChunk on
// every thread count and tier: one huge row still uses every thread, and the
// bits do not depend on how many there are.
std::vector<std::vector<float>> run_huge_rows(const std::vector<float>& xv, int64_t rows) {
  const int64_t n = static_cast<int64_t>(xv.size()) / rows;
  Tensor x = Tensor::from_blob(xv.data(), {rows, n});
  Tensor s = x.sum(-1), m = x.max(-1), sm = softmax(x, -1), mean = x.mean(-1);
  return {s.to_vector(), m.to_vector(), sm.to_vector(), mean.to_vector()};
}

TEST(Parallel, HugeRowsSplitIntoChunksBitIdentically) {
  for (int64_t rows : {1, 3}) {
    const int64_t n = rows == 1 ? 600001 : 300000;  // 10 and 5 chunks, ragged ends
    ASSERT_GT(n, vm::kSplitRowMin);
    const std::vector<float> xv = ramp(rows * n, 0.0007f);
    set_num_threads(1);
    set_tier_mode(TierMode::Off);
    const auto ref = run_huge_rows(xv, rows);
    for (TierMode tier : {TierMode::Off, TierMode::Eager})
      for (int threads : {1, 2, 3, 7}) {
        set_num_threads(threads);
        set_tier_mode(tier);
        const auto got = run_huge_rows(xv, rows);
        for (size_t k = 0; k < ref.size(); ++k)
          ASSERT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].size() * sizeof(float)), 0)
              << "result " << k << " differs with " << threads << " threads, rows " << rows;
      }
    // Against double precision. A sum of n floats, in any order of pairwise
    // adds, errs by at most (n - 1) * 2^-24 * sum|x| (first-order bound); the
    // chunked order has far fewer adds on any path, so this cannot hide a
    // lost or doubled chunk (which errs by a whole chunk's sum).
    const double eps = std::ldexp(1.0, -24);
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0, abs_sum = 0, mx = -INFINITY;
      for (int64_t i = 0; i < n; ++i) {
        const double v = xv[static_cast<size_t>(r * n + i)];
        sum += v;
        abs_sum += std::fabs(v);
        mx = std::max(mx, v);
      }
      const double bound = (vm::kRowChunk + 64) * eps * abs_sum;
      EXPECT_NEAR(ref[0][static_cast<size_t>(r)], sum, bound) << "sum, row " << r;
      EXPECT_EQ(ref[1][static_cast<size_t>(r)], static_cast<float>(mx)) << "max, row " << r;
      EXPECT_NEAR(ref[3][static_cast<size_t>(r)], sum / static_cast<double>(n),
                  bound / static_cast<double>(n) + 2 * eps * std::fabs(sum) / static_cast<double>(n))
          << "mean, row " << r;
      double esum = 0;
      for (int64_t i = 0; i < n; ++i) esum += std::exp(xv[static_cast<size_t>(r * n + i)] - mx);
      for (int64_t i = 0; i < n; i += 997) {
        const double want = std::exp(xv[static_cast<size_t>(r * n + i)] - mx) / esum;
        // exp's 1 ULP and the divide's 0.5, plus the sum's relative error
        // (positive terms: at most the bound above over the sum itself).
        EXPECT_NEAR(ref[2][static_cast<size_t>(r * n + i)], want, want * (4 * eps + (vm::kRowChunk + 64) * eps))
            << "softmax, row " << r << " element " << i;
      }
    }
  }
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

// The chunked order itself, modelled independently for the portable ISA (one
// lane, four accumulators: element i folds into i mod 4): each chunk of
// kRowChunk floats folds from zero, the chunks' accumulators add in chunk
// order, then (a0 + a1) + (a2 + a3). The unsplit order gives other bits, and
// is what a launch of kSplitRowsBelow such rows follows.
TEST(Parallel, HugeRowSumFollowsTheChunkedOrder) {
  const int64_t n = 3 * vm::kRowChunk + vm::kSplitRowMin / 2 + 123;
  ASSERT_GT(n, vm::kSplitRowMin);
  const std::vector<float> xv = ramp(n, 0.0013f);
  float total[4] = {0, 0, 0, 0}, flat[4] = {0, 0, 0, 0};
  for (int64_t c0 = 0; c0 < n; c0 += vm::kRowChunk) {
    float acc[4] = {0, 0, 0, 0};
    for (int64_t i = c0; i < std::min(n, c0 + vm::kRowChunk); ++i) acc[i % 4] += xv[static_cast<size_t>(i)];
    for (int j = 0; j < 4; ++j) total[j] += acc[j];
  }
  for (int64_t i = 0; i < n; ++i) flat[i % 4] += xv[static_cast<size_t>(i)];
  const float want = (total[0] + total[1]) + (total[2] + total[3]);
  const float unsplit = (flat[0] + flat[1]) + (flat[2] + flat[3]);
  ASSERT_NE(want, unsplit) << "pick another input: the two orders agree on this one";
  const std::string before = isa();
  set_isa("portable");
  // kSplitRowsBelow rows of the same data: rows alone keep threads busy, no
  // split, every row in the unsplit order.
  std::vector<float> many(static_cast<size_t>(vm::kSplitRowsBelow * n));
  for (int64_t r = 0; r < vm::kSplitRowsBelow; ++r) std::copy(xv.begin(), xv.end(), many.begin() + r * n);
  for (int threads : {1, 2, 7}) {
    set_num_threads(threads);
    Tensor x = Tensor::from_blob(xv.data(), {n});
    EXPECT_EQ(x.sum().item(), want) << threads << " threads";
    const std::vector<float> sums = Tensor::from_blob(many.data(), {vm::kSplitRowsBelow, n}).sum(-1).to_vector();
    for (float s : sums) EXPECT_EQ(s, unsplit) << threads << " threads, " << vm::kSplitRowsBelow << " rows";
  }
  set_isa(before);
  set_num_threads(0);
}

// The order of a split column sum, modelled: per column, each chunk of
// `rows` rows sums from zero in row order, then the chunks add pairwise.
float chunked_column_sum(const std::vector<float>& x, int64_t R, int64_t C, int64_t c, int64_t rows) {
  std::vector<float> parts;
  for (int64_t r0 = 0; r0 < R; r0 += rows) {
    float part = 0;
    for (int64_t r = r0; r < std::min(R, r0 + rows); ++r) part += x[static_cast<size_t>(r * C + c)];
    parts.push_back(part);
  }
  for (size_t step = 1; step < parts.size(); step *= 2)
    for (size_t i = 0; i + step < parts.size(); i += 2 * step) parts[i] += parts[i + step];
  return parts.empty() ? 0.0f : parts[0];
}

// Column reductions over many rows and few columns split R into chunks the
// same way: bits independent of the thread count and tier, and the chunked
// order of chunked_column_sum.
TEST(Parallel, TallColumnReductionsSplitIntoRowChunks) {
  const int64_t C = vm::kSplitColsMin, R = 8 * (vm::kRowChunk / C) + 77;  // 9 chunks
  ASSERT_GT(R * C, vm::kSplitRowMin);
  const std::vector<float> xv = ramp(R * C, 0.0011f);
  auto run = [&] {
    Tensor x = Tensor::from_blob(xv.data(), {R, C});
    Tensor s = x.sum(0), m = x.max(0), mean = x.mean(0);
    return std::vector<std::vector<float>>{s.to_vector(), m.to_vector(), mean.to_vector()};
  };
  set_num_threads(1);
  set_tier_mode(TierMode::Off);
  const auto ref = run();
  for (TierMode tier : {TierMode::Off, TierMode::Eager})
    for (int threads : {1, 2, 3, 7}) {
      set_num_threads(threads);
      set_tier_mode(tier);
      const auto got = run();
      for (size_t k = 0; k < ref.size(); ++k)
        ASSERT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].size() * sizeof(float)), 0)
            << "result " << k << " differs with " << threads << " threads";
    }
  const int64_t rows = std::min(vm::kRowChunk / C, vm::kColChunkRowsMax);
  int orders_differ = 0;
  for (int64_t c = 0; c < C; ++c) {
    const float chunked = chunked_column_sum(xv, R, C, c, rows);
    float flat = 0;
    double exact = 0, mx = -INFINITY;
    for (int64_t r = 0; r < R; ++r) {
      flat += xv[static_cast<size_t>(r * C + c)];
      exact += xv[static_cast<size_t>(r * C + c)];
      mx = std::max<double>(mx, xv[static_cast<size_t>(r * C + c)]);
    }
    orders_differ += chunked != flat;
    // Each column is one lane on every ISA: the model holds bit for bit.
    EXPECT_EQ(ref[0][static_cast<size_t>(c)], chunked) << "sum, column " << c;
    EXPECT_EQ(ref[1][static_cast<size_t>(c)], static_cast<float>(mx)) << "max, column " << c;
    // |x| <= 3; no path through the chunked order has more than rows + 64 adds.
    EXPECT_NEAR(ref[0][static_cast<size_t>(c)], exact, (rows + 64) * std::ldexp(1.0, -24) * R * 3.0) << "column " << c;
  }
  EXPECT_GT(orders_differ, C / 2) << "pick another input: the two orders mostly agree on this one";
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

// Narrow tensors' long columns split too (accuracy, not speed): a column
// sum adds at most kColChunkRowsMax rows into one accumulator, then the
// chunks pairwise. All-ones of 2^25 rows: every partial is exact, so the sum
// is 2^25 (one float accumulator stops at 2^24). Ordinary data: within the
// chunked order's bound, bit-identical over tiers and thread counts. One
// column ([R, 1]) is a row reduction of its R elements: the bits of the
// same data's sum as [R].
TEST(Parallel, NarrowColumnSumsSplitForAccuracy) {
  const int64_t big = int64_t{1} << 25;
  EXPECT_EQ(Tensor::full({big, 1}, 1.0f).sum(0).to_vector(), std::vector<float>{33554432.0f});
  const int64_t R = 3 * vm::kRowChunk + 1234;
  for (int64_t C : {int64_t{1}, int64_t{3}, int64_t{17}, vm::kSplitColsMin - 1}) {
    std::vector<float> xv(static_cast<size_t>(R * C));
    uint32_t state = 12345u + static_cast<uint32_t>(C);
    for (float& v : xv) {  // uniform in [0, 1): every column sum has condition number 1
      state = state * 1664525u + 1013904223u;
      v = static_cast<float>(state >> 8) * 0x1p-24f;
    }
    auto run = [&] { return Tensor::from_blob(xv.data(), {R, C}).sum(0).to_vector(); };
    set_num_threads(1);
    set_tier_mode(TierMode::Off);
    const std::vector<float> ref = run();
    for (int64_t c = 0; c < C; ++c) {
      double exact = 0;
      for (int64_t r = 0; r < R; ++r) exact += xv[static_cast<size_t>(r * C + c)];
      const float got = ref[static_cast<size_t>(c)];
      const float want = C == 1 ? Tensor::from_blob(xv.data(), {R}).sum(0).to_vector()[0]
                                : chunked_column_sum(xv, R, C, c, vm::kColChunkRowsMax);
      EXPECT_EQ(got, want) << "C " << C << ", column " << c;
      // Worst case (1024 + log2(chunks)) adds of relative error 2^-24 each;
      // one accumulator over all R rows has a bound of R adds (and is ~100x
      // off on this data).
      EXPECT_NEAR(got, exact, (vm::kColChunkRowsMax + 8) * std::ldexp(1.0, -24) * exact) << "C " << C;
      // (One column is the row sum, whose order is the row reduction's: its
      // bound is the one above.)
      if (C > 1) {
        EXPECT_NEAR(got, exact, 1e-6 * exact) << "C " << C << ": the pairwise order keeps this data within 1e-6";
      }
    }
    for (TierMode tier : {TierMode::Off, TierMode::Eager})
      for (int threads : {1, 2, 7}) {
        set_num_threads(threads);
        set_tier_mode(tier);
        const std::vector<float> got = run();
        ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
            << "C " << C << " differs with " << threads << " threads";
      }
  }
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

// Split column reductions fold their chunks on machine code (the kernel's
// fold kernel) with the interpreter's bits, for every shape the split takes:
// several column tiles and a ragged one, odd widths, P > 1, a row stride
// wider than C (a slice), NaN in a max, an epilogue (mean).
TEST(Parallel, SplitColumnReductionsRunOnTheJitWithTheInterpretersBits) {
  if (isa() == "portable") GTEST_SKIP() << "no JIT on a CPU without AVX2";
  DVM_SKIP_WITHOUT_JIT();
  struct Case {
    const char* what;
    std::vector<int64_t> shape;
    int axis;
    int64_t keep_cols;  // > 0: reduce a slice of the last axis to this width
  };
  const std::vector<Case> cases = {
      {"[R, 64] (the model's shape)", {9000, 64}, 0, 0},
      {"[R, 100]: blocks of 4, 2 and a masked tail", {5000, 100}, 0, 0},
      {"[R, 600]: a full tile and a ragged one", {1200, 600}, 0, 0},
      {"[3, R, 72]: P = 3", {3, 4000, 72}, 1, 0},
      {"[R, 160] sliced to 80 columns: rs = 160", {7000, 160}, 0, 80},
      {"[16, R, 100]: 16 tiles, split for the cache", {16, 2700, 100}, 1, 0},
  };
  for (const Case& c : cases) {
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    std::vector<float> xv = ramp(n, 0.0007f);
    xv[static_cast<size_t>(n / 3)] = NAN;  // one column's max is NaN
    auto run = [&] {
      Tensor x = Tensor::from_blob(xv.data(), Shape(c.shape));
      if (c.keep_cols > 0) x = x.slice(static_cast<int>(c.shape.size()) - 1, 0, c.keep_cols);
      return std::vector<std::vector<float>>{x.sum(c.axis).to_vector(), x.max(c.axis).to_vector(),
                                             x.mean(c.axis).to_vector()};
    };
    set_num_threads(2);
    set_tier_mode(TierMode::Off);
    const auto ref = run();
    set_tier_mode(TierMode::Eager);
    set_kernel_log(true);
    (void)take_kernel_log();
    const auto got = run();
    const std::vector<KernelRun> log = take_kernel_log();
    set_kernel_log(false);
    ASSERT_EQ(log.size(), 3u) << c.what;
    for (const KernelRun& k : log) EXPECT_EQ(k.tier, "jit") << c.what << ": a split launch left the JIT";
    for (size_t k = 0; k < ref.size(); ++k)
      ASSERT_EQ(std::memcmp(got[k].data(), ref[k].data(), ref[k].size() * sizeof(float)), 0)
          << c.what << ", result " << k << ": the JIT's fold differs from the interpreter's";
  }
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

// A split column reduction whose prologue also stores (softmax along an
// outer axis: its sum of exponentials stores the exponentials too) folds on
// machine code, each chunk storing its own rows, with the interpreter's
// bits: generated shapes, narrow and odd widths, 1s, P > 1, against a
// softmax in double.
TEST(Parallel, SplitColumnReductionsWithPrologueStoresFoldOnTheJit) {
  if (isa() == "portable") GTEST_SKIP() << "no JIT on a CPU without AVX2";
  DVM_SKIP_WITHOUT_JIT();
  std::mt19937 gen(20261129);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  for (int c = 0; c < 12; ++c) {
    // More than two chunks of rows (vm::col_split): narrower than 64 columns
    // always splits; wider ones once a column tile folds enough floats.
    const int64_t P = c % 3 == 0 ? pick(1, 3) : 1;
    const int64_t C = c == 0 ? 1 : c == 1 ? 3 : c == 2 ? 100 : pick(1, 63);
    const int64_t R = c == 2 ? pick(2700, 3500) : pick(2 * 1024 + 1, 7000);
    const std::vector<int64_t> shape = P > 1 || c % 3 == 0 ? std::vector<int64_t>{P, R, C} : std::vector<int64_t>{R, C};
    const int axis = static_cast<int>(shape.size()) - 2;
    std::vector<float> xv(static_cast<size_t>(P * R * C));
    std::uniform_real_distribution<float> val(-4.0f, 4.0f);
    for (float& v : xv) v = val(gen);
    const std::string what = "softmax over rows of [" + std::to_string(P) + ", " + std::to_string(R) + ", " +
                             std::to_string(C) + "]";
    auto run = [&] { return softmax(Tensor::from_blob(xv.data(), Shape(shape)), axis).to_vector(); };
    set_num_threads(2);
    set_tier_mode(TierMode::Off);
    const std::vector<float> ref = run();
    set_tier_mode(TierMode::Eager);
    set_kernel_log(true);
    (void)take_kernel_log();
    const std::vector<float> got = run();
    const std::vector<KernelRun> log = take_kernel_log();
    set_kernel_log(false);
    int col_reduces = 0;
    for (const KernelRun& k : log) {
      EXPECT_EQ(k.tier, "jit") << what << ": a " << k.form << " launch left the JIT";
      col_reduces += k.form == "col_reduce";
    }
    // One column reduces its rows' elements in order: one row reduction.
    EXPECT_EQ(col_reduces, C == 1 ? 0 : 2) << what;
    ASSERT_EQ(got.size(), xv.size()) << what;
    ASSERT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
        << what << ": the JIT's fold differs from the interpreter's";
    for (int64_t p = 0; p < P; ++p)
      for (int64_t j = 0; j < C; ++j) {
        const float* x = xv.data() + p * R * C + j;
        double mx = -INFINITY, sum = 0;
        for (int64_t r = 0; r < R; ++r) mx = std::max(mx, static_cast<double>(x[r * C]));
        for (int64_t r = 0; r < R; ++r) sum += std::exp(x[r * C] - mx);
        for (int64_t r = 0; r < R; ++r) {
          const double want = std::exp(x[r * C] - mx) / sum;
          const size_t at = static_cast<size_t>(p * R * C + r * C + j);
          ASSERT_NEAR(got[at], want, 1e-5 * want + 1e-12) << what << " at p " << p << ", row " << r << ", column " << j;
        }
      }
  }
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

// Split rows run each pass per chunk on machine code (the kernel's split
// passes: whole rounds of accumulator floats fold as a ColReduce, the last
// pass stores as an Elementwise kernel), the interpreter folds what is left
// of a chunk; the bits must be the interpreter's, for every thread count.
// Cases: a ragged last chunk and a tail of fewer than 64 floats, a last chunk
// shorter than one round, two levels with vec stores (softmax, layer_norm
// with per-element weight and bias), a strided row (lds), a row value both
// stored per row and used per element (stb and st in one kernel), NaN.
TEST(Parallel, SplitRowReductionsRunOnTheJitWithTheInterpretersBits) {
  if (isa() == "portable") GTEST_SKIP() << "no JIT on a CPU without AVX2";
  DVM_SKIP_WITHOUT_JIT();
  const int64_t ragged = 4 * 65536 + 4097 + 37;  // five chunks, the last 4134 floats
  const int64_t stub = 4 * 65536 + 30;           // a last chunk of 30 floats
  struct Case {
    const char* what;
    std::function<std::vector<Tensor>(const std::vector<float>&)> run;
  };
  const std::vector<Case> cases = {
      {"sum, max and mean of everything (ragged)",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {ragged});
         return std::vector<Tensor>{x.sum(), x.max(), x.mean()};
       }},
      {"sum of squares, a 30-float last chunk",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {stub});
         return std::vector<Tensor>{(x * x).sum()};
       }},
      {"softmax of [2, C] (two levels, vec stores)",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {2, ragged});
         return std::vector<Tensor>{softmax(x, -1)};
       }},
      {"layer_norm of [2, C] with weight and bias",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {2, ragged});
         Tensor w = Tensor::from_blob(v.data() + 7, {ragged}) * 0.5f + 1.0f;
         Tensor b = Tensor::from_blob(v.data() + 11, {ragged});
         return std::vector<Tensor>{layer_norm(x, {ragged}, w, b, 1e-5f)};
       }},
      {"strided row: sum over the first axis of [C, 3] transposed, two of its three rows",
       [&](const std::vector<float>& v) {
         // (A plain transpose is reduced in its input's order: a column.)
         Tensor x = Tensor::from_blob(v.data(), {ragged, 3}).transpose(0, 1).slice(0, 0, 2);
         return std::vector<Tensor>{x.sum(1)};
       }},
      {"a row sum stored and subtracted in one kernel",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {2, ragged});
         Tensor s = x.sum(1, true);
         Tensor d = x - s;
         return std::vector<Tensor>{s, d};
       }},
      {"a per-row input (read per row, not per element) in every pass",
       [&](const std::vector<float>& v) {
         Tensor x = Tensor::from_blob(v.data(), {2, ragged});
         Tensor r = Tensor::from_blob(v.data() + 5, {2, 1});
         Tensor y = x * r;
         return std::vector<Tensor>{y - y.max(1, true) + r};
       }},
  };
  std::vector<float> xv = ramp(3 * ragged + 16, 0.0007f);
  std::vector<float> with_nan = xv;
  with_nan[static_cast<size_t>(ragged / 3)] = NAN;
  // Every run's outputs stay alive, so no run can find another's results in
  // a reused buffer and pass without writing its own.
  auto values = [](const std::vector<Tensor>& ts) {
    std::vector<std::vector<float>> out;
    for (const Tensor& t : ts) out.push_back(t.to_vector());
    return out;
  };
  for (const Case& c : cases)
    for (const std::vector<float>* v : {&xv, &with_nan}) {
      std::vector<std::vector<Tensor>> alive;
      set_num_threads(2);
      set_tier_mode(TierMode::Off);
      alive.push_back(c.run(*v));
      const auto ref = values(alive.back());
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        set_tier_mode(TierMode::Eager);
        set_kernel_log(true);
        (void)take_kernel_log();
        alive.push_back(c.run(*v));
        const auto got = values(alive.back());
        const std::vector<KernelRun> log = take_kernel_log();
        set_kernel_log(false);
        bool split_jit = false;
        for (const KernelRun& k : log) split_jit |= k.form == "row_reduce" && k.tier == "jit";
        EXPECT_TRUE(split_jit) << c.what << ": no split row ran on the JIT";
        ASSERT_EQ(got.size(), ref.size());
        for (size_t k = 0; k < ref.size(); ++k) {
          ASSERT_EQ(got[k].size(), ref[k].size());
          for (size_t i = 0; i < ref[k].size(); ++i) {
            if (std::isnan(got[k][i]) && std::isnan(ref[k][i])) continue;
            ASSERT_EQ(std::memcmp(&got[k][i], &ref[k][i], sizeof(float)), 0)
                  << c.what << ", result " << k << ", element " << i << ", " << threads
                  << " threads: the JIT's split row differs from the interpreter's (" << got[k][i] << " vs "
                  << ref[k][i] << ")";
          }
        }
      }
    }
  set_num_threads(0);
  set_tier_mode(TierMode::Auto);
}

TEST(Parallel, HostArenaBoundsDvm) {
  set_num_threads(0);  // run in the caller's arena
  tbb::task_arena host(1);
  int seen = 0;
  host.execute([&] { seen = num_threads(); });
  EXPECT_EQ(seen, 1);
  // And work submitted from inside it still computes the right values.
  const std::vector<float> xv = ramp(128 * 1024, 0.002f);
  std::vector<float> got;
  host.execute([&] {
    Tensor x = Tensor::from_blob(xv.data(), {static_cast<int64_t>(xv.size())});
    got = (x * 2.0f).to_vector();
  });
  for (size_t i = 0; i < xv.size(); i += 1013) EXPECT_EQ(got[i], xv[i] * 2.0f);
}

TEST(Parallel, SmallLaunchesRunOnTheCaller) {
  set_num_threads(2);
  // A 4K launch must not leave the calling thread.
  std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> seen;
  vm::parallel_items(4, 1024, [&](int64_t, int64_t) { seen.push_back(std::this_thread::get_id()); });
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], caller);
  set_num_threads(0);
}

TEST(Parallel, NegativeThreadCountIsAnError) {
  EXPECT_THROW(set_num_threads(-1), Error);
}

}  // namespace
}  // namespace dvm
