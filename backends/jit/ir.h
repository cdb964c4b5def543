// The JIT's straight-line vector IR and JitVec, the SIMD type whose primitives
// append IR nodes instead of computing: instantiating the shared math and
// micro-kernel templates with JitVec records exactly the primitive sequence
// the interpreter executes, so both tiers share one definition of every op.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "backends/jit/caps.h"
#include "backends/jit/ir_ops.h"
#include "backends/simd/scale_pow2.h"
#include "dvm/dtype.h"

#ifndef DVM_SIMD_INLINE
#define DVM_SIMD_INLINE [[gnu::always_inline]] inline
#endif

namespace dvm::backends::jit {

// Loops (IrOp::LoopBegin): imm = 0 column loop (vectors of i), 1 row loop
// (r); a = its LoopEnd. Column loops: u = copies U of the body per
// iteration. U <= 1: one vector per iteration, then the masked tail; U > 1:
// U vectors per iteration while U fit, no tail (a U = 1 loop with b = 1
// follows and finishes). b = 1: i continues from the previous column loop
// instead of starting at 0. b = 2 (RowReduce passes that fold, U > 1): the
// body is U copies one after another, each opened by a CopyBegin; after the
// U-vector loop, copy k runs once more masked to elements [i + k * lanes, n)
// (at most one vector), for each k while that range is not empty. b = 3
// (ColReduce, after the U-vector loop): a masked block that runs once, when
// the r = n - i elements left need more than U/2 vectors (U = 1: any); copies
// below U/2 are full, copy k >= U/2 is masked to clip(r - k * lanes, 0,
// lanes); i becomes n.

// Where a load or store finds its argument's address.
//   base: JitArgs::base[arg];  row: the ColReduce row pointer of arg;
//   scratch: row `arg` of JitArgs::scratch (values kept between passes).
enum : uint8_t { kPhaseBase = 0, kPhaseRow = 1, kPhaseScratch = 2 };
inline constexpr int kMaxScratchRows = 8;

// One node: its op (ir_ops.h says what each reads and defines), the value
// operands a, b, c (node ids, -1 where none), imm and u as the op defines
// them, and for memory ops the argument and phase.
struct Node {
  IrOp op;
  uint8_t imm = 0;
  uint8_t arg = 0;
  uint8_t phase = kPhaseBase;
  int32_t a = -1, b = -1, c = -1;
  uint32_t u = 0;
};

// The value ids n reads (its ir_operands(n.op) first operands), -1 for the rest.
inline void operands_of(const Node& n, int32_t out[3]) {
  const int k = ir_operands(n.op);
  out[0] = k > 0 ? n.a : -1;
  out[1] = k > 1 ? n.b : -1;
  out[2] = k > 2 ? n.c : -1;
}

// The node list one kernel is lowered into.
struct IrBuilder {
  std::vector<Node> nodes;
  std::vector<std::pair<uint32_t, int32_t>> consts;  // dedup of Const nodes
  int scratch_rows = 0;
  TargetCaps caps;  // the target's: which fused ops JitVec records
  // Element type of each kernel argument (compile() sets it; the emitter
  // converts at loads and stores). Scratch rows are always f32.
  std::vector<Dtype> arg_types;
  // Per argument: 1 where it moves int32 lanes (vm::int_lanes): loads
  // widen without converting to f32, stores narrow int32 values.
  std::vector<uint8_t> arg_int;
  // Full-vector float32 stores to arguments bypass the caches (non-temporal):
  // the variant compile() makes for launches whose outputs are larger than
  // the caches. Its caller guarantees every such store is vector-aligned.
  bool stream_stores = false;

  // konst's index of consts: open addressing on the pattern, entries are
  // positions in consts (-1: empty); a power of two, at most half full.
  std::vector<int32_t> const_index;

  void clear() {
    nodes.clear();
    consts.clear();
    scratch_rows = 0;
    const_index.assign(std::max<size_t>(const_index.size(), 128), -1);
  }
  // Drops the nodes from `n` on and the constants from `c` on (recorded
  // since nodes.size() was n and consts.size() was c).
  void truncate(size_t n, size_t c) {
    nodes.resize(n);
    consts.resize(c);
    reindex(const_index.size());
  }
  // Copied field by field: callers have just written n that way, and a wide
  // load of it could not be forwarded from those pending stores.
  int32_t add(const Node& n) {
    Node& d = nodes.emplace_back();
    d.op = n.op;
    d.imm = n.imm;
    d.arg = n.arg;
    d.phase = n.phase;
    d.a = n.a;
    d.b = n.b;
    d.c = n.c;
    d.u = n.u;
    return static_cast<int32_t>(nodes.size() - 1);
  }
  int32_t op(IrOp o, int32_t a, int32_t b = -1, int32_t c = -1, uint8_t imm = 0) {
    Node& d = nodes.emplace_back();
    d.op = o;
    d.a = a;
    d.b = b;
    d.c = c;
    d.imm = imm;
    return static_cast<int32_t>(nodes.size() - 1);
  }
  int32_t konst(uint32_t bits) {
    if (const_index.size() < 2 * (consts.size() + 1)) reindex(std::max<size_t>(128, 4 * (consts.size() + 1)));
    const size_t mask = const_index.size() - 1;
    size_t h = const_hash(bits) & mask;
    for (int32_t k; (k = const_index[h]) >= 0; h = (h + 1) & mask)
      if (consts[static_cast<size_t>(k)].first == bits) return consts[static_cast<size_t>(k)].second;
    Node& d = nodes.emplace_back();
    d.op = IrOp::Const;
    d.u = bits;
    const int32_t id = static_cast<int32_t>(nodes.size() - 1);
    const_index[h] = static_cast<int32_t>(consts.size());
    consts.emplace_back(bits, id);
    return id;
  }

 private:
  // Float patterns differ mostly in their high bits: the top of the product
  // depends on every bit.
  static size_t const_hash(uint32_t bits) { return static_cast<size_t>((bits * 0x9E3779B97F4A7C15ull) >> 40); }
  // Rebuilds const_index with `size` entries (a power of two) from consts.
  void reindex(size_t size) {
    size_t pow2 = 128;
    while (pow2 < size) pow2 *= 2;
    const_index.assign(pow2, -1);
    for (size_t k = 0; k < consts.size(); ++k) {
      size_t h = const_hash(consts[k].first) & (pow2 - 1);
      while (const_index[h] >= 0) h = (h + 1) & (pow2 - 1);
      const_index[h] = static_cast<int32_t>(k);
    }
  }
};

// The builder JitVec's primitives append to (one per thread; compile() sets it).
inline thread_local IrBuilder* t_ir = nullptr;

// A SIMD value type satisfying the primitive contract of vec_scalar.h, where
// every primitive records one IR node. Lane count is the target's; the IR does
// not depend on it.
struct JitVec {
  static constexpr int kLanes = 0;  // decided by the ISA at code generation
  struct Mask {
    int32_t id;
  };
  struct Int {
    int32_t id;
  };
  int32_t id;

  static Mask cmp(CmpPred p, JitVec a, JitVec b) {
    return mkm(IrOp::Cmp, a.id, b.id, static_cast<uint8_t>(p));
  }
  static JitVec mk(IrOp o, int32_t a, int32_t b = -1, int32_t c = -1, uint8_t imm = 0) {
    return {t_ir->op(o, a, b, c, imm)};
  }
  static Mask mkm(IrOp o, int32_t a, int32_t b = -1, uint8_t imm = 0) {
    return {t_ir->op(o, a, b, -1, imm)};
  }
  static Int mki(IrOp o, int32_t a, int32_t b = -1, uint8_t imm = 0) {
    return {t_ir->op(o, a, b, -1, imm)};
  }

  DVM_SIMD_INLINE static JitVec splat(float x) { return {t_ir->konst(std::bit_cast<uint32_t>(x))}; }
  DVM_SIMD_INLINE static JitVec add(JitVec a, JitVec b) { return mk(IrOp::Add, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec sub(JitVec a, JitVec b) { return mk(IrOp::Sub, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec mul(JitVec a, JitVec b) { return mk(IrOp::Mul, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec div(JitVec a, JitVec b) { return mk(IrOp::Div, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec fma(JitVec a, JitVec b, JitVec c) {
    return mk(IrOp::Fma, a.id, b.id, c.id);
  }
  DVM_SIMD_INLINE static JitVec fnma(JitVec a, JitVec b, JitVec c) {
    return mk(IrOp::Fnma, a.id, b.id, c.id);
  }
  DVM_SIMD_INLINE static JitVec min(JitVec a, JitVec b) { return mk(IrOp::Min, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec max(JitVec a, JitVec b) { return mk(IrOp::Max, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec sqrt(JitVec a) { return mk(IrOp::Sqrt, a.id); }
  DVM_SIMD_INLINE static JitVec abs(JitVec a) { return bit_andnot(splat(-0.0f), a); }
  DVM_SIMD_INLINE static JitVec neg(JitVec a) { return bit_xor(a, splat(-0.0f)); }

  DVM_SIMD_INLINE static JitVec bit_and(JitVec a, JitVec b) { return mk(IrOp::And, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec bit_or(JitVec a, JitVec b) { return mk(IrOp::Or, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec bit_xor(JitVec a, JitVec b) { return mk(IrOp::Xor, a.id, b.id); }
  DVM_SIMD_INLINE static JitVec bit_andnot(JitVec a, JitVec b) { return mk(IrOp::AndN, a.id, b.id); }
  // The same primitive sequence the target's interpreter type runs.
  DVM_SIMD_INLINE static JitVec bit_or_and(JitVec a, JitVec b, JitVec c) {
    if (t_ir->caps.fused_or_and) return mk(IrOp::OrAnd, a.id, b.id, c.id);
    return bit_or(a, bit_and(b, c));
  }

  DVM_SIMD_INLINE static JitVec round_even(JitVec a) { return mk(IrOp::Round, a.id, -1, -1, 0); }
  DVM_SIMD_INLINE static JitVec floor(JitVec a) { return mk(IrOp::Round, a.id, -1, -1, 1); }
  DVM_SIMD_INLINE static JitVec ceil(JitVec a) { return mk(IrOp::Round, a.id, -1, -1, 2); }
  DVM_SIMD_INLINE static JitVec trunc(JitVec a) { return mk(IrOp::Round, a.id, -1, -1, 3); }

  DVM_SIMD_INLINE static Mask eq(JitVec a, JitVec b) { return cmp(CmpPred::Eq, a, b); }
  DVM_SIMD_INLINE static Mask ne(JitVec a, JitVec b) { return cmp(CmpPred::Ne, a, b); }
  DVM_SIMD_INLINE static Mask lt(JitVec a, JitVec b) { return cmp(CmpPred::Lt, a, b); }
  DVM_SIMD_INLINE static Mask le(JitVec a, JitVec b) { return cmp(CmpPred::Le, a, b); }
  DVM_SIMD_INLINE static Mask gt(JitVec a, JitVec b) { return cmp(CmpPred::Gt, a, b); }
  DVM_SIMD_INLINE static Mask ge(JitVec a, JitVec b) { return cmp(CmpPred::Ge, a, b); }
  DVM_SIMD_INLINE static Mask unord(JitVec a, JitVec b) { return cmp(CmpPred::Unord, a, b); }
  DVM_SIMD_INLINE static Mask mask_and(Mask a, Mask b) { return mkm(IrOp::MAnd, a.id, b.id); }
  DVM_SIMD_INLINE static Mask mask_or(Mask a, Mask b) { return mkm(IrOp::MOr, a.id, b.id); }
  DVM_SIMD_INLINE static Mask mask_not(Mask a) { return mkm(IrOp::MNot, a.id); }
  DVM_SIMD_INLINE static JitVec select(Mask m, JitVec a, JitVec b) {
    return mk(IrOp::Select, m.id, a.id, b.id);
  }
  // The same primitive sequence the target's interpreter type runs.
  DVM_SIMD_INLINE static JitVec scale_pow2(JitVec y, JitVec n) {
    if (t_ir->caps.scale_exp) return mk(IrOp::Scalef, y.id, n.id);
    return simd::scale_pow2_halves(y, n);
  }

  DVM_SIMD_INLINE static Int isplat(int32_t x) { return {t_ir->konst(static_cast<uint32_t>(x))}; }
  DVM_SIMD_INLINE static Int as_int(JitVec a) { return {a.id}; }
  DVM_SIMD_INLINE static JitVec as_float(Int a) { return {a.id}; }
  DVM_SIMD_INLINE static Int cvt_round(JitVec a) { return mki(IrOp::CvtRound, a.id); }
  DVM_SIMD_INLINE static JitVec cvt_float(Int a) { return mk(IrOp::CvtFloat, a.id); }
  DVM_SIMD_INLINE static Int iadd(Int a, Int b) { return mki(IrOp::IAdd, a.id, b.id); }
  DVM_SIMD_INLINE static Int isub(Int a, Int b) { return mki(IrOp::ISub, a.id, b.id); }
  DVM_SIMD_INLINE static Int iand(Int a, Int b) { return mki(IrOp::IAnd, a.id, b.id); }
  DVM_SIMD_INLINE static Int imul(Int a, Int b) { return mki(IrOp::IMul, a.id, b.id); }
  DVM_SIMD_INLINE static Int cvt_trunc(JitVec a) { return mki(IrOp::CvtTrunc, a.id); }
  template <int k>
  DVM_SIMD_INLINE static Int shl(Int a) {
    return mki(IrOp::Shl, a.id, -1, k);
  }
  template <int k>
  DVM_SIMD_INLINE static Int shr(Int a) {
    return mki(IrOp::Shr, a.id, -1, k);
  }
  template <int k>
  DVM_SIMD_INLINE static Int sra(Int a) {
    return mki(IrOp::Sra, a.id, -1, k);
  }
  DVM_SIMD_INLINE static Mask ieq(Int a, Int b) { return mkm(IrOp::IEq, a.id, b.id); }
  DVM_SIMD_INLINE static Mask igt(Int a, Int b) { return mkm(IrOp::IGt, a.id, b.id); }
  DVM_SIMD_INLINE static Int ifloordiv(Int a, Int b) { return mki(IrOp::IFloorDiv, a.id, b.id); }
};

}  // namespace dvm::backends::jit
