// Hand-written fused loops: one read of every input and one write of every
// output per element, compiled with -O3 -march=native. Row workloads work on
// one row at a time; a 1024-float row (4 KiB) stays in L1 between the passes
// over it, so memory sees a single read and a single write.
//
// Every loop here vectorizes (AVX2 and AVX-512; `objdump -d` on this object
// shows vfmadd...ps on ymm/zmm and no call in the loops): relu and the
// selects are bit operations (see select()), and exp and tanh are this
// file's own branch-free float functions (exp_ref, tanh_ref) rather than
// std::exp / std::tanh, which GCC 12 leaves as scalar libm calls without
// -ffast-math. Their polynomial comes from bench/fit_ref_poly.py; their
// errors against double are measured by `bench_dvm --accuracy`
// (docs/PERFORMANCE.md, "Reference loops"): exp 1.05 ULP (every 7th float
// of [-87.3, 88.3]), tanh 2.3 ULP.
#include "bench/fused_loops.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace bench {
namespace {

// Independent partial results per reduction: 16 floats = one AVX-512
// register, so the compiler vectorises the reductions without -ffast-math.
constexpr int kLanes = 16;

// c ? a : b on the bits. GCC sinks the arithmetic of each side of a plain
// ?: (or of std::max) into a branch of its own, and under the default
// -ftrapping-math it may not speculate that arithmetic back into a vector
// select unless the ISA has masked operations (AVX-512 does, AVX2 does not):
// the loops would stay scalar on AVX2. Selecting on the bits keeps both
// sides computed and the loop branch-free on both ISAs.
inline float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// max(t, 0): t where its sign bit is clear, else +0 (NaN with the sign bit
// set gives 0, like relu in most libraries).
inline float relu(float t) {
  const int32_t b = std::bit_cast<int32_t>(t);
  return std::bit_cast<float>(b & ~(b >> 31));
}

// e^x for float, branch-free so that GCC vectorizes the loops calling it.
// x = n*ln2 + r with n = round(x*log2e) (the 1.5*2^23 shifter rounds to
// nearest and leaves n in the low bits), r by a two-part ln2 through fma
// (ln2_hi has 11 significant bits, so n*ln2_hi is exact for |n| <= 128), then
// e^r = 1 + r + r^2*Q(r) (Q degree 4, fit_ref_poly.py, 1e-8 relative) and
// 2^n built in the exponent field. x is clamped to [-87.3, 88.3] (n in
// [-126, 127]): below, the result is e^-87.3 (~1.2e-38) instead of a
// subnormal or 0, far below anything the workloads can see; NaN passes.
inline float exp_ref(float x) {
  constexpr float kLog2e = 1.44269502f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194442e-4f;
  // On the bits: as std::min(std::max(...)), GCC 12 built the clamp from
  // mask registers moved through integer ones (13 instructions per vector).
  x = select(x < -87.3f, -87.3f, x);
  x = select(x > 88.3f, 88.3f, x);
  const float t = std::fma(x, kLog2e, kShifter);
  const float n = t - kShifter;
  float r = std::fma(n, -kLn2Hi, x);
  r = std::fma(n, -kLn2Lo, r);
  float q = 0.00139261759f;
  q = std::fma(q, r, 0.00836317334f);
  q = std::fma(q, r, 0.0416665561f);
  q = std::fma(q, r, 0.166665778f);
  q = std::fma(q, r, 0.5f);
  const float p = std::fma(r * r, q, r) + 1.0f;
  const int32_t k = std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShifter);
  return p * std::bit_cast<float>((k + 127) << 23);
}

// tanh for float, branch-free, from one exponential. a = |x| (clamped at 9:
// tanh(9) rounds to 1), -2a = n*ln2 + r as in exp_ref, e^r - 1 = r + r^2*Q(r)
// (the same Q), and with s = 2^n:
//   m = e^(-2a) - 1 = s*(e^r - 1) + (s - 1)   (one fma; s - 1 is exact)
//   e = e^(-2a)     = s*(e^r - 1) + s
// Below a = 0.55, tanh(a) = -m / (m + 2): m is an expm1, accurate also where
// it is small, so nothing cancels. Above, tanh(a) = 1 - 2e / (1 + e), whose
// quotient is below 1/2 there, so its error counts for at most half as much
// in the result (-m / (m + 2) near 1 would carry the rounding of m + 2 in
// full: 2.5 ULP). Both share the one divide. NaN stays NaN; the sign goes
// back at the end.
inline float tanh_ref(float x) {
  constexpr float kLog2e = 1.44269502f;
  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23
  constexpr float kLn2Hi = 0.693359375f;
  constexpr float kLn2Lo = -2.12194442e-4f;
  const float ax = std::fabs(x);
  const float v = -2.0f * select(ax > 9.0f, 9.0f, ax);
  const float t = std::fma(v, kLog2e, kShifter);
  const float n = t - kShifter;
  float r = std::fma(n, -kLn2Hi, v);
  r = std::fma(n, -kLn2Lo, r);
  float q = 0.00139261759f;
  q = std::fma(q, r, 0.00836317334f);
  q = std::fma(q, r, 0.0416665561f);
  q = std::fma(q, r, 0.166665778f);
  q = std::fma(q, r, 0.5f);
  const float em1_r = std::fma(r * r, q, r);
  const float s = std::bit_cast<float>((std::bit_cast<int32_t>(t) - std::bit_cast<int32_t>(kShifter) + 127) << 23);
  const float m = std::fma(s, em1_r, s - 1.0f);
  const float e = std::fma(s, em1_r, s);
  const bool small = ax < 0.55f;
  const float quotient = select(small, -m, e + e) / select(small, m + 2.0f, e + 1.0f);
  return std::copysign(select(small, quotient, 1.0f - quotient), x);
}

// The row's max, as an integer max: a float's bits, with the magnitude bits
// flipped where the sign is set, order as the floats do (-0 below +0, a
// positive NaN above +inf), and an integer max reduction is exact in any
// order, so GCC vectorizes it (vpmaxsd) without -ffast-math. As 16 float
// partial results with std::max, as the sums below do, it stayed scalar:
// 16 vmaxss per 16 floats, on AVX-512 too.
inline int32_t order_key(float v) {
  const int32_t b = std::bit_cast<int32_t>(v);
  return b ^ ((b >> 31) & 0x7fffffff);
}

float row_max(const float* __restrict x, int64_t n) {
  int32_t m = order_key(-std::numeric_limits<float>::infinity());
  for (int64_t i = 0; i < n; ++i) m = std::max(m, order_key(x[i]));
  return std::bit_cast<float>(m ^ ((m >> 31) & 0x7fffffff));
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
    y[i] = relu(t) * 0.5f + x[i];
  }
}

void fused_w2_gelu(const float* __restrict x, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
    y[i] = 0.5f * v * (1.0f + tanh_ref(inner));
  }
}

void fused_w3_softmax(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* __restrict xr = x + r * cols;
    float* __restrict yr = y + r * cols;
    // Pass 1: row max (read from memory). Pass 2: exp into y, summed (x from
    // L1). Pass 3: scale y in place (L1).
    const float m = row_max(xr, cols);
    // Two sets of 16 partial sums, added pairwise at the end: shorter chains
    // of additions than one set (5.3 -> 3.1 ULP at most on W3's inputs).
    float acc0[kLanes] = {}, acc1[kLanes] = {};
    int64_t i = 0;
    for (; i + 2 * kLanes <= cols; i += 2 * kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const float e = exp_ref(xr[i + l] - m);
        yr[i + l] = e;
        acc0[l] += e;
      }
      for (int l = 0; l < kLanes; ++l) {
        const float e = exp_ref(xr[i + kLanes + l] - m);
        yr[i + kLanes + l] = e;
        acc1[l] += e;
      }
    }
    for (int l = 0; l < kLanes; ++l) acc0[l] += acc1[l];
    for (int w = kLanes / 2; w > 0; w /= 2)
      for (int l = 0; l < w; ++l) acc0[l] += acc0[l + w];
    float s = acc0[0];
    for (; i < cols; ++i) {
      const float e = exp_ref(xr[i] - m);
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
    for (int64_t j = 0; j < cols; ++j) yr[j] = tanh_ref(xr[j] + bias[j]);
  }
}

void fused_w6_rowsum(const float* __restrict x, float* __restrict y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) y[r] = row_sum(x + r * cols, cols);
}

void fused_w7_op_stream(const float* __restrict x, const float* __restrict z,
                        const float* __restrict s, float* __restrict y, int64_t n, int ops) {
  // Op by op over the whole (L1-resident, 64-float) vector, so that each op
  // is one vectorized loop; the same arithmetic, element by element, as
  // applying the ops in turn to each element.
  for (int64_t i = 0; i < n; ++i) y[i] = x[i];
  for (int k = 0; k < ops; ++k) {
    const bool tensor = k % 2 == 0;
    const float v = s[k % 3];
    switch (k % 3) {
      case 0:
        if (tensor)
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] + z[i];
        else
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] + v;
        break;
      case 1:
        if (tensor)
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] * z[i];
        else
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] * v;
        break;
      default:
        if (tensor)
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] - z[i];
        else
          for (int64_t i = 0; i < n; ++i) y[i] = y[i] - v;
        break;
    }
  }
}

const RefLoops& fused_loops() {
  static constexpr RefLoops loops{fused_w1_chain,     fused_w2_gelu,   fused_w3_softmax,  fused_w4_layernorm,
                                  fused_w5_bias_tanh, fused_w6_rowsum, fused_w7_op_stream};
  return loops;
}

float fused_exp(float x) { return exp_ref(x); }
float fused_tanh(float x) { return tanh_ref(x); }

}  // namespace bench
