// Uses an installed dvm: a row softmax of relu(x * w + b) checked against the
// same computation in double precision, and the headers' version against the
// library's. Exits 0 when both match.
#include <dvm/dvm.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

int main() {
  if (std::strcmp(dvm::version(), DVM_VERSION_STRING) != 0) {
    std::fprintf(stderr, "consumer: headers say dvm %s, the library %s\n", DVM_VERSION_STRING, dvm::version());
    return 1;
  }
  constexpr int64_t kRows = 8, kCols = 300;
  std::vector<float> x(kRows * kCols), w(kCols), b(kCols);
  for (int64_t i = 0; i < kRows * kCols; ++i) x[size_t(i)] = float(i % 37) / 9.0f - 2.0f;
  for (int64_t c = 0; c < kCols; ++c) {
    w[size_t(c)] = float(c % 11) / 5.0f - 1.0f;
    b[size_t(c)] = float(c % 7) / 20.0f;
  }
  dvm::Tensor tx = dvm::Tensor::from_vector(x, {kRows, kCols});
  dvm::Tensor tw = dvm::Tensor::from_vector(w, {kCols});
  dvm::Tensor tb = dvm::Tensor::from_vector(b, {kCols});
  const std::vector<float> got = dvm::softmax(dvm::relu(tx * tw + tb), 1).to_vector();

  // Softmax outputs lie in [0, 1] and each is a few float roundings (about
  // 6e-8 each at 1) from the double result: 1e-6 absolute is generous.
  double worst = 0;
  for (int64_t r = 0; r < kRows; ++r) {
    std::vector<double> h(kCols);
    double mx = 0, sum = 0;
    for (int64_t c = 0; c < kCols; ++c) {
      h[size_t(c)] = std::max(0.0, double(x[size_t(r * kCols + c)]) * w[size_t(c)] + b[size_t(c)]);
      mx = std::max(mx, h[size_t(c)]);
    }
    for (double& v : h) sum += std::exp(v - mx);
    for (int64_t c = 0; c < kCols; ++c)
      worst = std::max(worst, std::abs(got[size_t(r * kCols + c)] - std::exp(h[size_t(c)] - mx) / sum));
  }
  const bool ok = got.size() == size_t(kRows * kCols) && worst < 1e-6;
  std::printf("consumer: dvm %s, ISA %s, softmax(relu(x*w+b)) max error %.2e: %s\n", dvm::version(),
              dvm::isa().c_str(), worst, ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
