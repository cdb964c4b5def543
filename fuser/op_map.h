// Maps the tracer's ops to the vm's bytecode opcodes, for lowering.
#pragma once

#include "tracer/ops.h"
#include "vm/opcodes.h"

namespace dvm::fuser {

// The opcode that computes a tracer op. Every op of the tracer's table but
// None has one (checked at compile time in op_map.cpp).
vm::Op bytecode_op(detail::OpKind op);

}  // namespace dvm::fuser
