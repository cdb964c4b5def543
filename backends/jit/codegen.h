// Code generation for lowered IR: the target's capabilities (target.h), the
// neutral register allocator (regalloc.h), then the target's emitter.
#pragma once

#include <cstddef>
#include <string>

#include "backends/isa.h"
#include "backends/jit/ir.h"

namespace dvm::backends::jit {

// Emits the function `void entry(const JitArgs*)` for ir. Returns the entry
// point (free it with release_code) or null with *reason: the ISA has no
// emitter, or ir uses an op the target lacks (IR lowered for another ISA).
// With `no_spills`, returns null and sets *spilled instead of emitting code
// that would spill a value to the stack.
void* generate(const IrBuilder& ir, Isa isa, size_t* code_bytes, std::string* reason,
               bool no_spills = false, bool* spilled = nullptr);

}  // namespace dvm::backends::jit
