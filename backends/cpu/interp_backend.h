// The tile interpreter (vm/interpreter.h) as a backend, one per ISA: it runs
// every verified kernel with that ISA's micro-kernels and needs no compile.
#pragma once

#include "backends/isa.h"
#include "vm/backend.h"

namespace dvm::backends::cpu {

// Null when isa's micro-kernels are not compiled in or the CPU lacks it.
const vm::Backend* interpreter_backend(Isa isa);

}  // namespace dvm::backends::cpu
