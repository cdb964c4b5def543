// Tile interpreter: each kernel form and each load pattern, on every ISA the
// CPU has, for lengths 0..2*16+1 and long odd lengths, against a double
// reference, with guard elements after every output.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "backends/isa.h"
#include "backends/microkernels.h"
#include "dvm/error.h"
#include "vm/encoder.h"
#include "vm/forms.h"
#include "vm/interpreter.h"
#include "vm/kernel_cache.h"
#include "vm/launcher.h"
#include "vm/tiering.h"

namespace dvm::vm {
namespace {

constexpr float kGuard = -12345.678f;
constexpr int kGuards = 16;

// An output buffer with guard elements after its n values.
struct Out {
  std::vector<float> buf;
  explicit Out(int64_t n) : buf(static_cast<size_t>(n + kGuards), kGuard) {}
  float* data() { return buf.data(); }
  float operator[](int64_t i) const { return buf[static_cast<size_t>(i)]; }
  void expect_guards(int64_t n) const {
    for (int g = 0; g < kGuards; ++g)
      ASSERT_EQ(buf[static_cast<size_t>(n + g)], kGuard) << "write past the end at +" << g;
  }
};

std::vector<float> random_vec(int64_t n, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<backends::Isa> isas() {
  std::vector<backends::Isa> out;
  for (auto i : {backends::Isa::Portable, backends::Isa::Avx2, backends::Isa::Avx512})
    if (backends::microkernels_for(i)) out.push_back(i);
  return out;
}

void run(const Kernel& k, const Launch& l, backends::Isa isa) {
  check_launch(k, l);
  interpret(k, l, 0, work_items(k, l), *backends::microkernels_for(isa));
}

std::vector<int64_t> lengths() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 33; ++i) n.push_back(i);
  n.push_back(511);
  n.push_back(513);
  n.push_back(4099);
  n.push_back(20001);
  return n;
}

// y = relu(x * a + b) * 0.5 + x with a row-broadcast b and a per-row scale.
TEST(Interpreter, ElementwiseAllPatterns) {
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), aa = e.add_arg(ArgRole::Input), ab = e.add_arg(ArgRole::Input),
      as = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto a = e.load(Op::LDS, aa);  // strided along C
  auto b = e.load(Op::LD, ab);   // row-broadcast (rs = 0)
  auto s = e.load(Op::LDB, as);  // one value per row
  auto t = e.binary(Op::ADD, e.binary(Op::MUL, x, a), b);
  auto y = e.binary(Op::ADD, e.binary(Op::MUL, e.unary(Op::RELU, t), e.constant(0.5f)), x);
  e.store(Op::ST, ay, e.binary(Op::MUL, y, s));
  auto k = KernelCache::global().get(e.finish());

  for (backends::Isa isa : isas()) {
    for (int64_t C : lengths()) {
      const int64_t R = 3;
      auto xv = random_vec(R * C, 1), av = random_vec(R * C * 2, 2), bv = random_vec(C, 3),
           sv = random_vec(R, 4);
      Out out(R * C);
      Launch l;
      l.extent[kR] = R;
      l.extent[kC] = C;
      l.args.resize(5);
      l.args[0] = {xv.data(), nullptr, 0, C, 1};
      l.args[1] = {av.data(), nullptr, 0, 2 * C, 2};
      l.args[2] = {bv.data(), nullptr, 0, 0, 1};
      l.args[3] = {sv.data(), nullptr, 0, 1, 0};
      l.args[4] = {nullptr, out.data(), 0, C, 1};
      run(*k, l, isa);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t c = 0; c < C; ++c) {
          size_t i = static_cast<size_t>(r * C + c);
          double tv = static_cast<double>(xv[i]) * av[static_cast<size_t>(r * 2 * C + 2 * c)] + bv[static_cast<size_t>(c)];
          double want = ((tv > 0 ? tv : 0) * 0.5 + xv[i]) * sv[static_cast<size_t>(r)];
          // Five roundings in float, each <= 0.5 ULP of its result; the
          // relu/add can cancel, so compare relative to the operands' size.
          double scale = (std::fabs(tv) * 0.5 + std::fabs(xv[i])) * std::fabs(sv[static_cast<size_t>(r)]) + 1e-30;
          ASSERT_LE(std::fabs(out[static_cast<int64_t>(i)] - want) / scale, 4 * 0x1p-24)
              << backends::isa_name(isa) << " C=" << C << " r=" << r << " c=" << c;
        }
      out.expect_guards(R * C);
    }
  }
}

// An output that is also an input is refused when the launch touches them;
// an empty launch's pointers (an empty view's may point past its buffer, at
// anything) are not compared.
TEST(Interpreter, AliasedArgumentsAreRefusedOnlyWhenTouched) {
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.unary(Op::NEG, e.load(Op::LD, ax)));
  auto k = KernelCache::global().get(e.finish());
  std::vector<float> buf(8, 1.0f);
  Launch l;
  l.extent[kC] = 8;
  l.args.resize(2);
  l.args[0] = {buf.data(), nullptr, 0, 8, 1};
  l.args[1] = {nullptr, buf.data(), 0, 8, 1};
  try {
    check_launch(*k, l);
    ADD_FAILURE() << "an output aliasing an input was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("also input argument 0"), std::string::npos) << err.what();
  }
  l.extent[kC] = 0;
  EXPECT_NO_THROW(check_launch(*k, l));
}

// A gather over a 3-D transposed input: ldg with per-part dims.
TEST(Interpreter, GeneralGather) {
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.unary(Op::NEG, e.load(Op::LDG, ax)));
  auto k = KernelCache::global().get(e.finish());
  // x is [4, 5, 6] read as its permutation (2, 0, 1): y[i][j][l] = -x[j][l][i].
  const int64_t A = 4, B = 5, D = 6;
  auto xv = random_vec(A * B * D, 7);
  for (backends::Isa isa : isas()) {
    Out out(A * B * D);
    Launch l;
    l.extent[kP] = D;
    l.extent[kR] = A;
    l.extent[kC] = B;
    l.args.resize(2);
    ArgBinding& g = l.args[0];
    g.in = xv.data();
    g.ndims[0] = 1; g.dim_size[0][0] = D; g.dim_stride[0][0] = 1;
    g.ndims[1] = 1; g.dim_size[1][0] = A; g.dim_stride[1][0] = B * D;
    g.ndims[2] = 1; g.dim_size[2][0] = B; g.dim_stride[2][0] = D;
    l.args[1] = {nullptr, out.data(), A * B, B, 1};
    run(*k, l, isa);
    for (int64_t i = 0; i < D; ++i)
      for (int64_t j = 0; j < A; ++j)
        for (int64_t m = 0; m < B; ++m)
          ASSERT_EQ(out[i * A * B + j * B + m], -xv[static_cast<size_t>(j * B * D + m * D + i)]);
    out.expect_guards(A * B * D);
  }
}

// softmax as a multi-phase row kernel: rows that fit the buffer (one pass)
// and rows that do not (one pass per level) give the same values.
TEST(Interpreter, RowReduceSoftmaxOnePassAndMultiPass) {
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output), am = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto m = e.reduce(Op::RMAX, x);
  auto ex = e.unary(Op::EXP, e.binary(Op::SUB, x, m));
  auto s = e.reduce(Op::RSUM, ex);
  e.store(Op::ST, ay, e.binary(Op::DIV, ex, s));
  e.store(Op::STB, am, m);
  auto k = KernelCache::global().get(e.finish());
  ASSERT_EQ(k->verified().max_level, 2);
  for (backends::Isa isa : isas()) {
    for (int64_t C : {int64_t{0}, int64_t{1}, int64_t{17}, int64_t{1024}, kRowTileMax, kRowTileMax + 1, int64_t{10007}}) {
      const int64_t R = 3;
      auto xv = random_vec(R * C, 11, -5, 5);
      Out y(R * C), mx(R);
      Launch l;
      l.extent[kR] = R;
      l.extent[kC] = C;
      l.args = {{xv.data(), nullptr, 0, C, 1}, {nullptr, y.data(), 0, C, 1}, {nullptr, mx.data(), 0, 1, 0}};
      run(*k, l, isa);
      for (int64_t r = 0; r < R; ++r) {
        double mref = -INFINITY, sum = 0;
        for (int64_t c = 0; c < C; ++c) mref = std::max<double>(mref, xv[static_cast<size_t>(r * C + c)]);
        for (int64_t c = 0; c < C; ++c) sum += std::exp(xv[static_cast<size_t>(r * C + c)] - mref);
        ASSERT_EQ(mx[r], static_cast<float>(mref));
        for (int64_t c = 0; c < C; ++c) {
          double want = std::exp(xv[static_cast<size_t>(r * C + c)] - mref) / sum;
          // exp <= 4 ULP (docs/MATH.md), the float sum of C terms in `lanes`
          // partial sums <= C/lanes * 2^-24 relative, one division.
          double tol = (8 + static_cast<double>(C)) * 0x1p-24 * want;
          ASSERT_NEAR(y[r * C + c], want, tol) << backends::isa_name(isa) << " C=" << C;
        }
      }
      y.expect_guards(R * C);
      mx.expect_guards(R);
    }
  }
}

// Column sum with an epilogue that reads a per-column bias:
// y[p, c] = sum_r x[p, r, c] * 2 + bias[c].
TEST(Interpreter, ColReduceWithEpilogue) {
  Encoder e(Form::ColReduce);
  int ax = e.add_arg(ArgRole::Input), ab = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  auto two = e.constant(2.0f);
  auto s = e.reduce(Op::RSUM, e.binary(Op::MUL, e.load(Op::LD, ax), two));
  e.store(Op::ST, ay, e.binary(Op::ADD, s, e.load(Op::LD, ab)));
  auto k = KernelCache::global().get(e.finish());
  for (backends::Isa isa : isas()) {
    for (int64_t C : {int64_t{1}, int64_t{33}, int64_t{600}}) {
      for (int64_t R : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{300}}) {
        const int64_t P = 2;
        auto xv = random_vec(P * R * C, 21), bv = random_vec(C, 22);
        Out y(P * C);
        Launch l;
        l.extent[kP] = P;
        l.extent[kR] = R;
        l.extent[kC] = C;
        l.args = {{xv.data(), nullptr, R * C, C, 1}, {bv.data(), nullptr, 0, 0, 1}, {nullptr, y.data(), C, 0, 1}};
        run(*k, l, isa);
        for (int64_t p = 0; p < P; ++p)
          for (int64_t c = 0; c < C; ++c) {
            double sum = 0, mag = 0;
            for (int64_t r = 0; r < R; ++r) {
              sum += 2.0 * xv[static_cast<size_t>(p * R * C + r * C + c)];
              mag += std::fabs(2.0 * xv[static_cast<size_t>(p * R * C + r * C + c)]);
            }
            double want = sum + bv[static_cast<size_t>(c)];
            // R sequential float adds: |err| <= R * 2^-24 * sum|terms|, plus the bias add.
            double tol = (static_cast<double>(R) + 2) * 0x1p-24 * (mag + std::fabs(bv[static_cast<size_t>(c)]));
            ASSERT_NEAR(y[p * C + c], want, tol) << backends::isa_name(isa) << " R=" << R << " C=" << C;
          }
        y.expect_guards(P * C);
      }
    }
  }
}

// The epilogue reads a constant the prologue sets: right for every R,
// including R = 0 where the prologue never runs, on every ISA and tier.
TEST(Interpreter, ColReduceEpilogueReadsAPrologueConstantAtEveryR) {
  Encoder e(Form::ColReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  auto two = e.constant(2.0f);
  auto s = e.reduce(Op::RSUM, e.binary(Op::MUL, e.load(Op::LD, ax), two));
  e.store(Op::ST, ay, e.binary(Op::ADD, s, two));
  auto k = KernelCache::global().get(e.finish());
  const TierMode saved_mode = vm::tier_mode();
  const backends::Isa saved_isa = backends::active_isa();
  for (backends::Isa isa : isas()) {
    for (TierMode tier : {TierMode::Off, TierMode::Eager}) {
      backends::set_isa(isa);
      vm::set_tier_mode(tier);
      for (int64_t R : {int64_t{0}, int64_t{1}, int64_t{5}}) {
        const int64_t C = 37;
        std::vector<float> xv(static_cast<size_t>(R * C));
        for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>(i % 7) - 3.0f;
        Out y(C);
        Launch l;
        l.extent[kR] = R;
        l.extent[kC] = C;
        l.args = {{xv.data(), nullptr, 0, C, 1}, {nullptr, y.data(), 0, 0, 1}};
        launch(*k, l);
        for (int64_t c = 0; c < C; ++c) {
          double want = 2.0;  // small integers: every sum is exact
          for (int64_t r = 0; r < R; ++r) want += 2.0 * xv[static_cast<size_t>(r * C + c)];
          ASSERT_EQ(y[c], want) << backends::isa_name(isa) << " tier " << static_cast<int>(tier) << " R=" << R
                                << " c=" << c;
        }
        y.expect_guards(C);
      }
    }
  }
  backends::set_isa(saved_isa);
  vm::set_tier_mode(saved_mode);
}

// Launch checks fail before anything is written.
TEST(Launcher, BadLaunchWritesNothing) {
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.unary(Op::EXP, e.load(Op::LD, ax)));
  auto k = KernelCache::global().get(e.finish());
  std::vector<float> x(64, 1.0f), xcopy = x;
  Out y(64);
  Launch l;
  l.extent[kC] = 64;
  l.args = {{x.data(), nullptr, 0, 0, 2}, {nullptr, y.data(), 0, 0, 1}};  // ld with cs = 2
  EXPECT_THROW(launch(*k, l), Error);
  l.args[0].stride[kC] = 1;
  l.args.pop_back();  // too few arguments
  EXPECT_THROW(launch(*k, l), Error);
  l.args.push_back({nullptr, nullptr, 0, 0, 1});  // output without a pointer
  EXPECT_THROW(launch(*k, l), Error);
  l.args[1].out = x.data();  // output aliases the input
  EXPECT_THROW(launch(*k, l), Error);
  EXPECT_EQ(x, xcopy);
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], kGuard);
  try {
    l.args[1].out = nullptr;
    launch(*k, l);
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("argument 1 (output) has no pointer"), std::string::npos) << err.what();
  }
  // Extents: each part >= 0, and the parts the form does not use are 1.
  l.args[1].out = y.data();
  for (int part = 0; part < kMaxParts; ++part)
    for (int64_t bad : {int64_t{-1}, int64_t{2}}) {
      if (part < form_row(Form::Elementwise).parts && bad >= 0) continue;  // a used part may be 2
      Launch lb = l;
      lb.extent[part] = bad;
      try {
        launch(*k, lb);
        ADD_FAILURE() << "extent " << bad << " of part " << part << " accepted";
      } catch (const Error& err) {
        EXPECT_NE(std::string(err.what()).find("elementwise kernels use 3 parts"), std::string::npos) << err.what();
      }
    }
  for (int i = 0; i < 64; ++i) EXPECT_EQ(y[i], kGuard);
}

}  // namespace
}  // namespace dvm::vm
