// The Contraction form on the interpreter: the cube unit's product with a
// vector-unit epilogue, on every ISA the CPU has, for odd and edge sizes,
// transposed, strided and batch-broadcast operands, against a double
// reference and against the summation order the form defines (bits).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/isa.h"
#include "backends/microkernels.h"
#include "vm/encoder.h"
#include "vm/interpreter.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"
#include "vm/schedule.h"
#include "vm/verifier.h"

namespace dvm::vm {
namespace {

constexpr float kGuard = -12345.678f;
constexpr int64_t kGuards = 16;

std::vector<backends::Isa> isas() {
  std::vector<backends::Isa> out;
  for (auto i : {backends::Isa::Portable, backends::Isa::Avx2, backends::Isa::Avx512})
    if (backends::microkernels_for(i)) out.push_back(i);
  return out;
}

std::vector<float> random_vec(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(std::max<int64_t>(n, 1)));
  for (auto& x : v) x = d(rng);
  return v;
}

// One [P, M, K] x [P, K, N] problem with its operands' layouts.
struct Problem {
  int64_t P, M, N, K;
  bool a_transposed, b_transposed, b_broadcast;  // b_broadcast: one B for every p
  std::vector<float> a, b, bias;
  ArgBinding A, B;
  float a_at(int64_t p, int64_t m, int64_t k) const {
    return a[static_cast<size_t>(p * A.stride[kP] + m * A.stride[kR] + k * A.stride[kK])];
  }
  float b_at(int64_t p, int64_t k, int64_t n) const {
    return b[static_cast<size_t>(p * B.stride[kP] + k * B.stride[kK] + n * B.stride[kC])];
  }
};

Problem make_problem(int64_t P, int64_t M, int64_t N, int64_t K, uint32_t seed) {
  Problem q{P, M, N, K, (seed & 1) != 0, (seed & 2) != 0, (seed & 4) != 0, {}, {}, {}, {}, {}};
  q.a = random_vec(P * M * K, seed * 3 + 1);
  q.b = random_vec((q.b_broadcast ? 1 : P) * K * N, seed * 3 + 2);
  q.bias = random_vec(N, seed * 3 + 3);
  q.A.in = q.a.data();
  q.A.stride[kP] = M * K;
  q.A.stride[kR] = q.a_transposed ? 1 : K;
  q.A.stride[kK] = q.a_transposed ? M : 1;
  q.B.in = q.b.data();
  q.B.stride[kP] = q.b_broadcast ? 0 : K * N;
  q.B.stride[kK] = q.b_transposed ? 1 : N;
  q.B.stride[kC] = q.b_transposed ? K : 1;
  return q;
}

Launch make_launch(const Problem& q, float* out, size_t nargs) {
  Launch l;
  l.extent[kP] = q.P;
  l.extent[kR] = q.M;
  l.extent[kC] = q.N;
  l.extent[kK] = q.K;
  l.args.resize(nargs);
  l.args[0] = q.A;
  l.args[1] = q.B;
  ArgBinding& y = l.args[nargs - 1];
  y.out = out;
  y.stride[kP] = q.M * q.N;
  y.stride[kR] = q.N;
  y.stride[kC] = 1;
  return l;
}

// The sum the form defines: ascending k from +0, fused on the SIMD ISAs.
float ordered_sum(const Problem& q, int64_t p, int64_t m, int64_t n, bool fused) {
  float acc = 0.0f;
  for (int64_t k = 0; k < q.K; ++k) {
    if (fused) {
      acc = std::fma(q.a_at(p, m, k), q.b_at(p, k, n), acc);
    } else {
      const float prod = q.a_at(p, m, k) * q.b_at(p, k, n);
      acc = acc + prod;
    }
  }
  return acc;
}

std::vector<int64_t> sizes() { return {0, 1, 7, 17, 63, 65, 200}; }

// y = mma(a, b): every element as the defined order gives it, bit for bit;
// the items run in uneven ranges, as threads would take them.
TEST(Contraction, ProductMatchesTheDefinedOrderBitForBit) {
  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), y = e.add_arg(ArgRole::Output);
  e.store(Op::ST, y, e.mma(a, b));
  auto k = KernelCache::global().get(e.finish());
  std::mt19937 rng(5);
  uint32_t seed = 0;
  for (backends::Isa isa : isas()) {
    const backends::MicroKernels& mk = *backends::microkernels_for(isa);
    for (int64_t M : sizes())
      for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{513}})
        for (int64_t K : {int64_t{0}, int64_t{1}, int64_t{31}, int64_t{130}}) {
          const int64_t P = 1 + seed % 2;
          const Problem q = make_problem(P, M, N, K, ++seed);
          std::vector<float> out(static_cast<size_t>(P * M * N + kGuards), kGuard);
          Launch l = make_launch(q, out.data(), 3);
          check_launch(*k, l);
          const int64_t items = work_items(*k, l);
          for (int64_t i = 0; i < items;) {
            const int64_t n = 1 + static_cast<int64_t>(rng() % 3);
            interpret(*k, l, i, std::min(items, i + n), mk);
            i += n;
          }
          const bool fused = isa != backends::Isa::Portable;
          for (int64_t p = 0; p < P; ++p)
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < N; ++n) {
                const float want = ordered_sum(q, p, m, n, fused);
                const float got = out[static_cast<size_t>((p * M + m) * N + n)];
                ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                    << backends::isa_name(isa) << " P=" << P << " M=" << M << " N=" << N << " K=" << K
                    << " at " << p << "," << m << "," << n << " transposed a/b " << q.a_transposed
                    << q.b_transposed << " broadcast b " << q.b_broadcast;
              }
          for (int64_t g = 0; g < kGuards; ++g)
            ASSERT_EQ(out[static_cast<size_t>(P * M * N + g)], kGuard) << "write past the end";
        }
  }
}

// y = relu(mma(a, b) + bias[n]) * s, s a scalar parameter: the epilogue on
// the product's tiles, against a double reference.
TEST(Contraction, EpilogueRunsOnTheProduct) {
  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), bias = e.add_arg(ArgRole::Input),
            y = e.add_arg(ArgRole::Output);
  const auto t = e.binary(Op::ADD, e.mma(a, b), e.load(Op::LD, bias));
  e.store(Op::ST, y, e.binary(Op::MUL, e.unary(Op::RELU, t), e.param()));
  auto k = KernelCache::global().get(e.finish());
  uint32_t seed = 100;
  for (backends::Isa isa : isas())
    for (int64_t M : {int64_t{1}, int64_t{16}, int64_t{17}, int64_t{200}, int64_t{385}})
      for (int64_t N : {int64_t{1}, int64_t{65}, int64_t{600}}) {
        const int64_t K = 1 + (seed * 37) % 300;
        const Problem q = make_problem(2, M, N, K, ++seed);
        std::vector<float> out(static_cast<size_t>(2 * M * N + kGuards), kGuard);
        Launch l = make_launch(q, out.data(), 4);
        l.args[2].in = q.bias.data();
        l.args[2].stride[kC] = 1;  // one bias per column, for every (p, r)
        l.scalars = {0.75f};
        check_launch(*k, l);
        interpret(*k, l, 0, work_items(*k, l), *backends::microkernels_for(isa));
        for (int64_t p = 0; p < 2; ++p)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              double sum = 0, mag = 0;
              for (int64_t kk = 0; kk < K; ++kk) {
                const double prod = static_cast<double>(q.a_at(p, m, kk)) * q.b_at(p, kk, n);
                sum += prod;
                mag += std::fabs(prod);
              }
              const double pre = sum + q.bias[static_cast<size_t>(n)];
              const double want = (pre > 0 ? pre : 0) * 0.75;
              // K roundings of the sum (each <= 2^-24 of the running
              // magnitude, at most mag), then the add, relu and scale.
              const double tol = (static_cast<double>(K) + 3) * 0x1p-24 * (mag + std::fabs(q.bias[static_cast<size_t>(n)]));
              ASSERT_NEAR(out[static_cast<size_t>((p * M + m) * N + n)], want, tol)
                  << backends::isa_name(isa) << " M=" << M << " N=" << N << " K=" << K;
            }
        for (int64_t g = 0; g < kGuards; ++g) ASSERT_EQ(out[static_cast<size_t>(2 * M * N + g)], kGuard);
      }
}

// A launch's items cut for several threads (Launch::item_threads): the
// column blocks tile the output exactly, are as even as the alignment
// allows, come in a multiple of the thread count where a few more blocks do
// it, and give the bits of the one-thread blocks, run in any pieces.
TEST(Contraction, ItemsCutForThreadsTileTheOutputAndKeepTheBits) {
  for (int64_t P : {1, 2, 3})
    for (int64_t R : {1, 16, 17, 48, 128, 241, 500})
      for (int64_t C : {1, 31, 128, 129, 700, 768, 1029, 2304, 3072})
        for (int32_t T : {1, 2, 3, 4, 8, 16}) {
          Launch l;
          l.extent[kP] = P;
          l.extent[kR] = R;
          l.extent[kC] = C;
          l.extent[kK] = 9;
          l.item_threads = T;
          const MmaBlocks b = mma_blocks(l);
          const std::string at = "P=" + std::to_string(P) + " R=" + std::to_string(R) + " C=" + std::to_string(C) +
                                 " threads=" + std::to_string(T);
          ASSERT_GE(b.rows * b.rblocks, R) << at;
          ASSERT_LT(b.rows * (b.rblocks - 1), R) << at;
          ASSERT_GE(b.cols * b.cblocks, C) << at;
          ASSERT_LT(b.cols * (b.cblocks - 1), C) << at << ": an empty column block";
          ASSERT_LE(b.cols, kMmaCols) << at;
          if (T == 1 || R <= kMmaSmallRows) {
            ASSERT_EQ(b.cols, kMmaCols) << at << ": one thread (or a few rows) keeps the widest blocks";
          } else {
            ASSERT_EQ(b.cols % kMmaColAlign, 0) << at;
            ASSERT_GE(b.cblocks, (C + kMmaCols - 1) / kMmaCols) << at;
          }
        }
  // The shapes of a prompt's products on two threads: equal halves.
  auto cut = [](int64_t R, int64_t C, int32_t T) {
    Launch l;
    l.extent[kR] = R;
    l.extent[kC] = C;
    l.item_threads = T;
    const MmaBlocks b = mma_blocks(l);
    return std::pair{b.cblocks, b.cols};
  };
  EXPECT_EQ(cut(128, 768, 2), (std::pair<int64_t, int64_t>{2, 384}));
  EXPECT_EQ(cut(128, 2304, 2), (std::pair<int64_t, int64_t>{6, 384}));
  EXPECT_EQ(cut(128, 3072, 2), (std::pair<int64_t, int64_t>{6, 512}));
  EXPECT_EQ(cut(32, 768, 3), (std::pair<int64_t, int64_t>{3, 256}));
  EXPECT_EQ(cut(128, 768, 1), (std::pair<int64_t, int64_t>{2, 512}));

  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), bb = e.add_arg(ArgRole::Input), bias = e.add_arg(ArgRole::Input),
            y = e.add_arg(ArgRole::Output);
  e.store(Op::ST, y, e.unary(Op::RELU, e.binary(Op::ADD, e.mma(a, bb), e.load(Op::LD, bias))));
  auto k = KernelCache::global().get(e.finish());
  uint32_t seed = 900;
  for (backends::Isa isa : isas())
    for (int64_t M : {int64_t{17}, int64_t{128}})
      for (int64_t N : {int64_t{600}, int64_t{768}, int64_t{1029}}) {
        const Problem q = make_problem(2, M, N, 40, ++seed);
        std::vector<float> first;
        for (int32_t T : {1, 2, 3, 5}) {
          std::vector<float> out(static_cast<size_t>(2 * M * N + kGuards), kGuard);
          Launch l = make_launch(q, out.data(), 4);
          l.args[2].in = q.bias.data();
          l.args[2].stride[kC] = 1;
          l.item_threads = T;
          check_launch(*k, l);
          const int64_t items = work_items(*k, l);
          for (int64_t i = 0; i < items; ++i)  // one item at a time, as threads would take them
            interpret(*k, l, i, i + 1, *backends::microkernels_for(isa));
          for (int64_t g = 0; g < kGuards; ++g) ASSERT_EQ(out[static_cast<size_t>(2 * M * N + g)], kGuard);
          out.resize(static_cast<size_t>(2 * M * N));
          if (T == 1) {
            for (int64_t i = 0; i < 2 * M * N; ++i) {
              const int64_t p = i / (M * N), m = i / N % M, n = i % N;
              const float want = std::max(0.0f, ordered_sum(q, p, m, n, isa != backends::Isa::Portable) +
                                                    q.bias[static_cast<size_t>(n)]);
              ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(i)]), std::bit_cast<uint32_t>(want))
                  << backends::isa_name(isa) << " M=" << M << " N=" << N << " element " << i;
            }
            first = out;
          } else {
            for (size_t i = 0; i < out.size(); ++i)
              ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(first[i]))
                  << backends::isa_name(isa) << " M=" << M << " N=" << N << " threads " << T << " element " << i;
          }
        }
      }
}

// Operand prologues: a' = a * s (s a scalar parameter) is computed while
// the cube packs a, b' = relu(b) + c[n] (c a per-column vector) while it
// packs b; y = mma(a', b') is the defined order's sum of a'[k] * b'[k],
// bit for bit, each prologue value rounded once as a lone op rounds it.
// K crosses the K panels; the items run in uneven ranges; transposed
// operands are read with their strides.
TEST(Contraction, OperandProloguesAreComputedWhileTheCubePacks) {
  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), c = e.add_arg(ArgRole::Input),
            y = e.add_arg(ArgRole::Output);
  const auto pa = e.binary(Op::MUL, e.load(Op::LDOA, a), e.param());
  const auto pb = e.binary(Op::ADD, e.unary(Op::RELU, e.load(Op::LDOB, b)), e.load(Op::LDOB, c));
  e.store(Op::ST, y, e.mma_values(pa, pb));
  auto k = KernelCache::global().get(e.finish());
  // Only a's prologue; b read as mma reads it (the cube's own path).
  Encoder e1(Form::Contraction);
  const int a1 = e1.add_arg(ArgRole::Input), b1 = e1.add_arg(ArgRole::Input), y1 = e1.add_arg(ArgRole::Output);
  e1.store(Op::ST, y1, e1.mma_values(e1.binary(Op::MUL, e1.load(Op::LDOA, a1), e1.param()), e1.load(Op::LDOB, b1)));
  auto k1 = KernelCache::global().get(e1.finish());
  std::mt19937 rng(7);
  uint32_t seed = 300;
  const float s = -0.3f;
  for (backends::Isa isa : isas()) {
    const backends::MicroKernels& mk = *backends::microkernels_for(isa);
    const bool fused = isa != backends::Isa::Portable;
    for (int64_t M : {int64_t{1}, int64_t{7}, int64_t{65}, int64_t{250}})
      for (int64_t N : {int64_t{1}, int64_t{17}, int64_t{600}})
        for (int64_t K : {int64_t{0}, int64_t{1}, int64_t{63}, int64_t{300}})
          for (bool both : {true, false}) {
            const int64_t P = 1 + seed % 2;
            const Problem q = make_problem(P, M, N, K, ++seed);
            const std::vector<float> col = random_vec(N, seed * 5);
            std::vector<float> out(static_cast<size_t>(P * M * N + kGuards), kGuard);
            Launch l = make_launch(q, out.data(), both ? 4 : 3);
            if (both) {
              l.args[2].in = col.data();
              l.args[2].stride[kC] = 1;  // c[n], for every (p, k)
            }
            l.scalars = {s};
            const Kernel& kern = both ? *k : *k1;
            check_launch(kern, l);
            const int64_t items = work_items(kern, l);
            for (int64_t i = 0; i < items;) {
              const int64_t n = 1 + static_cast<int64_t>(rng() % 3);
              interpret(kern, l, i, std::min(items, i + n), mk);
              i += n;
            }
            for (int64_t p = 0; p < P; ++p)
              for (int64_t m = 0; m < M; ++m)
                for (int64_t n = 0; n < N; ++n) {
                  float acc = 0.0f;
                  for (int64_t kk = 0; kk < K; ++kk) {
                    const float x = q.a_at(p, m, kk) * s;
                    const float w = both ? std::max(q.b_at(p, kk, n), 0.0f) + col[static_cast<size_t>(n)] : q.b_at(p, kk, n);
                    if (fused) acc = std::fma(x, w, acc);
                    else acc = acc + x * w;
                  }
                  const float got = out[static_cast<size_t>((p * M + m) * N + n)];
                  ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(acc))
                      << backends::isa_name(isa) << (both ? " both prologues" : " a's prologue") << " P=" << P
                      << " M=" << M << " N=" << N << " K=" << K << " at " << p << "," << m << "," << n
                      << " transposed a/b " << q.a_transposed << q.b_transposed;
                }
            for (int64_t g = 0; g < kGuards; ++g)
              ASSERT_EQ(out[static_cast<size_t>(P * M * N + g)], kGuard) << "write past the end";
          }
  }
}

// A store of a constant (a uniform value) in a kernel with operand
// prologues: it writes the [P, R, C] output in the epilogue, not while a
// prologue covers an operand's [P, R, K] or [P, K, C] with that operand's
// strides (which wrote past the output when K > C; found by the bytecode
// fuzzer). Generated sizes with K above and below N, every ISA: the
// constant everywhere in its output, the product in the other, and the
// guards after both intact.
TEST(Contraction, AConstantStoredBesideProloguesIsAnEpilogueStore) {
  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), z = e.add_arg(ArgRole::Output),
            y = e.add_arg(ArgRole::Output);
  e.store(Op::ST, z, e.constant(2.5f));
  e.store(Op::ST, y, e.mma_values(e.binary(Op::MUL, e.load(Op::LDOA, a), e.param()), e.load(Op::LDOB, b)));
  const Bytecode bc = e.finish();
  VerifiedProgram vp;
  std::string err;
  ASSERT_TRUE(verify(bc, &vp, &err)) << err;
  EXPECT_EQ(vp.info[1].space, kOutSpace) << "the constant's store";
  auto k = KernelCache::global().get(bc);
  std::mt19937 rng(23);
  uint32_t seed = 900;
  for (backends::Isa isa : isas()) {
    const backends::MicroKernels& mk = *backends::microkernels_for(isa);
    for (int iter = 0; iter < 12; ++iter) {
      const int64_t P = 1 + rng() % 2, M = 1 + rng() % 9, N = 1 + rng() % 6, K = rng() % 40;
      const Problem q = make_problem(P, M, N, K, ++seed);
      std::vector<float> out(static_cast<size_t>(P * M * N + kGuards), kGuard), zs = out;
      Launch l = make_launch(q, out.data(), 4);
      l.args[2] = l.args[3];
      l.args[2].out = zs.data();
      l.scalars = {0.75f};
      check_launch(*k, l);
      interpret(*k, l, 0, work_items(*k, l), mk);
      const std::string what = std::string(backends::isa_name(isa)) + " P=" + std::to_string(P) + " M=" +
                               std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K);
      for (int64_t i = 0; i < P * M * N; ++i) {
        ASSERT_EQ(zs[static_cast<size_t>(i)], 2.5f) << what << " at " << i;
        const int64_t pp = i / (M * N), m = i / N % M, n = i % N;
        double want = 0;
        for (int64_t kk = 0; kk < K; ++kk) want += static_cast<double>(q.a_at(pp, m, kk) * 0.75f) * q.b_at(pp, kk, n);
        ASSERT_NEAR(out[static_cast<size_t>(i)], want, 1e-4 * (1 + std::fabs(want))) << what << " at " << i;
      }
      for (int64_t g = 0; g < kGuards; ++g) {
        ASSERT_EQ(zs[static_cast<size_t>(P * M * N + g)], kGuard) << what << ": written past the constant's output";
        ASSERT_EQ(out[static_cast<size_t>(P * M * N + g)], kGuard) << what << ": written past the product";
      }
    }
  }
}

// AVX2 and AVX-512 both sum with one rounding per step in the same order:
// the same bits.
TEST(Contraction, SimdIsasAgreeBitForBit) {
  if (!backends::microkernels_for(backends::Isa::Avx2) || !backends::microkernels_for(backends::Isa::Avx512))
    GTEST_SKIP() << "needs AVX2 and AVX-512";
  Encoder e(Form::Contraction);
  const int a = e.add_arg(ArgRole::Input), b = e.add_arg(ArgRole::Input), y = e.add_arg(ArgRole::Output);
  e.store(Op::ST, y, e.unary(Op::TANH, e.mma(a, b)));
  auto k = KernelCache::global().get(e.finish());
  const Problem q = make_problem(1, 77, 300, 257, 9);
  std::vector<float> y2(77 * 300), y5(77 * 300);
  Launch l2 = make_launch(q, y2.data(), 3), l5 = make_launch(q, y5.data(), 3);
  interpret(*k, l2, 0, work_items(*k, l2), *backends::microkernels_for(backends::Isa::Avx2));
  interpret(*k, l5, 0, work_items(*k, l5), *backends::microkernels_for(backends::Isa::Avx512));
  for (size_t i = 0; i < y2.size(); ++i)
    ASSERT_EQ(std::bit_cast<uint32_t>(y2[i]), std::bit_cast<uint32_t>(y5[i])) << i;
}

}  // namespace
}  // namespace dvm::vm
