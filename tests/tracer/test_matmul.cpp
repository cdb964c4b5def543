// matmul, bmm, linear and addmm through the public API: torch's shape rules
// (1-D promotion, batch broadcasting), transposed and strided operands read
// in place, fused epilogues, against a double-precision reference; and the
// errors for shapes that do not contract.
#include <gtest/gtest.h>

#include <limits>

#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backends/cube/gemm.h"
#include "dvm/dvm.h"
#include "fuser/executor.h"
#include "tests/tracer/tracer_testing.h"

namespace dvm {
namespace {

std::vector<float> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (auto& x : v) x = d(rng);
  return v;
}

// A dense row-major double copy of t's values with t's shape.
struct Dense {
  Shape shape;
  std::vector<double> v;
  double at(const std::vector<int64_t>& idx) const {
    int64_t off = 0;
    for (int i = 0; i < shape.rank(); ++i) off = off * shape[i] + idx[static_cast<size_t>(i)];
    return v[static_cast<size_t>(off)];
  }
};

Dense dense(const Tensor& t) {
  const std::vector<float> f = t.to_vector();
  return {t.shape(), std::vector<double>(f.begin(), f.end())};
}

// torch.matmul in double, with the K-sum's magnitude for the tolerance.
struct Ref {
  Shape shape;
  std::vector<double> value, magnitude;
};

Ref reference_matmul(const Dense& a, const Dense& b) {
  Shape sa = a.shape, sb = b.shape;
  const bool a1 = sa.rank() == 1, b1 = sb.rank() == 1;
  Shape A = a1 ? Shape{1, sa[0]} : sa, B = b1 ? Shape{sb[0], 1} : sb;
  const int ra = A.rank(), rb = B.rank();
  const int64_t M = A[ra - 2], K = A[ra - 1], N = B[rb - 1];
  const int nb = std::max(ra, rb) - 2;
  Shape batch;
  for (int i = 0; i < nb; ++i) {
    const int ia = i - (nb - (ra - 2)), ib = i - (nb - (rb - 2));
    const int64_t ea = ia >= 0 ? A[ia] : 1, eb = ib >= 0 ? B[ib] : 1;
    batch.push_back(ea == 1 ? eb : ea);
  }
  Ref r;
  Shape full = batch;
  full.push_back(M);
  full.push_back(N);
  const int64_t total = full.numel();
  r.value.resize(static_cast<size_t>(total));
  r.magnitude.resize(static_cast<size_t>(total));
  std::vector<int64_t> idx(static_cast<size_t>(full.rank()), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t rem = e;
    for (int i = full.rank() - 1; i >= 0; --i) {
      idx[static_cast<size_t>(i)] = rem % full[i];
      rem /= full[i];
    }
    const int64_t m = idx[static_cast<size_t>(nb)], n = idx[static_cast<size_t>(nb + 1)];
    double s = 0, mag = 0;
    for (int64_t k = 0; k < K; ++k) {
      std::vector<int64_t> ia, ib;
      for (int i = 0; i < ra - 2; ++i) {
        const int64_t bi = idx[static_cast<size_t>(i + nb - (ra - 2))];
        ia.push_back(A[i] == 1 ? 0 : bi);
      }
      for (int i = 0; i < rb - 2; ++i) {
        const int64_t bi = idx[static_cast<size_t>(i + nb - (rb - 2))];
        ib.push_back(B[i] == 1 ? 0 : bi);
      }
      if (a1) ia = {k};
      else {
        ia.push_back(m);
        ia.push_back(k);
      }
      if (b1) ib = {k};
      else {
        ib.push_back(k);
        ib.push_back(n);
      }
      const double p = a.at(ia) * b.at(ib);
      s += p;
      mag += std::fabs(p);
    }
    r.value[static_cast<size_t>(e)] = s;
    r.magnitude[static_cast<size_t>(e)] = mag;
  }
  Shape out = batch;
  if (!a1) out.push_back(M);
  if (!b1) out.push_back(N);
  r.shape = out;
  return r;
}

// |got - want| <= (K + 2) u * (sum of |products| + |extra|): K roundings of
// the running sum (fused or not), each at most u of a partial sum bounded by
// the magnitude, and the epilogue's few roundings.
// rel: the result's own rounding (2^-9 for bfloat16), relative.
void expect_close(const Tensor& got, const Ref& want, int64_t K, const std::string& what, double rel = 0) {
  ASSERT_EQ(got.shape(), want.shape) << what;
  const std::vector<float> g = got.to_vector();
  ASSERT_EQ(g.size(), want.value.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = (static_cast<double>(K) + 2) * 0x1p-24 * (want.magnitude[i] + std::fabs(want.value[i])) +
                       rel * std::fabs(want.value[i]) + 1e-30;
    ASSERT_NEAR(g[i], want.value[i], tol) << what << " element " << i;
  }
}

Tensor tensor_of(const Shape& s, uint32_t seed) { return Tensor::from_vector(random_vec(s.numel(), seed), s); }

TEST(MatMul, ShapeRulesOfTorch) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{5}, {5}},           {{3, 5}, {5}},          {{5}, {5, 4}},        {{3, 5}, {5, 4}},
      {{1, 1}, {1, 1}},     {{7, 17}, {17, 63}},    {{2, 3, 5}, {5, 4}},  {{3, 5}, {2, 5, 4}},
      {{2, 3, 5}, {2, 5, 4}}, {{2, 1, 3, 5}, {4, 5, 6}}, {{5}, {2, 5, 4}}, {{2, 3, 5}, {5}},
      {{65, 0}, {0, 3}},    {{0, 4}, {4, 2}},       {{1, 200}, {200, 600}}, {{2, 2, 3, 7}, {2, 2, 7, 1}}};
  uint32_t seed = 1;
  for (const auto& [sa, sb] : cases) {
    const Tensor a = tensor_of(sa, seed++), b = tensor_of(sb, seed++);
    const Ref want = reference_matmul(dense(a), dense(b));
    expect_close(matmul(a, b), want, sa[sa.rank() - 1], "matmul " + sa.to_string() + " x " + sb.to_string());
  }
}

TEST(MatMul, TransposedAndStridedOperandsAreReadInPlace) {
  const Tensor a = tensor_of({17, 9}, 3), b = tensor_of({20, 17}, 4);
  // a^T [9, 17] x b^T [17, 20]; a sliced every other column.
  const Tensor at = a.transpose(0, 1), bt = b.transpose(0, 1);
  expect_close(matmul(at, bt), reference_matmul(dense(at.contiguous()), dense(bt.contiguous())), 17, "transposed");
  const Tensor s = tensor_of({6, 40}, 5).slice(1, 0, 40, 2);  // [6, 20], stride 2
  expect_close(matmul(s, bt.transpose(0, 1)), reference_matmul(dense(s.contiguous()), dense(b)), 20, "strided");
}

TEST(MatMul, LinearWithAFusedEpilogue) {
  for (int64_t M : {1, 7, 65}) {
    const Tensor x = tensor_of({2, M, 33}, 10), w = tensor_of({19, 33}, 11), bias = tensor_of({19}, 12);
    x.sync();
    const int64_t before = dvm::stats().kernels_run;
    const Tensor y = gelu(linear(x, w, bias), GeluApprox::Tanh) * 0.5f;
    y.sync();
    EXPECT_EQ(dvm::stats().kernels_run - before, 1) << "the bias, gelu and scale run in the product's kernel";
    Ref lin = reference_matmul(dense(x), dense(w.transpose(0, 1).contiguous()));
    const Dense db = dense(bias);
    const std::vector<float> got = y.to_vector();
    ASSERT_EQ(y.shape(), (Shape{2, M, 19}));
    for (size_t i = 0; i < got.size(); ++i) {
      const double t = lin.value[i] + db.v[i % 19];
      const double want = 0.5 * 0.5 * t * (1 + std::tanh(0.7978845608028654 * (t + 0.044715 * t * t * t)));
      const double tol = 40 * 0x1p-24 * (lin.magnitude[i] + std::fabs(db.v[i % 19])) + 1e-6 * std::fabs(want) + 1e-12;
      ASSERT_NEAR(got[i], want, tol) << "M=" << M << " element " << i;
    }
  }
}

TEST(MatMul, BmmAndAddmm) {
  const Tensor a = tensor_of({3, 4, 5}, 20), b = tensor_of({3, 5, 6}, 21);
  expect_close(bmm(a, b), reference_matmul(dense(a), dense(b)), 5, "bmm");
  const Tensor p = tensor_of({4, 5}, 22), q = tensor_of({5, 6}, 23), in = tensor_of({6}, 24);
  const Tensor y = addmm(in, p, q, 0.5f, 2.0f);
  const Ref r = reference_matmul(dense(p), dense(q));
  const std::vector<float> got = y.to_vector();
  const Dense din = dense(in);
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = 0.5 * din.v[i % 6] + 2.0 * r.value[i];
    ASSERT_NEAR(got[i], want, 8 * 0x1p-24 * (2 * r.magnitude[i] + std::fabs(din.v[i % 6]))) << i;
  }
  // As torch: alpha 0 ignores the product and beta 0 the input, with their
  // infinities and NaNs.
  const float inf = std::numeric_limits<float>::infinity();
  const Tensor bad = Tensor::from_vector({inf, std::nanf(""), 1.0f, -inf}, {2, 2});
  const Tensor c = Tensor::from_vector({1.5f, -2.0f}, {2});
  EXPECT_EQ(addmm(c, bad, bad, 2.0f, 0.0f).to_vector(), (std::vector<float>{3.0f, -4.0f, 3.0f, -4.0f}));
  EXPECT_EQ(addmm(bad, c.reshape({2, 1}), c.reshape({1, 2}), 0.0f, 1.0f).to_vector(),
            (std::vector<float>{2.25f, -3.0f, -3.0f, 4.0f}));
  EXPECT_EQ(addmm(c, bad, bad, 0.0f, 0.0f).to_vector(), (std::vector<float>(4, 0.0f)));
  // Without the product the result is beta * input itself, signs of zero
  // included (a zero product added would make every -0 a +0).
  const Tensor zeros = Tensor::from_vector({-0.0f, 0.0f}, {2});
  auto sign_bits = [](const Tensor& t) {
    std::vector<bool> s;
    for (float v : t.to_vector()) s.push_back(std::signbit(v));
    return s;
  };
  EXPECT_EQ(sign_bits(addmm(zeros, bad, bad, 1.0f, 0.0f)), (std::vector<bool>{true, false, true, false}));
  EXPECT_EQ(sign_bits(addmm(zeros, bad, bad, -1.0f, 0.0f)), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(sign_bits(addmm(zeros.reshape({1, 2}).expand({2, 2}).contiguous(), bad, bad, -0.5f, -0.0f)),
            (std::vector<bool>{false, true, false, true}));
}

// A transpose times a vector runs as the vector times the transpose's
// input: the same products in the same order, so the bits of the product of
// the transpose made contiguous, at generated sizes.
TEST(MatMul, ATransposeTimesAVectorKeepsItsBits) {
  std::mt19937 rng(5);
  for (int t = 0; t < 12; ++t) {
    const int64_t K = 1 + static_cast<int64_t>(rng() % 700), M = 1 + static_cast<int64_t>(rng() % 300);
    const Tensor a = tensor_of({K, M}, 40 + static_cast<uint32_t>(t)), v = tensor_of({K}, 60 + static_cast<uint32_t>(t));
    const Tensor pending = a * 1.0f;  // exact: a pending input too
    for (const Tensor& base : {a, pending}) {
      const std::vector<float> got = matmul(base.transpose(0, 1), v).to_vector();
      const std::vector<float> want = matmul(base.transpose(0, 1).contiguous(), v).to_vector();
      ASSERT_EQ(got.size(), static_cast<size_t>(M));
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << "K " << K << " M " << M << " [" << i << "]";
    }
  }
}

// B broadcast over the batch dims next to M (grouped-query attention: one
// key cache per group of query heads) folds those dims into M: one product
// per remaining batch reads B in place, no copy of B per folded dim. Over
// generated shapes (leading dims equal, trailing dims of B 1, A's there 1 or
// more, transposed B as a key cache is), each element has the bits of the
// same product with B copied out to the full batch (the unfolded path), and
// is within the rounding bound of a double reference.
TEST(MatMul, BatchDimsWhereBIsOneFoldIntoRows) {
  std::mt19937 rng(77);
  for (int t = 0; t < 40; ++t) {
    const int lead = static_cast<int>(rng() % 3), trail = 1 + static_cast<int>(rng() % 2);
    const int64_t M = 1 + static_cast<int64_t>(rng() % 5), K = 1 + static_cast<int64_t>(rng() % 70);
    const int64_t N = 1 + static_cast<int64_t>(rng() % 90);
    Shape ba, bb;
    for (int i = 0; i < lead; ++i) {
      const int64_t e = 1 + static_cast<int64_t>(rng() % 3);
      ba.push_back(e);
      bb.push_back(e);
    }
    for (int i = 0; i < trail; ++i) {
      ba.push_back(1 + static_cast<int64_t>(rng() % 4));
      bb.push_back(1);
    }
    Shape sa = ba, sbt = bb;
    sa.push_back(M);
    sa.push_back(K);
    sbt.push_back(N);
    sbt.push_back(K);
    const Tensor a = tensor_of(sa, 500 + static_cast<uint32_t>(t));
    const int r = sbt.rank();
    const Tensor b = tensor_of(sbt, 600 + static_cast<uint32_t>(t)).transpose(r - 2, r - 1);  // [.., K, N] by columns
    Shape full = ba;
    full.push_back(K);
    full.push_back(N);
    const std::string what = "a " + sa.to_string() + " b " + b.shape().to_string();
    dvm::set_kernel_log(true);
    (void)dvm::take_kernel_log();
    const Tensor got = matmul(a, b);
    got.sync();
    const std::vector<KernelRun> log = dvm::take_kernel_log();
    dvm::set_kernel_log(false);
    for (const KernelRun& k : log) EXPECT_EQ(k.form, "contraction") << what << ": B was copied (" << k.form << ")";
    const std::vector<float> g = got.to_vector(), w = matmul(a, b.expand(full).contiguous()).to_vector();
    ASSERT_EQ(g.size(), w.size()) << what;
    for (size_t i = 0; i < g.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(w[i])) << what << " [" << i << "]";
    expect_close(got, reference_matmul(dense(a), dense(b.contiguous())), K, what);
  }
}

// K is never split: the bits do not depend on the thread count.
TEST(MatMul, ThreadCountsGiveTheSameBits) {
  const Tensor a = tensor_of({2, 300, 257}, 30), b = tensor_of({257, 700}, 31), r = tensor_of({700}, 32);
  auto run = [&](int threads) {
    dvm::set_num_threads(threads);
    return (relu(matmul(a, b)) + r).to_vector();
  };
  const int before = dvm::num_threads();
  const std::vector<float> one = run(1), four = run(4);
  dvm::set_num_threads(before);
  ASSERT_EQ(one.size(), four.size());
  for (size_t i = 0; i < one.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(one[i]), std::bit_cast<uint32_t>(four[i])) << i;
}

// A product stored as it is goes from the cube straight into its output;
// with an epilogue (here * 1, exact) it goes through a block buffer. The
// sums are the same, so the bits are, at shapes that cross the launch's
// blocks (240 rows, 512 columns), in a batch, with one row, on 1 and 3
// threads (a write past the output is the ASan job's to see).
// bmm of many tiny matrices runs as batches of the cube's tiny products
// (backends/cube/gemm.h: tiny_batch): generated shapes (1s, odd sizes, up to
// the tiny limit, a broadcast batch operand), each element bit-equal to the
// documented order (ascending k from +0, fused on the SIMD ISAs) on every
// tier, within the rounding bound of a double reference.
TEST(MatMul, TinyBatchedProductsRunAsOneBatchWithTheDocumentedBits) {
  std::mt19937 gen(4242);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  const bool fused = isa() != "portable";
  for (int c = 0; c < 16; ++c) {
    const int64_t P = pick(1, 300), M = c == 0 ? 1 : pick(1, 16), K = c == 1 ? 1 : pick(1, 16),
                  N = c == 2 ? 1 : pick(1, 16);
    const bool bcast_b = c % 4 == 3;  // one B for every product: a stride of 0
    const std::vector<float> av = random_vec(P * M * K, static_cast<uint32_t>(2 * c + 1));
    const std::vector<float> bv = random_vec((bcast_b ? 1 : P) * K * N, static_cast<uint32_t>(2 * c + 2));
    const std::string what = "bmm [" + std::to_string(P) + ", " + std::to_string(M) + ", " + std::to_string(K) +
                             "] x [" + (bcast_b ? "1 expanded" : std::to_string(P)) + ", " + std::to_string(K) +
                             ", " + std::to_string(N) + "]";
    auto run = [&] {
      Tensor a = Tensor::from_blob(av.data(), {P, M, K});
      Tensor b = Tensor::from_blob(bv.data(), {bcast_b ? 1 : P, K, N});
      if (bcast_b) b = b.expand({P, K, N});
      return bmm(a, b).to_vector();
    };
    std::vector<std::vector<float>> got;
    for (TierMode t : {TierMode::Off, TierMode::Eager}) {
      set_tier_mode(t);
      const int64_t before = backends::cube::tiny_products();
      got.push_back(run());
      EXPECT_EQ(backends::cube::tiny_products() - before, P) << what << ": the products left the tiny batch";
    }
    set_tier_mode(TierMode::Auto);
    ASSERT_EQ(got[0].size(), static_cast<size_t>(P * M * N)) << what;
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * sizeof(float)), 0)
        << what << ": the tiers differ";
    const double u = std::ldexp(1.0, -24), gamma = (K + 1) * u / (1.0 - (K + 1) * u);
    int64_t bad = 0;
    for (int64_t p = 0; p < P; ++p)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const float* a = av.data() + (p * M + i) * K;
          const float* b = bv.data() + (bcast_b ? 0 : p) * K * N + j;
          float acc = 0.0f;
          double ref = 0.0, mag = 0.0;
          for (int64_t k = 0; k < K; ++k) {
            acc = fused ? std::fmaf(a[k], b[k * N], acc) : acc + a[k] * b[k * N];
            ref += static_cast<double>(a[k]) * b[k * N];
            mag += std::fabs(static_cast<double>(a[k]) * b[k * N]);
          }
          const float g = got[1][static_cast<size_t>((p * M + i) * N + j)];
          if ((std::bit_cast<uint32_t>(g) != std::bit_cast<uint32_t>(acc) || !(std::fabs(g - ref) <= gamma * mag)) &&
              bad++ < 3)
            ADD_FAILURE() << what << ": C[" << p << "][" << i << "][" << j << "] = " << g << ", ordered sum " << acc
                          << ", reference " << ref;
        }
    EXPECT_EQ(bad, 0) << what;
  }
}

TEST(MatMul, DirectStoreMatchesTheEpiloguePathBitForBit) {
  const int before = dvm::num_threads();
  struct Case {
    Shape a, b;
  };
  const Case cases[] = {{{1, 300}, {300, 1029}}, {{241, 65}, {65, 513}}, {{3, 250, 17}, {3, 17, 40}},
                        {{481, 7}, {7, 1}},     {{5, 64}, {64, 1024}},   {{2, 1, 33}, {33, 600}}};
  uint32_t seed = 40;
  for (int threads : {1, 3}) {
    dvm::set_num_threads(threads);
    for (const Case& c : cases) {
      const Tensor a = tensor_of(c.a, seed++), b = tensor_of(c.b, seed++);
      const std::vector<float> direct = matmul(a, b).to_vector(), through = (matmul(a, b) * 1.0f).to_vector();
      ASSERT_EQ(direct.size(), through.size());
      for (size_t i = 0; i < direct.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(direct[i]), std::bit_cast<uint32_t>(through[i]))
            << c.a.to_string() << " x " << c.b.to_string() << " at " << i << ", " << threads << " threads";
      expect_close(matmul(a, b), reference_matmul(dense(a), dense(b)), c.a[c.a.rank() - 1], "direct store");
    }
  }
  dvm::set_num_threads(before);
}

// An epilogue op reading one of the product's operands (here a, broadcast
// by lt) gives a kernel that does not depend on what the lowering's stack
// held: the second flush replays the first one's plan, and under
// DVM_PLAN_CHECK (set here and by ctest) the replay is lowered again and
// must give the same bytecode. The epilogue's K stride was uninitialized.
TEST(MatMul, EpilogueReadingAnOperandLowersTheSameOnReplay) {
  fuser::set_plan_check(true);
  for (int run = 0; run < 3; ++run) {
    const Tensor a = tensor_of({8, 8, 1}, 40), c = tensor_of({8, 8}, 41);
    const Tensor b = tensor_of({8, 8, 1}, 42).transpose(1, 2);  // [8, 1, 8]
    const Tensor m = lt(c, a);                                   // [8, 8, 8]
    const Tensor y = where(m, reciprocal(matmul(a, b)), Tensor(1.0f));
    std::vector<float> got;
    ASSERT_NO_THROW(got = y.to_vector()) << "run " << run;
    const Dense da = dense(a), db = dense(b), dc = dense(c);
    for (int64_t i = 0; i < 8; ++i)
      for (int64_t j = 0; j < 8; ++j)
        for (int64_t k = 0; k < 8; ++k) {
          const double x = da.at({i, j, 0}), p = x * db.at({i, 0, k});  // K = 1: the product is exact
          const double want = dc.at({j, k}) < x ? static_cast<double>(1.0f / static_cast<float>(p)) : 1.0;
          ASSERT_EQ(got[static_cast<size_t>((i * 8 + j) * 8 + k)], static_cast<float>(want))
              << i << " " << j << " " << k;
        }
  }
  const char* env = std::getenv("DVM_PLAN_CHECK");
  fuser::set_plan_check(env && std::string(env) == "1");
}

// Elementwise ops that feed only one operand of a product (a scale, a
// broadcast multiply, a widening cast, activations) run in the product's
// kernel while the cube packs that operand. Their values are the f32
// values the same ops give when stored first, so the product has the same
// bits; and it is within the K-sum bound of a double reference on those
// values. Shapes cross the cube's K panels, operands are transposed,
// broadcast and batched.
TEST(MatMul, OperandProloguesRunInTheProductsKernel) {
  using Fn = Tensor (*)(const Tensor&);
  struct Case {
    const char* name;
    Shape sa, sb;
    Fn fa, fb;
    Dtype ta = Dtype::F32, tb = Dtype::F32;
    int kernels = 1;  // 2: the operand is 16-bit, rounded by its own kernel's store (as torch rounds it)
  };
  static Tensor col_scale, k_scale;  // read by the cases below
  const Fn same = [](const Tensor& t) { return t; };
  const Case cases[] = {
      {"x * s", {65, 300}, {300, 33}, [](const Tensor& t) { return t * 0.37f; }, same},
      {"relu(w) - c", {7, 17}, {17, 600}, same, [](const Tensor& t) { return relu(t) - 0.25f; }},
      {"x * v[k]", {33, 300}, {300, 600}, [](const Tensor& t) { return t * k_scale; }, same},
      {"x * v[m, 1]", {9, 40}, {40, 5}, [](const Tensor& t) { return t * col_scale; }, same},
      {"x^T * 2", {300, 9}, {300, 70}, [](const Tensor& t) { return t.transpose(0, 1) * 2.0f; }, same},
      {"f16 x cast", {1, 300}, {300, 513}, [](const Tensor& t) { return t.to(Dtype::F32); }, same, Dtype::F16},
      {"bf16 x * s @ bf16 w", {70, 300}, {300, 600}, [](const Tensor& t) { return t * 0.37f; }, same, Dtype::BF16,
       Dtype::BF16, 2},
      {"f16 x cast, * s @ bf16 w cast", {70, 300}, {300, 600}, [](const Tensor& t) { return t.to(Dtype::F32) * 0.37f; },
       [](const Tensor& t) { return t.to(Dtype::F32); }, Dtype::F16, Dtype::BF16},
      {"exp(x) @ sigmoid(w)", {17, 63}, {63, 65}, [](const Tensor& t) { return exp(t); },
       [](const Tensor& t) { return sigmoid(t); }},
      {"bmm(q * s, k)", {3, 20, 64}, {3, 64, 20}, [](const Tensor& t) { return t * 0.125f; }, same},
      {"2-D prologue, batched b", {20, 31}, {4, 31, 7}, [](const Tensor& t) { return t - 1.0f; }, same},
      {"batched prologue, 2-D b", {2, 1, 31}, {31, 700}, [](const Tensor& t) { return abs(t); },
       [](const Tensor& t) { return t * t; }},
  };
  uint32_t seed = 70;
  for (const Case& c : cases) {
    const int64_t K = c.sb[c.sb.rank() - 2];
    k_scale = tensor_of({K}, seed++);
    col_scale = tensor_of({c.sa[0], 1}, seed++);
    Tensor a = tensor_of(c.sa, seed++), b = tensor_of(c.sb, seed++);
    if (c.ta != Dtype::F32) a = a.to(c.ta);
    if (c.tb != Dtype::F32) b = b.to(c.tb);
    for (const Tensor& t : {a, b, k_scale, col_scale}) t.sync();
    const int64_t before = dvm::stats().kernels_run;
    const Tensor fused = matmul(c.fa(a), c.fb(b));
    fused.sync();
    EXPECT_EQ(dvm::stats().kernels_run - before, c.kernels) << c.name << ": the prologues run in the product's kernel";
    // The operands stored first (their handles held), then multiplied.
    const Tensor pa = c.fa(a), pb = c.fb(b);
    pa.sync();
    pb.sync();
    const std::vector<float> got = fused.to_vector(), stored = matmul(pa, pb).to_vector();
    ASSERT_EQ(got.size(), stored.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(stored[i])) << c.name << " element " << i;
    expect_close(fused, reference_matmul(dense(pa), dense(pb)), K, c.name, fused.dtype() == Dtype::BF16 ? 0x1p-8 : 0.0);
  }
  k_scale = col_scale = Tensor();
}

// A product that reads its prologue's value through a view walking whole
// axes (linear's transposed weight, a 1-D operand's reshape, a permute, an
// expand over the batch) still runs it in the product's kernel, with the
// bits of the operand stored first. A view that does not walk whole axes (a
// slice), or one something else also reads, stores the value first.
TEST(MatMul, ProloguesReadThroughViewsRunInTheProductsKernel) {
  using Fn = Tensor (*)(const Tensor&, const Tensor&);
  struct Case {
    const char* name;
    Shape sa, sb;
    Fn product;  // of the leaves a and b
    Dtype tb = Dtype::F32;
    int kernels = 1;
  };
  const Case cases[] = {
      {"linear(x, w * s)", {9, 300}, {70, 300}, [](const Tensor& a, const Tensor& b) { return linear(a, b * 0.37f); }},
      {"linear(x, w * s), one row", {1, 600}, {513, 600},
       [](const Tensor& a, const Tensor& b) { return linear(a, relu(b) * 0.5f); }},
      {"linear(x, bf16 w cast)", {5, 300}, {33, 300},
       [](const Tensor& a, const Tensor& b) { return linear(a, b.to(Dtype::F32)); }, Dtype::BF16},
      {"linear(x, f16 w cast * s)", {5, 300}, {33, 300},
       [](const Tensor& a, const Tensor& b) { return linear(a, b.to(Dtype::F32) * 0.25f); }, Dtype::F16},
      {"1-D a * s", {300}, {300, 65}, [](const Tensor& a, const Tensor& b) { return matmul(a * 2.0f, b); }},
      {"1-D b * s", {7, 300}, {300}, [](const Tensor& a, const Tensor& b) { return matmul(a, exp(b * 0.01f)); }},
      {"bmm(q, (k * s)^T)", {3, 20, 64}, {3, 33, 64},
       [](const Tensor& a, const Tensor& b) { return bmm(a, (b * 0.125f).transpose(1, 2)); }},
      {"(x * s)^T as a", {300, 17}, {300, 40},
       [](const Tensor& a, const Tensor& b) { return matmul((a - 1.0f).transpose(0, 1), b); }},
      {"permuted a", {4, 300, 2}, {300, 9},
       [](const Tensor& a, const Tensor& b) { return matmul(abs(a).permute({2, 0, 1}), b); }},
      {"expanded b", {2, 7, 40}, {40, 11},
       [](const Tensor& a, const Tensor& b) { return matmul(a, (b * 3.0f).expand({2, 40, 11})); }},
      {"sliced b: stored", {6, 40}, {40, 12},
       [](const Tensor& a, const Tensor& b) { return matmul(a, (b * 3.0f).slice(1, 2, 12)); }, Dtype::F32, 2},
      {"value read by the epilogue too: stored", {40, 40}, {40, 40},
       [](const Tensor& a, const Tensor& b) {
         const Tensor t = b * 3.0f;
         return matmul(a, t.transpose(0, 1)) + t;  // t stored; the product's epilogue takes the add
       },
       Dtype::F32, 2},
      {"view read by two products: stored", {6, 40}, {40, 40},
       [](const Tensor& a, const Tensor& b) {
         const Tensor t = (b * 3.0f).transpose(0, 1);
         return matmul(a, t) + matmul(a * 2.0f, t);  // t, two products (a * 2 a prologue, one takes the add)
       },
       Dtype::F32, 3},
  };
  uint32_t seed = 170;
  for (const Case& c : cases) {
    Tensor a = tensor_of(c.sa, seed++), b = tensor_of(c.sb, seed++);
    if (c.tb != Dtype::F32) b = b.to(c.tb);
    a.sync();
    b.sync();
    const int64_t before = dvm::stats().kernels_run;
    const Tensor fused = c.product(a, b);
    fused.sync();
    EXPECT_EQ(dvm::stats().kernels_run - before, c.kernels) << c.name;
    // Again: a replay of the cached plan, checked against a fresh lowering.
    fuser::set_plan_check(true);
    const Tensor again = c.product(a, b);
    std::vector<float> replayed;
    ASSERT_NO_THROW(replayed = again.to_vector()) << c.name;
    const char* env = std::getenv("DVM_PLAN_CHECK");
    fuser::set_plan_check(env && std::string(env) == "1");
    // Every value computed alone, its handle held: each op its own kernel.
    std::vector<float> stored;
    {
      const testing::TraceLimitGuard guard;
      dvm::set_trace_limit(1);
      stored = c.product(a, b).to_vector();
    }
    const std::vector<float> got = fused.to_vector();
    ASSERT_EQ(got.size(), stored.size()) << c.name;
    ASSERT_EQ(replayed.size(), stored.size()) << c.name;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(stored[i])) << c.name << " element " << i;
      ASSERT_EQ(std::bit_cast<uint32_t>(replayed[i]), std::bit_cast<uint32_t>(stored[i])) << c.name << " element " << i;
    }
  }
}

// Generated prologues: random sizes (empty and size-1 axes included),
// chains of one to three ops on each operand reading broadcast vectors,
// scalars and transposed leaves, on 1-D, 2-D and batched products. The
// fused product must have the bits of the product of the operands stored
// first (each chain computed alone, its handle held).
TEST(MatMul, GeneratedProloguesMatchTheStoredOperands) {
  std::mt19937 rng(2026);
  const int64_t dims[] = {0, 1, 2, 3, 5, 16, 17, 33, 100};
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  uint32_t seed = 1000;
  // One op of a chain on t (shape s), reading the extra operand e.
  auto step = [&](const Tensor& t, const Tensor& e, int op) -> Tensor {
    switch (op) {
      case 0: return t * 0.75f;
      case 1: return t + e;
      case 2: return relu(t - e);
      case 3: return exp(t * 0.25f);
      case 4: return maximum(t, e) * e;
      case 5: return where(gt(t, 0.0f), t, e);
      default: return tanh(t) + 1.0f;
    }
  };
  int fused_prologues = 0;  // products whose prologues ran in their kernel
  for (int iter = 0; iter < 150; ++iter) {
    const int64_t M = dims[pick(9)], K = dims[pick(9)], N = dims[pick(9)];
    const int64_t batch = pick(3) == 0 ? 2 : 0;  // 0: no batch dim
    Shape sa = batch ? Shape{batch, M, K} : Shape{M, K}, sb = Shape{K, N};
    if (pick(4) == 0) sa = Shape{K};  // 1-D a: the product reads the chain's value through a reshape
    // b's chain computed as [N, K] and read transposed (as linear's weight)?
    const bool b_transposed = pick(3) == 0;
    // The leaves: a possibly transposed, the extra operands broadcast.
    Tensor a = pick(3) == 0 && sa.rank() == 2 ? tensor_of({K, M}, seed++).transpose(0, 1) : tensor_of(sa, seed++);
    const Tensor b = tensor_of(b_transposed ? Shape{N, K} : sb, seed++);
    const Shape ea_shape = pick(2) ? Shape{K} : (sa.rank() >= 2 ? Shape{sa[sa.rank() - 2], 1} : Shape{1});
    const Tensor ea = tensor_of(ea_shape, seed++);
    const Tensor eb = pick(2) ? tensor_of({b_transposed ? K : N}, seed++) : Tensor(0.5f);
    const int na = pick(4), nb = pick(3);
    int ops_a[3], ops_b[3];
    for (int& o : ops_a) o = pick(7);
    for (int& o : ops_b) o = pick(7);
    auto chain_a = [&] {
      Tensor t = a;
      for (int i = 0; i < na; ++i) t = step(t, ea, ops_a[i]);
      return t;
    };
    auto chain_b = [&] {
      Tensor t = b;
      for (int i = 0; i < nb; ++i) t = step(t, eb, ops_b[i]);
      return b_transposed ? t.transpose(0, 1) : t;
    };
    const std::string what = "iteration " + std::to_string(iter) + ": " + sa.to_string() + " x " + sb.to_string() +
                             (b_transposed ? " (b read transposed)" : "") +
                             ", " + std::to_string(na) + " and " + std::to_string(nb) + " prologue ops";
    std::vector<float> fused;
    for (const Tensor& t : {a, b, ea, eb}) t.sync();
    const int64_t before = dvm::stats().kernels_run;
    // (The chains' handles die with the statement: the flush sees none.)
    ASSERT_NO_THROW({
      const Tensor y = matmul(chain_a(), chain_b());
      fused = y.to_vector();
    }) << what;
    fused_prologues += na + nb > 0 && M * N > 0 && dvm::stats().kernels_run - before == 1;
    const Tensor pa = chain_a(), pb = chain_b();
    pa.sync();
    pb.sync();
    const std::vector<float> stored = matmul(pa, pb).to_vector();
    ASSERT_EQ(fused.size(), stored.size()) << what;
    for (size_t i = 0; i < fused.size(); ++i)
      ASSERT_EQ(std::bit_cast<uint32_t>(fused[i]), std::bit_cast<uint32_t>(stored[i])) << what << " element " << i;
    expect_close(matmul(pa, pb), reference_matmul(dense(pa), dense(pb)), K, what);
  }
  EXPECT_GE(fused_prologues, 50) << "the generator should exercise fused prologues";
}

// A prologue, the product and an epilogue with a residual: one kernel, with
// the bits of the scaled input stored first.
TEST(MatMul, LinearWithAPrologueAndAnEpilogueIsOneKernel) {
  const Tensor x = tensor_of({9, 33}, 95), w = tensor_of({19, 33}, 96), b = tensor_of({19}, 97), r = tensor_of({9, 19}, 98);
  for (const Tensor& t : {x, w, b, r}) t.sync();
  const int64_t before = dvm::stats().kernels_run;
  const Tensor y = gelu(linear(x * 0.5f, w, b)) + r;
  y.sync();
  EXPECT_EQ(dvm::stats().kernels_run - before, 1);
  const Tensor xs = x * 0.5f;
  xs.sync();
  const std::vector<float> got = y.to_vector(), want = (gelu(linear(xs, w, b)) + r).to_vector();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i])) << i;
}

// A decoded token's linear over 16-bit weights (x @ W^T, one row, W stored
// as torch.nn.Linear keeps it): the cube reads W's 16-bit rows in place and
// widens them as it reads. The sums are those of the same product on
// float32 copies of both operands (every 16-bit value widens exactly), so
// after the one rounding of the 16-bit store the bits are the same; and the
// result is within the K-sum bound of a double reference plus that
// rounding. Shapes cover K and N tails of the register blocks and rows of W
// further apart than K (a view).
TEST(MatMul, OneRowLinearOverSixteenBitWeights) {
  uint32_t seed = 900;
  for (Dtype type : {Dtype::F16, Dtype::BF16}) {
    for (const auto& [K, N] : {std::pair<int64_t, int64_t>{256, 768}, {37, 17}, {300, 513}, {16, 16}, {5, 3}}) {
      const std::string what = std::string(dtype_name(type)) + " K " + std::to_string(K) + " N " + std::to_string(N);
      const Tensor x = tensor_of({1, K}, seed++).to(type);
      const Tensor wide = tensor_of({N, K + 3}, seed++).to(type);
      const Tensor w = wide.narrow(1, 0, K);  // rows K + 3 apart
      x.sync();
      wide.sync();
      const Tensor got = linear(x, w);
      const Tensor xf = x.to(Dtype::F32), wf = w.to(Dtype::F32).contiguous();
      xf.sync();
      wf.sync();
      const Tensor want = linear(xf, wf).to(type);
      ASSERT_EQ(got.dtype(), type) << what;
      const std::vector<float> g = got.to(Dtype::F32).to_vector(), e = want.to(Dtype::F32).to_vector();
      ASSERT_EQ(g.size(), e.size()) << what;
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(g[i]), std::bit_cast<uint32_t>(e[i])) << what << " element " << i;
      expect_close(got.to(Dtype::F32), reference_matmul(dense(xf), dense(wf.transpose(0, 1).contiguous())), K, what,
                   type == Dtype::BF16 ? 0x1p-8 : 0x1p-11);
    }
  }
}

// An operand's elementwise value that something else also reads (here the
// user, and a sum) is stored by its own kernel, and the product reads it.
TEST(MatMul, AnOperandValueReadElsewhereIsStored) {
  const Tensor x = tensor_of({9, 40}, 90), w = tensor_of({40, 11}, 91);
  x.sync();
  w.sync();
  const int64_t before = dvm::stats().kernels_run;
  const Tensor y = x * 3.0f;
  const Tensor p = matmul(y, w);
  p.sync();
  EXPECT_EQ(dvm::stats().kernels_run - before, 2) << "y is held by the user: stored, then read";
  expect_close(p, reference_matmul(dense(y), dense(w)), 40, "held operand");
  Tensor q, zs;
  {
    const Tensor z = exp(x);  // no handle left at the flush: the sum's read keeps it
    q = matmul(z, w);
    zs = z.sum();
  }
  q.sync();
  const Tensor z = exp(x);
  expect_close(q, reference_matmul(dense(z), dense(w)), 40, "operand also summed");
  double total = 0;
  for (double v : dense(z).v) total += v;
  EXPECT_NEAR(zs.item(), total, 400 * 0x1p-24 * total);
}

TEST(MatMul, ShapesThatDoNotContractAreErrors) {
  using testing::expect_error;
  const Tensor a = tensor_of({3, 5}, 1), b = tensor_of({4, 6}, 2), s = Tensor::scalar(2.0f);
  const Tensor a3 = tensor_of({2, 3, 5}, 3), b3 = tensor_of({3, 5, 2}, 4), w = tensor_of({6, 4}, 5),
               w2 = tensor_of({6, 5}, 5), bias = tensor_of({5}, 6);
  expect_error("inner dims", [&] { (void)matmul(a, b); }, {"matmul", "[3, 5]", "[4, 6]", "inner"});
  expect_error("0-d", [&] { (void)matmul(s, a); }, {"matmul", "at least one dimension"});
  expect_error("batch", [&] { (void)matmul(a3, b3); }, {"matmul", "batch", "[2]", "[3]"});
  expect_error("bmm rank", [&] { (void)bmm(a, b); }, {"bmm", "[B, M, K]"});
  expect_error("linear weight", [&] { (void)linear(a, w); }, {"linear", "[out, in]", "[6, 4]"});
  expect_error("linear bias", [&] { (void)linear(a, w2, bias); }, {"linear", "bias", "[6]"});
  expect_error("undefined", [&] { (void)matmul(a, Tensor()); }, {"matmul", "undefined"});
  // A bias or an addmm input of another type than the operands is refused,
  // as torch refuses it (no silent promotion of a 16-bit product).
  const Tensor a16 = a.to(Dtype::F16), w16 = tensor_of({6, 5}, 7).to(Dtype::F16), w16t = w16.transpose(0, 1),
               b32 = tensor_of({6}, 8);
  for (const Tensor& t : {a16, w16, w16t, b32}) t.sync();
  expect_error("linear bias type", [&] { (void)linear(a16, w16, b32); }, {"linear", "bias float32[6]", "float16"});
  expect_error("addmm input type", [&] { (void)addmm(b32, a16, w16t); }, {"addmm", "input float32[6]", "float16"});
  EXPECT_EQ(linear(a16, w16, tensor_of({6}, 8).to(Dtype::F16)).dtype(), Dtype::F16);
}

}  // namespace
}  // namespace dvm
