// The JIT's three-input instructions (vfmadd / vfnmadd, vpternlogd) overwrite
// one of their inputs, so the code generator picks the form by which input
// shares the result's register: a, b, c or none. Lowered kernels reach some of
// those placements only by chance of register allocation, so these tests build
// the IR by hand to force each one and compare every lane with a scalar
// evaluation of the same operation.
#include <gtest/gtest.h>

#include <bit>
#include <climits>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "backends/jit/codegen.h"
#include "backends/jit/ir.h"
#include "backends/jit/jit.h"
#include "backends/jit/target.h"
#include "backends/jit/x86/asmjit_adapter.h"
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


// ---------------------------------------------------------------------------
// The x86 adapter encodes the zmm instructions kernels are made of itself and
// copies GP instructions from a memo of asmjit's bytes: both must write what
// asmjit writes. Every such form with registers on each side of the encoding
// boundaries (8, 16, 24), each memory shape (bases needing a SIB or a
// displacement, indexes, scales, displacements on each side of disp8*N),
// broadcasts, masks, immediates and pool operands, is assembled both ways and
// the bytes compared (nothing is run).
// ---------------------------------------------------------------------------
namespace enc {

using asmx::Gp;
using asmx::Opnd;
using asmx::VI;
using asmx::W;

// The bytes of the function `body` assembles, through the adapter's own
// encoding or through asmjit only.
template <class Body>
std::vector<uint8_t> assemble(bool asmjit_only, Body&& body) {
  asmx::Assembler as(4, asmjit_only);
  body(as);
  as.ret();
  size_t bytes = 0;
  std::string err;
  void* fn = as.finish(&bytes, &err);
  EXPECT_NE(fn, nullptr) << err;
  if (!fn) return {};
  const auto* p = static_cast<const uint8_t*>(fn);
  std::vector<uint8_t> out(p, p + bytes);
  asmx::release(fn);
  return out;
}

template <class Body>
void expect_same(const std::string& what, Body&& body) {
  const std::vector<uint8_t> want = assemble(true, body), got = assemble(false, body);
  ASSERT_FALSE(want.empty()) << what;
  if (got == want) return;
  size_t at = 0;
  while (at < got.size() && at < want.size() && got[at] == want[at]) ++at;
  auto hex = [&](const std::vector<uint8_t>& v) {
    std::string out;
    for (size_t i = at; i < v.size() && i < at + 16; ++i) {
      out += ' ';
      out += std::to_string(v[i]);
    }
    return out;
  };
  ADD_FAILURE() << what << ": bytes differ from offset " << at << " (of " << want.size() << "): asmjit" << hex(want)
                << ", adapter" << hex(got);
}

Opnd z(int r) { return asmx::vreg(r, W::Z); }

std::vector<Opnd> memory_operands(int scale_bytes) {
  std::vector<Opnd> out;
  const Gp bases[] = {asmx::rax, asmx::rsp, asmx::rbp, asmx::rdi, asmx::r9, asmx::r12, asmx::r13, asmx::r15};
  const int32_t disps[] = {0, 4, 60, 64, -64, 100, 128, 4032, 8128, 8192, -8192, -8256, 1 << 20, -4};
  for (Gp base : bases)
    for (int32_t disp : disps) {
      out.push_back(asmx::mem(base, disp, scale_bytes));
      for (Gp index : {asmx::rsi, asmx::rcx, asmx::r11})
        for (int shift : {0, 2, 3}) out.push_back(asmx::mem(base, index, shift, disp, scale_bytes));
    }
  return out;
}

const int kRegs[] = {0, 1, 7, 8, 15, 16, 23, 24, 31};

}  // namespace enc

TEST(JitEncoding, OwnZmmEncodingWritesAsmjitsBytes) {
  using namespace enc;
  // Three-operand forms (k destination for the comparisons), with an imm8 where the form takes one.
  struct Rvm {
    VI inst;
    bool kdst, imm, bcst;
  };
  const Rvm rvm[] = {
      {VI::vaddps, false, false, true},      {VI::vmulps, false, false, true},
      {VI::vsubps, false, false, true},      {VI::vminps, false, false, true},
      {VI::vdivps, false, false, true},      {VI::vmaxps, false, false, true},
      {VI::vandps, false, false, true},      {VI::vandnps, false, false, true},
      {VI::vorps, false, false, true},       {VI::vxorps, false, false, true},
      {VI::vpaddd, false, false, true},      {VI::vpsubd, false, false, true},
      {VI::vpandd, false, false, true},      {VI::vpmulld, false, false, true},
      {VI::vfmadd132ps, false, false, true}, {VI::vfmadd213ps, false, false, true},
      {VI::vfmadd231ps, false, false, true}, {VI::vfnmadd213ps, false, false, true},
      {VI::vfnmadd231ps, false, false, true}, {VI::vscalefps, false, false, true},
      {VI::vblendmps, false, false, true},   {VI::vpternlogd, false, true, true},
      {VI::vcmpps, true, true, true},        {VI::vpcmpeqd, true, false, true},
      {VI::vpcmpgtd, true, false, true},
  };
  for (const Rvm& f : rvm) {
    const std::string name = "inst " + std::to_string(static_cast<int>(f.inst));
    const Opnd imm = f.imm ? asmx::imm(0x1d) : Opnd{};
    auto dst = [&](int r) { return f.kdst ? asmx::kreg(r & 7) : z(r); };
    expect_same(name + " registers", [&](asmx::Assembler& as) {
      for (int d : kRegs)
        for (int a : kRegs)
          for (int b : kRegs) as.v(f.inst, dst(d), z(a), z(b), imm);
    });
    expect_same(name + " memory", [&](asmx::Assembler& as) {
      for (const Opnd& m : memory_operands(64)) as.v(f.inst, dst(24), z(9), m, imm);
      for (Opnd m : memory_operands(4)) {
        m.bcst = f.bcst;
        as.v(f.inst, dst(3), z(17), m, imm);
      }
      Opnd k = as.constant(0x3f800000u, 4);
      k.bcst = true;
      as.v(f.inst, dst(5), z(30), k, imm);
      as.v(f.inst, dst(12), z(2), as.constant(0xbf000000u, 64), imm);
    });
    expect_same(name + " masked", [&](asmx::Assembler& as) {
      for (int k : {1, 2, 7})
        for (bool zero : {false, true}) {
          if (f.kdst && zero) continue;  // a k destination has no zeroing form
          as.masked(k, zero);
          as.v(f.inst, dst(20), z(4), z(28), imm);
          as.masked(k, zero);
          as.v(f.inst, dst(6), z(19), asmx::mem(asmx::r10, asmx::rsi, 2, 128, 64), imm);
        }
    });
  }
  // Two-operand forms: loads and reg-reg moves, conversions, rounding, broadcasts.
  struct Rm {
    VI inst;
    bool imm, bcst, scalar;
  };
  const Rm rm[] = {
      {VI::vmovups, false, false, false},   {VI::vmovaps, false, false, false},
      {VI::vsqrtps, false, true, false},    {VI::vcvtps2dq, false, true, false},
      {VI::vcvttps2dq, false, true, false}, {VI::vcvtdq2ps, false, true, false},
      {VI::vrndscaleps, true, true, false}, {VI::vbroadcastss, false, false, true},
  };
  for (const Rm& f : rm) {
    const std::string name = "inst " + std::to_string(static_cast<int>(f.inst));
    const Opnd imm = f.imm ? asmx::imm(9) : Opnd{};
    expect_same(name, [&](asmx::Assembler& as) {
      for (int d : kRegs)
        for (int a : kRegs) as.v(f.inst, z(d), f.scalar ? asmx::vreg(a, W::X) : z(a), imm);
      for (Opnd m : memory_operands(f.scalar ? 4 : 64)) as.v(f.inst, z(26), m, imm);
      if (f.bcst)
        for (Opnd m : memory_operands(4)) {
          m.bcst = true;
          as.v(f.inst, z(11), m, imm);
        }
      as.v(f.inst, z(1), as.constant(0x40490fdbu, f.scalar ? 4 : 64), imm);
      for (int k : {1, 6})
        for (bool zero : {false, true}) {
          as.masked(k, zero);
          as.v(f.inst, z(17), asmx::mem(asmx::r14, asmx::rsi, 2, 64, f.scalar ? 4 : 64), imm);
        }
    });
  }
  // Stores, plain and masked.
  expect_same("vmovups stores", [&](asmx::Assembler& as) {
    for (int r : kRegs)
      for (const Opnd& m : memory_operands(64)) as.v(VI::vmovups, m, z(r));
    for (int k : {1, 5}) {
      as.masked(k, false);
      as.v(VI::vmovups, asmx::mem(asmx::r9, asmx::rsi, 2, 192, 64), z(22));
    }
  });
  // Shifts by an immediate (the digit in ModRM.reg, the destination in vvvv).
  for (VI inst : {VI::vpslld, VI::vpsrld, VI::vpsrad})
    expect_same("shift " + std::to_string(static_cast<int>(inst)), [&](asmx::Assembler& as) {
      for (int d : kRegs)
        for (int a : kRegs) as.v(inst, z(d), z(a), asmx::imm(23));
      for (const Opnd& m : memory_operands(64)) as.v(inst, z(13), m, asmx::imm(1));
    });
}

TEST(JitEncoding, MemoisedGpInstructionsAreAsmjitsBytes) {
  using namespace enc;
  const Gp regs[] = {asmx::rax, asmx::rcx, asmx::rdx, asmx::rbx, asmx::rbp, asmx::rsi,
                     asmx::rdi, asmx::r8,  asmx::r11, asmx::r12, asmx::r13, asmx::r15};
  const int32_t imms[] = {0, 1, -1, 2, 16, 127, 128, -128, -129, 255, 4096, 1 << 20, INT32_MIN, INT32_MAX};
  const int64_t imm64s[] = {0, 1, -1, 255, 0x7fffffff, 0x80000000, 0xffffffff, int64_t{1} << 32, INT64_MIN,
                            INT64_MAX};
  // Each instruction twice: the second is a memo hit (the first may be one too).
  auto twice = [](auto&& emit) {
    emit();
    emit();
  };
  expect_same("gp", [&](asmx::Assembler& as) {
    for (Gp d : regs) {
      for (Gp s : regs) {
        twice([&] { as.mov(d, s); });
        twice([&] { as.add(d, s); });
        twice([&] { as.sub(d, s); });
        twice([&] { as.imul(d, s); });
        twice([&] { as.cmp(d, s); });
      }
      for (int32_t v : imms) {
        twice([&] { as.add(d, v); });
        twice([&] { as.sub(d, v); });
        twice([&] { as.cmp(d, v); });
        twice([&] { as.and_(d, v); });
      }
      for (int64_t v : imm64s) twice([&] { as.mov_imm(d, v); });
      for (int v : {1, 2, 3, 31, 63}) twice([&] { as.shl(d, v); });
      twice([&] { as.shl_cl(d); });
      twice([&] { as.push(d); });
      twice([&] { as.pop(d); });
      for (const Opnd& m : memory_operands(0)) {
        twice([&] { as.mov(d, m); });
        twice([&] { as.mov(m, d); });
        twice([&] { as.lea(d, m); });
        twice([&] { as.add(m, d); });
        twice([&] { as.cmp(d, m); });
        twice([&] { as.mov32_load(d, m); });
        twice([&] { as.mov32_store(m, d); });
        for (int bytes : {1, 2, 4, 8}) {
          twice([&] { as.load_n(d, m, bytes); });
          twice([&] { as.store_n(m, d, bytes); });
        }
      }
    }
    // A pool operand is label-relative: never memoised, always asmjit's.
    twice([&] { as.lea(asmx::r11, as.constant(0u, 32)); });
  });
}

}  // namespace
}  // namespace dvm::backends::jit
