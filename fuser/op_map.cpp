// Compile-time checks of the tracer-op -> opcode table against both tables.
#include "fuser/op_map.h"

namespace dvm::fuser {
namespace {
using detail::OpKind;

// The opcode's class agrees with the op's arity and shape rule.
constexpr bool fits(OpKind op, vm::Op to) {
  const vm::OpClass c = vm::op_class(to);
  if (detail::op_shape_rule(op) == detail::ShapeRule::Reduce) return c == vm::OpClass::Reduce;
  if (detail::op_shape_rule(op) == detail::ShapeRule::Contract) return c == vm::OpClass::Contract;
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
    if (kOpMap[static_cast<size_t>(i)].mapped != (op != OpKind::None)) return false;
    if (op != OpKind::None && !fits(op, kOpMap[static_cast<size_t>(i)].op)) return false;
  }
  return true;
}
static_assert(complete(), "every tracer op but None maps to one opcode of its class");

}  // namespace

}  // namespace dvm::fuser
