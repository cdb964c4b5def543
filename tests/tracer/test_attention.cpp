// scaled_dot_product_attention against a double-precision reference over
// generated shapes (heads as batch axes, causal, bool and float masks), and
// read through a KVCache as a decoder's step reads it.
#include "tests/tracer/tracer_testing.h"

namespace dvm::testing {
namespace {

class Attention : public IsaTest {};

std::vector<float> randoms(int64_t n, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = u(rng);
  return v;
}

// out[b, i, :] = softmax_j(q[b, i] . k[b, j] * scale + mask) v[b, j, :] in
// double; mask(i, j) is false for keys left out, add(i, j) is added.
std::vector<double> reference(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                              int64_t B, int64_t L, int64_t S, int64_t E, int64_t Ev, double scale,
                              const std::function<bool(int64_t, int64_t)>& keep,
                              const std::function<double(int64_t, int64_t)>& add) {
  std::vector<double> out(static_cast<size_t>(B * L * Ev), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L; ++i) {
      std::vector<double> s(static_cast<size_t>(S));
      double m = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double d = 0;
        for (int64_t e = 0; e < E; ++e)
          d += static_cast<double>(q[static_cast<size_t>((b * L + i) * E + e)]) * k[static_cast<size_t>((b * S + j) * E + e)];
        s[static_cast<size_t>(j)] = keep(i, j) ? d * scale + add(i, j) : -INFINITY;
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double z = 0;
      for (double& x : s) z += (x = std::exp(x - m));
      for (int64_t j = 0; j < S; ++j)
        for (int64_t e = 0; e < Ev; ++e)
          out[static_cast<size_t>((b * L + i) * Ev + e)] +=
              s[static_cast<size_t>(j)] / z * v[static_cast<size_t>((b * S + j) * Ev + e)];
    }
  return out;
}

// Errors against double: the products and the softmax each add a few
// float roundings per term; 2e-5 relative to the largest |value| bounds them
// for the sizes here (E, S <= 80, values in [-1, 1]).
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 2e-5 * std::max(1.0, std::abs(want[i]))) << what << " element " << i;
}

TEST_P(Attention, GeneratedShapesMatchADoubleReference) {
  std::mt19937 rng(21);
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t B = 1 + static_cast<int64_t>(rng() % 2), H = 1 + static_cast<int64_t>(rng() % 3);
    const int64_t L = 1 + static_cast<int64_t>(rng() % 20), S = 1 + static_cast<int64_t>(rng() % 40);
    const int64_t E = 1 + static_cast<int64_t>(rng() % 40), Ev = 1 + static_cast<int64_t>(rng() % 40);
    const int kind = static_cast<int>(rng() % 4);  // none, causal, bool mask, float mask
    const int64_t BH = B * H;
    const std::vector<float> q = randoms(BH * L * E, rng), k = randoms(BH * S * E, rng), v = randoms(BH * S * Ev, rng);
    std::vector<uint8_t> mbits(static_cast<size_t>(L * S));
    std::vector<float> madd(static_cast<size_t>(L * S));
    for (size_t i = 0; i < mbits.size(); ++i) {
      mbits[i] = (rng() % 4 != 0) || i % static_cast<size_t>(S) == 0;  // every query keeps key 0
      madd[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4) / 4.0f;
    }
    const Tensor tq = Tensor::from_vector(q, Shape{B, H, L, E}), tk = Tensor::from_vector(k, Shape{B, H, S, E});
    const Tensor tv = Tensor::from_vector(v, Shape{B, H, S, Ev});
    Tensor mask;
    if (kind == 2) mask = Tensor::from_vector(std::vector<bool>(mbits.begin(), mbits.end()), Shape{L, S});
    if (kind == 3) mask = Tensor::from_vector(madd, Shape{L, S});
    const float scale = rng() % 2 ? 0.0f : 0.3f;
    const Tensor y = scaled_dot_product_attention(tq, tk, tv, mask, kind == 1, scale);
    ASSERT_EQ(y.shape(), (Shape{B, H, L, Ev}));
    const double sc = scale > 0 ? 0.3f : 1.0 / std::sqrt(static_cast<double>(E));
    const auto want = reference(
        q, k, v, BH, L, S, E, Ev, sc,
        [&](int64_t i, int64_t j) { return kind == 1 ? j <= i : kind == 2 ? mbits[static_cast<size_t>(i * S + j)] != 0 : true; },
        [&](int64_t i, int64_t j) { return kind == 3 ? static_cast<double>(madd[static_cast<size_t>(i * S + j)]) : 0.0; });
    expect_close(y.to_vector(), want, "iteration " + std::to_string(iter) + " kind " + std::to_string(kind));
  }
}

TEST_P(Attention, DecodeStepsThroughACacheMatchFullAttention) {
  std::mt19937 rng(4);
  const int64_t H = 2, E = 16, steps = 12;
  KVCache kc(Shape{1, H, 32, E}, 2), vc(Shape{1, H, 32, E}, 2);
  std::vector<std::vector<float>> ks, vs;
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<float> q = randoms(H * E, rng), k = randoms(H * E, rng), v = randoms(H * E, rng);
    ks.push_back(k);
    vs.push_back(v);
    const Tensor kall = kc.append(Tensor::from_vector(k, Shape{1, H, 1, E}));
    const Tensor vall = vc.append(Tensor::from_vector(v, Shape{1, H, 1, E}));
    const Tensor y = scaled_dot_product_attention(Tensor::from_vector(q, Shape{1, H, 1, E}), kall, vall);
    // The reference lays the cached rows out per head.
    std::vector<float> kk, vv;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j <= t; ++j)
        for (int64_t e = 0; e < E; ++e) {
          kk.push_back(ks[static_cast<size_t>(j)][static_cast<size_t>(h * E + e)]);
          vv.push_back(vs[static_cast<size_t>(j)][static_cast<size_t>(h * E + e)]);
        }
    const auto want = reference(q, kk, vv, H, 1, t + 1, E, E, 1.0 / std::sqrt(16.0), [](int64_t, int64_t) { return true; },
                                [](int64_t, int64_t) { return 0.0; });
    expect_close(y.to_vector(), want, "step " + std::to_string(t));
  }
}

// Softmax over a product's scores is one row kernel after the product,
// whatever the scores' rank: x - max(x) cannot join the product's epilogue
// (max reads the product's result), so it joins max's row kernel and reads
// the scores from memory. Attention without a mask is three kernels (a
// product with its scale, the row kernel, a product), with a mask the mask
// joins the first product's epilogue (plus a kernel for a mask computed
// from a smaller shape). Values are checked against double above.
TEST(AttentionKernels, SoftmaxOverAProductIsOneRowKernel) {
  auto kernels = [](const std::function<Tensor()>& f) {
    const int64_t before = dvm::stats().kernels_run;
    f().sync();
    return dvm::stats().kernels_run - before;
  };
  const Tensor q2 = Tensor::normal({5, 8}, 1), k2 = Tensor::normal({7, 8}, 2);
  const Tensor q = Tensor::normal({2, 3, 5, 8}, 3), k = Tensor::normal({2, 3, 7, 8}, 4), v = Tensor::normal({2, 3, 7, 6}, 5);
  for (const Tensor* t : {&q2, &k2, &q, &k, &v}) t->sync();
  EXPECT_EQ(kernels([&] { return softmax(matmul(q2, k2.transpose(0, 1)), -1); }), 2);
  EXPECT_EQ(kernels([&] { return softmax(matmul(q2, k2.transpose(0, 1)) * 0.5f, -1); }), 2);
  EXPECT_EQ(kernels([&] { return softmax(matmul(q, k.transpose(-2, -1)), -1); }), 2);
  EXPECT_EQ(kernels([&] { return scaled_dot_product_attention(q, k, v, Tensor(), false, 0.0f); }), 3);
  const Tensor mask = Tensor::from_vector(std::vector<bool>(35, true), {5, 7});
  EXPECT_EQ(kernels([&] { return scaled_dot_product_attention(q, k, v, mask, false, 0.0f); }), 4);
}

TEST(AttentionErrors, NameTheOpAndTheShapes) {
  const Tensor q = Tensor::zeros(Shape{2, 3, 4}), k = Tensor::zeros(Shape{2, 5, 6}), v = Tensor::zeros(Shape{2, 5, 4});
  const Tensor m = Tensor::zeros(Shape{3, 5});
  for (const Tensor* t : {&q, &k, &v, &m}) t->sync();
  expect_error("mismatched E", [&] { (void)scaled_dot_product_attention(q, k, v); },
               {"scaled_dot_product_attention", "[2, 3, 4]", "[2, 5, 6]"});
  expect_error("mask and causal", [&] { (void)scaled_dot_product_attention(q, v, v, m, true); },
               {"scaled_dot_product_attention", "is_causal"});
  const Tensor mi = m.to(Dtype::I32);
  mi.sync();
  expect_error("an int32 mask", [&] { (void)scaled_dot_product_attention(q, v, v, mi); },
               {"scaled_dot_product_attention", "int32", "bool", "floating"});
  // Batches that do not broadcast, a mask that does not fit the scores and
  // mixed types name this op and the caller's shapes (not matmul's view of
  // a transposed k, nor add or masked_fill).
  const Tensor q2 = Tensor::zeros(Shape{2, 2, 4}), k3 = Tensor::zeros(Shape{3, 3, 4}), k1 = Tensor::zeros(Shape{1, 3, 4});
  const Tensor mask22 = Tensor::zeros(Shape{2, 2}), k16 = k1.to(Dtype::F16);
  const Tensor bool22 = gt(mask22, 0.0f);
  for (const Tensor* t : {&q2, &k3, &k1, &mask22, &k16, &bool22}) t->sync();
  expect_error("batches", [&] { (void)scaled_dot_product_attention(q2, k3, k3); },
               {"scaled_dot_product_attention", "batch", "float32[2, 2, 4]", "float32[3, 3, 4]"});
  expect_error("a float mask", [&] { (void)scaled_dot_product_attention(q2, k1, k1, mask22); },
               {"scaled_dot_product_attention", "attn_mask float32[2, 2]", "[2, 2, 3]"});
  expect_error("a bool mask", [&] { (void)scaled_dot_product_attention(q2, k1, k1, bool22); },
               {"scaled_dot_product_attention", "attn_mask bool[2, 2]", "[2, 2, 3]"});
  expect_error("mixed types", [&] { (void)scaled_dot_product_attention(q2, k16, k1); },
               {"scaled_dot_product_attention", "float32[2, 2, 4]", "float16[1, 3, 4]", "one floating type"});
}

// scale <= 0 asks for 1/sqrt(E); a NaN scale is a scale, whose scores are
// NaN (as torch's), not the default.
TEST(AttentionErrors, ANanScaleIsNotTheDefault) {
  const Tensor q = Tensor::uniform({1, 2, 4}, 1), k = Tensor::uniform({1, 3, 4}, 2), v = Tensor::uniform({1, 3, 4}, 3);
  for (float y : scaled_dot_product_attention(q, k, v, Tensor(), false, std::nanf("")).to_vector())
    EXPECT_TRUE(std::isnan(y));
  EXPECT_EQ(scaled_dot_product_attention(q, k, v, Tensor(), false, -1.0f).to_vector(),
            scaled_dot_product_attention(q, k, v, Tensor(), false, 0.5f).to_vector());
}

INSTANTIATE_TEST_SUITE_P(Target, Attention, ::testing::ValuesIn(kTargets), target_name);

}  // namespace
}  // namespace dvm::testing
