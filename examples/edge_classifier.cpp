// An edge classifier on dvm: a small audio-keyword classifier whose weights ship
// as float16 (half the bytes of the download and of every weight read), run
// on batches whose size changes with every call, as frames arrive.
//
//   features [B, 64] -> linear 64x128 -> gelu -> (+ linear 128x128 -> gelu)
//   -> layer_norm -> linear 128x12 -> softmax            (B from 1 to 16)
//
// The activations are float16 too (dvm computes each kernel in f32 and rounds
// its stores once); the class probabilities come back as float32. With
// --interp the program runs as an engine that forbids executable memory
// (TierMode::Off: the interpreter only). It checks every call against a
// double-precision reference on the same float16 weights and inputs, and
// that no kernel compiles after the first call, and prints the latency.
//
//   edge_classifier [--interp] [calls]     (default 200; exit status 0 when the checks pass)
#include <dvm/dvm.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

constexpr int64_t kIn = 64, kHidden = 128, kClasses = 12, kMaxBatch = 16;

// A weight as it ships: float16 values, and the same values widened for the
// reference.
struct Weight {
  std::vector<dvm::Half> f16;
  std::vector<double> ref;
  dvm::Shape shape;
};

Weight make_weight(dvm::Shape shape, uint32_t seed, double scale) {
  Weight w;
  w.shape = shape;
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  uint32_t s = seed;
  for (int64_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    const float v = static_cast<float>(scale * (static_cast<double>(s >> 8) / 8388608.0 - 1.0));
    w.f16.push_back(dvm::to_half(v));
    w.ref.push_back(dvm::to_float(w.f16.back()));
  }
  return w;
}

struct Model {
  Weight w1 = make_weight({kHidden, kIn}, 1, 0.25), b1 = make_weight({kHidden}, 2, 0.1);
  Weight w2 = make_weight({kHidden, kHidden}, 3, 0.18), b2 = make_weight({kHidden}, 4, 0.1);
  Weight w3 = make_weight({kClasses, kHidden}, 5, 0.3), b3 = make_weight({kClasses}, 6, 0.1);
};

dvm::Tensor wrap(const Weight& w) { return dvm::Tensor::from_blob(w.f16.data(), w.shape); }

// One call: probabilities [B, kClasses] in float32.
std::vector<float> classify(const Model& m, const std::vector<dvm::Half>& features, int64_t batch) {
  using dvm::Tensor;
  const Tensor x = Tensor::from_blob(features.data(), {batch, kIn});
  const Tensor h = dvm::gelu(dvm::linear(x, wrap(m.w1), wrap(m.b1)));
  const Tensor r = h + dvm::gelu(dvm::linear(h, wrap(m.w2), wrap(m.b2)));
  const Tensor n = dvm::layer_norm(r, {kHidden}, Tensor(), Tensor());
  const Tensor logits = dvm::linear(n, wrap(m.w3), wrap(m.b3));
  return dvm::softmax(logits.to(dvm::Dtype::F32), -1).to_vector();
}

double gelu_ref(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double f16_round(double v) { return dvm::to_float(dvm::to_half(static_cast<float>(v))); }

// The same model in double precision, rounding to float16 where dvm's
// kernels store float16 (each linear's output, the residual sum, the norm,
// the logits), so the comparison measures dvm's f32 arithmetic, not the
// model's sensitivity to float16.
std::vector<double> classify_ref(const Model& m, const std::vector<dvm::Half>& features, int64_t batch) {
  auto linear = [](const std::vector<double>& x, int64_t rows, int64_t in, const Weight& w, const Weight& b,
                   int64_t out) {
    std::vector<double> y(static_cast<size_t>(rows * out));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out; ++o) {
        double s = b.ref[static_cast<size_t>(o)];
        for (int64_t k = 0; k < in; ++k)
          s += x[static_cast<size_t>(r * in + k)] * w.ref[static_cast<size_t>(o * in + k)];
        y[static_cast<size_t>(r * out + o)] = s;
      }
    return y;
  };
  std::vector<double> x(static_cast<size_t>(batch * kIn));
  for (size_t i = 0; i < x.size(); ++i) x[i] = dvm::to_float(features[i]);
  std::vector<double> h = linear(x, batch, kIn, m.w1, m.b1, kHidden);
  for (double& v : h) v = f16_round(gelu_ref(v));
  std::vector<double> g = linear(h, batch, kHidden, m.w2, m.b2, kHidden);
  for (size_t i = 0; i < g.size(); ++i) g[i] = f16_round(h[i] + f16_round(gelu_ref(g[i])));
  for (int64_t r = 0; r < batch; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < kHidden; ++k) mean += g[static_cast<size_t>(r * kHidden + k)];
    mean /= kHidden;
    for (int64_t k = 0; k < kHidden; ++k) var += std::pow(g[static_cast<size_t>(r * kHidden + k)] - mean, 2);
    var /= kHidden;
    for (int64_t k = 0; k < kHidden; ++k) {
      double& v = g[static_cast<size_t>(r * kHidden + k)];
      v = f16_round((v - mean) / std::sqrt(var + 1e-5));
    }
  }
  std::vector<double> z = linear(g, batch, kHidden, m.w3, m.b3, kClasses);
  for (int64_t r = 0; r < batch; ++r) {
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < kClasses; ++c) mx = std::max(mx, f16_round(z[static_cast<size_t>(r * kClasses + c)]));
    for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(f16_round(z[static_cast<size_t>(r * kClasses + c)]) - mx);
    for (int64_t c = 0; c < kClasses; ++c) {
      double& v = z[static_cast<size_t>(r * kClasses + c)];
      v = std::exp(f16_round(v) - mx) / sum;
    }
  }
  return z;
}

double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * static_cast<double>(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  bool interp = false;
  int calls = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--interp") == 0) interp = true;
    else calls = std::atoi(argv[i]);
  }
  if (calls < 2) {
    std::fprintf(stderr, "edge_classifier: expected at least 2 calls\n");
    return 2;
  }
  if (interp) dvm::set_tier_mode(dvm::TierMode::Off);
  const Model model;
  std::vector<dvm::Half> features(static_cast<size_t>(kMaxBatch * kIn));

  std::vector<double> us;
  int64_t compiled_after_first = 0, compiled_at_first = 0;
  double worst = 0;
  for (int c = 0; c < calls; ++c) {
    const int64_t batch = 1 + (static_cast<int64_t>(c) * 7) % kMaxBatch;  // 1..16, a new size most calls
    for (size_t i = 0; i < features.size(); ++i)
      features[i] = dvm::to_half(static_cast<float>(std::sin(0.013 * static_cast<double>(i) + 0.7 * c)));
    std::vector<float> p;
    if (c == 0) {
      // At load time: the first call with its kernels compiled before they run.
      dvm::warm_up([&] { p = classify(model, features, batch); });
      compiled_at_first = dvm::stats().kernels_compiled + dvm::stats().jit_compiles;
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      p = classify(model, features, batch);
      us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      compiled_after_first = dvm::stats().kernels_compiled + dvm::stats().jit_compiles - compiled_at_first;
    }
    // Every probability within 4e-3 of the reference. The reference rounds
    // where dvm rounds, so what is left is f32 arithmetic (~1e-6) and the
    // float16 roundings it can flip by one unit (2^-11 relative): a flipped
    // logit (|z| < 4) moves a probability by at most 0.25 * 4 * 2^-11 = 5e-4,
    // and flips in the 128-wide hidden layers reach the logits through the
    // weights (|w| <= 0.3): a few of them stay under 4e-3.
    const std::vector<double> want = classify_ref(model, features, batch);
    for (size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::fabs(p[i] - want[i]));
  }
  const int64_t jit_compiles = dvm::stats().jit_compiles;
  std::printf("edge_classifier: %d calls, batch 1-16, float16 weights and activations, %s (ISA %s)\n", calls,
              interp ? "interpreter only (tier off)" : "interpreter, then machine code", dvm::isa().c_str());
  std::printf("edge_classifier: latency p50 %.1f us, p99 %.1f us; max probability error %.2g; weights %zu bytes\n",
              percentile(us, 0.5), percentile(us, 0.99), worst,
              sizeof(dvm::Half) * static_cast<size_t>(kHidden * kIn + kHidden * kHidden + kClasses * kHidden +
                                                      2 * kHidden + kClasses));
  std::printf("edge_classifier: kernels compiled after the first call: %lld\n",
              static_cast<long long>(compiled_after_first));
  if (worst > 4e-3) {
    std::fprintf(stderr, "edge_classifier: probabilities differ from the reference by %g\n", worst);
    return 1;
  }
  if (interp && jit_compiles != 0) {
    std::fprintf(stderr, "edge_classifier: %lld machine-code compiles with the tier off\n",
                 static_cast<long long>(jit_compiles));
    return 1;
  }
  if (compiled_after_first != 0) {
    std::fprintf(stderr, "edge_classifier: %lld kernels compiled after the first call (expected none: only B changed)\n",
                 static_cast<long long>(compiled_after_first));
    return 1;
  }
  return 0;
}
