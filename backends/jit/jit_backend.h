// The JIT (backends/jit/jit.h) as a backend, one per ISA it lowers to.
#pragma once

#include "backends/isa.h"
#include "vm/backend.h"

namespace dvm::backends::jit {

// Null for ISAs the JIT does not lower to or the CPU lacks.
const vm::Backend* jit_backend(Isa isa);

}  // namespace dvm::backends::jit
