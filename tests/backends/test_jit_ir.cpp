// The JIT IR's op table (backends/jit/ir_ops.h) against itself and against
// what lowering records, and each neutral comparison predicate, emitted for
// every JIT ISA this CPU runs, against C++'s scalar comparisons (NaN, signed
// zeros, infinities).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "backends/jit/codegen.h"
#include "backends/jit/ir.h"
#include "backends/jit/jit.h"
#include "backends/jit/lower.h"
#include "backends/jit/target.h"
#include "tests/backends/jit_isas.h"
#include "vm/encoder.h"
#include "vm/opcodes.h"
#include "vm/verifier.h"

namespace dvm::backends::jit {
namespace {

using vm::ArgRole;
using vm::Encoder;
using vm::Form;
using vm::Op;

TEST(JitIrOps, EveryOpHasANameAndAWellFormedRow) {
  std::set<std::string> names;
  for (int i = 0; i < kNumIrOps; ++i) {
    const IrOp op = static_cast<IrOp>(i);
    const IrOpInfo& info = ir_info(op);
    ASSERT_NE(info.name, nullptr) << "op " << i;
    EXPECT_FALSE(std::string(info.name).empty()) << "op " << i;
    EXPECT_TRUE(names.insert(info.name).second) << info.name << " named twice";
    // Operands are a, then b, then c: no operand after a missing one.
    const int n = ir_operands(op);
    for (int k = n; k < 3; ++k) EXPECT_EQ(info.in[k], IrKind::_) << info.name;
    const bool pool = info.flags & kIrPool, effect = info.flags & kIrEffect, loop = info.flags & kIrLoop;
    if (loop) {
      EXPECT_TRUE(n == 0 && info.result == IrKind::_ && !effect) << info.name;
    }
    if (effect) {
      EXPECT_EQ(info.result, IrKind::_) << info.name << ": an effect defines no value";
    }
    if (info.result == IrKind::_) {
      EXPECT_TRUE(effect || loop) << info.name << ": no value, no effect";
    }
    if (pool) {
      EXPECT_TRUE(n == 0 && info.result == IrKind::V) << info.name;
    }
    EXPECT_EQ(ir_defines_reg(op), info.result != IrKind::_ && !pool) << info.name;
  }
  EXPECT_STREQ(ir_name(IrOp::Cmp), "Cmp");
  EXPECT_STREQ(ir_name(IrOp::CopyBegin), "CopyBegin");
  EXPECT_EQ(ir_operands(IrOp::Select), 3);
  EXPECT_EQ(ir_info(IrOp::Select).in[0], IrKind::M);
  EXPECT_TRUE(ir_is_mask(IrOp::Cmp) && ir_is_mask(IrOp::IGt) && !ir_is_mask(IrOp::Select));
  EXPECT_EQ(ir_info(IrOp::OrAnd).need, IrNeed::FusedOrAnd);
  EXPECT_EQ(ir_info(IrOp::Scalef).need, IrNeed::ScaleExp);
}

void verified(const Encoder& e, vm::VerifiedProgram* vp) {
  const vm::Bytecode bc = e.finish();
  std::string err;
  EXPECT_TRUE(vm::verify(bc, vp, &err)) << err;
}

// Elementwise: every unary, binary and ternary op on two inputs.
void every_elementwise_op(vm::VerifiedProgram* vp) {
  Encoder e(Form::Elementwise);
  const int ax = e.add_arg(ArgRole::Input), ay = e.add_arg(ArgRole::Input), ao = e.add_arg(ArgRole::Output);
  const auto x = e.load(Op::LD, ax), y = e.load(Op::LD, ay);
  auto acc = e.constant(0.5f);
  // The int32-lane ops (appended after MMA; not floordiv, rem, ldoa, ldob, mmar) read int32 lanes; those giving
  // int32 lanes are converted back before the float sum (the verifier's lanes).
  const auto xi = e.unary(Op::FTOI, x), yi = e.unary(Op::FTOI, y);
  auto float_op = [](Op op) { return op <= Op::MMA || op == Op::FLOORDIV || op == Op::REM; };
  auto reads_int = [&](Op op) { return !float_op(op) && op != Op::FTOI; };
  auto gives_int = [&](Op op) { return !float_op(op) && op != Op::ITOF && !(op >= Op::IEQ && op <= Op::IGE); };
  auto to_f32 = [&](Op op, Encoder::Value v) { return gives_int(op) ? e.unary(Op::ITOF, v) : v; };
  for (int i = 0; i < vm::kNumOps; ++i) {
    const Op op = static_cast<Op>(i);
    if (vm::int64_op(op)) continue;  // kernels with int64 lanes are not lowered (the JIT declines them)
    const auto a = reads_int(op) ? xi : x, b = reads_int(op) ? yi : y;
    switch (vm::op_class(op)) {
      case vm::OpClass::Unary: acc = e.binary(Op::ADD, acc, to_f32(op, e.unary(op, a))); break;
      case vm::OpClass::Binary: acc = e.binary(Op::ADD, acc, to_f32(op, e.binary(op, a, b))); break;
      case vm::OpClass::Ternary: acc = e.binary(Op::ADD, acc, e.ternary(op, x, y, acc)); break;
      default: break;
    }
  }
  e.store(Op::ST, ao, acc);
  verified(e, vp);
}

// RowReduce: every reduction, a value used after them, a strided load.
void row_reductions(vm::VerifiedProgram* vp) {
  Encoder e(Form::RowReduce);
  const int ax = e.add_arg(ArgRole::Input), as = e.add_arg(ArgRole::Input), o1 = e.add_arg(ArgRole::Output),
            o2 = e.add_arg(ArgRole::Output), o3 = e.add_arg(ArgRole::Output), o4 = e.add_arg(ArgRole::Output);
  const auto x = e.load(Op::LD, ax);
  const auto s = e.reduce(Op::RSUM, e.unary(Op::EXP, x));
  const auto m = e.reduce(Op::RMAX, x);
  e.store(Op::STB, o1, s);
  e.store(Op::STB, o2, m);
  e.store(Op::STB, o3, e.reduce(Op::RMIN, e.load(Op::LDS, as)));
  e.store(Op::ST, o4, e.binary(Op::MUL, x, e.binary(Op::SUB, s, m)));
  verified(e, vp);
}

// ColReduce: a sum over rows.
void col_reduction(vm::VerifiedProgram* vp) {
  Encoder e(Form::ColReduce);
  const int ax = e.add_arg(ArgRole::Input), ao = e.add_arg(ArgRole::Output);
  e.store(Op::ST, ao, e.reduce(Op::RSUM, e.unary(Op::TANH, e.load(Op::LD, ax))));
  verified(e, vp);
}

// Every node's operands are earlier values of the kinds its row names, its
// unused operand fields are -1, and it needs no capability the target lacks.
void expect_agrees_with_table(const IrBuilder& ir, const char* what) {
  std::set<IrOp> seen;
  for (size_t i = 0; i < ir.nodes.size(); ++i) {
    const Node& n = ir.nodes[i];
    ASSERT_LT(static_cast<int>(n.op), kNumIrOps) << what << " node " << i;
    const IrOpInfo& info = ir_info(n.op);
    seen.insert(n.op);
    const int32_t ops[3] = {n.a, n.b, n.c};
    const int count = ir_operands(n.op);
    for (int k = 0; k < 3; ++k) {
      if (k >= count) {
        if (!(info.flags & kIrLoop)) {
          EXPECT_EQ(ops[k], -1) << what << ": " << info.name << " node " << i;
        }
        continue;
      }
      ASSERT_GE(ops[k], 0) << what << ": " << info.name << " node " << i << " operand " << k;
      ASSERT_LT(static_cast<size_t>(ops[k]), i) << what << ": " << info.name << " node " << i;
      const IrKind def = ir_info(ir.nodes[static_cast<size_t>(ops[k])].op).result;
      EXPECT_EQ(def, info.in[k]) << what << ": " << info.name << " node " << i << " operand " << k << " is a "
                                 << ir_name(ir.nodes[static_cast<size_t>(ops[k])].op);
    }
    if (n.op == IrOp::Cmp) {
      EXPECT_LT(n.imm, kNumCmpPreds) << what;
    }
    if (info.flags & kIrMemory) {
      EXPECT_LT(n.arg, vm::kMaxArgs) << what;
    }
    if (info.need == IrNeed::FusedOrAnd) {
      EXPECT_TRUE(ir.caps.fused_or_and) << what;
    }
    if (info.need == IrNeed::ScaleExp) {
      EXPECT_TRUE(ir.caps.scale_exp) << what;
    }
  }
  EXPECT_TRUE(seen.count(IrOp::LoopBegin) && seen.count(IrOp::LoopEnd)) << what;
}

TEST(JitIrOps, LoweredKernelsAgreeWithTheTable) {
  vm::VerifiedProgram kernels[3];
  every_elementwise_op(&kernels[0]);
  row_reductions(&kernels[1]);
  col_reduction(&kernels[2]);
  // Lowering needs only the target's capabilities, not a CPU that runs it.
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    IrBuilder ir;
    std::string reason;
    ASSERT_TRUE(target_caps(isa, &ir.caps, &reason)) << reason;
    for (auto& vp : kernels) {
      ASSERT_TRUE(lower(vp, &ir, &reason)) << reason;
      expect_agrees_with_table(ir, isa_name(isa));
    }
    // The elementwise kernel records the fused ops exactly where the target has them.
    ASSERT_TRUE(lower(kernels[0], &ir, &reason)) << reason;
    bool or_and = false, scalef = false, cmp = false, select = false;
    for (const Node& n : ir.nodes) {
      or_and |= n.op == IrOp::OrAnd;
      scalef |= n.op == IrOp::Scalef;
      cmp |= n.op == IrOp::Cmp;
      select |= n.op == IrOp::Select;
    }
    EXPECT_EQ(or_and, ir.caps.fused_or_and) << isa_name(isa);
    EXPECT_EQ(scalef, ir.caps.scale_exp) << isa_name(isa);
    EXPECT_TRUE(cmp && select) << isa_name(isa);
  }
}

// A tanh read only by stores to bfloat16 arguments is lowered as the
// one-divide candidate with tanh itself in a SkipIfNone region; read by
// anything else (a float32 store, another op), or in a reduction kernel, it
// is tanh alone.
TEST(JitIrOps, TanhStoredOnlyAsBfloat16GetsTheCandidateAndARegion) {
  auto regions = [](Dtype out1, bool second_store, Form form) {
    Encoder e(form);
    const int ax = e.add_arg(ArgRole::Input), a1 = e.add_arg(ArgRole::Output, out1);
    const auto t = e.unary(Op::TANH, e.load(Op::LD, ax));
    if (form == Form::Elementwise) {
      e.store(Op::ST, a1, t);
      if (second_store) e.store(Op::ST, e.add_arg(ArgRole::Output, Dtype::BF16), e.binary(Op::MUL, t, t));
    } else {
      e.store(Op::STB, a1, e.reduce(Op::RSUM, t));
    }
    vm::VerifiedProgram vp;
    verified(e, &vp);
    IrBuilder ir;
    std::string reason;
    EXPECT_TRUE(target_caps(Isa::Avx512, &ir.caps, &reason)) << reason;
    EXPECT_TRUE(lower(vp, &ir, &reason)) << reason;
    int skips = 0, ends = 0, divides = 0;
    for (const Node& n : ir.nodes) {
      skips += n.op == IrOp::SkipIfNone;
      ends += n.op == IrOp::RegionEnd;
      divides += n.op == IrOp::Div;
    }
    EXPECT_EQ(skips, ends);
    return std::pair(skips, divides);
  };
  // One column loop and its masked tail: one region in the body.
  const auto [fast, fast_divides] = regions(Dtype::BF16, false, Form::Elementwise);
  EXPECT_EQ(fast, 1);
  EXPECT_EQ(fast_divides, 3);  // the candidate's, and tanh's two in the region
  EXPECT_EQ(regions(Dtype::F32, false, Form::Elementwise).first, 0);
  EXPECT_EQ(regions(Dtype::F16, false, Form::Elementwise).first, 0);
  EXPECT_EQ(regions(Dtype::BF16, true, Form::Elementwise).first, 0);  // also read by the mul
  EXPECT_EQ(regions(Dtype::BF16, false, Form::RowReduce).first, 0);
}

// IR lowered with a capability the target lacks is refused, not emitted.
TEST(JitIrOps, GenerateRefusesOpsTheTargetLacks) {
  IrBuilder ir;
  std::string reason;
  ASSERT_TRUE(target_caps(Isa::Avx2, &ir.caps, &reason)) << reason;
  ASSERT_FALSE(ir.caps.fused_or_and);
  Node lb{IrOp::LoopBegin};
  lb.u = 1;
  const int32_t loop = ir.add(lb);
  Node ld{IrOp::Load};
  const int32_t x = ir.add(ld);
  Node st{IrOp::Store};
  st.arg = 1;
  st.a = ir.op(IrOp::OrAnd, x, x, x);
  ir.add(st);
  Node le{IrOp::LoopEnd};
  le.a = loop;
  ir.nodes[static_cast<size_t>(loop)].a = ir.add(le);
  size_t bytes = 0;
  EXPECT_EQ(generate(ir, Isa::Avx2, &bytes, &reason), nullptr);
  EXPECT_NE(reason.find("OrAnd"), std::string::npos) << reason;
}

// ---------------------------------------------------------------------------
// Comparison predicates
// ---------------------------------------------------------------------------

bool scalar_cmp(CmpPred p, float a, float b) {
  switch (p) {
    case CmpPred::Eq: return a == b;
    case CmpPred::Ne: return a != b;
    case CmpPred::Lt: return a < b;
    case CmpPred::Le: return a <= b;
    case CmpPred::Gt: return a > b;
    case CmpPred::Ge: return a >= b;
    case CmpPred::Unord: return std::isnan(a) || std::isnan(b);
  }
  return false;
}

// out[i] = pred(a[i], b[i]) ? 1 : 0 through Cmp and Select.
void* compile_predicate(Isa isa, CmpPred p, std::string* reason) {
  IrBuilder ir;
  if (!target_caps(isa, &ir.caps, reason)) return nullptr;
  Node lb{IrOp::LoopBegin};
  lb.u = 1;
  const int32_t loop = ir.add(lb);
  Node la{IrOp::Load};
  la.arg = 0;
  const int32_t a = ir.add(la);
  Node lbn{IrOp::Load};
  lbn.arg = 1;
  const int32_t b = ir.add(lbn);
  const int32_t m = ir.op(IrOp::Cmp, a, b, -1, static_cast<uint8_t>(p));
  Node st{IrOp::Store};
  st.arg = 2;
  st.a = ir.op(IrOp::Select, m, ir.konst(std::bit_cast<uint32_t>(1.0f)), ir.konst(0u));
  ir.add(st);
  Node le{IrOp::LoopEnd};
  le.a = loop;
  ir.nodes[static_cast<size_t>(loop)].a = ir.add(le);
  size_t bytes = 0;
  return generate(ir, isa, &bytes, reason);
}

TEST(JitCmpPred, EachPredicateMatchesScalarComparison) {
  const std::vector<Isa> isas = testing::jit_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  const float inf = std::numeric_limits<float>::infinity();
  const float vals[] = {std::nanf(""), -std::nanf(""), -inf, -1.5f, -0.0f, 0.0f, 1e-40f, 1.5f, inf};
  // Every ordered pair: 81 lanes, full vectors and a masked tail either way.
  std::vector<float> a, b;
  for (float x : vals)
    for (float y : vals) {
      a.push_back(x);
      b.push_back(y);
    }
  for (Isa isa : isas)
    for (int pi = 0; pi < kNumCmpPreds; ++pi) {
      const CmpPred p = static_cast<CmpPred>(pi);
      std::string reason;
      void* fn = compile_predicate(isa, p, &reason);
      ASSERT_NE(fn, nullptr) << kCmpPredNames[pi] << ": " << reason;
      std::vector<float> out(a.size() + 1, -7.0f);  // one guard element
      JitArgs args{};
      args.base[0] = a.data();
      args.base[1] = b.data();
      args.base[2] = out.data();
      args.n = static_cast<int64_t>(a.size());
      args.rows = 1;
      reinterpret_cast<EntryFn>(fn)(&args);
      release_code(fn);
      for (size_t i = 0; i < a.size(); ++i) {
        const bool want = scalar_cmp(p, a[i], b[i]);
        EXPECT_EQ(cmp_holds(p, a[i], b[i]), want) << kCmpPredNames[pi] << "(" << a[i] << ", " << b[i] << ")";
        EXPECT_EQ(out[i], want ? 1.0f : 0.0f)
            << isa_name(isa) << " " << kCmpPredNames[pi] << "(" << a[i] << ", " << b[i] << ")";
      }
      EXPECT_EQ(out[a.size()], -7.0f) << "guard, " << isa_name(isa) << " " << kCmpPredNames[pi];
    }
}

}  // namespace
}  // namespace dvm::backends::jit
