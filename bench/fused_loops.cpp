// Hand-written fused loops: one read of every input and one write of every
// output per element, compiled with -O3 -march=native. Row workloads work on
// one row at a time; a 1024-float row (4 KiB) stays in L1 between the passes
// over it, so memory sees a single read and a single write.
#include "bench/fused_loops.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace bench {
namespace {

// Independent partial results per reduction: 16 floats = one AVX-512
// register, so the compiler vectorises the reductions without -ffast-math.
constexpr int kLanes = 16;

float row_max(const float* __restrict x, int64_t n) {
  float acc[kLanes];
  for (int l = 0; l < kLanes; ++l) acc[l] = -std::numeric_limits<float>::infinity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] = std::max(acc[l], x[i + l]);
  float m = acc[0];
  for (int l = 1; l < kLanes; ++l) m = std::max(m, acc[l]);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

// Sum of (x - c)^2 over the row.
float row_sum_sq_dev(const float* __restrict x, float c, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      const float d = x[i + l] - c;
      acc[l] += d * d;
    }
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += (x[i] - c) * (x[i] - c);
  return s;
}

float row_sum(const float* __restrict x, int64_t n) {
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l];
  float s = 0.0f;
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  for (; i < n; ++i) s += x[i];
  return s;
}

}  // namespace

void fused_triad(float* __restrict a, const float* __restrict b, const float* __restrict c, float s,
                 int64_t n) {
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

void fused_w1_chain(const float* __restrict x, const float* __restrict a, const float* __restrict b,
                    float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float t = x[i] * a[i] + b[i];
    y[i] = std::max(t, 0.0f) * 0.5f + x[i];
  }
}

void fused_w2_gelu(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + std::tanh(inner));
  }
}

void fused_w3_softmax(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    // Pass 1: row max (read from memory). Pass 2: exp into y, summed (x from
    // L1). Pass 3: scale y in place (L1).
    const float m = row_max(xr, cols);
    float acc[kLanes] = {};
    int64_t i = 0;
    for (; i + kLanes <= cols; i += kLanes)
      for (int l = 0; l < kLanes; ++l) {
        const float e = std::exp(xr[i + l] - m);
        yr[i + l] = e;
        acc[l] += e;
      }
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += acc[l];
    for (; i < cols; ++i) {
      const float e = std::exp(xr[i] - m);
      yr[i] = e;
      s += e;
    }
    const float inv = 1.0f / s;
    for (int64_t j = 0; j < cols; ++j) yr[j] *= inv;
  }
}

void fused_w4_layernorm(const float* __restrict x, const float* __restrict w,
                        const float* __restrict b, float eps, float* __restrict y, int64_t rows,
                        int64_t cols) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    // Mean, then the centred sum of squares (the row is in L1 by then), then
    // the output: one read of the row from memory.
    const float mean = row_sum(xr, cols) * inv_n;
    const float var = row_sum_sq_dev(xr, mean, cols) * inv_n;
    const float rstd = 1.0f / std::sqrt(var + eps);
    for (int64_t j = 0; j < cols; ++j) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
  }
}

void fused_w5_bias_tanh(const float* __restrict x, const float* __restrict bias, float* __restrict y,
                        int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    for (int64_t j = 0; j < cols; ++j) yr[j] = std::tanh(xr[j] + bias[j]);
  }
}

void fused_w6_rowsum(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) y[r] = row_sum(x + r * cols, cols);
}

void fused_w7_op_stream(const float* __restrict x, const float* __restrict z,
                        const float* __restrict s, float* __restrict y, int64_t n, int ops) {
  for (int64_t i = 0; i < n; ++i) {
    float t = x[i];
    for (int k = 0; k < ops; ++k) {
      const float v = (k % 2 == 0) ? z[i] : s[k % 3];
      switch (k % 3) {
        case 0: t = t + v; break;
        case 1: t = t * v; break;
        default: t = t - v; break;
      }
    }
    y[i] = t;
  }
}

}  // namespace bench
