// libtorch as a comparison system for the contractions: matmul/<shape>/libtorch
// is torch::matmul(a [M, K], b [K, N]) (batched for bmm shapes); linear_gelu/<shape>/libtorch is
// torch::gelu(torch::linear(x [M, K], w [N, K], bias), "tanh"), what a
// PyTorch user writes, under c10::InferenceMode. libtorch's matmul calls the
// system BLAS (OpenBLAS where libopenblas0 is installed). Built only with
// DVM_BENCH_HAVE_LIBTORCH (bench/CMakeLists.txt).
#ifdef DVM_BENCH_HAVE_LIBTORCH

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/types.h>

#include <cstring>

#include "bench/common.h"

namespace bench {
namespace {

// A [batch, rows, cols] tensor over p, or [rows, cols] for one matrix.
torch::Tensor wrap3(const float* p, int64_t batch, int64_t rows, int64_t cols) {
  if (batch > 1) return torch::from_blob(const_cast<float*>(p), {batch, rows, cols}, torch::kFloat32);
  return torch::from_blob(const_cast<float*>(p), {rows, cols}, torch::kFloat32);
}

torch::Tensor product(const float* a, const float* b, const float* bias, int64_t batch, int64_t M, int64_t K,
                      int64_t N) {
  const torch::Tensor x = wrap3(a, batch, M, K);
  if (!bias) return torch::matmul(x, wrap3(b, batch, K, N));
  const torch::Tensor w = wrap3(b, 1, N, K);
  const torch::Tensor c = torch::from_blob(const_cast<float*>(bias), {N}, torch::kFloat32);
  return torch::gelu(torch::linear(x, w, c), "tanh");
}

}  // namespace

void libtorch_product(const float* a, const float* b, const float* bias, int64_t batch, int64_t M, int64_t K,
                      int64_t N, float* out) {
  const c10::InferenceMode inference;
  const torch::Tensor y = product(a, b, bias, batch, M, K, N).contiguous();
  std::memcpy(out, y.data_ptr<float>(), static_cast<size_t>(batch * M * N) * sizeof(float));
}

void libtorch_product_loop(benchmark::State& state, const float* a, const float* b, const float* bias, int64_t batch,
                           int64_t M, int64_t K, int64_t N) {
  const c10::InferenceMode inference;
  for (int i = 0; i < 3; ++i) product(a, b, bias, batch, M, K, N);  // warm: threads started, allocator filled
  for (auto _ : state) {
    torch::Tensor y = product(a, b, bias, batch, M, K, N);
    benchmark::DoNotOptimize(y.data_ptr<float>());
  }
}

}  // namespace bench

#endif  // DVM_BENCH_HAVE_LIBTORCH
