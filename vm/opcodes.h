// The one opcode table of the dvm vector unit: every consumer (encoder,
// verifier, interpreter dispatch, disassembler, JIT coverage) expands it.
#pragma once

#include <cstdint>

namespace dvm::vm {

// Operand signatures, one letter per operand in encoding order:
//   D = destination register, R = source register, A = argument index,
//   S = scalar parameter index (two bytes little-endian, < the kernel's
//       scalar count; held in Instr::scalar),
//   F = 32-bit float immediate.
// A value the user passes (a frame's dt, `x * t`, `where(m, x, t)`) is a
// scalar parameter read by PARAM and bound with the launch (Launch::scalars),
// so a new value runs the same kernel; CONST holds only constants that
// belong to an op's definition.
// Classes say how the interpreter and JIT treat an instruction.
//
//   X(NAME,     mnemonic,   class,    signature)
#define DVM_OPCODES(X)                                                         \
  /* data movement: global tensor <-> local buffer (the NPU's DMA) */           \
  X(LD,        "ld",        Load,     "DA")  /* contiguous along C          */ \
  X(LDB,       "ldb",       Load,     "DA")  /* one value per row           */ \
  X(LDS,       "lds",       Load,     "DA")  /* strided along C             */ \
  X(LDG,       "ldg",       Load,     "DA")  /* general gather, any rank    */ \
  X(ST,        "st",        Store,    "AR")  /* full extent along C         */ \
  X(STB,       "stb",       Store,    "AR")  /* one value per row           */ \
  X(CONST,     "const",     Const,    "DF")  /* uniform value (immediate)   */ \
  X(PARAM,     "param",     Const,    "DS")  /* uniform value, from launch  */ \
  /* unary */                                                                  \
  X(NEG,       "neg",       Unary,    "DR")                                    \
  X(ABS,       "abs",       Unary,    "DR")                                    \
  X(EXP,       "exp",       Unary,    "DR")                                    \
  X(LOG,       "log",       Unary,    "DR")                                    \
  X(SQRT,      "sqrt",      Unary,    "DR")                                    \
  X(RSQRT,     "rsqrt",     Unary,    "DR")                                    \
  X(RECIP,     "recip",     Unary,    "DR")                                    \
  X(TANH,      "tanh",      Unary,    "DR")                                    \
  X(SIGMOID,   "sigmoid",   Unary,    "DR")                                    \
  X(RELU,      "relu",      Unary,    "DR")                                    \
  X(GELU_TANH, "gelu_tanh", Unary,    "DR")                                    \
  X(GELU_ERF,  "gelu_erf",  Unary,    "DR")                                    \
  X(ERF,       "erf",       Unary,    "DR")                                    \
  X(SIN,       "sin",       Unary,    "DR")                                    \
  X(COS,       "cos",       Unary,    "DR")                                    \
  X(FLOOR,     "floor",     Unary,    "DR")                                    \
  X(CEIL,      "ceil",      Unary,    "DR")                                    \
  X(ROUND,     "round",     Unary,    "DR")                                    \
  /* binary */                                                                 \
  X(ADD,       "add",       Binary,   "DRR")                                   \
  X(SUB,       "sub",       Binary,   "DRR")                                   \
  X(MUL,       "mul",       Binary,   "DRR")                                   \
  X(DIV,       "div",       Binary,   "DRR")                                   \
  X(MAX,       "max",       Binary,   "DRR")                                   \
  X(MIN,       "min",       Binary,   "DRR")                                   \
  X(POW,       "pow",       Binary,   "DRR")                                   \
  X(EQ,        "eq",        Binary,   "DRR")                                   \
  X(NE,        "ne",        Binary,   "DRR")                                   \
  X(LT,        "lt",        Binary,   "DRR")                                   \
  X(LE,        "le",        Binary,   "DRR")                                   \
  X(GT,        "gt",        Binary,   "DRR")                                   \
  X(GE,        "ge",        Binary,   "DRR")                                   \
  /* ternary */                                                                \
  X(SELECT,    "select",    Ternary,  "DRRR") /* m != 0 ? a : b             */ \
  X(FMA,       "fma",       Ternary,  "DRRR") /* a * b + c, one rounding    */ \
  /* reductions along the kernel's reduced axis */                             \
  X(RSUM,      "rsum",      Reduce,   "DR")                                    \
  X(RMAX,      "rmax",      Reduce,   "DR")                                    \
  X(RMIN,      "rmin",      Reduce,   "DR")                                    \
  /* the cube unit: D = sum over K of A[p, r, k] * B[p, k, c] (Contraction) */ \
  X(MMA,       "mma",       Contract, "DAA")                                   \
  /* int32 lanes: a register holds an int32's bit pattern (docs/DTYPES.md).  \
     Wrapping two's-complement arithmetic; comparisons give the 0.0f / 1.0f \
     the float comparisons give. */                                            \
  X(ITOF,      "itof",      Unary,    "DR")  /* int32 -> f32, nearest even  */ \
  X(FTOI,      "ftoi",      Unary,    "DR")  /* f32 -> int32, truncated;    \
                                   NaN and out of range: INT32_MIN           */ \
  X(INEG,      "ineg",      Unary,    "DR")                                    \
  X(IABS,      "iabs",      Unary,    "DR")  /* INT32_MIN stays INT32_MIN   */ \
  X(INOT,      "inot",      Unary,    "DR")  /* bitwise                     */ \
  X(IADD,      "iadd",      Binary,   "DRR")                                   \
  X(ISUB,      "isub",      Binary,   "DRR")                                   \
  X(IMUL,      "imul",      Binary,   "DRR") /* the low 32 bits             */ \
  X(IMAX,      "imax",      Binary,   "DRR")                                   \
  X(IMIN,      "imin",      Binary,   "DRR")                                   \
  X(IEQ,       "ieq",       Binary,   "DRR")                                   \
  X(INE,       "ine",       Binary,   "DRR")                                   \
  X(ILT,       "ilt",       Binary,   "DRR")                                   \
  X(ILE,       "ile",       Binary,   "DRR")                                   \
  X(IGT,       "igt",       Binary,   "DRR")                                   \
  X(IGE,       "ige",       Binary,   "DRR")                                   \
  X(IAND,      "iand",      Binary,   "DRR")                                   \
  X(IOR,       "ior",       Binary,   "DRR")                                   \
  X(IXOR,      "ixor",      Binary,   "DRR")                                   \
  /* Python's division (torch.floor_divide, torch.remainder). f32: the     \
     floor of the true quotient and a - b * floor(a / b) with the divisor's \
     sign, exact while |a / b| < 2^24 (docs/DTYPES.md). int32 lanes: exact; \
     x // 0 = 0, x % 0 = x, INT32_MIN // -1 = INT32_MIN. */                   \
  X(FLOORDIV,  "floordiv",  Binary,   "DRR")                                   \
  X(REM,       "rem",       Binary,   "DRR")                                   \
  X(IFLOORDIV, "ifloordiv", Binary,   "DRR")                                   \
  X(IREM,      "irem",      Binary,   "DRR")                                   \
  /* the cube unit's operand prologues (Contraction): elementwise programs   \
     evaluated while an operand is packed. ldoa reads element (p, r, k) of   \
     its argument into operand a's prologue, ldob element (p, k, c) into     \
     b's; mmar multiplies the registers the two prologues computed.          \
     Values of one space never mix with another's (vm/verifier.cpp). */      \
  X(LDOA,      "ldoa",      Load,     "DA")                                    \
  X(LDOB,      "ldob",      Load,     "DA")                                    \
  X(MMAR,      "mmar",      Contract, "DRR")                                  \
  /* int64 lanes: a register holds an int64 per element (docs/DTYPES.md),  \
     loaded from int64 arguments or widened from int32 lanes. Wrapping     \
     two's-complement arithmetic as the i* ops; comparisons give 0.0f /    \
     1.0f; lselect's mask is f32. x // 0 = 0, x % 0 = x, INT64_MIN // -1 = \
     INT64_MIN. */                                                           \
  X(ITOL,      "itol",      Unary,    "DR")  /* int32 -> int64, exact       */ \
  X(LTOI,      "ltoi",      Unary,    "DR")  /* int64 -> int32, low 32 bits */ \
  X(LTOF,      "ltof",      Unary,    "DR")  /* int64 -> f32, nearest even  */ \
  X(LNEG,      "lneg",      Unary,    "DR")                                    \
  X(LABS,      "labs",      Unary,    "DR")  /* INT64_MIN stays INT64_MIN   */ \
  X(LNOT,      "lnot",      Unary,    "DR")                                    \
  X(LADD,      "ladd",      Binary,   "DRR")                                   \
  X(LSUB,      "lsub",      Binary,   "DRR")                                   \
  X(LMUL,      "lmul",      Binary,   "DRR") /* the low 64 bits             */ \
  X(LMAX,      "lmax",      Binary,   "DRR")                                   \
  X(LMIN,      "lmin",      Binary,   "DRR")                                   \
  X(LEQ,       "leq",       Binary,   "DRR")                                   \
  X(LNE,       "lne",       Binary,   "DRR")                                   \
  X(LLT,       "llt",       Binary,   "DRR")                                   \
  X(LLE,       "lle",       Binary,   "DRR")                                   \
  X(LGT,       "lgt",       Binary,   "DRR")                                   \
  X(LGE,       "lge",       Binary,   "DRR")                                   \
  X(LAND,      "land",      Binary,   "DRR")                                   \
  X(LOR,       "lor",       Binary,   "DRR")                                   \
  X(LXOR,      "lxor",      Binary,   "DRR")                                   \
  X(LFLOORDIV, "lfloordiv", Binary,   "DRR")                                   \
  X(LREM,      "lrem",      Binary,   "DRR")                                   \
  X(LSELECT,   "lselect",   Ternary,  "DRRR") /* m != 0 ? a : b             */ \
  /* int64 reductions: exact, so in any order; lrsum wraps */                  \
  X(LRSUM,     "lrsum",     Reduce,   "DR")                                    \
  X(LRMAX,     "lrmax",     Reduce,   "DR")                                    \
  X(LRMIN,     "lrmin",     Reduce,   "DR")                                    \
  /* a store strided along C (Elementwise only): a write into a slice one   \
     element wide along its buffer's inner axis (stack along a new last     \
     axis), which ST's unit stride would run one element per row. Last in  \
     the table, so that the other opcodes keep their numbers. */            \
  X(STS,       "sts",       Store,    "AR")

enum class Op : uint8_t {
#define DVM_X(name, mn, cls, sig) name,
  DVM_OPCODES(DVM_X)
#undef DVM_X
};

inline constexpr int kNumOps = 0
#define DVM_X(name, mn, cls, sig) +1
    DVM_OPCODES(DVM_X)
#undef DVM_X
    ;

enum class OpClass : uint8_t { Load, Store, Const, Unary, Binary, Ternary, Reduce, Contract };

struct OpInfo {
  const char* mnemonic;
  OpClass cls;
  const char* signature;  // see the legend above
};

inline constexpr OpInfo kOpInfo[kNumOps] = {
#define DVM_X(name, mn, cls, sig) {mn, OpClass::cls, sig},
    DVM_OPCODES(DVM_X)
#undef DVM_X
};

constexpr const OpInfo& op_info(Op op) { return kOpInfo[static_cast<int>(op)]; }
constexpr OpClass op_class(Op op) { return op_info(op).cls; }
constexpr const char* op_name(Op op) { return op_info(op).mnemonic; }

// The int64-lane opcodes, itol .. lrmin: each reads or gives registers of
// 8-byte lanes, so the interpreter runs them from its own tables
// (MicroKernels::wide, long_reduce).
constexpr bool int64_op(Op op) { return op >= Op::ITOL && op <= Op::LRMIN; }
// Whether operand k of an int64-lane op (0 the destination, then its
// sources) holds int64 lanes; the others hold 4-byte lanes: itol's source
// (int32), ltoi's result (int32), ltof's and the comparisons' results (f32),
// lselect's mask (f32).
constexpr bool int64_operand(Op op, int k) {
  if (op == Op::ITOL) return k == 0;
  if (op == Op::LSELECT) return k != 1;
  if (op == Op::LTOI || op == Op::LTOF || (op >= Op::LEQ && op <= Op::LGE)) return k != 0;
  return true;
}

// Bytes one operand letter takes in the encoding.
constexpr int operand_bytes(char letter) { return letter == 'F' ? 4 : letter == 'S' ? 2 : 1; }

// Encoded size of an instruction: one opcode byte plus its operands.
constexpr int instr_bytes(Op op) {
  int n = 1;
  for (const char* s = op_info(op).signature; *s; ++s) n += operand_bytes(*s);
  return n;
}

}  // namespace dvm::vm
