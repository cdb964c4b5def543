// The built-in backends of this build: the interpreter per ISA the CPU has
// and, when the JIT is compiled in, the JIT per ISA. The vm registers them on
// first use of its backend table (vm/backend.h).
#pragma once

#include <vector>

#include "vm/backend.h"

namespace dvm::backends {

std::vector<const vm::Backend*> builtin_backends();

}  // namespace dvm::backends
