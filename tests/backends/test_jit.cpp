// The JIT against the interpreter: every op, operand kind, load/store
// pattern and kernel form, on every ISA the CPU has (AVX2, AVX-512), must give
// BIT-IDENTICAL results (memcmp) with guard elements intact after every output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/isa.h"
#include "backends/jit/jit.h"
#include "backends/jit/lower.h"
#include "backends/microkernels.h"
#include "vm/encoder.h"
#include "vm/interpreter.h"
#include "vm/kernel.h"
#include "vm/schedule.h"
#include "vm/verifier.h"

#include "tests/backends/canonical_row_reduce.h"
#include "tests/backends/jit_isas.h"

namespace dvm::backends::jit {
namespace {

using vm::ArgRole;
using vm::Encoder;
using vm::Form;
using vm::Op;

constexpr float kGuard = -12345.678f;
int64_t g_nan_sign_differences = 0;
constexpr int64_t kGuards = 16;

using testing::canonical_row_reduce;
using testing::jit_isas;

using testing::make_kernel;

// How one argument is laid out over [P, R, C].
struct Layout {
  int64_t ps = 0, rs = 0, cs = 0;
};
Layout dense(int64_t R, int64_t C) { return {R * C, C, 1}; }
// Dense rows, a gap after each p: a run of rows must not step from one p into
// the next by the row stride.
Layout padded(int64_t R, int64_t C) { return {(R + 1) * C + 5, C, 1}; }
Layout per_row(int64_t R) { return {R, 1, 0}; }
Layout strided(int64_t R, int64_t C, int64_t k) {
  int64_t a = std::max<int64_t>(1, std::abs(k));
  return {R * C * a, C * a, k};
}
Layout row_bcast(int64_t) { return {0, 0, 1}; }  // one row shared by all (p, r)
Layout epilogue(int64_t C) { return {C, 0, 1}; }            // ColReduce [P, C]

// Values the tests feed: mostly moderate, some large, and a few specials.
std::vector<float> input_data(size_t n, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = d(rng);
    if (i % 7 == 3) v[i] *= 30.0f;
  }
  if (specials) {
    const float sp[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity(), std::nanf(""), 1.0f, -1.0f,
                        0.5f, 1e-40f, 100.0f, -100.0f};
    for (size_t i = 0; i < n; i += 5) v[i] = sp[(i / 5) % (sizeof(sp) / sizeof(sp[0]))];
  }
  return v;
}

// Outputs start on a cache line (as the buffer pool's do) so that the
// streaming variant's alignment rules, not chance, decide where it runs.
template <class T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <class U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t{64}); }
  template <class U>
  bool operator==(const LineAligned<U>&) const { return true; }
};
using Floats = std::vector<float, LineAligned<float>>;

// Elements every output is moved by from its buffer's start (the streaming
// tests move them off the cache line).
int64_t g_output_shift = 0;

struct Buf {
  Floats data;
  int64_t origin = 0;  // index of element (0, 0, 0)
  int64_t extent = 0;  // elements that belong to the tensor
};

Buf layout_buffer(const Layout& l, int64_t P, int64_t R, int64_t C) {
  int64_t lo = 0, hi = 0;
  auto span = [&](int64_t n, int64_t s) {
    if (n <= 0) return;
    int64_t o = (n - 1) * s;
    if (o < 0) lo += o;
    else hi += o;
  };
  span(P, l.ps);
  span(R, l.rs);
  span(C, l.cs);
  Buf b;
  b.origin = -lo;
  b.extent = hi - lo + 1;
  return b;
}

// Runs k through the interpreter and the JIT on the same inputs; expects
// identical output bytes, including untouched guard elements.
void differential(const vm::Kernel& k, const std::vector<Layout>& layouts, int64_t P, int64_t R,
                  int64_t C, uint32_t seed, const std::string& what, bool specials = false,
                  const std::vector<float>& scalars = {}) {
  const auto& roles = k.program().roles;
  ASSERT_EQ(roles.size(), layouts.size());
  for (Isa isa : jit_isas()) {
    std::string reason;
    auto code = compile(k.verified(), isa, &reason);
    ASSERT_TRUE(code) << what << ": " << reason;
    std::vector<Buf> in(roles.size()), out_i(roles.size()), out_j(roles.size());
    vm::Launch li, lj;
    li.extent[vm::kP] = lj.extent[vm::kP] = P;
    li.extent[vm::kR] = lj.extent[vm::kR] = R;
    li.extent[vm::kC] = lj.extent[vm::kC] = C;
    li.args.resize(roles.size());
    lj.args.resize(roles.size());
    li.scalars = lj.scalars = scalars;
    for (size_t a = 0; a < roles.size(); ++a) {
      const Layout& ly = layouts[a];
      Buf b = layout_buffer(ly, P, R, C);
      vm::ArgBinding bind;
      bind.stride[vm::kP] = ly.ps;
      bind.stride[vm::kR] = ly.rs;
      bind.stride[vm::kC] = ly.cs;
      li.args[a] = lj.args[a] = bind;
      if (roles[a] == ArgRole::Input) {
        const std::vector<float> v = input_data(static_cast<size_t>(b.extent), seed * 31 + static_cast<uint32_t>(a), specials);
        b.data.assign(v.begin(), v.end());
        in[a] = b;
        li.args[a].in = lj.args[a].in = in[a].data.data() + in[a].origin;
      } else {
        b.origin += g_output_shift;
        b.extent += g_output_shift;
        b.data.assign(static_cast<size_t>(b.extent + kGuards), kGuard);
        out_i[a] = b;
        out_j[a] = b;
        li.args[a].out = out_i[a].data.data() + b.origin;
        lj.args[a].out = out_j[a].data.data() + b.origin;
      }
    }
    const int64_t items = vm::work_items(k, li);
    vm::interpret(k, li, 0, items, *microkernels_for(isa));
    // The JIT in three ranges, as threads would take them: the later ones
    // start inside a row run (and, where P > 1, inside a p).
    const int64_t cut1 = std::min<int64_t>(items, 1), cut2 = std::max(cut1, items - 1);
    run_items(*code, k.verified(), lj, 0, cut1);
    run_items(*code, k.verified(), lj, cut1, cut2);
    run_items(*code, k.verified(), lj, cut2, items);
    for (size_t a = 0; a < roles.size(); ++a) {
      if (roles[a] != ArgRole::Output) continue;
      const auto& x = out_i[a].data;
      const auto& y = out_j[a].data;
      for (int64_t g = 0; g < kGuards; ++g)
        ASSERT_EQ(y[static_cast<size_t>(out_j[a].extent + g)], kGuard)
            << what << " " << isa_name(isa) << ": JIT wrote past the end of output " << a;
      if (std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) != 0) {
        for (size_t i = 0; i < x.size(); ++i) {
          uint32_t bx, by;
          std::memcpy(&bx, &x[i], 4);
          std::memcpy(&by, &y[i], 4);
          // The one tolerated difference: which NaN comes out when two NaNs
          // of different sign meet in a commutative op (x86 returns the first
          // source's, and the C++ compiler orders the interpreter's operands
          // of add/mul freely). Every non-NaN result must match bit for bit.
          if (bx != by && std::isnan(x[i]) && std::isnan(y[i])) {
            ++g_nan_sign_differences;
            continue;
          }
          if (bx != by) {
            ADD_FAILURE() << what << " " << isa_name(isa) << " P=" << P << " R=" << R << " C=" << C
                          << ": output " << a << " element " << static_cast<int64_t>(i) - out_j[a].origin
                          << " interpreter " << x[i] << " (0x" << std::hex << bx << ") jit " << y[i]
                          << " (0x" << by << std::dec << ")";
            return;
          }
        }
      }
    }
  }
}

std::vector<int64_t> short_and_long() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 33; ++i) n.push_back(i);
  n.push_back(4099);
  return n;
}

constexpr Op kUnary[] = {Op::NEG, Op::ABS, Op::EXP, Op::LOG, Op::SQRT, Op::RSQRT, Op::RECIP,
                         Op::TANH, Op::SIGMOID, Op::RELU, Op::GELU_TANH, Op::GELU_ERF, Op::ERF,
                         Op::SIN, Op::COS, Op::FLOOR, Op::CEIL, Op::ROUND};
constexpr Op kBinary[] = {Op::ADD, Op::SUB, Op::MUL, Op::DIV, Op::MAX, Op::MIN, Op::POW,
                          Op::EQ, Op::NE, Op::LT, Op::LE, Op::GT, Op::GE};
constexpr Op kReduce[] = {Op::RSUM, Op::RMAX, Op::RMIN};

// ---------------------------------------------------------------------------
// Single ops.
// ---------------------------------------------------------------------------
TEST(JitOps, UnaryVecAndRow) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Op op : kUnary) {
    Encoder e(Form::Elementwise);
    int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input);
    int ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output);
    e.store(Op::ST, ay, e.unary(op, e.load(Op::LD, ax)));
    // a row operand: op on one value per row, then stored over the row
    e.store(Op::ST, az, e.unary(op, e.load(Op::LDB, as)));
    auto k = make_kernel(e);
    for (int64_t C : short_and_long()) {
      const int64_t P = 2, R = 3;
      differential(*k, {padded(R, C), per_row(R), padded(R, C), dense(R, C)}, P, R, C,
                   static_cast<uint32_t>(C), vm::op_name(op), C == 33);
    }
  }
}

TEST(JitOps, BinaryAllOperandKinds) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Op op : kBinary) {
    Encoder e(Form::Elementwise);
    int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input);
    int as = e.add_arg(ArgRole::Input), at = e.add_arg(ArgRole::Input);
    int o[4];
    for (int& oi : o) oi = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax), y = e.load(Op::LD, ay);
    auto s = e.load(Op::LDB, as), t = e.load(Op::LDB, at);
    e.store(Op::ST, o[0], e.binary(op, x, y));  // vec, vec
    e.store(Op::ST, o[1], e.binary(op, x, s));  // vec, row
    e.store(Op::ST, o[2], e.binary(op, s, y));  // row, vec
    e.store(Op::ST, o[3], e.binary(op, s, t));  // row, row
    auto k = make_kernel(e);
    for (int64_t C : short_and_long()) {
      const int64_t P = 1, R = 3;
      differential(*k,
                   {dense(R, C), dense(R, C), per_row(R), per_row(R), dense(R, C), dense(R, C),
                    dense(R, C), dense(R, C)},
                   P, R, C, static_cast<uint32_t>(C) + 100, vm::op_name(op), C == 17);
    }
  }
}

TEST(JitOps, TernaryAllOperandKinds) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Op op : {Op::SELECT, Op::FMA}) {
    Encoder e(Form::Elementwise);
    int av[3], ar[3], outs[8];
    for (int k = 0; k < 3; ++k) av[k] = e.add_arg(ArgRole::Input);
    for (int k = 0; k < 3; ++k) ar[k] = e.add_arg(ArgRole::Input);
    for (int& oi : outs) oi = e.add_arg(ArgRole::Output);
    Encoder::Value v[3], r[3];
    for (int k = 0; k < 3; ++k) {
      v[k] = e.load(Op::LD, av[k]);
      r[k] = e.load(Op::LDB, ar[k]);
    }
    // SELECT's mask: mostly nonzero floats; make some zeros via a compare.
    if (op == Op::SELECT) {
      v[0] = e.binary(Op::GT, v[0], e.constant(0.0f));
    }
    for (int combo = 0; combo < 8; ++combo) {
      Encoder::Value s[3];
      for (int k = 0; k < 3; ++k) s[k] = (combo >> k & 1) ? r[k] : v[k];
      e.store(Op::ST, outs[combo], e.ternary(op, s[0], s[1], s[2]));
    }
    auto k = make_kernel(e);
    for (int64_t C : short_and_long()) {
      const int64_t P = 1, R = 2;
      std::vector<Layout> ls;
      for (int j = 0; j < 3; ++j) ls.push_back(dense(R, C));
      for (int j = 0; j < 3; ++j) ls.push_back(per_row(R));
      for (int j = 0; j < 8; ++j) ls.push_back(dense(R, C));
      differential(*k, ls, P, R, C, static_cast<uint32_t>(C) + 7, vm::op_name(op), C == 9);
    }
  }
}

// ---------------------------------------------------------------------------
// Reductions.
// ---------------------------------------------------------------------------
TEST(JitReduce, RowReductions) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Op op : kReduce) {
    Encoder e(Form::RowReduce);
    int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input);
    int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output),
        o3 = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto r = e.reduce(op, x);
    e.store(Op::STB, o1, r);
    e.store(Op::STB, o2, e.reduce(op, e.load(Op::LDB, as)));  // reduce of a row value
    e.store(Op::ST, o3, e.binary(Op::SUB, x, r));             // broadcast back
    auto k = make_kernel(e);
    std::vector<int64_t> lens = short_and_long();
    lens.push_back(5003);
    for (int64_t C : lens) {
      const int64_t P = 2, R = 3;
      differential(*k, {dense(R, C), per_row(R), per_row(R), per_row(R), dense(R, C)}, P, R, C,
                   static_cast<uint32_t>(C) + 11, vm::op_name(op), C == 21 || C == 5003);
    }
  }
}

// Both tiers against the scalar re-implementation of the canonical order, on
// rows whose float sum depends on the association (2^24-scale values of both
// signs among small ones), at lengths around multiples of 4 * W, and past
// kRowTileMax where the interpreter folds 512-float tiles in several passes.
// A second reduction over x - r (a later pass, which also runs four copies)
// is checked the same way.
TEST(JitReduce, RowReductionOrderPinned) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  std::mt19937 rng(99);
  for (Op op : kReduce) {
    Encoder e(Form::RowReduce);
    int ax = e.add_arg(ArgRole::Input), o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto r = e.reduce(op, x);
    e.store(Op::STB, o1, r);
    e.store(Op::STB, o2, e.reduce(op, e.binary(Op::SUB, x, r)));
    auto k = make_kernel(e);
    for (Isa isa : jit_isas()) {
      const int64_t W = microkernels_for(isa)->lanes, B = 4 * W;
      std::vector<int64_t> ns;
      for (int64_t m = 0; m <= 3; ++m)
        for (int64_t d : {-W - 1, -W, -W + 1, int64_t{-1}, int64_t{0}, int64_t{1}, W - 1, W, W + 1, 2 * W + 3, 3 * W})
          if (m * B + d >= 0) ns.push_back(m * B + d);
      ns.push_back(vm::kRowTileMax + 512 + 3 * W + 5);
      std::string reason;
      auto code = compile(k->verified(), isa, &reason);
      ASSERT_TRUE(code) << reason;
      for (int64_t C : ns) {
        std::vector<float> xs(static_cast<size_t>(C));
        for (float& v : xs) {
          const int c = static_cast<int>(rng() % 4);
          v = c == 0 ? 16777216.0f : c == 1 ? -16777216.0f : static_cast<float>(static_cast<int>(rng() % 17) - 8) + 0.25f;
        }
        const float want1 = canonical_row_reduce(op, static_cast<size_t>(W), xs);
        std::vector<float> d(xs.size());
        for (size_t i = 0; i < xs.size(); ++i) d[i] = xs[i] - want1;
        const float want2 = canonical_row_reduce(op, static_cast<size_t>(W), d);
        for (int tier = 0; tier < 2; ++tier) {
          float y1 = kGuard, y2 = kGuard;
          vm::Launch l;
          l.extent[vm::kP] = 1;
          l.extent[vm::kR] = 1;
          l.extent[vm::kC] = C;
          l.args.resize(3);
          l.args[0].in = xs.data();
          l.args[0].stride[vm::kC] = 1;
          l.args[1].out = &y1;
          l.args[2].out = &y2;
          const int64_t items = vm::work_items(*k, l);
          if (tier == 0) vm::interpret(*k, l, 0, items, *microkernels_for(isa));
          else run_items(*code, k->verified(), l, 0, items);
          const char* tn = tier == 0 ? "interpreter" : "jit";
          auto same = [](float a, float b) {
            return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, 4) == 0;
          };
          ASSERT_TRUE(same(y1, want1)) << tn << " " << isa_name(isa) << " " << vm::op_name(op) << " C=" << C
                                       << ": " << y1 << " vs " << want1;
          ASSERT_TRUE(same(y2, want2)) << tn << " " << isa_name(isa) << " " << vm::op_name(op) << " C=" << C
                                       << " (second pass): " << y2 << " vs " << want2;
        }
      }
    }
  }
}

// A folding pass with a large body (an exp) is split: a one-vector loop keeps
// the folded value in a scratch row, then four copies reload it and fold. In
// the same pass: a fold of a plain load (reloaded from its argument) and of a
// row value; the last pass stores over the row.
TEST(JitReduce, SplitFoldingPass) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input);
  int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output), o3 = e.add_arg(ArgRole::Output),
      o4 = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto s1 = e.reduce(Op::RSUM, e.unary(Op::EXP, x));
  auto s2 = e.reduce(Op::RMAX, x);
  e.store(Op::STB, o1, s1);
  e.store(Op::STB, o2, s2);
  e.store(Op::STB, o3, e.reduce(Op::RSUM, e.load(Op::LDB, as)));
  e.store(Op::ST, o4, e.binary(Op::MUL, x, e.binary(Op::SUB, s1, s2)));
  auto k = make_kernel(e);
  IrBuilder ir;
  std::string reason;
  ASSERT_TRUE(lower(k->verified(), &ir, &reason));
  int loops = 0;
  for (const Node& n : ir.nodes) loops += n.op == IrOp::LoopBegin && n.imm == 0;
  EXPECT_EQ(loops, 3) << "pass 0 split in two column loops, then the last pass";
  EXPECT_EQ(ir.scratch_rows, 1);
  std::vector<int64_t> lens = short_and_long();
  lens.push_back(5003);
  for (int64_t C : lens)
    differential(*k, {dense(3, C), per_row(3), per_row(3), per_row(3), per_row(3), dense(3, C)}, 1, 3, C,
                 static_cast<uint32_t>(C) + 5, "split pass", C == 17);
}

// A row kernel whose outputs need no reduction beside one that does (a game
// loop's particle update that also sums an energy): the values no reduction
// feeds are stored in the first pass, while it folds, so no later pass
// recomputes them or keeps them in scratch rows; only the value that reads
// the sum is stored by the last pass. Results stay the interpreter's.
TEST(JitReduce, StoresNoReductionFeedsRunInTheFirstPass) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input);
  int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output), o3 = e.add_arg(ArgRole::Output),
      o4 = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto v = e.binary(Op::ADD, e.binary(Op::MUL, x, x), e.load(Op::LD, ay));
  e.store(Op::ST, o1, v);
  e.store(Op::ST, o2, e.unary(Op::NEG, v));
  auto s = e.reduce(Op::RSUM, e.binary(Op::MUL, v, v));
  e.store(Op::STB, o3, s);
  e.store(Op::ST, o4, e.binary(Op::MUL, x, s));
  auto k = make_kernel(e);
  IrBuilder ir;
  std::string reason;
  ASSERT_TRUE(lower(k->verified(), &ir, &reason));
  EXPECT_EQ(ir.scratch_rows, 0);
  // Column loops in order; for each output, which of them store it.
  std::vector<std::pair<int32_t, int32_t>> loops;  // [begin, end) node ids
  for (size_t i = 0; i < ir.nodes.size(); ++i)
    if (ir.nodes[i].op == IrOp::LoopBegin && ir.nodes[i].imm == 0)
      loops.emplace_back(static_cast<int32_t>(i), ir.nodes[i].a);
  ASSERT_EQ(loops.size(), 2u) << "the folding pass, then the last pass";
  auto stored_in = [&](int arg) {
    std::vector<int> in;
    for (size_t l = 0; l < loops.size(); ++l)
      for (int32_t i = loops[l].first; i < loops[l].second; ++i)
        if (ir.nodes[static_cast<size_t>(i)].op == IrOp::Store && ir.nodes[static_cast<size_t>(i)].arg == arg &&
            ir.nodes[static_cast<size_t>(i)].phase == kPhaseRow) {
          in.push_back(static_cast<int>(l));
          break;
        }
    return in;
  };
  EXPECT_EQ(stored_in(o1), std::vector<int>{0});
  EXPECT_EQ(stored_in(o2), std::vector<int>{0});
  EXPECT_EQ(stored_in(o4), std::vector<int>{1});
  std::vector<int64_t> lens = short_and_long();
  lens.push_back(10007);
  for (int64_t C : lens)
    differential(*k, {dense(3, C), dense(3, C), dense(3, C), dense(3, C), per_row(3), dense(3, C)}, 1, 3, C,
                 static_cast<uint32_t>(C) + 11, "first-pass stores", C == 17);
}

// A layernorm-shaped row kernel (mean, variance, affine) whose weight every
// row shares (row stride 0) while x and the output advance row by row: over
// a run of rows in one call, each row's pointers move by their own rs, P = 2
// with a gap after each p. Each kept value and the results stay the
// interpreter's (differential).
TEST(JitReduce, RowRunsAdvanceEachArgumentByItsOwnStride) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::RowReduce);
  int ax = e.add_arg(ArgRole::Input), aw = e.add_arg(ArgRole::Input), ao = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto mean = e.reduce(Op::RSUM, x);
  auto d = e.binary(Op::SUB, x, mean);
  auto var = e.reduce(Op::RSUM, e.binary(Op::MUL, d, d));
  e.store(Op::ST, ao, e.binary(Op::MUL, e.binary(Op::MUL, d, var), e.load(Op::LD, aw)));
  auto k = make_kernel(e);
  for (int64_t C : short_and_long())
    differential(*k, {padded(3, C), row_bcast(C), padded(3, C)}, 2, 3, C, static_cast<uint32_t>(C) + 9,
                 "layernorm-shaped row kernel", false);
}

TEST(JitReduce, ColReductions) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Op op : kReduce) {
    Encoder e(Form::ColReduce);
    int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input),
        ab = e.add_arg(ArgRole::Input);
    int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto s = e.load(Op::LDB, as);
    auto xs = e.binary(Op::MUL, x, s);
    auto es = e.unary(Op::EXP, s);
    auto rx = e.reduce(op, xs);
    auto rs = e.reduce(op, es);  // a row-kind reduction
    auto b = e.load(Op::LD, ab);
    e.store(Op::ST, o1, e.binary(Op::ADD, e.binary(Op::MUL, rx, e.constant(0.25f)), b));
    e.store(Op::ST, o2, rs);
    auto k = make_kernel(e);
    std::vector<int64_t> lens = short_and_long();
    lens.push_back(511);
    lens.push_back(1025);
    for (int64_t C : lens)
      for (int64_t R : {0, 1, 7}) {
        const int64_t P = 2;
        differential(*k, {dense(R, C), per_row(R), epilogue(C), epilogue(C), epilogue(C)}, P, R, C,
                     static_cast<uint32_t>(C * 10 + R), vm::op_name(op), C == 19);
      }
  }
}

// Scalar parameters (PARAM): the launch's values broadcast like constants,
// in every form and phase, bit for bit as the interpreter computes; new
// values run the same compiled code.
TEST(JitScalars, ParamsInEveryForm) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  const std::vector<std::vector<float>> values = {
      {0.75f, -2.5f, 3.0f}, {1e-3f, 7.0f, -0.0f}, {std::nanf(""), 1e30f, -1e-40f}};
  {
    // Elementwise: x * s0 + y, a comparison with s1, a select against s2.
    Encoder e(Form::Elementwise);
    int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input);
    int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto s0 = e.param(), s1 = e.param(), s2 = e.param();
    e.store(Op::ST, o1, e.ternary(Op::FMA, x, s0, e.load(Op::LD, ay)));
    e.store(Op::ST, o2, e.ternary(Op::SELECT, e.binary(Op::GT, x, s1), x, e.binary(Op::POW, s2, s0)));
    auto k = make_kernel(e);
    ASSERT_EQ(k->program().nscalars, 3);
    for (size_t v = 0; v < values.size(); ++v)
      for (int64_t C : short_and_long())
        differential(*k, {dense(3, C), dense(3, C), dense(3, C), dense(3, C)}, 2, 3, C,
                     static_cast<uint32_t>(C + 100 * v), "elementwise params", C == 13, values[v]);
  }
  {
    // RowReduce, multi-phase: a parameter before and after each reduction.
    Encoder e(Form::RowReduce);
    int ax = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output), ob = e.add_arg(ArgRole::Output);
    auto s0 = e.param();
    auto x = e.binary(Op::MUL, e.load(Op::LD, ax), s0);
    auto m = e.reduce(Op::RMAX, x);
    auto ex = e.unary(Op::EXP, e.binary(Op::SUB, x, m));
    auto sum = e.reduce(Op::RSUM, ex);
    auto s1 = e.param();
    e.store(Op::ST, o, e.binary(Op::MUL, ex, e.binary(Op::ADD, e.unary(Op::RECIP, sum), s1)));
    e.store(Op::STB, ob, e.binary(Op::SUB, sum, e.param()));
    auto k = make_kernel(e);
    for (size_t v = 0; v < values.size(); ++v)
      for (int64_t C : short_and_long())
        differential(*k, {dense(3, C), dense(3, C), per_row(3)}, 2, 3, C, static_cast<uint32_t>(C + 7 * v),
                     "row_reduce params", false, values[v]);
  }
  {
    // 256 parameters (the most the JIT keeps): most live in spill slots.
    Encoder e(Form::Elementwise);
    int ax = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
    auto y = e.load(Op::LD, ax);
    for (int k = 0; k < 128; ++k) y = e.ternary(Op::FMA, y, e.param(), e.param());
    e.store(Op::ST, o, y);
    auto k = make_kernel(e);
    ASSERT_EQ(k->program().nscalars, 256);
    std::vector<float> many;
    for (int j = 0; j < 256; ++j) many.push_back(j % 2 ? 0.001f * static_cast<float>(j) : 1.0f - 0.0001f * j);
    for (int64_t C : {1, 17, 1001})
      differential(*k, {dense(3, C), dense(3, C)}, 2, 3, C, static_cast<uint32_t>(C), "256 params", false, many);
    Encoder more(Form::Elementwise);
    int mx = more.add_arg(ArgRole::Input), mo = more.add_arg(ArgRole::Output);
    auto z = more.load(Op::LD, mx);
    for (int j = 0; j < 257; ++j) z = more.binary(Op::ADD, z, more.param());
    more.store(Op::ST, mo, z);
    auto km = make_kernel(more);
    std::string reason;
    EXPECT_FALSE(compile(km->verified(), jit_isas().front(), &reason));
    EXPECT_NE(reason.find("257 scalar parameters"), std::string::npos) << reason;
  }
  {
    // ColReduce: a parameter in the prologue, read again by the epilogue.
    Encoder e(Form::ColReduce);
    int ax = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
    auto s0 = e.param();
    auto r = e.reduce(Op::RSUM, e.binary(Op::MUL, e.load(Op::LD, ax), s0));
    e.store(Op::ST, o, e.binary(Op::ADD, e.binary(Op::MUL, r, e.param()), s0));
    auto k = make_kernel(e);
    std::vector<int64_t> lens = short_and_long();
    lens.push_back(1025);
    for (size_t v = 0; v < values.size(); ++v)
      for (int64_t C : lens)
        for (int64_t R : {0, 1, 7})
          differential(*k, {dense(R, C), epilogue(C)}, 2, R, C, static_cast<uint32_t>(C * 10 + R + v),
                       "col_reduce params", false, {values[v][0], values[v][1]});
  }
}

// ---------------------------------------------------------------------------
// Load and store patterns.
// ---------------------------------------------------------------------------
TEST(JitPatterns, LoadsAndStores) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (int64_t cs : {3, -2, 0, 1}) {
    Encoder e(Form::Elementwise);
    int ax = e.add_arg(ArgRole::Input), aa = e.add_arg(ArgRole::Input),
        ab = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input);
    int ay = e.add_arg(ArgRole::Output), az = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto a = e.load(Op::LDS, aa);
    auto b = e.load(Op::LD, ab);  // one row shared by every (p, r)
    auto s = e.load(Op::LDB, as);
    auto t = e.binary(Op::ADD, e.binary(Op::MUL, x, a), b);
    auto y = e.binary(Op::ADD, e.binary(Op::MUL, e.unary(Op::RELU, t), e.constant(0.5f)), x);
    e.store(Op::ST, ay, e.binary(Op::MUL, y, s));
    e.store(Op::ST, az, e.binary(Op::ADD, s, e.constant(2.0f)));  // a row value over the row
    auto k = make_kernel(e);
    std::vector<int64_t> lens = short_and_long();
    lens.push_back(20001);  // more than one work item per row
    for (int64_t C : lens) {
      const int64_t P = 2, R = 3;
      differential(*k,
                   {dense(R, C), strided(R, C, cs), row_bcast(C), per_row(R), dense(R, C), dense(R, C)},
                   P, R, C, static_cast<uint32_t>(C), "patterns cs=" + std::to_string(cs));
    }
  }
}

TEST(JitPatterns, StridedLoadsInEveryForm) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  // RowReduce: sum of a strided row.
  {
    Encoder e(Form::RowReduce);
    int aa = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
    e.store(Op::STB, o, e.reduce(Op::RSUM, e.load(Op::LDS, aa)));
    auto k = make_kernel(e);
    for (int64_t C : short_and_long())
      differential(*k, {strided(2, C, -3), per_row(2)}, 1, 2, C, 5, "row lds");
  }
  // ColReduce: strided prologue load and epilogue load.
  {
    Encoder e(Form::ColReduce);
    int aa = e.add_arg(ArgRole::Input), ab = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
    auto r = e.reduce(Op::RMAX, e.load(Op::LDS, aa));
    e.store(Op::ST, o, e.binary(Op::SUB, r, e.load(Op::LDS, ab)));
    auto k = make_kernel(e);
    for (int64_t C : short_and_long()) {
      Layout pro = {5 * C * 3, C * 3, 3};
      Layout epi = {2 * C, 0, 2};
      differential(*k, {pro, epi, epilogue(C)}, 2, 5, C, 6, "col lds");
    }
  }
}

// Elementwise launches with an input read across rows (a transpose: its
// elements a cache line or more apart) run in blocks of rows (jit.cpp,
// run_row_blocks): the interpreter's bits at generated shapes around the
// block sizes, in ranges that start inside a block, with strides on both
// sides of a line and of both signs; only those at a line or more block.
TEST(JitShapes, InputsReadAcrossRowsRunInBlocksOfRows) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input), o = e.add_arg(ArgRole::Output);
  e.store(Op::ST, o, e.binary(Op::MUL, e.load(Op::LDS, ax), e.load(Op::LD, ay)));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  std::mt19937 rng(23);
  for (int iter = 0; iter < 80; ++iter) {
    const int64_t P = 1 + static_cast<int64_t>(rng() % 2), R = 1 + static_cast<int64_t>(rng() % 70);
    const int64_t C = 1 + static_cast<int64_t>(rng() % 90);
    const int64_t step = (rng() % 2 ? -1 : 1) * (1 + static_cast<int64_t>(rng() % 40));
    const std::string what = "P=" + std::to_string(P) + " R=" + std::to_string(R) + " C=" + std::to_string(C) +
                             " stride " + std::to_string(step);
    const int64_t before = row_block_launches();
    differential(*k, {strided(R, C, step), dense(R, C), dense(R, C)}, P, R, C, static_cast<uint32_t>(iter), what);
    EXPECT_EQ(row_block_launches() > before, R >= 2 && std::abs(step) >= 16) << what;
  }
}

// Narrow rows whose arguments continue the row before or repeat one row (a
// [C] operand broadcast over [R, C]) run several rows to a call (jit.cpp,
// run_periodic_rows): the interpreter's bits over generated P, R and C
// below 64 (multiples of 16 keep their rows), in three item ranges (the
// later ones start inside a group of rows), with a strided input as the
// case that does not qualify.
TEST(JitShapes, NarrowRowsWithARepeatedRowRunSeveralToACall) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), am = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input);
  int o = e.add_arg(ArgRole::Output);
  e.store(Op::ST, o, e.binary(Op::DIV, e.binary(Op::SUB, e.load(Op::LD, ax), e.load(Op::LD, am)), e.load(Op::LD, as)));
  auto k = make_kernel(e);
  ASSERT_TRUE(k);
  std::mt19937 rng(29);
  for (int iter = 0; iter < 80; ++iter) {
    const int64_t P = 1 + static_cast<int64_t>(rng() % 2), R = 1 + static_cast<int64_t>(rng() % 300);
    const int64_t C = 1 + static_cast<int64_t>(rng() % 70);
    const bool both_repeat = rng() % 2;
    const std::string what = "P=" + std::to_string(P) + " R=" + std::to_string(R) + " C=" + std::to_string(C);
    const int64_t before = periodic_row_launches();
    differential(*k, {dense(R, C), row_bcast(C), both_repeat ? row_bcast(C) : dense(R, C), dense(R, C)}, P, R, C,
                 static_cast<uint32_t>(iter) + 3, what);
    const int64_t group = std::lcm(C, int64_t{16}) / C;
    EXPECT_EQ(periodic_row_launches() > before, C < 64 && C % 16 != 0 && R >= 2 * group) << what;
  }
  const int64_t before = periodic_row_launches();
  differential(*k, {strided(40, 3, 2), row_bcast(3), row_bcast(3), dense(40, 3)}, 1, 40, 3, 1, "strided x");
  EXPECT_EQ(periodic_row_launches(), before) << "a strided input does not continue its rows";
}

// ---------------------------------------------------------------------------
// Code shapes: every unroll factor, interleaved or not, and every ColReduce
// column block computes the interpreter's bits, at lengths around each
// boundary of the main loop (U * lanes), the one-vector loop and the tail.
// ---------------------------------------------------------------------------
struct TuningScope {
  Tuning saved = tuning();
  ~TuningScope() { tuning() = saved; }
};

std::vector<int64_t> around_blocks() {
  std::vector<int64_t> n;
  for (int64_t i = 0; i <= 70; ++i) n.push_back(i);
  for (int64_t b : {127, 128, 129, 191, 255, 256, 257, 511, 512, 513, 1000, 1031})
    n.push_back(b);
  return n;
}

TEST(JitShapes, ElementwiseUnrollFactors) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  TuningScope scope;
  // W1's chain with a row value, a strided operand and two outputs; a
  // transcendental body (more registers per copy).
  Encoder chain(Form::Elementwise);
  {
    int ax = chain.add_arg(ArgRole::Input), aa = chain.add_arg(ArgRole::Input),
        as = chain.add_arg(ArgRole::Input), ab = chain.add_arg(ArgRole::Input),
        ay = chain.add_arg(ArgRole::Output), az = chain.add_arg(ArgRole::Output);
    auto x = chain.load(Op::LD, ax);
    auto t = chain.ternary(Op::FMA, x, chain.load(Op::LD, aa), chain.load(Op::LDB, ab));
    auto y = chain.binary(Op::ADD, chain.binary(Op::MUL, chain.unary(Op::RELU, t), chain.constant(0.5f)), x);
    chain.store(Op::ST, ay, y);
    chain.store(Op::ST, az, chain.binary(Op::SUB, chain.load(Op::LDS, as), y));
  }
  Encoder heavy(Form::Elementwise);
  {
    int ax = heavy.add_arg(ArgRole::Input), ay = heavy.add_arg(ArgRole::Output);
    heavy.store(Op::ST, ay, heavy.unary(Op::GELU_TANH, heavy.unary(Op::EXP, heavy.load(Op::LD, ax))));
  }
  auto kc = make_kernel(chain), kh = make_kernel(heavy);
  for (int unroll : {1, 2, 4})
    for (int interleave : {0, 1}) {
      tuning().unroll = unroll;
      tuning().interleave = interleave;
      const std::string what = "unroll " + std::to_string(unroll) + (interleave ? " interleaved" : "");
      for (int64_t C : around_blocks()) {
        const int64_t R = 2;
        differential(*kc, {dense(R, C), dense(R, C), strided(R, C, 3), per_row(R), dense(R, C), dense(R, C)},
                     1, R, C, static_cast<uint32_t>(C) + 5, "chain " + what, C % 9 == 0);
        differential(*kh, {dense(R, C), dense(R, C)}, 1, R, C, static_cast<uint32_t>(C) + 6,
                     "heavy " + what, C % 5 == 0);
        if (::testing::Test::HasFailure()) return;
      }
    }
}

// Rows longer than a chunk (vm::kChunk elements): the consecutive chunks of
// one row that a range of items holds run as one call. The differential
// check splits the items in three ranges, so calls start inside a row, end
// inside one, and cross from one row (and p) into the next.
TEST(JitShapes, ChunksOfOneRowRunAsOneCall) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  {
    int ax = e.add_arg(ArgRole::Input), aa = e.add_arg(ArgRole::Input), ab = e.add_arg(ArgRole::Input),
        ay = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax);
    auto t = e.binary(Op::ADD, e.binary(Op::MUL, x, e.load(Op::LD, aa)), e.load(Op::LDB, ab));
    e.store(Op::ST, ay, e.binary(Op::ADD, e.binary(Op::MUL, e.unary(Op::RELU, t), e.constant(0.5f)), x));
  }
  auto k = make_kernel(e);
  for (int64_t C : {vm::kChunk - 1, vm::kChunk, vm::kChunk + 1, 3 * vm::kChunk + 5}) {
    differential(*k, {padded(2, C), dense(2, C), per_row(2), padded(2, C)}, 2, 2, C, static_cast<uint32_t>(C),
                 "chunked rows");
    differential(*k, {dense(1, C), dense(1, C), per_row(1), dense(1, C)}, 1, 1, C, static_cast<uint32_t>(C) + 1,
                 "one chunked row");
    if (::testing::Test::HasFailure()) return;
  }
}

// A long chain of dependent ops (W7's 100 ops, 50 of them reading scalar
// parameters) runs four interleaved copies per iteration by default, even
// though its parameters spill, with the bits of the interpreter.
TEST(JitShapes, LongChainsRunInterleavedCopies) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  TuningScope scope;
  tuning() = Tuning{};
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input), az = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  auto t = e.load(Op::LD, ax);
  const auto z = e.load(Op::LD, az);
  std::vector<float> scalars;
  for (int k = 0; k < 100; ++k) {
    const Op op = k % 3 == 0 ? Op::ADD : k % 3 == 1 ? Op::MUL : Op::SUB;
    if (k % 2 == 0) {
      t = e.binary(op, t, z);
    } else {
      t = e.binary(op, t, e.param());
      scalars.push_back(0.25f + 0.125f * static_cast<float>(k % 5));
    }
  }
  e.store(Op::ST, ay, t);
  auto k = make_kernel(e);
  for (Isa isa : jit_isas()) {
    std::string reason;
    auto chosen = compile(k->verified(), isa, &reason);
    tuning().unroll = 1;
    auto single = compile(k->verified(), isa, &reason);
    tuning() = Tuning{};
    ASSERT_TRUE(chosen && single) << reason;
    // The main loop holds four copies, the tail loop one.
    EXPECT_GT(2 * chosen->code_bytes, 3 * single->code_bytes) << isa_name(isa) << ": four copies of the body";
  }
  for (int64_t C : around_blocks())
    differential(*k, {dense(1, C), dense(1, C), dense(1, C)}, 1, 1, C, static_cast<uint32_t>(C), "chain",
                 C % 7 == 0, scalars);
}

TEST(JitShapes, ColReduceBlocks) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  TuningScope scope;
  Encoder e(Form::ColReduce);
  int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input), ab = e.add_arg(ArgRole::Input);
  int o1 = e.add_arg(ArgRole::Output), o2 = e.add_arg(ArgRole::Output), o3 = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  auto s = e.load(Op::LDB, as);
  auto xs = e.binary(Op::MUL, x, s);
  auto es = e.unary(Op::EXP, s);
  auto rsum = e.reduce(Op::RSUM, xs);
  auto rmax = e.reduce(Op::RMAX, x);
  auto rrow = e.reduce(Op::RMIN, es);  // a row-kind reduction
  e.store(Op::ST, o1, e.binary(Op::ADD, rsum, e.load(Op::LD, ab)));
  e.store(Op::ST, o2, e.binary(Op::SUB, rmax, rrow));
  e.store(Op::ST, o3, rrow);
  auto k = make_kernel(e);
  // A strided (gathered) column and a masked store: the last masked block
  // gathers and stores each copy to its own count.
  Encoder g(Form::ColReduce);
  int gx = g.add_arg(ArgRole::Input), go = g.add_arg(ArgRole::Output);
  g.store(Op::ST, go, g.reduce(Op::RSUM, g.unary(Op::EXP, g.load(Op::LDS, gx))));
  auto kg = make_kernel(g);
  for (int block : {1, 2, 3, 4, 8, 16}) {
    tuning().col_block = block;
    for (int64_t C : around_blocks())
      for (int64_t R : {0, 1, 5}) {
        if (R == 0 && C % 7 != 0) continue;
        differential(*k, {dense(R, C), per_row(R), epilogue(C), epilogue(C), epilogue(C), epilogue(C)}, 2,
                     R, C, static_cast<uint32_t>(C * 10 + R), "col block " + std::to_string(block),
                     C % 11 == 0);
        if (R > 0)
          differential(*kg, {strided(R, C, 3), epilogue(C)}, 2, R, C, static_cast<uint32_t>(C * 10 + R + 3),
                       "strided col block " + std::to_string(block), false);
        if (::testing::Test::HasFailure()) return;
      }
  }
}

// ---------------------------------------------------------------------------
// Multi-phase row kernels.
// ---------------------------------------------------------------------------
TEST(JitMultiPhase, SoftmaxAndLayerNorm) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder sm(Form::RowReduce);
  {
    int ax = sm.add_arg(ArgRole::Input), ay = sm.add_arg(ArgRole::Output);
    auto x = sm.load(Op::LD, ax);
    auto m = sm.reduce(Op::RMAX, x);
    auto ex = sm.unary(Op::EXP, sm.binary(Op::SUB, x, m));
    auto s = sm.reduce(Op::RSUM, ex);
    sm.store(Op::ST, ay, sm.binary(Op::DIV, ex, s));
  }
  Encoder ln(Form::RowReduce);
  {
    int ax = ln.add_arg(ArgRole::Input), aw = ln.add_arg(ArgRole::Input),
        ab = ln.add_arg(ArgRole::Input), ay = ln.add_arg(ArgRole::Output),
        am = ln.add_arg(ArgRole::Output);
    auto x = ln.load(Op::LD, ax);
    auto inv_n = ln.constant(1.0f / 777.0f);
    auto mean = ln.binary(Op::MUL, ln.reduce(Op::RSUM, x), inv_n);
    auto d = ln.binary(Op::SUB, x, mean);
    auto var = ln.binary(Op::MUL, ln.reduce(Op::RSUM, ln.binary(Op::MUL, d, d)), inv_n);
    auto rstd = ln.unary(Op::RSQRT, ln.binary(Op::ADD, var, ln.constant(1e-5f)));
    auto y = ln.ternary(Op::FMA, ln.binary(Op::MUL, d, rstd), ln.load(Op::LD, aw), ln.load(Op::LD, ab));
    ln.store(Op::ST, ay, y);
    ln.store(Op::STB, am, mean);
  }
  auto ksm = make_kernel(sm), kln = make_kernel(ln);
  std::vector<int64_t> lens = short_and_long();
  lens.push_back(5003);
  for (int64_t C : lens) {
    differential(*ksm, {dense(4, C), dense(4, C)}, 1, 4, C, static_cast<uint32_t>(C), "softmax");
    differential(*kln, {dense(3, C), row_bcast(C), row_bcast(C), dense(3, C), per_row(3)}, 1, 3, C,
                 static_cast<uint32_t>(C) + 1, "layernorm");
  }
}

// ---------------------------------------------------------------------------
// Register pressure: 40 values live at once force spills.
// ---------------------------------------------------------------------------
TEST(JitSpill, FortyLiveValues) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Form form : {Form::Elementwise, Form::RowReduce, Form::ColReduce}) {
    Encoder e(form);
    int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input),
        ao = e.add_arg(ArgRole::Output);
    auto x = e.load(Op::LD, ax), y = e.load(Op::LD, ay);
    std::vector<Encoder::Value> v;
    for (int k = 0; k < 40; ++k)
      v.push_back(e.ternary(Op::FMA, x, e.constant(0.5f + static_cast<float>(k)), k % 2 ? y : x));
    // Use them in an order that keeps all 40 live until the end.
    Encoder::Value acc = v[39];
    for (int k = 38; k >= 0; --k) acc = e.binary(k % 3 ? Op::ADD : Op::MAX, acc, e.binary(Op::MUL, v[k], v[38 - k]));
    if (form == Form::Elementwise) {
      e.store(Op::ST, ao, acc);
    } else if (form == Form::RowReduce) {
      auto r = e.reduce(Op::RSUM, acc);
      e.store(Op::STB, ao, e.binary(Op::ADD, r, e.reduce(Op::RMAX, v[5])));
    } else {
      e.store(Op::ST, ao, e.binary(Op::SUB, e.reduce(Op::RSUM, acc), e.reduce(Op::RMIN, v[7])));
    }
    auto k = make_kernel(e);
    for (int64_t C : {0, 1, 15, 16, 17, 33, 600}) {
      const int64_t R = 3;
      if (form == Form::ColReduce)
        differential(*k, {dense(R, C), dense(R, C), epilogue(C)}, 2, R, C, 3, "spill col");
      else if (form == Form::RowReduce)
        differential(*k, {dense(R, C), dense(R, C), per_row(R)}, 1, R, C, 3, "spill row");
      else
        differential(*k, {dense(R, C), dense(R, C), dense(R, C)}, 1, R, C, 3, "spill elementwise");
    }
  }
}

// Forty transcendental results live at once (masks and int temporaries under
// pressure too).
TEST(JitSpill, ManyLiveTranscendentals) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ao = e.add_arg(ArgRole::Output);
  auto x = e.load(Op::LD, ax);
  std::vector<Encoder::Value> v;
  const Op ops[] = {Op::EXP, Op::TANH, Op::GELU_ERF, Op::SIN, Op::LOG};
  for (int k = 0; k < 40; ++k) {
    auto xi = e.binary(Op::ADD, x, e.constant(0.1f * static_cast<float>(k)));
    v.push_back(k % 8 == 7 ? e.binary(Op::POW, e.unary(Op::ABS, xi), x) : e.unary(ops[k % 5], xi));
  }
  Encoder::Value acc = v[0];
  for (int k = 1; k < 40; ++k) acc = e.binary(Op::ADD, acc, v[k]);
  e.store(Op::ST, ao, acc);
  auto k = make_kernel(e);
  for (int64_t C : {0, 5, 16, 31, 1000})
    differential(*k, {dense(1, C), dense(1, C)}, 1, 1, C, 9, "transcendentals", true);
}

// ---------------------------------------------------------------------------
// Random kernels from a seeded generator.
// ---------------------------------------------------------------------------
struct RandomKernel {
  std::shared_ptr<vm::Kernel> kernel;
  std::vector<char> arg_kind;  // 'v' dense, 's' strided, 'b' per row, 'e' ColReduce epilogue, 'o' out (dense), 'p' out per row
};

RandomKernel random_kernel(uint32_t seed) {
  std::mt19937 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<uint32_t>(n)); };
  const Form form = static_cast<Form>(pick(3));
  Encoder e(form);
  RandomKernel out;
  struct Val {
    Encoder::Value v;
    bool row;
    int level;
    int phase;  // ColReduce: 0 const, 1 prologue, 2 reduction / epilogue
  };
  std::vector<Val> vals;
  auto input = [&](char kind) {
    int a = e.add_arg(ArgRole::Input);
    out.arg_kind.push_back(kind);
    return a;
  };
  auto any_val = [&](auto pred) -> int {
    std::vector<int> ok;
    for (size_t i = 0; i < vals.size(); ++i)
      if (pred(vals[i])) ok.push_back(static_cast<int>(i));
    if (ok.empty()) return -1;
    // prefer recent values
    int k = pick(static_cast<int>(ok.size()));
    int k2 = pick(static_cast<int>(ok.size()));
    return ok[static_cast<size_t>(std::max(k, k2))];
  };
  auto add_ops = [&](int count, int phase, auto usable) {
    for (int n = 0; n < count; ++n) {
      const int c = pick(10);
      if (c < 3) {
        int a = any_val(usable);
        if (a < 0) continue;
        Val s = vals[static_cast<size_t>(a)];
        vals.push_back({e.unary(kUnary[pick(std::size(kUnary))], s.v), s.row, s.level, phase});
      } else if (c < 8) {
        int a = any_val(usable), b = any_val(usable);
        if (a < 0 || b < 0) continue;
        Val s = vals[static_cast<size_t>(a)], t = vals[static_cast<size_t>(b)];
        Op op = pick(4) == 0 ? kBinary[pick(std::size(kBinary))] : kBinary[pick(5)];
        vals.push_back({e.binary(op, s.v, t.v), s.row && t.row, std::max(s.level, t.level), phase});
      } else {
        int a = any_val(usable), b = any_val(usable), d = any_val(usable);
        if (a < 0 || b < 0 || d < 0) continue;
        Val s = vals[static_cast<size_t>(a)], t = vals[static_cast<size_t>(b)], u = vals[static_cast<size_t>(d)];
        vals.push_back({e.ternary(pick(2) ? Op::FMA : Op::SELECT, s.v, t.v, u.v), s.row && t.row && u.row,
                        std::max({s.level, t.level, u.level}), phase});
      }
    }
  };
  auto loads = [&](int phase, bool col_epilogue) {
    const int nl = 1 + pick(3);
    for (int k = 0; k < nl; ++k) {
      const int kind = pick(5);
      if (kind <= 1) vals.push_back({e.load(Op::LD, input(col_epilogue ? 'e' : 'v')), false, 0, phase});
      else if (kind == 2) vals.push_back({e.load(Op::LDS, input(col_epilogue ? 'f' : 's')), false, 0, phase});
      else if (kind == 3 && !col_epilogue) vals.push_back({e.load(Op::LDB, input('b')), true, 0, phase});
      else {
        // Odd picks are scalar parameters (the launch binds k * 0.375 - 1
        // to parameter k), even ones immediates.
        const int c = pick(9);
        vals.push_back({c % 2 ? e.param() : e.constant(static_cast<float>(c) * 0.375f - 1.0f), true, 0, 0});
      }
    }
  };
  auto all = [](const Val&) { return true; };
  if (form == Form::Elementwise) {
    loads(1, false);
    add_ops(3 + pick(12), 1, all);
    int o = e.add_arg(ArgRole::Output);
    out.arg_kind.push_back('o');
    e.store(Op::ST, o, vals.back().v);
    if (pick(2)) {
      int o2 = e.add_arg(ArgRole::Output);
      out.arg_kind.push_back('o');
      e.store(Op::ST, o2, vals[static_cast<size_t>(any_val(all))].v);
    }
  } else if (form == Form::RowReduce) {
    loads(1, false);
    const int phases = 1 + pick(3);
    for (int ph = 0; ph < phases; ++ph) {
      add_ops(2 + pick(6), 1, all);
      const int nr = 1 + pick(2);
      for (int k = 0; k < nr; ++k) {
        int a = any_val(all);
        Val s = vals[static_cast<size_t>(a)];
        vals.push_back({e.reduce(kReduce[pick(3)], s.v), true, s.level + 1, 1});
      }
    }
    add_ops(1 + pick(4), 1, all);
    int o = e.add_arg(ArgRole::Output);
    Val last = vals.back();
    if (last.row) {
      out.arg_kind.push_back('p');
      e.store(Op::STB, o, last.v);
    } else {
      out.arg_kind.push_back('o');
      e.store(Op::ST, o, last.v);
    }
    int o2 = e.add_arg(ArgRole::Output);
    out.arg_kind.push_back('o');
    e.store(Op::ST, o2, vals[static_cast<size_t>(any_val(all))].v);
  } else {
    loads(1, false);
    add_ops(2 + pick(8), 1, [](const Val& v) { return v.phase <= 1; });
    const int nr = 1 + pick(3);
    std::vector<Val> reds;
    for (int k = 0; k < nr; ++k) {
      int a = any_val([](const Val& v) { return v.phase == 1; });
      if (a < 0) a = 0;
      Val s = vals[static_cast<size_t>(a)];
      reds.push_back({e.reduce(kReduce[pick(3)], s.v), s.row, 1, 2});
    }
    for (auto& r : reds) vals.push_back(r);
    auto epi = [](const Val& v) { return v.phase != 1; };
    if (pick(2)) {
      int a = e.add_arg(ArgRole::Input);
      out.arg_kind.push_back('e');
      vals.push_back({e.load(Op::LD, a), false, 1, 2});
    }
    add_ops(1 + pick(6), 2, epi);
    int o = e.add_arg(ArgRole::Output);
    out.arg_kind.push_back('q');
    int a = any_val([](const Val& v) { return v.phase == 2; });
    e.store(Op::ST, o, vals[static_cast<size_t>(a)].v);
  }
  out.kernel = make_kernel(e);
  return out;
}

TEST(JitRandom, TwoHundredKernels) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  int ran = 0;
  for (uint32_t seed = 1; ran < 240 && seed < 2000; ++seed) {
    RandomKernel rk = random_kernel(seed);
    ASSERT_TRUE(rk.kernel) << "seed " << seed;
    ++ran;
    const Form form = rk.kernel->form();
    std::vector<float> scalars;
    for (int k = 0; k < rk.kernel->program().nscalars; ++k) scalars.push_back(static_cast<float>(k) * 0.375f - 1.0f);
    for (int64_t C : {0, 1, 7, 16, 23, 40, 1001}) {
      const int64_t P = 2, R = form == Form::ColReduce ? 5 : 3;
      std::vector<Layout> ls;
      for (char c : rk.arg_kind) {
        switch (c) {
          case 'v': case 'o': ls.push_back(dense(R, C)); break;
          case 's': ls.push_back(strided(R, C, (seed % 2) ? 3 : -2)); break;
          case 'f': ls.push_back({C * 2, 0, 2}); break;
          case 'b': case 'p': ls.push_back(per_row(R)); break;
          case 'e': case 'q': ls.push_back(epilogue(C)); break;
        }
      }
      differential(*rk.kernel, ls, P, R, C, seed + static_cast<uint32_t>(C),
                   "random kernel seed " + std::to_string(seed) + " (" + vm::form_name(form) + ")",
                   seed % 3 == 0, scalars);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GE(ran, 200);
}

// ---------------------------------------------------------------------------
// Gathered rows (LDG whose C part is contiguous: a permute whose inner axis
// stays inner): the machine code finds each row through the gather dims of
// P and R and reads C in place, with the interpreter's bits; a launch whose
// gather is strided along C, or whose R part has two dims, is declined at
// run time (run_items runs nothing) and stays on the interpreter.
// ---------------------------------------------------------------------------

// An LDG input of [P = P1 * P2, R, C] that lies in memory as [P2, P1, R, C]
// with `gap` unused elements after each row: P's two dims are permuted.
struct GatherInput {
  int64_t P1, P2, R, C, gap;
  int64_t row() const { return C + gap; }
  int64_t elems() const { return P2 * P1 * R * row(); }
  vm::ArgBinding bind(const float* data) const {
    vm::ArgBinding b;
    b.in = data;
    auto dims = [&](int part, std::vector<std::pair<int64_t, int64_t>> ds) {  // (size, stride), size-1 dims left out as bind() does
      for (auto [size, stride] : ds)
        if (size > 1) {
          b.dim_size[part][b.ndims[part]] = size;
          b.dim_stride[part][b.ndims[part]] = stride;
          b.stride[part] = stride;
          ++b.ndims[part];
        }
    };
    dims(vm::kP, {{P1, R * row()}, {P2, P1 * R * row()}});
    dims(vm::kR, {{R, row()}});
    dims(vm::kC, {{C, 1}});
    return b;
  }
  // Element (p, r, c) of the gather.
  int64_t at(int64_t p, int64_t r, int64_t c) const {
    const int64_t p1 = p / P2, p2 = p % P2;
    return ((p2 * P1 + p1) * R + r) * row() + c;
  }
};

// Runs k (argument 0 the gather, argument 1 the output of `out_elems`
// elements with binding `ob`) on the interpreter and on the JIT in three
// item ranges; expects the same bytes and intact guards.
void gathered_differential(const vm::Kernel& k, const GatherInput& g, vm::ArgBinding ob, int64_t out_elems,
                           const std::string& what) {
  const std::vector<float> x = input_data(static_cast<size_t>(g.elems()), static_cast<uint32_t>(g.elems()), true);
  vm::Launch l;
  l.extent[vm::kP] = g.P1 * g.P2;
  l.extent[vm::kR] = g.R;
  l.extent[vm::kC] = g.C;
  l.args = {g.bind(x.data()), ob};
  for (Isa isa : jit_isas()) {
    std::string reason;
    auto code = compile(k.verified(), isa, &reason);
    ASSERT_TRUE(code) << what << ": " << reason;
    ASSERT_TRUE(can_run(*code, l)) << what;
    Floats yi(static_cast<size_t>(out_elems + kGuards), kGuard), yj = yi;
    const int64_t items = vm::work_items(k, l);
    l.args[1].out = yi.data();
    vm::interpret(k, l, 0, items, *microkernels_for(isa));
    l.args[1].out = yj.data();
    const int64_t declined = gather_runs_declined();
    const int64_t cut1 = std::min<int64_t>(items, 1), cut2 = std::max(cut1, items - 1);
    EXPECT_TRUE(run_items(*code, k.verified(), l, 0, cut1));
    EXPECT_TRUE(run_items(*code, k.verified(), l, cut1, cut2));
    EXPECT_TRUE(run_items(*code, k.verified(), l, cut2, items));
    EXPECT_EQ(gather_runs_declined(), declined);
    for (int64_t i = 0; i < kGuards; ++i) ASSERT_EQ(yj[static_cast<size_t>(out_elems + i)], kGuard) << what;
    for (int64_t i = 0; i < out_elems; ++i) {
      uint32_t bi, bj;
      std::memcpy(&bi, &yi[static_cast<size_t>(i)], 4);
      std::memcpy(&bj, &yj[static_cast<size_t>(i)], 4);
      // Which NaN two NaNs of different sign give may differ (see differential).
      if (std::isnan(yi[static_cast<size_t>(i)]) && std::isnan(yj[static_cast<size_t>(i)])) continue;
      ASSERT_EQ(bi, bj) << what << " " << isa_name(isa) << " element " << i;
    }
  }
}

TEST(JitPatterns, GatheredRowsInEveryForm) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  std::mt19937 rng(7);
  const int64_t sizes[] = {1, 2, 3, 5, 16, 17, 33, 100};
  auto pick = [&] { return sizes[rng() % std::size(sizes)]; };
  // Elementwise: y = neg(x) * x + 1 over the gather.
  Encoder ew(Form::Elementwise);
  {
    int ax = ew.add_arg(ArgRole::Input), ay = ew.add_arg(ArgRole::Output);
    auto x = ew.load(Op::LDG, ax);
    ew.store(Op::ST, ay, ew.binary(Op::ADD, ew.binary(Op::MUL, ew.unary(Op::NEG, x), x), ew.constant(1.0f)));
  }
  auto kew = make_kernel(ew);
  // RowReduce: softmax's max and sum of each gathered row.
  Encoder rw(Form::RowReduce);
  {
    int ax = rw.add_arg(ArgRole::Input), ay = rw.add_arg(ArgRole::Output);
    auto x = rw.load(Op::LDG, ax);
    rw.store(Op::STB, ay, rw.reduce(Op::RSUM, rw.unary(Op::EXP, rw.binary(Op::SUB, x, rw.reduce(Op::RMAX, x)))));
  }
  auto krw = make_kernel(rw);
  // ColReduce: the sum over R of the gathered rows.
  Encoder cl(Form::ColReduce);
  {
    int ax = cl.add_arg(ArgRole::Input), ay = cl.add_arg(ArgRole::Output);
    cl.store(Op::ST, ay, cl.reduce(Op::RSUM, cl.load(Op::LDG, ax)));
  }
  auto kcl = make_kernel(cl);
  for (int round = 0; round < 40; ++round) {
    GatherInput g{pick(), pick(), pick(), round == 0 ? 4099 : pick(), static_cast<int64_t>(rng() % 3)};
    const int64_t P = g.P1 * g.P2;
    const std::string shape = " P1=" + std::to_string(g.P1) + " P2=" + std::to_string(g.P2) + " R=" +
                              std::to_string(g.R) + " C=" + std::to_string(g.C) + " gap=" + std::to_string(g.gap);
    vm::ArgBinding dense;
    dense.stride[vm::kP] = g.R * g.C;
    dense.stride[vm::kR] = g.C;
    dense.stride[vm::kC] = 1;
    gathered_differential(*kew, g, dense, P * g.R * g.C, "elementwise" + shape);
    vm::ArgBinding rows;
    rows.stride[vm::kP] = g.R;
    rows.stride[vm::kR] = 1;
    gathered_differential(*krw, g, rows, P * g.R, "row reduce" + shape);
    vm::ArgBinding cols;
    cols.stride[vm::kP] = g.C;
    cols.stride[vm::kC] = 1;
    gathered_differential(*kcl, g, cols, P * g.C, "col reduce" + shape);
    if (::testing::Test::HasFailure()) return;
  }
}

// Offset of index idx of one part of an LDG binding: its dims as
// mixed-radix digits (innermost last), each wrapping at its size.
int64_t ldg_part_offset(const vm::ArgBinding& b, int part, int64_t idx) {
  int64_t off = 0;
  for (int d = b.ndims[part] - 1; d >= 0; --d) {
    off += (idx % b.dim_size[part][d]) * b.dim_stride[part][d];
    idx /= b.dim_size[part][d];
  }
  return off;
}

TEST(JitPatterns, GathersNotContiguousAlongCAreDeclinedAtRunTime) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.unary(Op::NEG, e.load(Op::LDG, ax)));
  auto k = make_kernel(e);
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
  const int64_t R = 4, C = 4;
  vm::Launch l;
  l.extent[vm::kP] = 1;
  l.extent[vm::kR] = R;
  l.extent[vm::kC] = C;
  vm::ArgBinding out;
  out.stride[vm::kR] = C;
  out.stride[vm::kC] = 1;
  // (size, stride) dims of R and of C per case; the binding's part strides
  // say something else on purpose (an LDG reads only its dims).
  struct Case {
    const char* what;
    std::vector<std::pair<int64_t, int64_t>> r, c;
  };
  const Case cases[] = {
      {"C strided (a transpose of the inner axes)", {{4, 1}}, {{4, 4}}},
      {"C over two dims", {{4, 4}}, {{2, 16}, {2, 32}}},
      {"R over two dims", {{2, 4}, {2, 8}}, {{4, 1}}},
      {"C of no dims: every element at offset 0", {{4, 4}}, {}},
      {"C's dim wraps before C", {{4, 4}}, {{2, 1}}},
      {"R's dim wraps before R", {{2, 4}}, {{4, 1}}},
  };
  for (const Case& c : cases) {
    vm::ArgBinding b;
    b.in = x.data();
    b.stride[vm::kR] = 5;
    b.stride[vm::kC] = 1;
    for (auto [size, stride] : c.r) {
      b.dim_size[vm::kR][b.ndims[vm::kR]] = size;
      b.dim_stride[vm::kR][b.ndims[vm::kR]++] = stride;
    }
    for (auto [size, stride] : c.c) {
      b.dim_size[vm::kC][b.ndims[vm::kC]] = size;
      b.dim_stride[vm::kC][b.ndims[vm::kC]++] = stride;
    }
    for (Isa isa : jit_isas()) {
      std::string reason;
      auto code = compile(k->verified(), isa, &reason);
      ASSERT_TRUE(code) << reason;
      std::vector<float> y(static_cast<size_t>(R * C + kGuards), kGuard);
      out.out = y.data();
      l.args = {b, out};
      EXPECT_FALSE(can_run(*code, l)) << c.what;
      const int64_t declined = gather_runs_declined();
      EXPECT_FALSE(run_items(*code, k->verified(), l, 0, vm::work_items(*k, l))) << c.what;
      EXPECT_EQ(gather_runs_declined(), declined + 1) << c.what;
      for (float v : y) ASSERT_EQ(v, kGuard) << c.what << ": run_items wrote";
      // What the backend then runs: the interpreter, with the gather's values.
      vm::interpret(*k, l, 0, vm::work_items(*k, l), *microkernels_for(isa));
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < C; ++j)
          EXPECT_EQ(y[static_cast<size_t>(r * C + j)],
                    -x[static_cast<size_t>(ldg_part_offset(b, vm::kR, r) + ldg_part_offset(b, vm::kC, j))])
              << c.what << " " << isa_name(isa) << " r=" << r << " c=" << j;
      for (int64_t g = 0; g < kGuards; ++g) EXPECT_EQ(y[static_cast<size_t>(R * C + g)], kGuard) << c.what;
    }
  }
}

// ---------------------------------------------------------------------------
// What the JIT refuses, and bookkeeping.
// ---------------------------------------------------------------------------
TEST(JitRefusal, PortableIsNotATarget) {
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.load(Op::LD, ax));
  auto k = make_kernel(e);
  std::string reason;
  EXPECT_EQ(compile(k->verified(), Isa::Portable, &reason), nullptr);
  EXPECT_FALSE(reason.empty());
}

TEST(JitMemory, CodeBytesAreAccounted) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  Encoder e(Form::Elementwise);
  int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ay, e.unary(Op::TANH, e.load(Op::LD, ax)));
  auto k = make_kernel(e);
  const size_t before = code_bytes_in_use();
  std::string reason;
  auto code = compile(k->verified(), jit_isas().back(), &reason);
  ASSERT_TRUE(code) << reason;
  EXPECT_GT(code->code_bytes, 0u);
  EXPECT_EQ(code_bytes_in_use(), before + code->code_bytes);
  code.reset();
  EXPECT_EQ(code_bytes_in_use(), before);
}

// ---------------------------------------------------------------------------
// Streaming stores: with the threshold at 0, every launch whose float32
// outputs are vector-aligned at every row runs the streaming variant. Its
// bits are the interpreter's and the guards stay intact; outputs off the
// cache line, and rows whose stride breaks the alignment, take the plain
// code, with the same bits.
// ---------------------------------------------------------------------------
struct StreamScope {
  explicit StreamScope(int64_t bytes) { set_stream_min_bytes(bytes); }
  ~StreamScope() {
    set_stream_min_bytes(-1);
    g_output_shift = 0;
  }
};

TEST(JitStreaming, StreamingVariantKeepsTheInterpretersBits) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  StreamScope scope(0);
  const int64_t compiled_before = streaming_variants_compiled();
  Encoder chain(Form::Elementwise);
  {
    int ax = chain.add_arg(ArgRole::Input), aa = chain.add_arg(ArgRole::Input), ab = chain.add_arg(ArgRole::Input),
        ay = chain.add_arg(ArgRole::Output), az = chain.add_arg(ArgRole::Output);
    auto x = chain.load(Op::LD, ax);
    auto t = chain.ternary(Op::FMA, x, chain.load(Op::LD, aa), chain.load(Op::LDB, ab));
    auto y = chain.binary(Op::ADD, chain.binary(Op::MUL, chain.unary(Op::RELU, t), chain.constant(0.5f)), x);
    chain.store(Op::ST, ay, y);
    chain.store(Op::ST, az, chain.unary(Op::TANH, y));
  }
  Encoder sm(Form::RowReduce);
  {
    int ax = sm.add_arg(ArgRole::Input), ay = sm.add_arg(ArgRole::Output);
    auto x = sm.load(Op::LD, ax);
    auto ex = sm.unary(Op::EXP, sm.binary(Op::SUB, x, sm.reduce(Op::RMAX, x)));
    sm.store(Op::ST, ay, sm.binary(Op::DIV, ex, sm.reduce(Op::RSUM, ex)));
  }
  auto kc = make_kernel(chain), ksm = make_kernel(sm);
  for (int64_t shift : {0, 1, 16}) {
    g_output_shift = shift;
    for (int64_t C : around_blocks()) {
      const std::string what = "streaming, outputs moved by " + std::to_string(shift);
      differential(*kc, {dense(3, C), dense(3, C), per_row(3), dense(3, C), dense(3, C)}, 2, 3, C,
                   static_cast<uint32_t>(C) + 7, "chain " + what, C % 7 == 0);
      differential(*kc, {dense(1, C), dense(1, C), per_row(1), dense(1, C), dense(1, C)}, 1, 1, C,
                   static_cast<uint32_t>(C) + 8, "one-row chain " + what);
      differential(*ksm, {dense(4, C), dense(4, C)}, 1, 4, C, static_cast<uint32_t>(C) + 9, "softmax " + what);
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_GT(streaming_variants_compiled(), compiled_before) << "no launch ran the streaming variant";
}

TEST(JitStreaming, RandomKernelsKeepTheirBits) {
  if (jit_isas().empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  StreamScope scope(0);
  for (uint32_t seed = 1; seed < 80; ++seed) {
    RandomKernel rk = random_kernel(seed);
    ASSERT_TRUE(rk.kernel) << "seed " << seed;
    const Form form = rk.kernel->form();
    std::vector<float> scalars;
    for (int k = 0; k < rk.kernel->program().nscalars; ++k) scalars.push_back(static_cast<float>(k) * 0.5f - 1.0f);
    for (int64_t C : {16, 48, 1024, 1001}) {
      const int64_t P = 2, R = form == Form::ColReduce ? 5 : 3;
      std::vector<Layout> ls;
      for (char c : rk.arg_kind) {
        switch (c) {
          case 'v': case 'o': ls.push_back(dense(R, C)); break;
          case 's': ls.push_back(strided(R, C, 3)); break;
          case 'f': ls.push_back({C * 2, 0, 2}); break;
          case 'b': case 'p': ls.push_back(per_row(R)); break;
          case 'e': case 'q': ls.push_back(epilogue(C)); break;
        }
      }
      differential(*rk.kernel, ls, P, R, C, seed * 7 + static_cast<uint32_t>(C),
                   "streaming random kernel seed " + std::to_string(seed) + " (" + vm::form_name(form) + ")",
                   seed % 3 == 0, scalars);
      if (::testing::Test::HasFailure()) return;
    }
  }
}

// The default threshold is half the largest cache sysfs describes for cpu 0
// (read here independently: the highest index whose level is largest), at
// least 1 MiB; 16 MiB where sysfs describes none. sysconf's figure, which a
// virtual machine can inflate to the whole host's L3, must not be used.
TEST(JitStreaming, DefaultThresholdIsHalfTheLastLevelCache) {
  int64_t llc = 0;
  int best = 0;
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level)) break;
    if (!(size_file >> size) || size.empty() || level < best) continue;
    best = level;
    const char unit = size.back();
    const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
    llc = std::stoll(shift ? size.substr(0, size.size() - 1) : size) << shift;
  }
  const int64_t want = llc > 0 ? std::max<int64_t>(llc / 2, int64_t{1} << 20) : int64_t{16} << 20;
  set_stream_min_bytes(-1);
  EXPECT_EQ(stream_min_bytes_for_tests(), want) << "sysfs last-level cache: " << llc << " bytes";
  set_stream_min_bytes(12345);
  EXPECT_EQ(stream_min_bytes_for_tests(), 12345);
  set_stream_min_bytes(-1);
  EXPECT_EQ(stream_min_bytes_for_tests(), want);
}

}  // namespace
}  // namespace dvm::backends::jit
