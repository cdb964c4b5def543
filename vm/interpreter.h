// The tile interpreter: runs a verified kernel tile by tile, one dispatch per
// instruction per tile, with the ISA's micro-kernels doing the SIMD work.
#pragma once

#include <cstdint>
#include <functional>

#include "vm/kernel.h"
#include "vm/launch.h"

namespace dvm::backends {
struct MicroKernels;
}

namespace dvm::vm {

// Floats per tile. Contiguous inputs are read in place, so a tile costs only
// the scratch for values the kernel computes.
inline constexpr int64_t kTile = 512;
// RowReduce rows up to this length are held whole (one read of the row);
// longer rows take one pass per reduction level.
inline constexpr int64_t kRowTileMax = 4096;
// Elementwise work items split C into chunks of this many floats.
inline constexpr int64_t kChunk = 16 * kTile;

// RowReduce launches of fewer than kSplitRowsBelow rows longer than
// kSplitRowMin floats split each row into chunks of kRowChunk floats that
// threads fold independently; the chunks' accumulators then combine in chunk
// order. All of it depends on the shape only, never on the thread count, so
// the result bits do not either. Split launches run on machine code where
// vm/split_launch.h can. With more rows, rows alone keep threads busy.
inline constexpr int64_t kSplitRowMin = 256 * 1024;
inline constexpr int64_t kSplitRowsBelow = 16;
inline constexpr int64_t kRowChunk = 64 * 1024;
// ColReduce launches split only from this many columns: narrower rows make
// the interpreter's per-row dispatch dominate (C = 4: 5x the JIT's time).
inline constexpr int64_t kSplitColsMin = 64;
static_assert(kRowChunk % kTile == 0, "chunks start on tile boundaries");

// Work items of a launch: independent pieces the launcher may run in any
// order or in parallel (rows, row chunks or column tiles).
int64_t work_items(const Kernel& k, const Launch& l);

// Floats one work item touches (the parallel cost model's unit).
int64_t item_elements(const Kernel& k, const Launch& l);

// True when a launch runs split (vm/split_launch.h): the RowReduce case
// above, and ColReduce launches of at least kSplitColsMin columns that fold
// more than kSplitRowMin floats per column tile: their R splits into chunks
// of about kRowChunk floats per tile. Few tiles gain threads; any number
// gains the cache: a tile the JIT covers in several passes over its rows
// (C = 100: blocks of 4 and 2 vectors, then a masked one) rereads a chunk
// from L2 instead of the whole column from memory.
bool splits_rows(const Kernel& k, const Launch& l);
// A split ColReduce launch: R in chunks of `rows` rows (about kRowChunk floats
// of one column tile; the last chunk may be shorter). Each chunk folds its
// rows from the identity; reduction j's partial for (chunk, p, c) is at
// at(partial, chunk, j, p, c), [chunk][j][P][C] with C innermost.
struct ColSplit {
  int64_t P = 0, C = 0, ctiles = 0, items = 0;  // items: P x column tiles
  int64_t rows = 1, chunks = 0;
  size_t nred = 0;  // reductions in the kernel's block
  size_t floats() const { return static_cast<size_t>(chunks) * nred * static_cast<size_t>(P * C); }
  float* at(float* partial, int64_t chunk, size_t j, int64_t p, int64_t c) const {
    return partial + ((static_cast<size_t>(chunk) * nred + j) * static_cast<size_t>(P) + static_cast<size_t>(p)) *
                         static_cast<size_t>(C) + static_cast<size_t>(c);
  }
};
ColSplit col_split(const Kernel& k, const Launch& l);
// The second half of a split ColReduce launch, whoever folded the chunks
// (sp = col_split(k, l)): per column tile the chunks combine in chunk order,
// then the epilogue runs.
void finish_split_cols(const Kernel& k, const Launch& l, const ColSplit& sp, const backends::MicroKernels& mk,
                       float* partial);

// Runs a whole split launch: RowReduce, per reduction level, one parallel
// phase over (row, chunk), then the per-row combines; ColReduce, one phase
// over (column tile, row chunk), then per tile the combines in chunk order
// and the epilogue.
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

}  // namespace dvm::vm
