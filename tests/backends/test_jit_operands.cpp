// The JIT's three-input instructions (vfmadd / vfnmadd, vpternlogd) overwrite
// one of their inputs, so the code generator picks the form by which input
// shares the result's register: a, b, c or none. Lowered kernels reach some of
// those placements only by chance of register allocation, so these tests build
// the IR by hand to force each one and compare every lane with a scalar
// evaluation of the same operation.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/jit/codegen.h"
#include "backends/jit/ir.h"
#include "backends/jit/jit.h"
#include "backends/jit/target.h"
#include "tests/backends/jit_isas.h"

namespace dvm::backends::jit {
namespace {

constexpr int64_t kN = 37;  // two AVX-512 vectors (four AVX2) and a masked tail

// The register allocator gives a new value the register of its first source
// when that one dies there, else the lowest free register. Loads happen in
// the order given, so the value loaded first holds the lowest register.
enum class Placement { A, B, C, Fresh };

struct Case {
  IrOp op;
  Placement where;
};

std::string name(const Case& c) {
  const char* w[] = {"a", "b", "c", "none"};
  return std::string(c.op == IrOp::Fma ? "fma" : c.op == IrOp::Fnma ? "fnma" : "or_and") +
         ", result in the register of " + w[static_cast<int>(c.where)];
}

float apply(IrOp op, float a, float b, float c) {
  switch (op) {
    case IrOp::Fma: return std::fma(a, b, c);
    case IrOp::Fnma: return std::fma(-a, b, c);
    default:
      return std::bit_cast<float>(std::bit_cast<uint32_t>(a) |
                                  (std::bit_cast<uint32_t>(b) & std::bit_cast<uint32_t>(c)));
  }
}

// Arguments: 0, 1, 2 inputs; 3 the result; 4 and 5 keep inputs alive past the
// instruction where a placement needs them not to die there.
void run_case(Isa isa, const Case& c) {
  IrBuilder ir;
  std::string reason;
  ASSERT_TRUE(target_caps(isa, &ir.caps, &reason)) << reason;
  Node lb{IrOp::LoopBegin};
  lb.u = 1;
  const int32_t loop = ir.add(lb);
  auto load = [&](uint8_t arg) {
    Node n{IrOp::Load};
    n.arg = arg;
    return ir.add(n);
  };
  auto store = [&](uint8_t arg, int32_t v) {
    Node n{IrOp::Store};
    n.arg = arg;
    n.a = v;
    ir.add(n);
  };
  // The dying input the result should take is loaded first (lowest register).
  int32_t in[3];
  const int first = c.where == Placement::B ? 1 : c.where == Placement::C ? 2 : 0;
  in[first] = load(static_cast<uint8_t>(first));
  for (int k = 0; k < 3; ++k)
    if (k != first) in[k] = load(static_cast<uint8_t>(k));
  const int32_t r = ir.op(c.op, in[0], in[1], in[2]);
  store(3, r);
  // Keep alive whatever must not die at r: for A all but a; for B, C the
  // inputs other than the one placed; for Fresh all three.
  std::vector<int> keep;
  for (int k = 0; k < 3; ++k) {
    const bool dies = (c.where == Placement::A && k == 0) || (c.where == Placement::B && k == 1) ||
                      (c.where == Placement::C && k == 2);
    if (!dies) keep.push_back(k);
  }
  int32_t kept = keep.empty() ? -1 : in[keep[0]];
  for (size_t k = 1; k < keep.size(); ++k) kept = ir.op(IrOp::Add, kept, in[keep[k]]);
  if (kept >= 0) store(4, kept);
  Node le{IrOp::LoopEnd};
  le.a = loop;
  ir.nodes[static_cast<size_t>(loop)].a = ir.add(le);

  size_t bytes = 0;
  void* fn = generate(ir, isa, &bytes, &reason);
  ASSERT_NE(fn, nullptr) << name(c) << ": " << reason;

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> a(kN), b(kN), cc(kN), out(kN, 0.0f), keep_out(kN, 0.0f);
  for (int64_t i = 0; i < kN; ++i) {
    a[static_cast<size_t>(i)] = u(rng);
    b[static_cast<size_t>(i)] = u(rng);
    cc[static_cast<size_t>(i)] = u(rng);
  }
  JitArgs args{};
  args.base[0] = a.data();
  args.base[1] = b.data();
  args.base[2] = cc.data();
  args.base[3] = out.data();
  args.base[4] = keep_out.data();
  args.n = kN;
  args.rows = 1;
  reinterpret_cast<EntryFn>(fn)(&args);
  release_code(fn);
  for (size_t i = 0; i < static_cast<size_t>(kN); ++i) {
    const float want = apply(c.op, a[i], b[i], cc[i]);
    ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(want))
        << name(c) << ", " << isa_name(isa) << ", element " << i;
  }
}

TargetCaps caps_of(Isa isa) {
  TargetCaps caps;
  std::string reason;
  EXPECT_TRUE(target_caps(isa, &caps, &reason)) << reason;
  return caps;
}

TEST(JitOperands, EveryPlacementOfTheResultRegister) {
  const std::vector<Isa> isas = testing::jit_isas();
  if (isas.empty()) GTEST_SKIP() << "no AVX2 / AVX-512";
  for (Isa isa : isas)
    for (IrOp op : {IrOp::Fma, IrOp::Fnma, IrOp::OrAnd}) {
      if (op == IrOp::OrAnd && !caps_of(isa).fused_or_and) continue;  // recorded as And, Or
      for (Placement w : {Placement::A, Placement::B, Placement::C, Placement::Fresh})
        run_case(isa, {op, w});
    }
}

}  // namespace
}  // namespace dvm::backends::jit
