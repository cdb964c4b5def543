// The launcher: checks a launch against its kernel and runs it on the active
// tier and ISA.
#pragma once

#include "vm/kernel.h"
#include "vm/launch.h"

namespace dvm::vm {

// Throws dvm::Error (naming the argument and what was expected) when the
// launch does not fit the kernel: argument count, missing pointers, an
// output that is also an input, strides a load or store cannot use. Nothing
// is written before these checks pass.
void check_launch(const Kernel& k, const Launch& l);

// check_launch, then runs every work item on the tier the tiering policy
// picks. Returns true when machine code ran, false for the interpreter.
bool launch(const Kernel& k, const Launch& l);

}  // namespace dvm::vm
