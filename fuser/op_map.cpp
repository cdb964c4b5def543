// The tracer-op -> opcode table, checked against both tables at compile time.
#include "fuser/op_map.h"

#include <array>

namespace dvm::fuser {
namespace {
using detail::OpKind;

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
  M(Min, RMIN)

struct Entry {
  vm::Op op = vm::Op::LD;
  bool mapped = false;
};

constexpr std::array<Entry, detail::kNumOpKinds> build() {
  std::array<Entry, detail::kNumOpKinds> t{};
#define DVM_M(from, to) t[static_cast<int>(OpKind::from)] = {vm::Op::to, true};
  DVM_OP_MAP(DVM_M)
#undef DVM_M
  return t;
}

constexpr std::array<Entry, detail::kNumOpKinds> kMap = build();

// The opcode's class agrees with the op's arity and shape rule.
constexpr bool fits(OpKind op, vm::Op to) {
  const vm::OpClass c = vm::op_class(to);
  if (detail::op_shape_rule(op) == detail::ShapeRule::Reduce) return c == vm::OpClass::Reduce;
  switch (detail::op_arity(op)) {
    case 1: return c == vm::OpClass::Unary;
    case 2: return c == vm::OpClass::Binary;
    case 3: return c == vm::OpClass::Ternary;
    default: return false;
  }
}

#define DVM_M(from, to) +1
constexpr int kMapEntries = 0 DVM_OP_MAP(DVM_M);
#undef DVM_M

constexpr bool complete() {
  if (kMapEntries != detail::kNumOpKinds - 1) return false;  // no op twice
  for (int i = 0; i < detail::kNumOpKinds; ++i) {
    const OpKind op = static_cast<OpKind>(i);
    if (kMap[static_cast<size_t>(i)].mapped != (op != OpKind::None)) return false;
    if (op != OpKind::None && !fits(op, kMap[static_cast<size_t>(i)].op)) return false;
  }
  return true;
}
static_assert(complete(), "every tracer op but None maps to one opcode of its class");

}  // namespace

vm::Op bytecode_op(OpKind op) { return kMap[static_cast<size_t>(op)].op; }

}  // namespace dvm::fuser
