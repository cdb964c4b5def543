// The tracer's op table: every op a node can record, with the name users
// see, its arity, shape rule and dtype rule; the enum, the names and the
// queries are all expanded from it.
#pragma once

#include <cstdint>

#include "dvm/dtype.h"

namespace dvm::detail {

// Shape rules:
//   None:      the node computes nothing (a leaf, constant, view or copy)
//   Broadcast: numpy broadcasting of the operands' shapes
//   Reduce:    the operand's shape with the reduced axes removed or kept as 1
//   Contract:  [batch, M, K] x [batch, K, N] -> [batch, M, N] (the batch dim
//              optional and broadcast; matmul() in tensor.cpp canonicalizes)
// Dtype rules (T: the operands' promoted type, torch's result_type;
// tensor.cpp applies them and refuses what the vector unit cannot do yet):
//   None:   the node's dtype is its source's
//   Same:   T (integer T: only where f32 holds every value, see tensor.cpp)
//   Float:  T when it is a floating type, else float32 (exp, true division)
//   Bool:   a bool mask, what comparisons give
//   Bits:   T for bool and integer operands; floating ones are an error
//
//   X(Name,      "name",       arity, shape rule, dtype rule)
#define DVM_TRACER_OPS(X)                                 \
  X(None,        "none",        0,     None,       None)  \
  /* unary */                                             \
  X(Neg,         "neg",         1,     Broadcast,  Same)  \
  X(Abs,         "abs",         1,     Broadcast,  Same)  \
  X(Exp,         "exp",         1,     Broadcast,  Float) \
  X(Log,         "log",         1,     Broadcast,  Float) \
  X(Sqrt,        "sqrt",        1,     Broadcast,  Float) \
  X(Rsqrt,       "rsqrt",       1,     Broadcast,  Float) \
  X(Reciprocal,  "reciprocal",  1,     Broadcast,  Float) \
  X(Tanh,        "tanh",        1,     Broadcast,  Float) \
  X(Sigmoid,     "sigmoid",     1,     Broadcast,  Float) \
  X(Relu,        "relu",        1,     Broadcast,  Same)  \
  X(GeluTanh,    "gelu",        1,     Broadcast,  Float) \
  X(GeluErf,     "gelu",        1,     Broadcast,  Float) \
  X(Erf,         "erf",         1,     Broadcast,  Float) \
  X(Sin,         "sin",         1,     Broadcast,  Float) \
  X(Cos,         "cos",         1,     Broadcast,  Float) \
  X(Floor,       "floor",       1,     Broadcast,  Same)  \
  X(Ceil,        "ceil",        1,     Broadcast,  Same)  \
  X(Round,       "round",       1,     Broadcast,  Same)  \
  /* binary */                                            \
  X(Add,         "add",         2,     Broadcast,  Same)  \
  X(Sub,         "sub",         2,     Broadcast,  Same)  \
  X(Mul,         "mul",         2,     Broadcast,  Same)  \
  X(Div,         "div",         2,     Broadcast,  Float) \
  X(Maximum,     "maximum",     2,     Broadcast,  Same)  \
  X(Minimum,     "minimum",     2,     Broadcast,  Same)  \
  X(Pow,         "pow",         2,     Broadcast,  Same)  \
  X(Eq,          "eq",          2,     Broadcast,  Bool)  \
  X(Ne,          "ne",          2,     Broadcast,  Bool)  \
  X(Lt,          "lt",          2,     Broadcast,  Bool)  \
  X(Le,          "le",          2,     Broadcast,  Bool)  \
  X(Gt,          "gt",          2,     Broadcast,  Bool)  \
  X(Ge,          "ge",          2,     Broadcast,  Bool)  \
  /* ternary */                                           \
  X(Where,       "where",       3,     Broadcast,  Same)  /* mask ? a : b */ \
  /* reductions over a run of adjacent axes */            \
  X(Sum,         "sum",         1,     Reduce,     Same)  \
  X(Max,         "max",         1,     Reduce,     Same)  \
  X(Min,         "min",         1,     Reduce,     Same)  \
  /* the cube unit: [.., M, K] x [.., K, N] -> [.., M, N] (batch rank <= 1) */ \
  X(MatMul,      "matmul",      2,     Contract,   Same)  \
  /* Python's division (floats, int32 and uint8 lanes) */ \
  X(FloorDivide, "floor_divide", 2,    Broadcast,  Same)  \
  X(Remainder,   "remainder",   2,     Broadcast,  Same)  \
  /* bitwise: bool and integer operands only */           \
  X(BitwiseAnd,  "bitwise_and", 2,     Broadcast,  Bits)  \
  X(BitwiseOr,   "bitwise_or",  2,     Broadcast,  Bits)  \
  X(BitwiseXor,  "bitwise_xor", 2,     Broadcast,  Bits)  \
  X(BitwiseNot,  "bitwise_not", 1,     Broadcast,  Bits)

enum class OpKind : uint8_t {
#define DVM_X(name, str, arity, shape, dtype) name,
  DVM_TRACER_OPS(DVM_X)
#undef DVM_X
};

inline constexpr int kNumOpKinds = 0
#define DVM_X(name, str, arity, shape, dtype) +1
    DVM_TRACER_OPS(DVM_X)
#undef DVM_X
    ;

enum class ShapeRule : uint8_t { None, Broadcast, Reduce, Contract };
enum class DtypeRule : uint8_t { None, Same, Float, Bool, Bits };

struct OpKindInfo {
  const char* name;
  int arity;
  ShapeRule shape;
  DtypeRule dtype;
};

inline constexpr OpKindInfo kOpKindInfo[kNumOpKinds] = {
#define DVM_X(name, str, arity, shape, dtype) {str, arity, ShapeRule::shape, DtypeRule::dtype},
    DVM_TRACER_OPS(DVM_X)
#undef DVM_X
};

constexpr const OpKindInfo& op_info(OpKind op) { return kOpKindInfo[static_cast<int>(op)]; }
constexpr const char* op_name(OpKind op) { return op_info(op).name; }
constexpr int op_arity(OpKind op) { return op_info(op).arity; }
constexpr ShapeRule op_shape_rule(OpKind op) { return op_info(op).shape; }

// The dtype an op's result has on float32 operands (ops with a dtype rule
// only; Bits ops refuse floats: bool, their result on bool operands).
constexpr Dtype op_result_dtype(OpKind op) {
  return op_info(op).dtype == DtypeRule::Bool || op_info(op).dtype == DtypeRule::Bits ? Dtype::Bool : Dtype::F32;
}

}  // namespace dvm::detail
