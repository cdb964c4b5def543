// The disassembler: readable text for any kernel's bytecode.
#pragma once

#include <string>

#include "vm/bytecode.h"

namespace dvm::vm {

// One header line, then one line per instruction, e.g.
//   kernel row_reduce regs=3 args=2 (in a0, out a1) instrs=4
//     0: ld     r0, a0
//     1: rsum   r1, r0
// Malformed bytecode gives the verifier's message instead of a listing.
std::string disassemble(const Bytecode& bc);

}  // namespace dvm::vm
