// Split launches (vm/schedule.h: splits_rows) on the best tier that can
// serve them: a split ColReduce folds its row chunks in machine code through
// the kernel's fold kernel, a split RowReduce runs each pass per chunk
// through its split passes; what they cannot serve splits on the
// interpreter. Either way the chunks combine in the same order (RowReduce:
// chunk order; ColReduce: pairwise), so the bits are the same.
#pragma once

#include "vm/kernel.h"
#include "vm/launch.h"

namespace dvm::backends {
struct MicroKernels;
}

namespace dvm::vm {

// Runs a whole split launch; true when machine code ran every pass.
bool run_split(const Kernel& k, const Launch& l, const backends::MicroKernels& mk);

}  // namespace dvm::vm
