// The tile interpreter: runs a verified kernel tile by tile, one dispatch per
// instruction per tile, with the ISA's micro-kernels doing the SIMD work.
#pragma once

#include <cstdint>
#include <functional>

#include "backends/cube/gemm.h"
#include "vm/kernel.h"
#include "vm/launch.h"
#include "vm/schedule.h"

namespace dvm::backends {
struct MicroKernels;
}

namespace dvm::vm {

// The second half of a split ColReduce launch, whoever folded the chunks
// (sp = col_split(k, l)): per column tile the chunks combine pairwise
// (chunk c with c + 1, then c with c + 2, ...), then the epilogue runs.
void finish_split_cols(const Kernel& k, const Launch& l, const ColSplit& sp, const backends::MicroKernels& mk,
                       float* partial);

// Runs a whole split launch: RowReduce, per reduction level, one parallel
// phase over (row, chunk), then the per-row combines; ColReduce, one phase
// over (column tile, row chunk), then per tile the pairwise combines and
// the epilogue.
void interpret_split_rows(const Kernel& k, const Launch& l, const backends::MicroKernels& mk);

// One (row, chunk) item of a split RowReduce pass on machine code: folds the
// reductions of level pass + 1 over a prefix of elements [c0, c1) of the row
// into the item's partial slots (reduce_lanes floats per folding reduction,
// in program order), or in the last pass computes the ST outputs of a
// prefix; `results` holds the row's finished reductions, one float per
// instruction. Returns the prefix's length (0: none); the interpreter runs
// the rest.
using RowChunkPass =
    std::function<int64_t(int pass, int64_t row, int64_t c0, int64_t c1, float* partial, const float* results)>;
// A split RowReduce launch (interpret_split_rows), with `machine` (may be
// null) running what it can of each item. The same bits either way.
void split_row_reduce(const Kernel& k, const Launch& l, const backends::MicroKernels& mk,
                      const RowChunkPass* machine);

// Runs work items [begin, end) with the given micro-kernel table.
void interpret(const Kernel& k, const Launch& l, int64_t begin, int64_t end,
               const backends::MicroKernels& mk);

// Work items [begin, end) of a Contraction kernel, the cube's GEMM on
// `kernels` (the precompiled micro-kernels here; the machine-code tier's
// generated ones), the epilogue on mk's vector micro-kernels. The same bits
// either way.
void run_contraction(const Kernel& k, const Launch& l, int64_t begin, int64_t end, const backends::MicroKernels& mk,
                     backends::cube::Kernels kernels);

}  // namespace dvm::vm
