// Maps the tracer's ops to the vm's bytecode opcodes, for lowering.
#pragma once

#include <array>
#include <cstddef>

#include "tracer/ops.h"
#include "vm/opcodes.h"

namespace dvm::fuser {

//   M(tracer op, opcode)
#define DVM_OP_MAP(M)        \
  M(Neg, NEG)                \
  M(Abs, ABS)                \
  M(Exp, EXP)                \
  M(Log, LOG)                \
  M(Sqrt, SQRT)              \
  M(Rsqrt, RSQRT)            \
  M(Reciprocal, RECIP)       \
  M(Tanh, TANH)              \
  M(Sigmoid, SIGMOID)        \
  M(Relu, RELU)              \
  M(GeluTanh, GELU_TANH)     \
  M(GeluErf, GELU_ERF)       \
  M(Erf, ERF)                \
  M(Sin, SIN)                \
  M(Cos, COS)                \
  M(Floor, FLOOR)            \
  M(Ceil, CEIL)              \
  M(Round, ROUND)            \
  M(Add, ADD)                \
  M(Sub, SUB)                \
  M(Mul, MUL)                \
  M(Div, DIV)                \
  M(Maximum, MAX)            \
  M(Minimum, MIN)            \
  M(Pow, POW)                \
  M(Eq, EQ)                  \
  M(Ne, NE)                  \
  M(Lt, LT)                  \
  M(Le, LE)                  \
  M(Gt, GT)                  \
  M(Ge, GE)                  \
  M(Where, SELECT)           \
  M(Sum, RSUM)               \
  M(Max, RMAX)               \
  M(Min, RMIN)               \
  M(MatMul, MMA)              \
  M(FloorDivide, FLOORDIV)    \
  M(Remainder, REM)           \
  M(BitwiseAnd, IAND)         \
  M(BitwiseOr, IOR)           \
  M(BitwiseXor, IXOR)         \
  M(BitwiseNot, INOT)

// One row per tracer op, in the tracer table's order.
struct OpMapEntry {
  vm::Op op = vm::Op::LD;
  bool mapped = false;
};

constexpr std::array<OpMapEntry, detail::kNumOpKinds> build_op_map() {
  std::array<OpMapEntry, detail::kNumOpKinds> t{};
#define DVM_M(from, to) t[static_cast<size_t>(detail::OpKind::from)] = {vm::Op::to, true};
  DVM_OP_MAP(DVM_M)
#undef DVM_M
  return t;
}

inline constexpr std::array<OpMapEntry, detail::kNumOpKinds> kOpMap = build_op_map();

// The opcode that computes a tracer op. Every op of the tracer's table but
// None has one (checked at compile time in op_map.cpp).
inline vm::Op bytecode_op(detail::OpKind op) { return kOpMap[static_cast<size_t>(op)].op; }

}  // namespace dvm::fuser
