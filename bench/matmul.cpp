// Contractions (issue 15's figures):
//   matmul/<M>x<K>x<N>/<system>/threads:N      C = A B, A [M, K], B [K, N] row-major
//   matmul/<B>x<M>x<K>x<N>/<system>/threads:N  the same for B matrices at once (bmm)
//   linear_gelu/<M>x<K>x<N>/<system>/threads:N gelu_tanh(x W^T + b), W [N, K] (torch's layout);
//                                              dvm holds W as a tensor, dvm_rewrap wraps it per call
//   matmul_dynamic/<system>                    50 pseudo-random M in [1, 512], K = N = 768,
//                                              one pass per iteration
//   matmul_prologue/<M>x<K>x<N>/<system>       (x * s) W, x [M, K]: dvm scales x while the
//                                              cube packs it (one kernel); dvm_stored holds
//                                              x * s, so it is stored first (two kernels);
//                                              openblas scales into a buffer, then sgemm
// Counter gflops (2 M N K per product). Systems: dvm (the public API, what a
// user writes, past the JIT threshold), dvm_interp (the interpreter only),
// dvm_bf16 (bfloat16 operands and result, the inference shapes),
// openblas (cblas_sgemm, its threads set to N), onednn (a matmul primitive
// created once; onednn_new_shape creates it inside the timed loop) and libtorch (libtorch_matmul.cpp), each where Debian's package was
// found at configure time. Every dvm and libtorch result is checked once,
// outside the timing, at sampled elements against a double-precision dot
// product.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "bench/common.h"

#ifdef DVM_BENCH_HAVE_OPENBLAS
#include <cblas.h>
#endif
#ifdef DVM_BENCH_HAVE_ONEDNN
#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace bench {
namespace {

struct MmShape {
  int64_t M, K, N;
  int64_t batch = 1;  // > 1: bmm of [batch, M, K] and [batch, K, N]
};

std::vector<MmShape> matmul_shapes() {
  std::vector<MmShape> s = {{256, 256, 256}, {512, 512, 512}, {1024, 1024, 1024}, {2048, 2048, 2048}};
  for (int64_t M : {1, 8, 32, 128, 512})
    for (auto [K, N] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {3072, 768}}) s.push_back({M, K, N});
  // Attention scores: [B*H = 48, S, 64] x [48, 64, S].
  for (int64_t S : {32, 128, 512}) s.push_back({S, 64, S, 48});
  return s;
}

std::vector<MmShape> linear_shapes() {
  std::vector<MmShape> s;
  for (int64_t M : {1, 8, 32, 128, 512})
    for (auto [K, N] : {std::pair<int64_t, int64_t>{768, 768}, {768, 3072}, {3072, 768}}) s.push_back({M, K, N});
  return s;
}

std::string dims(const MmShape& s) {
  return (s.batch > 1 ? std::to_string(s.batch) + "x" : "") + std::to_string(s.M) + "x" + std::to_string(s.K) + "x" +
         std::to_string(s.N);
}

// Flops of one product (of every batch).
double flops(const MmShape& s) { return 2.0 * static_cast<double>(s.batch * s.M * s.K * s.N); }

std::vector<float> values(int64_t n, uint64_t seed) {
  std::vector<float> v(static_cast<size_t>(n));
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& f : v) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    f = static_cast<float>(static_cast<int64_t>((x * 0x2545F4914F6CDD1Dull) >> 40) % 2001 - 1000) * 1e-3f;
  }
  return v;
}

double gelu_tanh(double t) { return 0.5 * t * (1 + std::tanh(0.7978845608028654 * (t + 0.044715 * t * t * t))); }

// Aborts unless sampled elements of y [batch, M, N] match the double
// reference: C[i][m][n] = sum_k a(i, m, k) b(i, k, n) (then bias and gelu
// when `linear`).
template <class A, class B>
void check_product(const std::string& what, const float* y, const MmShape& s, A a, B b, const float* bias = nullptr,
                   double rel = 0) {
  for (int t = 0; t < 64; ++t) {
    const int64_t i = t % s.batch, m = (t * 7919) % s.M, n = (t * 104729) % s.N;
    double sum = 0, mag = 0;
    for (int64_t k = 0; k < s.K; ++k) {
      sum += static_cast<double>(a(i, m, k)) * b(i, k, n);
      mag += std::fabs(static_cast<double>(a(i, m, k)) * b(i, k, n));
    }
    double want = sum;
    if (bias) want = gelu_tanh(sum + bias[n]);
    const double got = y[(i * s.M + m) * s.N + n];
    if (std::fabs(got - want) > (static_cast<double>(s.K) + 8) * 0x1p-24 * (mag + 1) + rel * std::fabs(want) + 1e-6) {
      std::fprintf(stderr, "bench_dvm: %s: element (%lld, %lld) is %.9g, expected %.9g\n", what.c_str(),
                   static_cast<long long>(m), static_cast<long long>(n), got, want);
      std::abort();
    }
  }
}

// Element accessors (batch i, row, column) of the row-major inputs.
auto a_at(const MmShape& s, const std::vector<float>& a) {
  return [&s, &a](int64_t i, int64_t m, int64_t k) { return a[static_cast<size_t>((i * s.M + m) * s.K + k)]; };
}
auto b_at(const MmShape& s, const std::vector<float>& b) {
  return [&s, &b](int64_t i, int64_t k, int64_t n) { return b[static_cast<size_t>((i * s.K + k) * s.N + n)]; };
}
// W [N, K] read as W^T (linear).
auto wt_at(const MmShape& s, const std::vector<float>& w) {
  return [&s, &w](int64_t, int64_t k, int64_t n) { return w[static_cast<size_t>(n * s.K + k)]; };
}

void set_gflops(benchmark::State& state, double flops_per_iter) {
  state.counters["gflops"] =
      benchmark::Counter(flops_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Past the JIT threshold with background compiles done, so that the timed
// loop measures the tier the system stands for.
template <class F>
void warm(F once) {
  for (int64_t i = 0; i <= dvm::jit_threshold(); ++i) once();
  dvm::wait_for_jit();
}

void BM_matmul_dvm(benchmark::State& state, MmShape s, int threads, const System& sys, const std::string& name) {
  apply_system(sys, threads);
  const std::vector<float> a = values(s.batch * s.M * s.K, 1), b = values(s.batch * s.K * s.N, 2);
  const dvm::Shape as = s.batch > 1 ? dvm::Shape{s.batch, s.M, s.K} : dvm::Shape{s.M, s.K};
  const dvm::Shape bs = s.batch > 1 ? dvm::Shape{s.batch, s.K, s.N} : dvm::Shape{s.K, s.N};
  auto once = [&] { return dvm::matmul(dvm::Tensor::from_blob(a.data(), as), dvm::Tensor::from_blob(b.data(), bs)); };
  if (first_time(name)) {
    const dvm::Tensor y = once();
    check_product(name, y.data(), s, a_at(s, a), b_at(s, b));
  }
  warm(once);
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data());
  }
  set_gflops(state, flops(s));
}

// matmul with bfloat16 operands and result (the inputs above rounded to
// bfloat16): the cube widens the operands as it reads them and rounds the
// f32 sums once. Checked as the f32 product on the rounded inputs, plus
// half a bfloat16 ulp (2^-8 relative) for the result's rounding.
void BM_matmul_dvm_bf16(benchmark::State& state, MmShape s, int threads, const std::string& name) {
  apply_system(kDvm, threads);
  std::vector<float> a = values(s.batch * s.M * s.K, 1), b = values(s.batch * s.K * s.N, 2);
  std::vector<dvm::BFloat16> a16, b16;
  for (float& v : a) {
    a16.push_back(dvm::to_bfloat16(v));
    v = dvm::to_float(a16.back());
  }
  for (float& v : b) {
    b16.push_back(dvm::to_bfloat16(v));
    v = dvm::to_float(b16.back());
  }
  const dvm::Shape as = s.batch > 1 ? dvm::Shape{s.batch, s.M, s.K} : dvm::Shape{s.M, s.K};
  const dvm::Shape bs = s.batch > 1 ? dvm::Shape{s.batch, s.K, s.N} : dvm::Shape{s.K, s.N};
  auto once = [&] { return dvm::matmul(dvm::Tensor::from_blob(a16.data(), as), dvm::Tensor::from_blob(b16.data(), bs)); };
  if (first_time(name)) {
    const std::vector<float> y = once().to_vector();
    check_product(name, y.data(), s, a_at(s, a), b_at(s, b), nullptr, 0x1p-8);
  }
  warm(once);
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data<dvm::BFloat16>());
  }
  set_gflops(state, flops(s));
}

// The weight and bias are tensors made once, as a model holds its
// parameters; x is wrapped on every call. rewrap: the weight is wrapped anew
// on every call too (an engine handing dvm its arrays each frame), so no
// tensor outlives a call.
void BM_linear_gelu_dvm(benchmark::State& state, MmShape s, int threads, const System& sys, bool rewrap,
                        const std::string& name) {
  apply_system(sys, threads);
  const std::vector<float> x = values(s.M * s.K, 3), w = values(s.N * s.K, 4), bias = values(s.N, 5);
  const dvm::Tensor weight = dvm::Tensor::from_blob(w.data(), {s.N, s.K}), b = dvm::Tensor::from_blob(bias.data(), {s.N});
  auto once = [&] {
    return dvm::gelu(dvm::linear(dvm::Tensor::from_blob(x.data(), {s.M, s.K}),
                                 rewrap ? dvm::Tensor::from_blob(w.data(), {s.N, s.K}) : weight, b),
                     dvm::GeluApprox::Tanh);
  };
  if (first_time(name)) {
    const dvm::Tensor y = once();
    check_product(name, y.data(), s, a_at(s, x), wt_at(s, w), bias.data());
  }
  warm(once);
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data());
  }
  set_gflops(state, flops(s));
}

// (x * s) W with the scale as an operand prologue, or (stored) computed by
// a kernel of its own first because the user holds it.
constexpr float kPrologueScale = 0.37f;
void BM_matmul_prologue_dvm(benchmark::State& state, MmShape s, bool stored, const std::string& name) {
  apply_system(kDvm, 1);
  const std::vector<float> x = values(s.M * s.K, 6), w = values(s.K * s.N, 7);
  std::vector<float> xs(x);
  for (float& v : xs) v *= kPrologueScale;
  auto once = [&] {
    const dvm::Tensor a = dvm::Tensor::from_blob(x.data(), {s.M, s.K}) * kPrologueScale;
    dvm::Tensor y = dvm::matmul(a, dvm::Tensor::from_blob(w.data(), {s.K, s.N}));
    if (stored) (void)y.data();  // a is still held here: stored by its own kernel
    return y;
  };
  if (first_time(name)) {
    const dvm::Tensor y = once();
    check_product(name, y.data(), s, a_at(s, xs), b_at(s, w));
  }
  warm(once);
  for (auto _ : state) {
    dvm::Tensor y = once();
    benchmark::DoNotOptimize(y.data());
  }
  set_gflops(state, flops(s));
}

// 50 pseudo-random M in [1, 512] (the same list every run).
std::vector<int64_t> dynamic_rows() {
  std::vector<int64_t> m;
  uint64_t x = 12345;
  for (int i = 0; i < 50; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    m.push_back(1 + static_cast<int64_t>((x >> 33) % 512));
  }
  return m;
}

void BM_matmul_dynamic_dvm(benchmark::State& state) {
  apply_system(kDvm, 1);
  const std::vector<int64_t> rows = dynamic_rows();
  const std::vector<float> a = values(512 * 768, 6), b = values(768 * 768, 7);
  const dvm::Tensor B = dvm::Tensor::from_blob(b.data(), {768, 768});
  auto pass = [&] {
    for (int64_t M : rows) {
      dvm::Tensor y = dvm::matmul(dvm::Tensor::from_blob(a.data(), {M, 768}), B);
      benchmark::DoNotOptimize(y.data());
    }
  };
  // Google Benchmark calls this function more than once: the counts are
  // those of the process's first two passes.
  static int64_t first = -1, second = -1;
  if (first < 0) {
    const int64_t c0 = dvm::stats().kernels_compiled;
    pass();
    const int64_t c1 = dvm::stats().kernels_compiled;
    pass();
    first = c1 - c0;
    second = dvm::stats().kernels_compiled - c1;
  }
  double flops = 0;
  for (int64_t M : rows) flops += 2.0 * static_cast<double>(M) * 768 * 768;
  for (auto _ : state) pass();
  // The first pass (0 if an earlier benchmark compiled the kernel already)
  // and the second, which must compile nothing.
  state.counters["compiles_first"] = static_cast<double>(first);
  state.counters["compiles_second"] = static_cast<double>(second);
  set_gflops(state, flops);
}

#ifdef DVM_BENCH_HAVE_OPENBLAS
void BM_matmul_openblas(benchmark::State& state, MmShape s, int threads) {
  openblas_set_num_threads(threads);
  const std::vector<float> a = values(s.batch * s.M * s.K, 1), b = values(s.batch * s.K * s.N, 2);
  std::vector<float> c(static_cast<size_t>(s.batch * s.M * s.N));
  for (auto _ : state) {
    for (int64_t i = 0; i < s.batch; ++i)  // a batch is one sgemm per matrix
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.M), static_cast<int>(s.N),
                  static_cast<int>(s.K), 1.0f, a.data() + i * s.M * s.K, static_cast<int>(s.K),
                  b.data() + i * s.K * s.N, static_cast<int>(s.N), 0.0f, c.data() + i * s.M * s.N,
                  static_cast<int>(s.N));
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, flops(s));
}

void BM_matmul_prologue_openblas(benchmark::State& state, MmShape s) {
  openblas_set_num_threads(1);
  const std::vector<float> x = values(s.M * s.K, 6), w = values(s.K * s.N, 7);
  std::vector<float> xs(x.size()), c(static_cast<size_t>(s.M * s.N));
  for (auto _ : state) {
    for (size_t i = 0; i < x.size(); ++i) xs[i] = x[i] * kPrologueScale;  // vectorized at -O2
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(s.M), static_cast<int>(s.N),
                static_cast<int>(s.K), 1.0f, xs.data(), static_cast<int>(s.K), w.data(), static_cast<int>(s.N), 0.0f,
                c.data(), static_cast<int>(s.N));
    benchmark::DoNotOptimize(c.data());
  }
  set_gflops(state, flops(s));
}

void BM_matmul_dynamic_openblas(benchmark::State& state) {
  openblas_set_num_threads(1);
  const std::vector<int64_t> rows = dynamic_rows();
  const std::vector<float> a = values(512 * 768, 6), b = values(768 * 768, 7);
  std::vector<float> c(512 * 768);
  double flops = 0;
  for (int64_t M : rows) flops += 2.0 * static_cast<double>(M) * 768 * 768;
  for (auto _ : state)
    for (int64_t M : rows) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), 768, 768, 1.0f, a.data(), 768,
                  b.data(), 768, 0.0f, c.data(), 768);
      benchmark::DoNotOptimize(c.data());
    }
  set_gflops(state, flops);
}
#endif

#ifdef DVM_BENCH_HAVE_ONEDNN
// A oneDNN matmul of src [M, K] and weights [K, N] (or W^T from W [N, K],
// with a bias and a gelu_tanh post-op when `linear`), created once.
struct OnednnMatmul {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::memory src, wei, dst, bias;
  dnnl::matmul prim;
  std::vector<float> x, w, b, y;

  OnednnMatmul(const MmShape& s, bool linear) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    x = values(s.batch * s.M * s.K, linear ? 3 : 1);
    w = values(s.batch * s.K * s.N, linear ? 4 : 2);
    b = values(s.N, 5);
    y.resize(static_cast<size_t>(s.batch * s.M * s.N));
    const bool batched = s.batch > 1;  // then never linear
    const dnnl::memory::desc sd = batched ? dnnl::memory::desc({s.batch, s.M, s.K}, dt::f32, tag::abc)
                                          : dnnl::memory::desc({s.M, s.K}, dt::f32, tag::ab);
    const dnnl::memory::desc dd = batched ? dnnl::memory::desc({s.batch, s.M, s.N}, dt::f32, tag::abc)
                                          : dnnl::memory::desc({s.M, s.N}, dt::f32, tag::ab);
    const dnnl::memory::desc wd = batched ? dnnl::memory::desc({s.batch, s.K, s.N}, dt::f32, tag::abc)
                                          : dnnl::memory::desc({s.K, s.N}, dt::f32, linear ? tag::ba : tag::ab);
    const dnnl::memory::desc bd({1, s.N}, dt::f32, tag::ab);
    src = dnnl::memory(sd, eng, x.data());
    wei = dnnl::memory(wd, eng, w.data());
    dst = dnnl::memory(dd, eng, y.data());
    bias = dnnl::memory(bd, eng, b.data());
    dnnl::primitive_attr attr;
    if (linear) {
      dnnl::post_ops po;
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_gelu_tanh, 0.0f, 0.0f);
      attr.set_post_ops(po);
      prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(sd, wd, bd, dd), attr, eng));
    } else {
      prim = dnnl::matmul(dnnl::matmul::primitive_desc(dnnl::matmul::desc(sd, wd, dd), attr, eng));
    }
    linear_ = linear;
  }
  void run() {
    std::unordered_map<int, dnnl::memory> args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}};
    if (linear_) args[DNNL_ARG_BIAS] = bias;
    prim.execute(strm, args);
    strm.wait();
  }
  bool linear_ = false;
};

void BM_onednn(benchmark::State& state, MmShape s, int threads, bool linear, bool new_shape) {
  omp_set_num_threads(threads);
  OnednnMatmul mm(s, linear);
  for (auto _ : state) {
    if (new_shape) mm = OnednnMatmul(s, linear);
    mm.run();
    benchmark::DoNotOptimize(mm.y.data());
  }
  set_gflops(state, flops(s));
}
#endif

#ifdef DVM_BENCH_HAVE_LIBTORCH
// torch::matmul, or gelu(linear) when `linear`, on the same inputs as dvm's.
void BM_libtorch(benchmark::State& state, MmShape s, int threads, bool linear, const std::string& name) {
  apply_system(System{"libtorch", Tier::Libtorch}, threads);
  const std::vector<float> a = values(s.batch * s.M * s.K, linear ? 3 : 1),
                           b = values(s.batch * s.K * s.N, linear ? 4 : 2), bias = values(s.N, 5);
  const float* c = linear ? bias.data() : nullptr;
  if (first_time(name)) {
    std::vector<float> y(static_cast<size_t>(s.batch * s.M * s.N));
    libtorch_product(a.data(), b.data(), c, s.batch, s.M, s.K, s.N, y.data());
    if (linear) check_product(name, y.data(), s, a_at(s, a), wt_at(s, b), c);
    else check_product(name, y.data(), s, a_at(s, a), b_at(s, b));
  }
  libtorch_product_loop(state, a.data(), b.data(), c, s.batch, s.M, s.K, s.N);
  set_gflops(state, flops(s));
}
#endif

void add(const std::string& name, std::function<void(benchmark::State&)> fn, int threads) {
  benchmark::internal::Benchmark* b = benchmark::RegisterBenchmark(name.c_str(), std::move(fn));
  b->Unit(benchmark::kMicrosecond);
  if (threads > 1) b->UseRealTime();
}

// dvm as a user gets it (tiering: the cube's generated micro-kernels once
// hot) and on the interpreter only (its precompiled micro-kernels).
constexpr System kDvmSystems[] = {{"dvm", Tier::Default}, {"dvm_interp", Tier::Off}};

int register_matmul() {
  for (const MmShape& s : matmul_shapes())
    for (int threads : thread_counts()) {
      const std::string tail = "/threads:" + std::to_string(threads);
      for (const System& sys : kDvmSystems) {
        const std::string dvm_name = "matmul/" + dims(s) + "/" + sys.name + tail;
        add(dvm_name, [=](benchmark::State& st) { BM_matmul_dvm(st, s, threads, sys, dvm_name); }, threads);
      }
      if (s.batch == 1 && s.K >= 768) {  // the inference shapes
        const std::string bf16_name = "matmul/" + dims(s) + "/dvm_bf16" + tail;
        add(bf16_name, [=](benchmark::State& st) { BM_matmul_dvm_bf16(st, s, threads, bf16_name); }, threads);
      }
#ifdef DVM_BENCH_HAVE_OPENBLAS
      add("matmul/" + dims(s) + "/openblas" + tail, [=](benchmark::State& st) { BM_matmul_openblas(st, s, threads); },
          threads);
#endif
#ifdef DVM_BENCH_HAVE_ONEDNN
      add("matmul/" + dims(s) + "/onednn" + tail,
          [=](benchmark::State& st) { BM_onednn(st, s, threads, false, false); }, threads);
#endif
#ifdef DVM_BENCH_HAVE_LIBTORCH
      const std::string torch_name = "matmul/" + dims(s) + "/libtorch" + tail;
      add(torch_name, [=](benchmark::State& st) { BM_libtorch(st, s, threads, false, torch_name); }, threads);
#endif
    }
  for (const MmShape& s : linear_shapes())
    for (int threads : thread_counts()) {
      const std::string tail = "/threads:" + std::to_string(threads);
      for (const System& sys : kDvmSystems) {
        const std::string dvm_name = "linear_gelu/" + dims(s) + "/" + sys.name + tail;
        add(dvm_name, [=](benchmark::State& st) { BM_linear_gelu_dvm(st, s, threads, sys, false, dvm_name); }, threads);
      }
      const std::string rewrap_name = "linear_gelu/" + dims(s) + "/dvm_rewrap" + tail;
      add(rewrap_name, [=](benchmark::State& st) { BM_linear_gelu_dvm(st, s, threads, kDvm, true, rewrap_name); },
          threads);
#ifdef DVM_BENCH_HAVE_ONEDNN
      add("linear_gelu/" + dims(s) + "/onednn" + tail,
          [=](benchmark::State& st) { BM_onednn(st, s, threads, true, false); }, threads);
      add("linear_gelu/" + dims(s) + "/onednn_new_shape" + tail,
          [=](benchmark::State& st) { BM_onednn(st, s, threads, true, true); }, threads);
#endif
#ifdef DVM_BENCH_HAVE_LIBTORCH
      const std::string torch_name = "linear_gelu/" + dims(s) + "/libtorch" + tail;
      add(torch_name, [=](benchmark::State& st) { BM_libtorch(st, s, threads, true, torch_name); }, threads);
#endif
    }
  for (int64_t M : {1, 8, 32, 128, 512}) {
    const MmShape s{M, 768, 768};
    for (bool stored : {false, true}) {
      const std::string name = "matmul_prologue/" + dims(s) + (stored ? "/dvm_stored" : "/dvm");
      add(name, [=](benchmark::State& st) { BM_matmul_prologue_dvm(st, s, stored, name); }, 1);
    }
#ifdef DVM_BENCH_HAVE_OPENBLAS
    add("matmul_prologue/" + dims(s) + "/openblas", [=](benchmark::State& st) { BM_matmul_prologue_openblas(st, s); },
        1);
#endif
  }
  add("matmul_dynamic/dvm", BM_matmul_dynamic_dvm, 1);
#ifdef DVM_BENCH_HAVE_OPENBLAS
  add("matmul_dynamic/openblas", BM_matmul_dynamic_openblas, 1);
#endif
  return 0;
}
const int registered = register_matmul();

}  // namespace
}  // namespace bench
