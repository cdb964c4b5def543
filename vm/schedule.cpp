// Schedule: work items per form and the split rules.
#include "vm/schedule.h"

#include <algorithm>

#include "vm/forms.h"

namespace dvm::vm {

int64_t elementwise_work_items(const Kernel&, const Launch& l) {
  return l.C() == 0 ? 0 : l.P() * l.R() * elementwise_chunks(l);
}
int64_t elementwise_item_elements(const Kernel&, const Launch& l) { return std::min(l.C(), kChunk); }

int64_t row_reduce_work_items(const Kernel&, const Launch& l) { return l.P() * l.R(); }
int64_t row_reduce_item_elements(const Kernel& k, const Launch& l) {
  return l.C() * (k.verified().max_level + 1);
}
bool row_reduce_splits(const Kernel&, const Launch& l) {
  return l.C() > kSplitRowMin && l.P() * l.R() < kSplitRowsBelow;
}

int64_t col_reduce_work_items(const Kernel&, const Launch& l) { return l.P() * col_tiles(l); }

int64_t contraction_work_items(const Kernel&, const Launch& l) {
  if (l.R() == 0 || l.C() == 0) return 0;
  const MmaBlocks b = mma_blocks(l);
  return l.P() * b.rblocks * b.cblocks;
}
int64_t contraction_item_elements(const Kernel&, const Launch& l) {
  // Floats read and written by one block: its output and its two panels.
  const MmaBlocks b = mma_blocks(l);
  const int64_t rows = std::min(b.rows, l.R()), cols = std::min(b.cols, l.C());
  return rows * cols + (rows + cols) * std::max<int64_t>(l.K(), 0);
}
int64_t col_reduce_item_elements(const Kernel&, const Launch& l) {
  return std::min(l.C(), kTile) * std::max<int64_t>(l.R(), 1);
}
bool col_reduce_splits(const Kernel& k, const Launch& l) {
  const ColSplit s = col_split(k, l);
  if (l.R() <= 2 * s.rows) return false;
  return l.C() < kSplitColsMin || l.R() * std::min(l.C(), kTile) > kSplitRowMin;
}

int64_t work_items(const Kernel& k, const Launch& l) { return form_row(k.form()).work_items(k, l); }
int64_t item_elements(const Kernel& k, const Launch& l) { return form_row(k.form()).item_elements(k, l); }
bool splits_rows(const Kernel& k, const Launch& l) {
  const FormRow& row = form_row(k.form());
  // Split launches keep partial results in f32 buffers: kernels with int64
  // lanes run their rows whole.
  return row.splits && !k.verified().int64_lanes && row.splits(k, l);
}

ColSplit col_split(const Kernel& k, const Launch& l) {
  ColSplit s;
  s.P = l.P();
  s.C = l.C();
  s.ctiles = col_tiles(l);
  s.items = l.P() * s.ctiles;
  // About kRowChunk floats of one column tile per chunk: a shape-only rule.
  s.rows = std::clamp<int64_t>(kRowChunk / std::min(std::max<int64_t>(l.C(), 1), kTile), 1, kColChunkRowsMax);
  s.chunks = (l.R() + s.rows - 1) / s.rows;
  s.nred = static_cast<size_t>(k.verified().last_reduce - k.verified().first_reduce + 1);
  return s;
}

}  // namespace dvm::vm
