// Weights read by columns (docs/API.md, "Weights read by columns"): the
// second small product that reads a matrix by columns makes a row-major copy
// of it, and later products read the copy. The copy must give the bits of
// the transposing path (the same sums in the same order), be made only where
// it is meant to be, be counted, respect the memory limit and the setting,
// and go with the tensor's buffer.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dvm/dvm.h"
#include "tracer/buffer_pool.h"
#include "tracer/row_copies.h"

namespace dvm {
namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// Restores the process-wide setting and memory limit a test changes.
struct Restore {
  bool copies = weight_copies();
  int64_t limit = memory_limit();
  ~Restore() {
    set_weight_copies(copies);
    set_memory_limit(limit);
  }
};

// y = x W^T for x [M, K] and W given by element (n, k) at w[n * ws + k]:
// every element against a double dot product. Each step of the cube's sum
// rounds once (fused multiply-add, or a product and a sum on the portable
// ISA: twice), so the error is at most 2K ulps of sum |x_k w_k|.
void expect_linear(const std::vector<float>& y, const std::vector<float>& x, const float* w, int64_t ws, int64_t M,
                   int64_t K, int64_t N, const std::string& what) {
  ASSERT_EQ(y.size(), static_cast<size_t>(M * N)) << what;
  int bad = 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double s = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = static_cast<double>(x[static_cast<size_t>(m * K + k)]) * w[n * ws + k];
        s += p;
        mag += std::fabs(p);
      }
      const double got = y[static_cast<size_t>(m * N + n)];
      const double tol = 2.0 * static_cast<double>(K) * std::ldexp(mag, -24) + 1e-30;
      if (std::fabs(got - s) > tol && ++bad <= 3)
        ADD_FAILURE() << what << ": y[" << m << "][" << n << "] = " << got << ", expected " << s << " +- " << tol;
    }
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return false;
  return true;
}

// The stride of a copy's rows for N columns (tracer/row_copies.h), checked
// for what it promises: room for the row, whole cache lines, off 4 KiB.
int64_t copy_row_stride(int64_t N) {
  const int64_t ld = detail::row_copy_stride(N);
  EXPECT_GE(ld, N);
  EXPECT_EQ(ld % 16, 0) << "N = " << N;
  EXPECT_NE(ld % 1024, 0) << "N = " << N;
  EXPECT_LT(ld, N + 32) << "N = " << N;
  return ld;
}

// What a copy of K rows of N columns counts in weight_copy_bytes and
// live_bytes: its pool block.
int64_t copy_bytes_of(int64_t K, int64_t N) {
  return static_cast<int64_t>(detail::pool_block_bytes(static_cast<size_t>(K * copy_row_stride(N) * 4)));
}

TEST(WeightCopies, GeneratedLinearsKeepTheirBitsOnTheCopy) {
  Restore restore;
  set_weight_copies(true);
  std::mt19937 rng(20261125);
  for (int t = 0; t < 24; ++t) {
    // Sizes around the transposes' 8 x 8 blocks and the copy's threshold.
    const int64_t M = std::uniform_int_distribution<int64_t>(2, 16)(rng);
    const int64_t K = t == 0 ? 1024 : std::uniform_int_distribution<int64_t>(9, 300)(rng);
    int64_t N = t == 0 ? 8 : std::uniform_int_distribution<int64_t>(2, 300)(rng);
    if (t == 1) N = 1024;  // a copy whose rows are padded off 4 KiB
    if (K * N < 4096) N = (4096 + K - 1) / K;
    const std::string what = "linear M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" + std::to_string(N);
    const std::vector<float> w = random_vec(N * K, static_cast<uint32_t>(t * 3 + 1));
    const std::vector<float> x = random_vec(M * K, static_cast<uint32_t>(t * 3 + 2));
    const int64_t before = memory_stats().weight_copy_bytes;
    {
      const Tensor W = Tensor::from_blob(w.data(), {N, K});
      const Tensor X = Tensor::from_blob(x.data(), {M, K});
      const std::vector<float> first = linear(X, W).to_vector();  // transposes W into panels
      EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << ": a copy at the first product";
      expect_linear(first, x, w.data(), K, M, K, N, what);
      for (int call = 2; call <= 3; ++call) {
        const std::vector<float> y = linear(X, W).to_vector();
        EXPECT_TRUE(same_bits(y, first)) << what << ": call " << call << " has other bits than the first";
      }
      EXPECT_EQ(memory_stats().weight_copy_bytes - before, copy_bytes_of(K, N))
          << what << ": the second product made no copy of the expected size";
    }
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << ": the copy outlived its weight";
  }
}

// A product of many rows makes no copy but reads one that small products
// made (a prompt after decoder steps): the same bits as before the copy, for
// generated sizes around the cube's blocks, batched or not.
TEST(WeightCopies, ManyRowProductsReadAnExistingCopyWithTheSameBits) {
  Restore restore;
  set_weight_copies(true);
  std::mt19937 rng(20261129);
  for (int t = 0; t < 16; ++t) {
    const int64_t M = std::uniform_int_distribution<int64_t>(17, 130)(rng);
    const int64_t K = std::uniform_int_distribution<int64_t>(9, 300)(rng);
    int64_t N = std::uniform_int_distribution<int64_t>(2, 300)(rng);
    if (K * N < 4096) N = (4096 + K - 1) / K;
    const int64_t batch = t % 4 == 3 ? 2 : 1;
    const std::string what = "linear M=" + std::to_string(M) + " K=" + std::to_string(K) + " N=" +
                             std::to_string(N) + " batch=" + std::to_string(batch);
    const std::vector<float> w = random_vec(N * K, static_cast<uint32_t>(t * 5 + 1));
    const std::vector<float> x = random_vec(batch * M * K, static_cast<uint32_t>(t * 5 + 2));
    const Tensor W = Tensor::from_blob(w.data(), {N, K});
    const Tensor X = batch == 1 ? Tensor::from_blob(x.data(), {M, K}) : Tensor::from_blob(x.data(), {batch, M, K});
    const Tensor X1 = Tensor::from_blob(x.data(), {1, K});
    const int64_t before = memory_stats().weight_copy_bytes;
    const std::vector<float> first = linear(X, W).to_vector();
    for (int64_t b = 0; b < batch; ++b) {
      const std::vector<float> xb(x.begin() + b * M * K, x.begin() + (b + 1) * M * K);
      const std::vector<float> yb(first.begin() + b * M * N, first.begin() + (b + 1) * M * N);
      expect_linear(yb, xb, w.data(), K, M, K, N, what);
    }
    (void)linear(X, W).to_vector();
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << ": many rows made a copy";
    (void)linear(X1, W).to_vector();
    (void)linear(X1, W).to_vector();  // the second small product makes it
    ASSERT_EQ(memory_stats().weight_copy_bytes - before, copy_bytes_of(K, N)) << what << ": no copy";
    EXPECT_TRUE(same_bits(linear(X, W).to_vector(), first)) << what << ": other bits on the copy";
  }
}

// What the products read once the copy exists: the copy. Seen by breaking
// from_blob's contract on purpose (its memory changes while a tensor reads
// it): from the third product on, the old values are the ones multiplied,
// by a product of many rows too (which makes no copy, but reads one).
TEST(WeightCopies, LaterProductsReadTheCopy) {
  Restore restore;
  set_weight_copies(true);
  const int64_t M = 2, K = 256, N = 96;
  std::vector<float> w = random_vec(N * K, 31);
  const std::vector<float> x = random_vec(M * K, 32), w_old = w;
  const Tensor W = Tensor::from_blob(w.data(), {N, K});
  const Tensor X = Tensor::from_blob(x.data(), {M, K});
  (void)linear(X, W).to_vector();
  (void)linear(X, W).to_vector();  // makes the copy
  for (float& v : w) v = -v;
  expect_linear(linear(X, W).to_vector(), x, w_old.data(), K, M, K, N, "the product after the copy");
  const std::vector<float> x40 = random_vec(40 * K, 33);
  expect_linear(linear(Tensor::from_blob(x40.data(), {40, K}), W).to_vector(), x40, w_old.data(), K, 40, K, N,
                "40 rows after the copy");
  // Without copies, the memory as it is now.
  set_weight_copies(false);
  const Tensor W2 = Tensor::from_blob(w.data(), {N, K});
  for (int call = 0; call < 3; ++call)
    expect_linear(linear(X, W2).to_vector(), x, w.data(), K, M, K, N, "copies off, call " + std::to_string(call));
}

TEST(WeightCopies, SlicesOfOneBufferEachGetTheirOwn) {
  Restore restore;
  set_weight_copies(true);
  // A fused [3N, K2] weight: two row slices (different offsets), and the
  // first K columns of one (columns K2 apart, more than K).
  const int64_t N = 96, K = 80, K2 = 88, M = 3;
  const std::vector<float> w = random_vec(3 * N * K2, 7), x = random_vec(M * K2, 8);
  const int64_t before = memory_stats().weight_copy_bytes;
  {
    const Tensor Wall = Tensor::from_blob(w.data(), {3 * N, K2});
    const Tensor X = Tensor::from_blob(x.data(), {M, K2});
    const Tensor Xk = Tensor::from_blob(x.data(), {M, K2}).slice(1, 0, K);
    std::vector<float> xk(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) xk[static_cast<size_t>(m * K + k)] = x[static_cast<size_t>(m * K2 + k)];
    for (int round = 0; round < 3; ++round) {
      for (int64_t part = 0; part < 2; ++part) {
        const Tensor Wp = Wall.slice(0, part * N, (part + 1) * N);
        expect_linear(linear(X, Wp).to_vector(), x, w.data() + part * N * K2, K2, M, K2, N,
                      "slice " + std::to_string(part) + " round " + std::to_string(round));
      }
      const Tensor Wk = Wall.slice(0, 2 * N, 3 * N).slice(1, 0, K);
      expect_linear(linear(Xk, Wk).to_vector(), xk, w.data() + 2 * N * K2, K2, M, K, N,
                    "narrowed slice round " + std::to_string(round));
    }
    EXPECT_EQ(memory_stats().weight_copy_bytes - before, 2 * copy_bytes_of(K2, N) + copy_bytes_of(K, N));
  }
  EXPECT_EQ(memory_stats().weight_copy_bytes, before);
}

TEST(WeightCopies, NoneWhereTheyAreNotMeantToBe) {
  Restore restore;
  set_weight_copies(true);
  const int64_t K = 128, N = 64;
  const std::vector<float> w = random_vec(N * K, 11), x = random_vec(64 * K, 12);
  const int64_t before = memory_stats().weight_copy_bytes;
  const Tensor W = Tensor::from_blob(w.data(), {N, K});
  auto run3 = [&](const Tensor& X, const Tensor& Wt, int64_t M, const std::string& what) {
    for (int call = 0; call < 3; ++call)
      expect_linear(matmul(X, Wt).to_vector(), x, w.data(), K, M, K, N, what);
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << " made a copy";
  };
  // Many rows: the cube amortizes the transpose.
  run3(Tensor::from_blob(x.data(), {64, K}), W.transpose(0, 1), 64, "64 rows");
  // B stored by rows already.
  std::vector<float> wt(static_cast<size_t>(K * N));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t k = 0; k < K; ++k) wt[static_cast<size_t>(k * N + n)] = w[static_cast<size_t>(n * K + k)];
  for (int call = 0; call < 3; ++call)
    expect_linear(matmul(Tensor::from_blob(x.data(), {4, K}), Tensor::from_blob(wt.data(), {K, N})).to_vector(), x,
                  w.data(), K, 4, K, N, "B by rows");
  EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "B by rows made a copy";
  // Under 4096 elements.
  const Tensor Wsmall = W.slice(0, 0, 16);  // 16 x 128 = 2048
  for (int call = 0; call < 3; ++call)
    expect_linear(linear(Tensor::from_blob(x.data(), {2, K}), Wsmall).to_vector(), x, w.data(), K, 2, K, 16, "small W");
  EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "a small weight made a copy";
  // Wrapped anew each call: each buffer is read once.
  for (int call = 0; call < 3; ++call)
    expect_linear(linear(Tensor::from_blob(x.data(), {2, K}), Tensor::from_blob(w.data(), {N, K})).to_vector(), x,
                  w.data(), K, 2, K, N, "rewrapped W");
  EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "a weight wrapped per call made a copy";
}

// A product of one row (a decoder step) gets a copy too, at its second
// call, while all copies hold at most 24 MiB (the weights of a small model,
// read from the caches); a weight whose copy would pass that is read in
// place on AVX2 and AVX-512 (the cube transposes small blocks in registers).
// The portable cube packs W^T on every call, so there one row always gets
// the copy. Either way the bits are those of the first call.
TEST(WeightCopies, OneRowCopiesWithinABudget) {
  Restore restore;
  set_weight_copies(true);
  struct Case {
    int64_t K, N;
    bool fits;  // its copy fits the 24 MiB budget
  };
  for (const Case& c : {Case{300, 70, true}, Case{2048, 3100, false}}) {
    const std::string what = "one row, K=" + std::to_string(c.K) + " N=" + std::to_string(c.N);
    const std::vector<float> w = random_vec(c.N * c.K, 41), x = random_vec(c.K, 42);
    const int64_t before = memory_stats().weight_copy_bytes;
    ASSERT_EQ(before, 0) << "copies of earlier tests are still held";
    {
      const Tensor W = Tensor::from_blob(w.data(), {c.N, c.K});
      const Tensor X = Tensor::from_blob(x.data(), {1, c.K});
      const std::vector<float> first = linear(X, W).to_vector();
      if (c.fits) expect_linear(first, x, w.data(), c.K, 1, c.K, c.N, what);
      EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << ": a copy at the first product";
      const int64_t live_before = memory_stats().live_bytes;
      for (int call = 2; call <= 3; ++call)
        EXPECT_TRUE(same_bits(linear(X, W).to_vector(), first)) << what << ", call " << call;
      const int64_t copies = memory_stats().weight_copy_bytes - before;
      // The copy's pool block, as live_bytes counts it.
      const int64_t copy_bytes = copy_bytes_of(c.K, c.N);
      EXPECT_EQ(memory_stats().live_bytes - live_before, copies) << what << ": weight_copy_bytes is not its part of live_bytes";
      if (c.fits || isa() == "portable") {
        EXPECT_EQ(copies, copy_bytes) << what << " on " << isa() << ": no copy";
      } else {
        EXPECT_GT(copy_bytes, int64_t{24} << 20);
        EXPECT_EQ(copies, 0) << what << " on " << isa() << ": a copy past the budget";
      }
    }
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << what << ": the copy outlived its weight";
  }
}

// The budget counts the copies' pool blocks, as live_bytes does: one-row
// products over weights whose padded copies fit 24 MiB but whose blocks do
// not stop at the budget.
TEST(WeightCopies, TheBudgetCountsPoolBlocks) {
  Restore restore;
  set_weight_copies(true);
  ASSERT_EQ(memory_stats().weight_copy_bytes, 0) << "copies of earlier tests are still held";
  const int64_t K = 1024, N = 1024, budget = int64_t{24} << 20;
  const int64_t request = K * copy_row_stride(N) * 4;
  const int64_t block = copy_bytes_of(K, N);
  const int64_t weights = budget / request + 1;  // their requests fit, their blocks do not
  ASSERT_GT(weights * block, budget);
  const std::vector<float> x = random_vec(K, 51);
  std::vector<std::vector<float>> w;
  std::vector<Tensor> W;
  for (int64_t i = 0; i < weights; ++i) {
    w.push_back(random_vec(N * K, 60 + static_cast<uint32_t>(i)));
    W.push_back(Tensor::from_blob(w.back().data(), {N, K}));
  }
  const int64_t live_before = memory_stats().live_bytes;
  for (int call = 0; call < 2; ++call)
    for (const Tensor& Wi : W) (void)linear(Tensor::from_blob(x.data(), {1, K}), Wi).to_vector();
  const int64_t copies = memory_stats().weight_copy_bytes;
  EXPECT_EQ(memory_stats().live_bytes - live_before, copies) << "weight_copy_bytes is not its part of live_bytes";
  EXPECT_EQ(copies % block, 0) << copies << " bytes: not whole blocks of " << block;
  if (isa() != "portable") EXPECT_LE(copies, budget) << copies / block << " copies of " << block << " bytes";
  else EXPECT_EQ(copies, weights * block) << "the portable cube copies every one-row weight";
}

TEST(WeightCopies, TheSettingAndTheMemoryLimitStopThem) {
  Restore restore;
  const int64_t M = 2, K = 512, N = 512;
  const std::vector<float> w = random_vec(N * K, 21), x = random_vec(M * K, 22);
  const Tensor X = Tensor::from_blob(x.data(), {M, K});
  const int64_t before = memory_stats().weight_copy_bytes;
  {
    set_weight_copies(false);
    const Tensor W = Tensor::from_blob(w.data(), {N, K});
    std::vector<float> first;
    for (int call = 0; call < 3; ++call) {
      const std::vector<float> y = linear(X, W).to_vector();
      if (call == 0) expect_linear(y, x, w.data(), K, M, K, N, "copies off");
      else EXPECT_TRUE(same_bits(y, first)) << "copies off, call " << call;
      if (call == 0) first = y;
    }
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "a copy with copies off";
  }
  {
    // Room for the products' results but not for a 1 MiB copy: the products
    // run on, without one and without an error.
    set_weight_copies(true);
    trim();
    set_memory_limit(memory_stats().live_bytes + (256 << 10));
    const Tensor W = Tensor::from_blob(w.data(), {N, K});
    for (int call = 0; call < 4; ++call)
      expect_linear(linear(X, W).to_vector(), x, w.data(), K, M, K, N, "under the limit, call " + std::to_string(call));
    EXPECT_EQ(memory_stats().weight_copy_bytes, before) << "a copy past the memory limit";
    EXPECT_LE(memory_stats().live_bytes + memory_stats().cached_bytes, memory_limit());
  }
}

}  // namespace
}  // namespace dvm
