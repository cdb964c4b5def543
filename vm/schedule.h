// Schedule: how a launch of each kernel form is cut into work items (rows,
// element chunks, column tiles) and when it splits rows into chunks. Every
// backend runs the same items, so results never depend on which tier or how
// many threads ran them.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "vm/kernel.h"
#include "vm/launch.h"

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
// ColReduce launches of this many columns split only for speed (enough
// floats per column tile); narrower ones split whenever R exceeds two
// chunks, for accuracy: one accumulator per column would add all R rows.
inline constexpr int64_t kSplitColsMin = 64;
// A column chunk adds at most this many rows into one accumulator; chunks
// then combine pairwise, so a column sum's error grows with
// kColChunkRowsMax + log2(R / kColChunkRowsMax) adds, not with R.
inline constexpr int64_t kColChunkRowsMax = 1024;
static_assert(kRowChunk % kTile == 0, "chunks start on tile boundaries");

// Work items of a launch: independent pieces the launcher may run in any
// order or in parallel (rows, row chunks or column tiles).
int64_t work_items(const Kernel& k, const Launch& l);

// Floats one work item touches (the parallel cost model's unit).
int64_t item_elements(const Kernel& k, const Launch& l);

// True when a launch runs split (vm/split_launch.h): the RowReduce case
// above, and ColReduce launches of more than two chunks' rows that are
// narrower than kSplitColsMin columns or fold more than kSplitRowMin floats
// per column tile: their R splits into chunks of about kRowChunk floats per
// tile, at most kColChunkRowsMax rows. Few tiles gain threads; any number
// gains the cache: a tile the JIT covers in several passes over its rows
// (C = 100: blocks of 4 and 2 vectors, then a masked one) rereads a chunk
// from L2 instead of the whole column from memory.
bool splits_rows(const Kernel& k, const Launch& l);
// A split ColReduce launch: R in chunks of `rows` rows (about kRowChunk floats
// of one column tile, at most kColChunkRowsMax rows; the last chunk may be
// shorter). Each chunk folds its rows from the identity; the chunks combine
// pairwise (finish_split_cols). Reduction j's partial for (chunk, p, c) is at
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

// The schedule of each form (its row in vm/forms.h points here).
int64_t elementwise_work_items(const Kernel& k, const Launch& l);
int64_t elementwise_item_elements(const Kernel& k, const Launch& l);
int64_t row_reduce_work_items(const Kernel& k, const Launch& l);
int64_t row_reduce_item_elements(const Kernel& k, const Launch& l);
bool row_reduce_splits(const Kernel& k, const Launch& l);
int64_t col_reduce_work_items(const Kernel& k, const Launch& l);
int64_t col_reduce_item_elements(const Kernel& k, const Launch& l);
bool col_reduce_splits(const Kernel& k, const Launch& l);
int64_t contraction_work_items(const Kernel& k, const Launch& l);
int64_t contraction_item_elements(const Kernel& k, const Launch& l);


// Where a work item starts: Elementwise items are (row, chunk) with rows
// p * R + r, C in chunks of kChunk; ColReduce items are (p, column tile) of
// kTile columns over every row; RowReduce items are rows (c0 = 0, n = C).
struct ItemStart {
  int64_t p, r, c0, n;
};
inline int64_t elementwise_chunks(const Launch& l) { return (l.C() + kChunk - 1) / kChunk; }
inline ItemStart elementwise_item(const Launch& l, int64_t chunks, int64_t item) {
  const int64_t row = item / chunks, c0 = (item % chunks) * kChunk;
  return {row / l.R(), row % l.R(), c0, std::min(kChunk, l.C() - c0)};
}
inline int64_t col_tiles(const Launch& l) { return (l.C() + kTile - 1) / kTile; }
inline ItemStart col_item(const Launch& l, int64_t ctiles, int64_t item) {
  const int64_t c0 = (item % ctiles) * kTile;
  return {item / ctiles, 0, c0, std::min(kTile, l.C() - c0)};
}

// Contraction items are output blocks (p, rows, columns) of up to
// kMmaRows x kMmaCols, each summed over the whole K (never split, so the
// bits do not depend on the thread count or on the blocks). A launch of at
// most kMmaSmallRows rows takes them all in one block per column block: the
// weights stream through once (one token of a decoder).
inline constexpr int64_t kMmaRows = 240;
inline constexpr int64_t kMmaCols = kTile;
inline constexpr int64_t kMmaSmallRows = 16;
// Items of at most this many rows run in the cube's own narrower blocks
// (Gemm::split_for_threads); taller ones as one block each.
inline constexpr int64_t kMmaSplitRows = 64;
// With more than one thread (Launch::item_threads), a launch of more than
// kMmaSmallRows rows is cut into a multiple of the thread count of column
// blocks of equal width (at least kMmaMinCols), where a few more blocks do
// it: a prompt's product of 768 columns would otherwise be one block of 512
// and one of 256, and one of two threads would wait a third of the product
// for the other. One thread keeps the widest blocks, which pack A fewest
// times.
inline constexpr int64_t kMmaMinCols = 128;
struct MmaBlocks {
  int64_t rows, rblocks, cols, cblocks;
};
// Row blocks are as even as a multiple of kMmaRowAlign rows allows (the
// AVX2 and AVX-512 register tiles, 6 and 8 rows, both divide it), and
// column blocks, with threads, as even as a multiple of kMmaColAlign
// columns allows, so that threads sharing the items get equal work.
inline constexpr int64_t kMmaRowAlign = 24;
inline constexpr int64_t kMmaColAlign = 32;
inline MmaBlocks mma_blocks(const Launch& l) {
  int64_t rows = std::max<int64_t>(l.R(), 1);
  if (l.R() > kMmaSmallRows) {
    const int64_t n = (l.R() + kMmaRows - 1) / kMmaRows;
    rows = ((l.R() + n - 1) / n + kMmaRowAlign - 1) / kMmaRowAlign * kMmaRowAlign;
  }
  const int64_t rblocks = (l.R() + rows - 1) / rows, C = l.C();
  const int64_t cblocks = (C + kMmaCols - 1) / kMmaCols;
  const int64_t threads = l.R() > kMmaSmallRows ? l.item_threads : 1;
  if (threads <= 1 || cblocks == 0) return {rows, rblocks, kMmaCols, cblocks};
  const int64_t others = std::max<int64_t>(l.P(), 1) * rblocks;
  int64_t n = cblocks;
  for (int64_t more = cblocks; more < cblocks + threads && more * kMmaMinCols <= C; ++more)
    if (others * more % threads == 0) {
      n = more;
      break;
    }
  const int64_t cols = std::min(kMmaCols, ((C + n - 1) / n + kMmaColAlign - 1) / kMmaColAlign * kMmaColAlign);
  return {rows, rblocks, cols, (C + cols - 1) / cols};
}
inline ItemStart mma_item(const Launch& l, const MmaBlocks& b, int64_t item, int64_t* rows) {
  const int64_t per_p = b.rblocks * b.cblocks;
  const int64_t p = item / per_p, rb = item % per_p / b.cblocks, cb = item % b.cblocks;
  const int64_t r0 = rb * b.rows, c0 = cb * b.cols;
  *rows = std::min(b.rows, l.R() - r0);
  return {p, r0, c0, std::min(b.cols, l.C() - c0)};
}

}  // namespace dvm::vm
