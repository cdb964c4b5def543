// What a JIT target's folder (backends/jit/x86/) implements for the neutral
// stages: its capabilities per ISA, emission of allocated IR as one callable
// function, freeing that function, and its assembly log. Nothing here names
// a machine.
#pragma once

#include <cstddef>
#include <string>

#include "backends/isa.h"
#include "backends/jit/caps.h"
#include "backends/jit/ir.h"
#include "backends/jit/regalloc.h"

namespace dvm::backends::jit {

// The target's capabilities for isa. False (with *reason) where the target
// emits no code for isa.
bool target_caps(Isa isa, TargetCaps* caps, std::string* reason);

// Emits `void entry(const JitArgs*)` for ir as allocated by al under caps
// (from target_caps(isa)). Returns the entry point (free it with
// release_code) and its size in *code_bytes, or null with *reason.
void* emit(const IrBuilder& ir, const Allocation& al, const TargetCaps& caps, Isa isa,
           size_t* code_bytes, std::string* reason);

// Frees a function emit() returned.
void release_code(void* fn);

// While on, emit() logs the assembly of every function (vm/log.h).
void set_target_log(bool on);
// Whether target_caps may offer the CPU's bfloat16 conversion (jit.h's
// set_bf16_instructions).
void set_target_bf16(bool on);

}  // namespace dvm::backends::jit
