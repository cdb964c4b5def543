// RowReduce kernels on short rows ([N, 3] positions): what the machine code
// does per row is cut without changing a bit. Scratch rows (values kept
// between passes) hold whole vectors, so a pass's tail stores and reloads
// them unmasked (a masked store does not forward to the next pass's load);
// the horizontal tree skips the steps whose upper half lies past the row.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/jit/jit.h"
#include "backends/jit/lower.h"
#include "backends/microkernels.h"
#include "dvm/dvm.h"
#include "tests/backends/canonical_row_reduce.h"
#include "tests/backends/jit_isas.h"

namespace dvm::backends::jit {
namespace {

using testing::canonical_row_reduce;
using testing::jit_isas;
using testing::make_kernel;
using vm::ArgRole;
using vm::Encoder;
using vm::Form;
using vm::Op;

constexpr uint32_t kSentinel = 0x7fc0beefu;  // a NaN no kernel computes here

std::vector<int64_t> generated_lengths(std::mt19937& g) {
  std::vector<int64_t> out = {1, 2, 3, 4, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100};
  std::uniform_int_distribution<int64_t> d(1, 300);
  for (int i = 0; i < 8; ++i) out.push_back(d(g));
  return out;
}

// softmax over rows, in double.
std::vector<double> softmax_ref(const std::vector<float>& x, int64_t R, int64_t C) {
  std::vector<double> y(x.size());
  for (int64_t r = 0; r < R; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, static_cast<double>(x[r * C + c]));
    for (int64_t c = 0; c < C; ++c) s += y[r * C + c] = std::exp(x[r * C + c] - m);
    for (int64_t c = 0; c < C; ++c) y[r * C + c] /= s;
  }
  return y;
}

// The kernel's entry point run directly on a scratch buffer it shares with
// nothing: the exponentials are kept in scratch row 0 and their tail is
// stored as a whole vector (the lanes past C change), nothing is written past
// the row's room, and the results are the reference's.
TEST(JitShortRows, ScratchTailsStoreAndLoadWholeVectors) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto ex = e.unary(Op::EXP, e.binary(Op::SUB, x, e.reduce(Op::RMAX, x)));
  e.store(Op::ST, ay, e.binary(Op::DIV, ex, e.reduce(Op::RSUM, ex)));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  IrBuilder ir;
  std::string reason;
  ASSERT_TRUE(lower(k->verified(), &ir, &reason)) << reason;
  ASSERT_EQ(ir.scratch_rows, 1) << "exp(x - max) is kept for the last pass";
  std::mt19937 g(7);
  for (Isa isa : jit_isas()) {
    auto code = compile(k->verified(), isa, &reason);
    ASSERT_TRUE(code) << reason;
    ASSERT_EQ(code->scratch_rows, 1);
    const int64_t lanes = isa == Isa::Avx512 ? 16 : 8;
    for (int64_t C : generated_lengths(g)) {
      const int64_t R = std::uniform_int_distribution<int64_t>(1, 6)(g), room = (C + 15) / 16 * 16;
      std::vector<float> xs(static_cast<size_t>(R * C)), y(static_cast<size_t>(R * C + 1), -7.0f);
      std::uniform_real_distribution<float> d(-4.0f, 4.0f);
      for (float& v : xs) v = d(g);
      std::vector<float> scratch(static_cast<size_t>(room + 16), std::bit_cast<float>(kSentinel));
      JitArgs args{};
      args.base[0] = xs.data();
      args.base[1] = y.data();
      args.cs[0] = args.cs[1] = 1;
      args.rs[0] = args.rs[1] = C;
      args.n = C;
      args.rows = R;
      args.scratch = scratch.data();
      code->entry(&args);
      const std::vector<double> want = softmax_ref(xs, R, C);
      for (int64_t i = 0; i < R * C; ++i)
        ASSERT_NEAR(y[static_cast<size_t>(i)], want[static_cast<size_t>(i)], 1e-6 + 1e-5 * want[static_cast<size_t>(i)])
            << isa_name(isa) << " C=" << C << " R=" << R << " at " << i;
      EXPECT_EQ(y[static_cast<size_t>(R * C)], -7.0f) << "guard after the output";
      const int64_t whole = (C + lanes - 1) / lanes * lanes;
      for (int64_t i = C; i < whole; ++i)
        EXPECT_NE(std::bit_cast<uint32_t>(scratch[static_cast<size_t>(i)]), kSentinel)
            << isa_name(isa) << " C=" << C << ": lane " << i << " of the tail vector was not stored whole";
      for (int64_t i = whole; i < room + 16; ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(scratch[static_cast<size_t>(i)]), kSentinel)
            << isa_name(isa) << " C=" << C << ": written past the tail vector at " << i;
    }
  }
}

// Through the public API at generated [R, C], C short or not a multiple of
// the vector: the JIT serves softmax, its bits are the interpreter's, and
// both are the reference's values.
TEST(JitShortRows, SoftmaxKeepsTheInterpretersBits) {
  if (jit_isas().empty() || dvm::isa() == "portable") GTEST_SKIP() << "no machine code for this ISA";
  const TierMode before = tier_mode();
  std::mt19937 g(11);
  std::vector<int64_t> lens = generated_lengths(g);
  for (int64_t C : lens) {
    const int64_t R = std::uniform_int_distribution<int64_t>(1, 40)(g);
    std::vector<float> xs(static_cast<size_t>(R * C));
    std::uniform_real_distribution<float> d(-4.0f, 4.0f);
    for (float& v : xs) v = d(g);
    Tensor x = Tensor::from_blob(xs.data(), {R, C});
    set_tier_mode(TierMode::Off);
    const std::vector<float> interp = softmax(x, 1).to_vector();
    set_tier_mode(TierMode::Eager);
    set_kernel_log(true);
    const std::vector<float> jit = softmax(x, 1).to_vector();
    std::vector<KernelRun> log = take_kernel_log();
    set_kernel_log(false);
    ASSERT_EQ(log.size(), 1u) << "C=" << C;
    EXPECT_EQ(log[0].form, "row_reduce");
    EXPECT_EQ(log[0].tier, "jit") << "C=" << C;
    ASSERT_EQ(jit.size(), interp.size());
    const std::vector<double> want = softmax_ref(xs, R, C);
    for (size_t i = 0; i < jit.size(); ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(jit[i]), std::bit_cast<uint32_t>(interp[i])) << "C=" << C << " R=" << R;
      ASSERT_NEAR(jit[i], want[i], 1e-6 + 1e-5 * want[i]) << "C=" << C << " R=" << R;
    }
  }
  set_tier_mode(before);
}


struct Asm {
  std::string text;
  static void log(void* self, LogLevel, const char* m) { static_cast<Asm*>(self)->text += m; }
};

// Rows of 1 to 2W + 1 floats drawn from signed zeros, NaNs, infinities,
// denormals and values whose sum depends on the order: every reduction gives
// the canonical order's bits (NaN: a NaN), in one call over many rows, and
// the code branches on n before its tree (the short-row path exists).
TEST(JitShortRows, TreeSkipsStepsPastTheRowKeepingTheOrder) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {0.0f, -0.0f, nan, -nan, inf, -inf, 1e-40f, -3e-39f, 1.5f, -2.25f, 16777216.0f, -16777216.0f, 0.25f};
  std::mt19937 g(5);
  for (Op op : {Op::RSUM, Op::RMAX, Op::RMIN}) {
    Encoder e(Form::RowReduce);
    int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
    e.store(Op::STB, ay, e.reduce(op, e.load(Op::LD, ax)));
    auto k = make_kernel(e);
    ASSERT_TRUE(k);
    for (Isa isa : jit_isas()) {
      Asm asm_text;
      set_log_callback(&Asm::log, &asm_text);
      set_log(true);
      std::string reason;
      auto code = compile(k->verified(), isa, &reason);
      set_log(false);
      set_log_callback(nullptr, nullptr);
      ASSERT_TRUE(code) << reason;
      EXPECT_NE(asm_text.text.find("cmp rdx, 4"), std::string::npos)
          << isa_name(isa) << ": no short-row branch before the tree";
      const size_t w = isa == Isa::Avx512 ? 16 : 8;
      for (size_t C = 1; C <= 2 * w + 1; ++C) {
        const int64_t R = std::uniform_int_distribution<int64_t>(1, 64)(g);
        std::vector<float> xs(static_cast<size_t>(R) * C);
        for (float& v : xs) v = pool[g() % std::size(pool)];
        std::vector<float> y(static_cast<size_t>(R) + 1, -7.0f);
        JitArgs args{};
        args.base[0] = xs.data();
        args.base[1] = y.data();
        args.cs[0] = 1;
        args.rs[0] = static_cast<int64_t>(C);
        args.rs[1] = 1;
        args.n = static_cast<int64_t>(C);
        args.rows = R;
        code->entry(&args);
        for (int64_t r = 0; r < R; ++r) {
          const std::vector<float> row(xs.begin() + r * static_cast<int64_t>(C), xs.begin() + (r + 1) * static_cast<int64_t>(C));
          const float want = canonical_row_reduce(op, w, row), got = y[static_cast<size_t>(r)];
          ASSERT_TRUE(std::isnan(want) ? std::isnan(got) : std::memcmp(&want, &got, 4) == 0)
              << isa_name(isa) << " " << vm::op_name(op) << " C=" << C << " row " << r << ": " << got << " vs " << want;
        }
        EXPECT_EQ(y[static_cast<size_t>(R)], -7.0f) << "guard";
      }
    }
  }
}

// AVX-512: every row of a call leaves the same tails, so their counts and
// masks are computed once per call (the code takes n mod 64 for the folding
// passes' four copies and n mod 16 for one-vector tails) and each row only
// loads them. A two-level kernel (a folding pass with a stored value, a sum of
// it, a last pass storing x * sum) at generated [R, C] against a double
// reference, one call over all rows.
TEST(JitShortRows, TailsAreComputedOncePerCall) {
  if (!microkernels_for(Isa::Avx512)) GTEST_SKIP() << "no AVX-512";
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto sq = e.binary(Op::MUL, x, x);
  e.store(Op::ST, az, sq);
  e.store(Op::ST, ay, e.binary(Op::MUL, x, e.reduce(Op::RSUM, sq)));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  Asm asm_text;
  set_log_callback(&Asm::log, &asm_text);
  set_log(true);
  std::string reason;
  auto code = compile(k->verified(), Isa::Avx512, &reason);
  set_log(false);
  set_log_callback(nullptr, nullptr);
  ASSERT_TRUE(code) << reason;
  EXPECT_NE(asm_text.text.find("and rcx, 63"), std::string::npos) << "the folding tails are not computed per call";
  EXPECT_NE(asm_text.text.find("and rcx, 15"), std::string::npos) << "the one-vector tails are not computed per call";
  std::mt19937 g(3);
  std::vector<int64_t> lens = generated_lengths(g);
  for (int64_t C : {int64_t{47}, int64_t{48}, int64_t{49}, int64_t{64}, int64_t{65}, int64_t{127}}) lens.push_back(C);
  for (int64_t C : lens) {
    const int64_t R = std::uniform_int_distribution<int64_t>(1, 9)(g);
    std::vector<float> xs(static_cast<size_t>(R * C)), y(static_cast<size_t>(R * C + 1), -7.0f),
        z(static_cast<size_t>(R * C + 1), -7.0f);
    std::uniform_real_distribution<float> d(-2.0f, 2.0f);
    for (float& v : xs) v = d(g);
    JitArgs args{};
    args.base[0] = xs.data();
    args.base[1] = y.data();
    args.base[2] = z.data();
    args.cs[0] = args.cs[1] = args.cs[2] = 1;
    args.rs[0] = args.rs[1] = args.rs[2] = C;
    args.n = C;
    args.rows = R;
    code->entry(&args);
    for (int64_t r = 0; r < R; ++r) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += static_cast<double>(xs[static_cast<size_t>(r * C + c)]) * xs[static_cast<size_t>(r * C + c)];
      for (int64_t c = 0; c < C; ++c) {
        const size_t i = static_cast<size_t>(r * C + c);
        ASSERT_EQ(z[i], xs[i] * xs[i]) << "C=" << C << " R=" << R << " at " << i;
        ASSERT_NEAR(y[i], xs[i] * s, 1e-5 * (1 + std::fabs(xs[i] * s))) << "C=" << C << " R=" << R << " at " << i;
      }
    }
    EXPECT_EQ(y[static_cast<size_t>(R * C)], -7.0f) << "guard";
    EXPECT_EQ(z[static_cast<size_t>(R * C)], -7.0f) << "guard";
  }
}


// A RowReduce kernel with three folding reductions of one pass (as
// layer_norm's sum, max and min), a value kept for the next pass (x - mean,
// squared) and a second folding pass, the shape of the kernels the
// one-vector-rows variant serves. Outputs: y (per element), z (per row).
std::shared_ptr<vm::Kernel> three_fold_kernel() {
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto m = e.binary(Op::ADD, e.reduce(Op::RSUM, x), e.binary(Op::SUB, e.reduce(Op::RMAX, x), e.reduce(Op::RMIN, x)));
  auto d = e.binary(Op::SUB, x, m);
  auto q = e.reduce(Op::RSUM, e.binary(Op::MUL, d, d));
  e.store(Op::ST, ay, e.binary(Op::MUL, d, q));
  e.store(Op::STB, az, q);
  return make_kernel(e);
}

// The one-vector-rows variant (every folding pass with one accumulator)
// against the kernel's usual code, on rows of 0 to W floats drawn from
// signed zeros, NaNs, infinities, denormals and order-sensitive values: the
// same bits everywhere (NaN payloads included), nothing past the outputs,
// and without the four-copy loop's tails (AVX-512: no n mod 64).
TEST(JitShortRows, OneVectorRowsVariantKeepsTheBits) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const float pool[] = {0.0f, -0.0f, nan, -nan, inf, -inf, 1e-40f, -3e-39f, 1.5f, -2.25f, 16777216.0f, -16777216.0f, 0.25f};
  std::mt19937 g(13);
  auto k = three_fold_kernel();
  ASSERT_TRUE(k);
  for (Isa isa : jit_isas()) {
    std::string reason;
    auto usual = compile(k->verified(), isa, &reason);
    ASSERT_TRUE(usual) << reason;
    Asm asm_text;
    set_log_callback(&Asm::log, &asm_text);
    set_log(true);
    auto one = compile_one_vector_rows(k->verified(), isa, &reason);
    set_log(false);
    set_log_callback(nullptr, nullptr);
    ASSERT_TRUE(one) << reason;
    if (isa == Isa::Avx512) {
      EXPECT_EQ(asm_text.text.find("and rcx, 63"), std::string::npos) << "four-copy tails left";
    }
    const int64_t w = isa == Isa::Avx512 ? 16 : 8;
    for (int64_t C = 0; C <= w; ++C)
      for (int rep = 0; rep < 8; ++rep) {
        const int64_t R = std::uniform_int_distribution<int64_t>(1, 40)(g);
        std::vector<float> xs(static_cast<size_t>(R * C));
        for (float& v : xs) v = rep % 2 ? pool[g() % std::size(pool)] : std::uniform_real_distribution<float>(-3, 3)(g);
        auto run = [&](const JitCode& code, std::vector<float>& y, std::vector<float>& z) {
          y.assign(static_cast<size_t>(R * C + 1), -7.0f);
          z.assign(static_cast<size_t>(R + 1), -7.0f);
          std::vector<float> scratch(static_cast<size_t>(code.scratch_rows * 16 + 16));
          JitArgs args{};
          args.base[0] = xs.data();
          args.base[1] = y.data();
          args.base[2] = z.data();
          args.cs[0] = args.cs[1] = 1;
          args.rs[0] = args.rs[1] = C;
          args.rs[2] = 1;
          args.n = C;
          args.rows = R;
          args.scratch = scratch.data();
          code.entry(&args);
        };
        std::vector<float> y1, z1, y2, z2;
        run(*usual, y1, z1);
        run(*one, y2, z2);
        ASSERT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * 4), 0) << isa_name(isa) << " C=" << C << " R=" << R;
        ASSERT_EQ(std::memcmp(z1.data(), z2.data(), z1.size() * 4), 0) << isa_name(isa) << " C=" << C << " R=" << R;
        EXPECT_EQ(y2.back(), -7.0f) << "guard";
        EXPECT_EQ(z2.back(), -7.0f) << "guard";
        for (int64_t r = 0; r < R && C > 0; ++r) {  // and the values are the reduction's (the usual code's are tested above)
          const std::vector<float> row(xs.begin() + r * C, xs.begin() + (r + 1) * C);
          const float m = canonical_row_reduce(Op::RSUM, static_cast<size_t>(w), row) +
                          (canonical_row_reduce(Op::RMAX, static_cast<size_t>(w), row) -
                           canonical_row_reduce(Op::RMIN, static_cast<size_t>(w), row));
          std::vector<float> dd(row.size());
          for (size_t c = 0; c < row.size(); ++c) dd[c] = (row[c] - m) * (row[c] - m);
          const float q = canonical_row_reduce(Op::RSUM, static_cast<size_t>(w), dd);
          ASSERT_TRUE(std::isnan(q) ? std::isnan(z2[static_cast<size_t>(r)]) : std::memcmp(&q, &z2[static_cast<size_t>(r)], 4) == 0)
              << isa_name(isa) << " C=" << C << " row " << r;
        }
      }
  }
}

// Through the public API: softmax, log_softmax, layer_norm, var and sum over
// rows of 1 to 2W + 1 floats at generated row counts give the interpreter's
// bits on machine code, and the rows that fit one vector ran the variant.
TEST(JitShortRows, OneVectorRowsThroughTheApi) {
  if (jit_isas().empty() || dvm::isa() == "portable") GTEST_SKIP() << "no machine code for this ISA";
  const TierMode before = tier_mode();
  const int64_t compiled = one_vector_row_variants_compiled();
  std::mt19937 g(17);
  for (int64_t C = 1; C <= 33; ++C) {
    const int64_t R = std::uniform_int_distribution<int64_t>(1, 300)(g);
    std::vector<float> xs(static_cast<size_t>(R * C));
    for (float& v : xs) v = std::uniform_real_distribution<float>(-5, 5)(g);
    if (C > 2) xs[static_cast<size_t>(C + 1) % xs.size()] = std::numeric_limits<float>::quiet_NaN();
    Tensor x = Tensor::from_blob(xs.data(), {R, C});
    auto all = [&] {
      std::vector<std::vector<float>> out;
      out.push_back(softmax(x, 1).to_vector());
      out.push_back(log_softmax(x, 1).to_vector());
      out.push_back(layer_norm(x, {C}, Tensor(), Tensor(), 1e-5f).to_vector());
      out.push_back(x.var(1).to_vector());
      out.push_back(x.sum(1).to_vector());
      return out;
    };
    set_tier_mode(TierMode::Off);
    const auto interp = all();
    set_tier_mode(TierMode::Eager);
    set_kernel_log(true);
    const auto jit = all();
    const std::vector<KernelRun> log = take_kernel_log();
    set_kernel_log(false);
    for (const KernelRun& r : log) EXPECT_EQ(r.tier, "jit") << r.form << " C=" << C;
    for (size_t o = 0; o < jit.size(); ++o) {
      ASSERT_EQ(jit[o].size(), interp[o].size());
      ASSERT_EQ(std::memcmp(jit[o].data(), interp[o].data(), jit[o].size() * 4), 0) << "output " << o << " C=" << C;
    }
  }
  set_tier_mode(before);
  EXPECT_GT(one_vector_row_variants_compiled(), compiled) << "no launch ran the one-vector-rows variant";
}

// A uint8 image normalized per channel, (img.to(F32) / 255 - mean) / std of
// img [R, C] and mean, std [C], at generated R (1 and odd ones too) and C in
// 1..8: the conversion joins the ops that read it, so it is one machine-code
// kernel whose narrow rows run G to a call (periodic rows, where R holds two
// groups), with the interpreter's bits and the float loop's values.
TEST(JitShortRows, NormalizedUint8ImageIsOnePeriodicKernel) {
  if (jit_isas().empty() || dvm::isa() == "portable") GTEST_SKIP() << "no machine code for this ISA";
  const TierMode before = tier_mode();
  std::mt19937 g(13);
  for (int64_t C = 1; C <= 8; ++C) {
    for (int64_t R : {int64_t{1}, int64_t{2}, int64_t{33}, std::uniform_int_distribution<int64_t>(3, 700)(g)}) {
      const std::string what = "R=" + std::to_string(R) + " C=" + std::to_string(C);
      std::vector<uint8_t> img(static_cast<size_t>(R * C));
      for (uint8_t& v : img) v = static_cast<uint8_t>(g());
      std::vector<float> mean(static_cast<size_t>(C)), sd(static_cast<size_t>(C));
      std::uniform_real_distribution<float> d(0.1f, 0.9f);
      for (int64_t c = 0; c < C; ++c) mean[static_cast<size_t>(c)] = d(g), sd[static_cast<size_t>(c)] = d(g);
      Tensor im = Tensor::from_blob(img.data(), {R, C}), m = Tensor::from_blob(mean.data(), {C}),
             s = Tensor::from_blob(sd.data(), {C});
      auto normalize = [&] { return (im.to(Dtype::F32) / 255.0f - m) / s; };
      set_tier_mode(TierMode::Off);
      const std::vector<float> interp = normalize().to_vector();
      set_tier_mode(TierMode::Eager);
      const int64_t periodic = periodic_row_launches();
      set_kernel_log(true);
      const std::vector<float> jit = normalize().to_vector();
      std::vector<KernelRun> log = take_kernel_log();
      set_kernel_log(false);
      ASSERT_EQ(log.size(), 1u) << what << ": the conversion is fused with its readers";
      EXPECT_EQ(log[0].form, "elementwise") << what;
      EXPECT_EQ(log[0].tier, "jit") << what;
      const int64_t group = std::lcm(C, int64_t{16}) / C;
      EXPECT_EQ(periodic_row_launches() > periodic, C > 1 && R >= 2 * group) << what << " (C = 1 is one long row)";
      ASSERT_EQ(jit.size(), img.size()) << what;
      for (size_t i = 0; i < jit.size(); ++i) {
        const size_t c = i % static_cast<size_t>(C);
        const float want = (static_cast<float>(img[i]) / 255.0f - mean[c]) / sd[c];
        ASSERT_EQ(std::bit_cast<uint32_t>(jit[i]), std::bit_cast<uint32_t>(want)) << what << " at " << i;
        ASSERT_EQ(std::bit_cast<uint32_t>(interp[i]), std::bit_cast<uint32_t>(want)) << what << " at " << i;
      }
    }
  }
  set_tier_mode(before);
}

}  // namespace
}  // namespace dvm::backends::jit
