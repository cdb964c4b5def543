// The eigen system: the workloads written with Eigen's Tensor module
// (unsupported/Eigen/CXX11/Tensor, Debian's libeigen3-dev 3.4) the way an
// Eigen user writes them: TensorMaps over the same buffers, one assignment
// of a whole expression per step (.cwiseMax, .tanh(), .exp(), W5's bias
// reshaped and broadcast over the rows, full reductions for each row's max,
// sum, mean and variance), on Eigen's default device (one thread). Built
// with -O3 -march=native (bench/CMakeLists.txt) so Eigen vectorizes with the
// machine's widest vectors; the expressions use Eigen's own exp and tanh
// (its fast rational tanh: EIGEN_FAST_MATH is on by default).
//
// Softmax, layernorm and rowsum go one row at a time, so the row stays in L1 between
// the steps over it, as in the hand loops. Written first as reductions over
// dimension 1 of blocks of rows, reshaped and broadcast back along the row,
// they were 3.6x (softmax) and 60x (layernorm) slower at 1M (Eigen's
// general broadcasting path, not looked into further).
#ifdef DVM_BENCH_HAVE_EIGEN
#include <unsupported/Eigen/CXX11/Tensor>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "bench/fused_loops.h"

namespace bench {
namespace {

using Index = Eigen::Index;
using Vec = Eigen::TensorMap<Eigen::Tensor<float, 1, Eigen::RowMajor, Index>>;
using CVec = Eigen::TensorMap<Eigen::Tensor<const float, 1, Eigen::RowMajor, Index>>;
using Mat = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor, Index>>;
using CMat = Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor, Index>>;
using Dims2 = Eigen::array<Index, 2>;

void eigen_w1_chain(const float* x, const float* a, const float* b, float* y, int64_t n) {
  const CVec X(x, n), A(a, n), B(b, n);
  Vec Y(y, n);
  Y = (X * A + B).cwiseMax(0.0f) * 0.5f + X;
}

void eigen_w2_gelu(const float* x, float* y, int64_t n) {
  const CVec X(x, n);
  Vec Y(y, n);
  Y = X * 0.5f * (((X + X * X * X * 0.044715f) * 0.7978845608f).tanh() + 1.0f);
}

// A float the rank-0 result of a full reduction is written into (no heap
// allocation, unlike a Tensor<float, 0>).
using Scalar = Eigen::TensorMap<Eigen::Tensor<float, 0, Eigen::RowMajor, Index>>;

void eigen_w3_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  float m = 0, s = 0;
  Scalar M(&m), S(&s);
  for (Index r = 0; r < rows; ++r) {
    const CVec X(x + r * cols, cols);
    Vec Y(y + r * cols, cols);
    M = X.maximum();
    Y = (X - m).exp();
    S = Y.sum();
    Y = Y * (1.0f / s);
  }
}

void eigen_w4_layernorm(const float* x, const float* w, const float* bias, float eps, float* y, int64_t rows,
                        int64_t cols) {
  const CVec Wt(w, cols), Bs(bias, cols);
  float mean = 0, var = 0;
  Scalar Mean(&mean), Var(&var);
  for (Index r = 0; r < rows; ++r) {
    const CVec X(x + r * cols, cols);
    Vec Y(y + r * cols, cols);
    Mean = X.mean();
    Var = (X - mean).square().mean();
    const float rstd = 1.0f / std::sqrt(var + eps);
    Y = (X - mean) * rstd * Wt + Bs;
  }
}

void eigen_w5_bias_tanh(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  const CMat X(x, rows, cols);
  const CVec Bs(bias, cols);
  Mat Y(y, rows, cols);
  const Dims2 row{1, cols}, down{rows, 1};
  Y = (X + Bs.reshape(row).broadcast(down)).tanh();
}

void eigen_w6_rowsum(const float* x, float* y, int64_t rows, int64_t cols) {
  // A full reduction per row: X.sum(Dims1{1}) over the [rows, cols] map was
  // 17x slower at 1M.
  for (Index r = 0; r < rows; ++r) {
    Scalar S(y + r);
    S = CVec(x + r * cols, cols).sum();
  }
}

void eigen_w7_op_stream(const float* x, const float* z, const float* s, float* y, int64_t n, int ops) {
  const CVec X(x, n), Z(z, n);
  Vec Y(y, n);
  Y = X;
  for (int k = 0; k < ops; ++k) {
    const bool tensor = k % 2 == 0;
    const float v = s[k % 3];
    switch (k % 3) {
      case 0:
        if (tensor) Y = Y + Z; else Y = Y + v;
        break;
      case 1:
        if (tensor) Y = Y * Z; else Y = Y * v;
        break;
      default:
        if (tensor) Y = Y - Z; else Y = Y - v;
        break;
    }
  }
}

}  // namespace

const RefLoops* eigen_loops() {
  static constexpr RefLoops loops{eigen_w1_chain,     eigen_w2_gelu,   eigen_w3_softmax,  eigen_w4_layernorm,
                                  eigen_w5_bias_tanh, eigen_w6_rowsum, eigen_w7_op_stream};
  return &loops;
}

const char* eigen_loops_description() {
  // snprintf, not std::string: this file is built with -march=native, and an
  // inline std:: function it emitted could be the copy the linker keeps for
  // the whole binary. Eigen's own code is used from this file only.
  static char text[256];
  std::snprintf(text, sizeof text, "on: Eigen %d.%d.%d Tensor, default device (one thread), %s", EIGEN_WORLD_VERSION,
                EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION, Eigen::SimdInstructionSetsInUse());
  return text;
}

}  // namespace bench
#else
#include "bench/fused_loops.h"

namespace bench {
const RefLoops* eigen_loops() { return nullptr; }
const char* eigen_loops_description() { return "skipped (libeigen3-dev not found, or -DDVM_BENCH_EIGEN=OFF)"; }
}  // namespace bench
#endif  // DVM_BENCH_HAVE_EIGEN
