// The JIT IR's operation table: one X-macro row per op generates the IrOp
// enum, the op names for dumps and logs, and the properties lowering, the
// register allocator and every target's emitter read (operand and result
// kinds, effects, the target capability an op needs), plus the comparison
// predicates of IrOp::Cmp with their NaN semantics.
#pragma once

#include <cstdint>

namespace dvm::backends::jit {

// What a node's operand or result is. V: a vector of 32-bit lanes (float or
// int32 bits; the IR reinterprets freely); M: a per-lane predicate; _: none.
enum class IrKind : uint8_t { _, V, M };

// Flags of an op.
//   kPool:    a constant, no register (target pools or broadcasts it per use)
//   kMemory:  reads or writes argument `arg` through `phase`
//   kEffect:  writes memory or an accumulator (kept whether or not used)
//   kLoop:    structure, no value (LoopBegin / LoopEnd / CopyBegin / RegionEnd)
enum : uint8_t { kIrPool = 1, kIrMemory = 2, kIrEffect = 4, kIrLoop = 8 };

// A capability of the target an op needs (TargetCaps); lowering records the
// op only where the target has it.
enum class IrNeed : uint8_t { None, FusedOrAnd, ScaleExp };

// The ops. Columns: name, kinds of operands a b c (the value ids an op reads,
// in order; the rest of a, b, c are -1 unless noted), result kind, flags,
// capability needed. Each comment gives the meaning of imm, u and of a, b, c
// where they are not value operands.
#define DVM_IR_OPS(X)                                                                              \
  /* u = 32-bit pattern splatted */                                                                \
  X(Const, _, _, _, V, kIrPool, None)                                                              \
  /* u = pattern materialised in a register (accumulators) */                                     \
  X(Init, _, _, _, V, 0, None)                                                                     \
  /* u = index: scalar parameter u of the launch (JitArgs::scalars) broadcast */                   \
  X(Param, _, _, _, V, 0, None)                                                                    \
  /* element i of the argument (masked in the tail); imm = copy k of an unrolled body: elements    \
     i + k * lanes */                                                                              \
  X(Load, _, _, _, V, kIrMemory, None)                                                             \
  /* one value of the argument broadcast */                                                        \
  X(LoadB, _, _, _, V, kIrMemory, None)                                                            \
  /* element i at i * cs (strided); imm = copy */                                                  \
  X(LoadS, _, _, _, V, kIrMemory, None)                                                            \
  /* a to element i; imm = copy */                                                                 \
  X(Store, V, _, _, _, kIrMemory | kIrEffect, None)                                                \
  /* lane 0 of the row value a to the argument */                                                  \
  X(StoreB, V, _, _, _, kIrMemory | kIrEffect, None)                                               \
  /* a to element i at i * cs (strided); imm = copy */                                             \
  X(StoreS, V, _, _, _, kIrMemory | kIrEffect, None)                                               \
  X(Add, V, V, _, V, 0, None)                                                                      \
  X(Sub, V, V, _, V, 0, None)                                                                      \
  X(Mul, V, V, _, V, 0, None)                                                                      \
  X(Div, V, V, _, V, 0, None)                                                                      \
  /* a < b ? a : b: b when either is NaN or both are zeros */                                      \
  X(Min, V, V, _, V, 0, None)                                                                      \
  /* a > b ? a : b: b when either is NaN or both are zeros */                                      \
  X(Max, V, V, _, V, 0, None)                                                                      \
  X(Sqrt, V, _, _, V, 0, None)                                                                     \
  X(And, V, V, _, V, 0, None)                                                                      \
  X(Or, V, V, _, V, 0, None)                                                                       \
  X(Xor, V, V, _, V, 0, None)                                                                      \
  /* ~a & b */                                                                                     \
  X(AndN, V, V, _, V, 0, None)                                                                     \
  /* a * b + c, one rounding */                                                                    \
  X(Fma, V, V, V, V, 0, None)                                                                      \
  /* c - a * b, one rounding */                                                                    \
  X(Fnma, V, V, V, V, 0, None)                                                                     \
  /* a | (b & c) in one op */                                                                      \
  X(OrAnd, V, V, V, V, 0, FusedOrAnd)                                                              \
  /* a * 2^b, b integral, one rounding */                                                          \
  X(Scalef, V, V, _, V, 0, ScaleExp)                                                               \
  /* imm = rounding mode: 0 nearest-even, 1 floor, 2 ceil, 3 trunc */                             \
  X(Round, V, _, _, V, 0, None)                                                                    \
  /* imm = CmpPred */                                                                              \
  X(Cmp, V, V, _, M, 0, None)                                                                      \
  X(MAnd, M, M, _, M, 0, None)                                                                     \
  X(MOr, M, M, _, M, 0, None)                                                                      \
  X(MNot, M, _, _, M, 0, None)                                                                     \
  /* a ? b : c per lane */                                                                         \
  X(Select, M, V, V, V, 0, None)                                                                   \
  /* float to int32, nearest-even; NaN and out of range give INT32_MIN */                          \
  X(CvtRound, V, _, _, V, 0, None)                                                                 \
  X(CvtFloat, V, _, _, V, 0, None)                                                                 \
  X(IAdd, V, V, _, V, 0, None)                                                                     \
  X(ISub, V, V, _, V, 0, None)                                                                     \
  X(IAnd, V, V, _, V, 0, None)                                                                     \
  /* the low 32 bits of the product */                                                             \
  X(IMul, V, V, _, V, 0, None)                                                                     \
  /* float to int32, toward zero; NaN and out of range give INT32_MIN */                           \
  X(CvtTrunc, V, _, _, V, 0, None)                                                                 \
  /* imm = count: shift left, logical right, arithmetic right */                                   \
  X(Shl, V, _, _, V, 0, None)                                                                      \
  X(Shr, V, _, _, V, 0, None)                                                                      \
  X(Sra, V, _, _, V, 0, None)                                                                      \
  /* int32 a == b, a > b (signed) */                                                               \
  X(IEq, V, V, _, M, 0, None)                                                                      \
  X(IGt, V, V, _, M, 0, None)                                                                      \
  /* floor(a / b) of int32 lanes through double (vec_scalar.h's ifloordiv) */                     \
  X(IFloorDiv, V, V, _, V, 0, None)                                                                \
  /* u = identity: in the masked tail, lanes >= rem take u, the others a */                        \
  X(TailSel, V, _, _, V, 0, None)                                                                  \
  /* imm = 0 sum, 1 max, 2 min: the fixed tree of vec_scalar.h, broadcast */                       \
  X(HReduce, V, _, _, V, 0, None)                                                                  \
  /* accumulator a (written in place) takes b */                                                   \
  X(Copy, V, V, _, _, kIrEffect, None)                                                             \
  /* a = its LoopEnd; imm, b, u: the loop's kind (IrOp::LoopBegin in ir.h) */                      \
  X(LoopBegin, _, _, _, _, kIrLoop, None)                                                          \
  X(LoopEnd, _, _, _, _, kIrLoop, None)                                                            \
  /* imm = k: the nodes up to the next CopyBegin / LoopEnd are copy k */                           \
  X(CopyBegin, _, _, _, _, kIrLoop, None)                                                          \
  /* the nodes up to the next RegionEnd run only when some lane of mask a is set (regions do not  \
     nest; a value they define is read inside only, or reaches later nodes through a Copy) */     \
  X(SkipIfNone, M, _, _, _, kIrEffect, None)                                                       \
  X(RegionEnd, _, _, _, _, kIrLoop, None)

enum class IrOp : uint8_t {
#define DVM_IR_ENUM(name, a, b, c, res, flags, need) name,
  DVM_IR_OPS(DVM_IR_ENUM)
#undef DVM_IR_ENUM
};

// One row of the table.
struct IrOpInfo {
  const char* name;
  IrKind in[3];
  IrKind result;
  uint8_t flags;
  IrNeed need;
};

inline constexpr IrOpInfo kIrOps[] = {
#define DVM_IR_ROW(name, a, b, c, res, flags, need) \
  {#name, {IrKind::a, IrKind::b, IrKind::c}, IrKind::res, flags, IrNeed::need},
    DVM_IR_OPS(DVM_IR_ROW)
#undef DVM_IR_ROW
};
inline constexpr int kNumIrOps = static_cast<int>(sizeof(kIrOps) / sizeof(kIrOps[0]));

constexpr const IrOpInfo& ir_info(IrOp op) { return kIrOps[static_cast<int>(op)]; }
constexpr const char* ir_name(IrOp op) { return ir_info(op).name; }
// Per op, what every pass over the nodes asks, packed in one byte: the
// number of value operands (bits 0-1), whether it defines a register value
// (bit 2) and whether that value is a mask (bit 3).
inline constexpr auto kIrTraits = [] {
  struct Table {
    uint8_t t[kNumIrOps];
  } out{};
  for (int i = 0; i < kNumIrOps; ++i) {
    const IrOpInfo& r = kIrOps[i];
    int n = 0;
    while (n < 3 && r.in[n] != IrKind::_) ++n;
    const bool reg = r.result != IrKind::_ && !(r.flags & kIrPool);
    out.t[i] = static_cast<uint8_t>(n | (reg ? 4 : 0) | (r.result == IrKind::M ? 8 : 0));
  }
  return out;
}();

// Value operands the op reads: a, then b, then c.
constexpr int ir_operands(IrOp op) { return kIrTraits.t[static_cast<int>(op)] & 3; }
// The node defines a value held in a register (or spilled): not a constant,
// a store, a copy or loop structure.
constexpr bool ir_defines_reg(IrOp op) { return kIrTraits.t[static_cast<int>(op)] & 4; }
constexpr bool ir_is_mask(IrOp op) { return kIrTraits.t[static_cast<int>(op)] & 8; }

// ---------------------------------------------------------------------------
// Comparison predicates (IrOp::Cmp imm). Ordered predicates are false when
// either operand is NaN; Ne is true then (unordered or not equal); Unord is
// true exactly when either is NaN. Zeros compare equal whatever their signs.
// ---------------------------------------------------------------------------
#define DVM_CMP_PREDS(X) \
  X(Eq)                  \
  X(Ne)                  \
  X(Lt)                  \
  X(Le)                  \
  X(Gt)                  \
  X(Ge)                  \
  X(Unord)

enum class CmpPred : uint8_t {
#define DVM_CMP_ENUM(name) name,
  DVM_CMP_PREDS(DVM_CMP_ENUM)
#undef DVM_CMP_ENUM
};

inline constexpr const char* kCmpPredNames[] = {
#define DVM_CMP_NAME(name) #name,
    DVM_CMP_PREDS(DVM_CMP_NAME)
#undef DVM_CMP_NAME
};
inline constexpr int kNumCmpPreds = static_cast<int>(sizeof(kCmpPredNames) / sizeof(kCmpPredNames[0]));

// The predicate on two floats, as every target must compute it per lane.
constexpr bool cmp_holds(CmpPred p, float a, float b) {
  const bool unord = a != a || b != b;
  switch (p) {
    case CmpPred::Eq: return !unord && a == b;
    case CmpPred::Ne: return unord || a != b;
    case CmpPred::Lt: return !unord && a < b;
    case CmpPred::Le: return !unord && a <= b;
    case CmpPred::Gt: return !unord && a > b;
    case CmpPred::Ge: return !unord && a >= b;
    case CmpPred::Unord: return unord;
  }
  return false;
}

}  // namespace dvm::backends::jit
