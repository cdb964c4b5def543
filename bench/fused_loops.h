// Hand-written single-pass loops for the benchmark workloads (see
// shared/bench/WORKLOADS.md): what a careful engineer writes by hand, compiled
// with -O3 -march=native (bench/CMakeLists.txt). Plain C++ that GCC
// vectorizes: exp and tanh are the file's own polynomial functions (std::exp
// and std::tanh would be scalar libm calls); reductions keep 16 independent
// partial results so the compiler can put them in one SIMD register without
// reassociating anything itself.
//
// The other reference systems implement the same functions (struct
// RefLoops): sleef_loop (sleef_loops.cpp: AVX2 or AVX-512 intrinsics with
// SLEEF's u10 exp and tanh, chosen at run time) and eigen (eigen_loops.cpp:
// Eigen Tensor expressions), each where its package was found.
//
// This header includes nothing but <cstdint>, so the -march=native file shares
// no inline code with the rest of the binary.
#pragma once

#include <cstdint>

namespace bench {

// The width of a row in the row workloads (W3..W6): [rows, kRowWidth].
inline constexpr int64_t kRowWidth = 1024;

// STREAM triad: a[i] = b[i] + s * c[i].
void fused_triad(float* a, const float* b, const float* c, float s, int64_t n);

// W1: y = relu(x*a + b) * 0.5 + x.
void fused_w1_chain(const float* x, const float* a, const float* b, float* y, int64_t n);
// W2: y = 0.5*x*(1 + tanh(0.7978845608*(x + 0.044715*x^3))).
void fused_w2_gelu(const float* x, float* y, int64_t n);
// W3: softmax over each row of [rows, cols].
void fused_w3_softmax(const float* x, float* y, int64_t rows, int64_t cols);
// W4: layernorm over each row of [rows, cols] with weight and bias [cols].
void fused_w4_layernorm(const float* x, const float* w, const float* b, float eps, float* y,
                        int64_t rows, int64_t cols);
// W5: y = tanh(x + bias), bias [cols] broadcast over the rows.
void fused_w5_bias_tanh(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);
// W6: y[r] = sum of row r.
void fused_w6_rowsum(const float* x, float* y, int64_t rows, int64_t cols);

// W7's op stream, element by element: op k is add / mul / sub (k % 3) with
// the scalar s[k % 3] when k is odd and with z[i] when k is even.
void fused_w7_op_stream(const float* x, const float* z, const float* s, float* y, int64_t n,
                        int ops);

// One reference system's loops, with the signatures above (W1..W7).
struct RefLoops {
  void (*w1_chain)(const float* x, const float* a, const float* b, float* y, int64_t n);
  void (*w2_gelu)(const float* x, float* y, int64_t n);
  void (*w3_softmax)(const float* x, float* y, int64_t rows, int64_t cols);
  void (*w4_layernorm)(const float* x, const float* w, const float* b, float eps, float* y, int64_t rows,
                       int64_t cols);
  void (*w5_bias_tanh)(const float* x, const float* bias, float* y, int64_t rows, int64_t cols);
  void (*w6_rowsum)(const float* x, float* y, int64_t rows, int64_t cols);
  void (*w7_op_stream)(const float* x, const float* z, const float* s, float* y, int64_t n, int ops);
};

// The hand-written loops above.
const RefLoops& fused_loops();
// The SLEEF loops for this CPU (AVX-512 where it has avx512f, else AVX2;
// nullptr on a CPU with neither, or where libsleef-dev was not found).
const RefLoops* sleef_loops();
// "avx512" or "avx2": the SLEEF loops' ISA on this CPU (or why there are none).
const char* sleef_loops_isa();
// The Eigen Tensor loops (nullptr where libeigen3-dev was not found).
const RefLoops* eigen_loops();
// "on: Eigen 3.4.0 Tensor, ..." or "skipped (...)", for the report.
const char* eigen_loops_description();

// The hand loops' own exp and tanh, one float at a time (for the accuracy
// report: the same inline functions the loops use).
float fused_exp(float x);
float fused_tanh(float x);

}  // namespace bench
