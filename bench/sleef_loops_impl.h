// The sleef_loop system's loops, written once over a vector type V and
// compiled twice: for AVX2 (sleef_loops_avx2.cpp, V = 8 floats, SLEEF's
// Sleef_expf8_u10 / Sleef_tanhf8_u10) and for AVX-512 (sleef_loops_avx512.cpp,
// 16 floats, Sleef_expf16_u10 / Sleef_tanhf16_u10). This is the code
// TorchInductor's C++ backend emits for these workloads: single-pass loops
// over at::vec::Vectorized<float>, whose exp and tanh are these SLEEF u10
// calls (1.0 ULP bounds). Row workloads work on one row at a time, which
// stays in L1 between the passes over it, as in fused_loops.cpp.
//
// Included only by those two files, inside namespace bench::sleef_impl, after
// they define V: static members N, load, store, set1, add, sub, mul, div,
// fmadd (a*b + c), max, exp, tanh, hsum, hmax; they include <algorithm>,
// <cmath>, <cstdint> and <limits> first (this file, inside a namespace,
// includes nothing).
#pragma once

// A vector of the last n < V::N floats of p, the rest filled with `fill`;
// loops finish their tails through it.
template <class V>
typename V::T load_tail(const float* p, int64_t n, float fill) {
  alignas(64) float buf[V::N];
  for (int i = 0; i < V::N; ++i) buf[i] = i < n ? p[i] : fill;
  return V::load(buf);
}
template <class V>
void store_tail(float* p, int64_t n, typename V::T v) {
  alignas(64) float buf[V::N];
  V::store(buf, v);
  for (int64_t i = 0; i < n; ++i) p[i] = buf[i];
}

// An elementwise loop y[i] = f(i-th vectors): full vectors, then one tail.
template <class V, class F>
void elementwise(int64_t n, float* y, F f) {
  int64_t i = 0;
  for (; i + V::N <= n; i += V::N) V::store(y + i, f(i, V::N));
  if (i < n) store_tail<V>(y + i, n - i, f(i, n - i));
}
// x[i..i+count) as a vector (count < N: the tail, padded with fill).
template <class V>
typename V::T ld(const float* x, int64_t i, int64_t count, float fill = 0.0f) {
  return count == V::N ? V::load(x + i) : load_tail<V>(x + i, count, fill);
}

// Sum and max of a row: four accumulators, then one vector, then the tail.
template <class V>
float row_sum(const float* x, int64_t n) {
  using T = typename V::T;
  T a0 = V::set1(0.0f), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * V::N <= n; i += 4 * V::N) {
    a0 = V::add(a0, V::load(x + i));
    a1 = V::add(a1, V::load(x + i + V::N));
    a2 = V::add(a2, V::load(x + i + 2 * V::N));
    a3 = V::add(a3, V::load(x + i + 3 * V::N));
  }
  for (; i + V::N <= n; i += V::N) a0 = V::add(a0, V::load(x + i));
  if (i < n) a0 = V::add(a0, load_tail<V>(x + i, n - i, 0.0f));
  return V::hsum(V::add(V::add(a0, a1), V::add(a2, a3)));
}
template <class V>
float row_max(const float* x, int64_t n) {
  using T = typename V::T;
  const float lowest = -std::numeric_limits<float>::infinity();
  T a0 = V::set1(lowest), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 4 * V::N <= n; i += 4 * V::N) {
    a0 = V::max(a0, V::load(x + i));
    a1 = V::max(a1, V::load(x + i + V::N));
    a2 = V::max(a2, V::load(x + i + 2 * V::N));
    a3 = V::max(a3, V::load(x + i + 3 * V::N));
  }
  for (; i + V::N <= n; i += V::N) a0 = V::max(a0, V::load(x + i));
  if (i < n) a0 = V::max(a0, load_tail<V>(x + i, n - i, lowest));
  return V::hmax(V::max(V::max(a0, a1), V::max(a2, a3)));
}

template <class V>
void w1_chain(const float* x, const float* a, const float* b, float* y, int64_t n) {
  const auto zero = V::set1(0.0f), half = V::set1(0.5f);
  elementwise<V>(n, y, [&](int64_t i, int64_t c) {
    const auto xv = ld<V>(x, i, c);
    const auto t = V::max(V::fmadd(xv, ld<V>(a, i, c), ld<V>(b, i, c)), zero);
    return V::fmadd(t, half, xv);
  });
}

template <class V>
void w2_gelu(const float* x, float* y, int64_t n) {
  const auto k0 = V::set1(0.7978845608f), k1 = V::set1(0.044715f), one = V::set1(1.0f),
             half = V::set1(0.5f);
  elementwise<V>(n, y, [&](int64_t i, int64_t c) {
    const auto v = ld<V>(x, i, c);
    const auto inner = V::mul(k0, V::fmadd(V::mul(k1, V::mul(v, v)), v, v));
    return V::mul(V::mul(half, v), V::add(one, V::tanh(inner)));
  });
}

template <class V>
void w3_softmax(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const auto m = V::set1(row_max<V>(xr, cols));
    auto s0 = V::set1(0.0f), s1 = s0;
    int64_t i = 0;
    for (; i + 2 * V::N <= cols; i += 2 * V::N) {
      const auto e0 = V::exp(V::sub(V::load(xr + i), m));
      const auto e1 = V::exp(V::sub(V::load(xr + i + V::N), m));
      V::store(yr + i, e0);
      V::store(yr + i + V::N, e1);
      s0 = V::add(s0, e0);
      s1 = V::add(s1, e1);
    }
    for (; i < cols; i += V::N) {
      const int64_t c = std::min<int64_t>(V::N, cols - i);
      // The tail pads with -inf: exp gives 0 there, which the sum ignores.
      const auto e = V::exp(V::sub(ld<V>(xr, i, c, -std::numeric_limits<float>::infinity()), m));
      if (c == V::N) V::store(yr + i, e); else store_tail<V>(yr + i, c, e);
      s0 = V::add(s0, e);
    }
    const auto inv = V::set1(1.0f / V::hsum(V::add(s0, s1)));
    elementwise<V>(cols, yr, [&](int64_t j, int64_t c) { return V::mul(ld<V>(yr, j, c), inv); });
  }
}

template <class V>
void w4_layernorm(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                  int64_t cols) {
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    float* yr = y + r * cols;
    const float mean = row_sum<V>(xr, cols) * inv_n;
    const auto mv = V::set1(mean);
    auto q = V::set1(0.0f);
    int64_t i = 0;
    for (; i + V::N <= cols; i += V::N) {
      const auto d = V::sub(V::load(xr + i), mv);
      q = V::fmadd(d, d, q);
    }
    float var = V::hsum(q);
    for (; i < cols; ++i) var += (xr[i] - mean) * (xr[i] - mean);
    var *= inv_n;
    const auto rstd = V::set1(1.0f / std::sqrt(var + eps));
    elementwise<V>(cols, yr, [&](int64_t j, int64_t c) {
      return V::fmadd(V::mul(V::sub(ld<V>(xr, j, c), mv), rstd), ld<V>(w, j, c), ld<V>(b, j, c));
    });
  }
}

template <class V>
void w5_bias_tanh(const float* x, const float* bias, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    elementwise<V>(cols, y + r * cols,
                   [&](int64_t j, int64_t c) { return V::tanh(V::add(ld<V>(xr, j, c), ld<V>(bias, j, c))); });
  }
}

template <class V>
void w6_rowsum(const float* x, float* y, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) y[r] = row_sum<V>(x + r * cols, cols);
}

template <class V>
void w7_op_stream(const float* x, const float* z, const float* s, float* y, int64_t n, int ops) {
  // Op by op over the (L1-resident) vector, as fused_loops.cpp does.
  std::copy(x, x + n, y);
  for (int k = 0; k < ops; ++k) {
    const bool tensor = k % 2 == 0;
    const auto sv = V::set1(s[k % 3]);
    const int op = k % 3;
    elementwise<V>(n, y, [&](int64_t i, int64_t c) {
      const auto t = ld<V>(y, i, c);
      const auto v = tensor ? ld<V>(z, i, c) : sv;
      return op == 0 ? V::add(t, v) : op == 1 ? V::mul(t, v) : V::sub(t, v);
    });
  }
}

template <class V>
const RefLoops& loops_for() {
  static constexpr RefLoops loops{w1_chain<V>,     w2_gelu<V>,   w3_softmax<V>, w4_layernorm<V>,
                                  w5_bias_tanh<V>, w6_rowsum<V>, w7_op_stream<V>};
  return loops;
}
