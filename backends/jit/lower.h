// The JIT's two stages: lower() turns a verified kernel into the vector IR of
// ir.h (one straight-line body per loop, math ops expanded through the shared
// templates), and generate() allocates registers and emits x86 code for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/isa.h"
#include "backends/jit/ir.h"
#include "vm/verifier.h"

namespace dvm::backends::jit {

// How a call's base address of each argument is found (see run_items).
enum : uint8_t { kArgUnused = 0, kArgContiguous = 1, kArgStrided = 2, kArgPerRow = 3 };

// One access pattern per argument; false (with *reason) for LDG or an
// argument read with two patterns.
bool arg_patterns(const vm::Program& p, std::vector<uint8_t>* out, std::string* reason);

// Lowers vp into *ir. Returns false with *reason for what the JIT leaves to
// the interpreter.
bool lower(const vm::VerifiedProgram& vp, IrBuilder* ir, std::string* reason);

// Emits the function `void entry(const JitArgs*)` for ir. Returns the entry
// point (release it with asmx::release) or null with *reason.
void* generate(const IrBuilder& ir, Isa isa, size_t* code_bytes, std::string* reason);

}  // namespace dvm::backends::jit
