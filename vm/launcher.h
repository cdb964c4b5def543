// The launcher: checks a launch against its kernel and runs it on the active
// tier and ISA.
#pragma once

#include <cstdint>
#include <vector>

#include "vm/kernel.h"
#include "vm/launch.h"

namespace dvm::vm {

// Throws dvm::Error (naming the argument and what was expected) when the
// launch does not fit the kernel: argument or scalar count, missing pointers, an
// output that is also an input, strides a load or store cannot use. Nothing
// is written before these checks pass.
void check_launch(const Kernel& k, const Launch& l);

// check_launch, then runs every work item on the tier the tiering policy
// picks. Returns true when machine code ran, false for the interpreter.
bool launch(const Kernel& k, const Launch& l);

// A stacked launch (DVM's stacking fusion): several kernels too small to
// fill the machine run as one launch. Entries with the same stage are
// independent and run side by side over one parallel index space; stages
// run in order, so a later stage may read what an earlier one wrote. All
// entries are checked before anything runs.
struct StackEntry {
  const Kernel* kernel;
  const Launch* launch;
  int stage;
};
void launch_stack(const std::vector<StackEntry>& entries);

// The cube unit's layout change for an operand stored by columns, on the
// active ISA: dst[k * ld + n] = src[n * cs + k] for k < K, n < N (ld >= N).
void copy_by_rows(const float* src, int64_t cs, int64_t K, int64_t N, float* dst, int64_t ld);
// Whether the cube, on the active ISA, reads one row times an operand stored
// by columns in place (no transpose into panels per call).
bool one_row_reads_columns();

}  // namespace dvm::vm
