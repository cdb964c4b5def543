// dvm demo: records the elementwise half of a transformer MLP block
// (bias, gelu, layer_norm, a scaled softmax) for several batch sizes, checks
// every result against a double-precision reference, and prints what ran.
#include <dvm/dvm.h>

#include <cmath>
#include <cstdio>
#include <vector>

namespace {

constexpr int64_t kDim = 1024;

// The block in double precision, one row at a time.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& bias,
                              const std::vector<float>& gamma, const std::vector<float>& beta,
                              int64_t rows) {
  std::vector<double> out(x.size());
  std::vector<double> h(kDim);
  for (int64_t r = 0; r < rows; ++r) {
    double mean = 0, var = 0;
    for (int64_t c = 0; c < kDim; ++c) {
      double v = double(x[size_t(r * kDim + c)]) + bias[size_t(c)];
      h[size_t(c)] = 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
      mean += h[size_t(c)];
    }
    mean /= kDim;
    for (int64_t c = 0; c < kDim; ++c) var += (h[size_t(c)] - mean) * (h[size_t(c)] - mean);
    var /= kDim;
    double mx = -INFINITY;
    for (int64_t c = 0; c < kDim; ++c) {
      h[size_t(c)] = ((h[size_t(c)] - mean) / std::sqrt(var + 1e-5) * gamma[size_t(c)] + beta[size_t(c)]) * 2.0;
      mx = std::max(mx, h[size_t(c)]);
    }
    double sum = 0;
    for (int64_t c = 0; c < kDim; ++c) sum += std::exp(h[size_t(c)] - mx);
    for (int64_t c = 0; c < kDim; ++c) out[size_t(r * kDim + c)] = std::exp(h[size_t(c)] - mx) / sum;
  }
  return out;
}

}  // namespace

int main() {
  using dvm::Tensor;
  std::printf("dvm demo: MLP block (bias + gelu + layer_norm + softmax), D=%lld, ISA %s\n",
              static_cast<long long>(kDim), dvm::isa().c_str());
  Tensor bias = Tensor::uniform({kDim}, 1, -0.5f, 0.5f);
  Tensor gamma = Tensor::uniform({kDim}, 2, 0.5f, 1.5f);
  Tensor beta = Tensor::uniform({kDim}, 3, -0.1f, 0.1f);
  const auto bias_v = bias.to_vector(), gamma_v = gamma.to_vector(), beta_v = beta.to_vector();

  bool all_ok = true;
  for (int64_t rows : {1, 7, 64, 512}) {
    Tensor x = Tensor::normal({rows, kDim}, 100 + static_cast<uint64_t>(rows));
    // A few calls per batch size, as a serving loop would make: the kernel
    // starts on the interpreter and moves to machine code once it is hot.
    std::vector<float> got;
    std::vector<dvm::KernelRun> runs;
    dvm::Stats st;
    for (int call = 0; call < 3; ++call) {
      dvm::set_kernel_log(true);
      dvm::reset_stats();
      Tensor h = dvm::gelu(x + bias);
      Tensor y = dvm::softmax(dvm::layer_norm(h, {kDim}, gamma, beta) * 2.0f, -1);
      got = y.to_vector();
      dvm::set_kernel_log(false);
      runs = dvm::take_kernel_log();
      st = dvm::stats();
    }

    std::vector<double> want = reference(x.to_vector(), bias_v, gamma_v, beta_v, rows);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::abs(got[i] - want[i]) / (std::abs(want[i]) + 1e-30));
    // float32 through ~15 dependent roundings and a few-ULP exp/erf: well
    // under 1e-4 relative.
    const bool ok = worst < 1e-4;
    all_ok &= ok;
    std::printf("\nbatch %4lld: %lld ops recorded, %zu kernel(s), max rel err %.2e %s\n",
                static_cast<long long>(rows), static_cast<long long>(st.nodes_recorded), runs.size(),
                worst, ok ? "ok" : "MISMATCH");
    for (const dvm::KernelRun& r : runs)
      std::printf("  kernel %016llx %-11s tier=%-6s ops=%2d time=%9.1f us  %6.2f GB/s\n",
                  static_cast<unsigned long long>(r.hash), r.form.c_str(), r.tier.c_str(), r.ops,
                  static_cast<double>(r.ns) / 1e3,
                  r.ns ? static_cast<double>(r.bytes) / static_cast<double>(r.ns) : 0.0);
  }
  dvm::Stats st = dvm::stats();
  std::printf("\nkernels compiled in the last batch: %lld (new shapes reuse the bytecode)\n",
              static_cast<long long>(st.kernels_compiled));
  for (const dvm::KernelStats& k : dvm::kernel_stats())
    std::printf("kernel %016llx %-11s tier=%-6s calls=%lld jit compile=%.1f us%s%s\n",
                static_cast<unsigned long long>(k.hash), k.form.c_str(), k.tier.c_str(),
                static_cast<long long>(k.calls), static_cast<double>(k.compile_ns) / 1e3,
                k.jit_failure.empty() ? "" : " jit declined: ", k.jit_failure.c_str());
  std::printf("%s\n", all_ok ? "demo: all results match the reference" : "demo: MISMATCH");
  return all_ok ? 0 : 1;
}
