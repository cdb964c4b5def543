// Schedule: work items per form and the split rules.
#include "vm/schedule.h"

#include <algorithm>

namespace dvm::vm {

int64_t work_items(const Kernel& k, const Launch& l) {
  switch (k.form()) {
    case Form::Elementwise:
      return l.C == 0 ? 0 : l.P * l.R * elementwise_chunks(l);
    case Form::RowReduce:
      return l.P * l.R;
    case Form::ColReduce:
      return l.P * col_tiles(l);
  }
  return 0;
}

int64_t item_elements(const Kernel& k, const Launch& l) {
  switch (k.form()) {
    case Form::Elementwise: return std::min(l.C, kChunk);
    case Form::RowReduce: return l.C * (k.verified().max_level + 1);
    case Form::ColReduce: return std::min(l.C, kTile) * std::max<int64_t>(l.R, 1);
  }
  return 1;
}

ColSplit col_split(const Kernel& k, const Launch& l) {
  ColSplit s;
  s.P = l.P;
  s.C = l.C;
  s.ctiles = col_tiles(l);
  s.items = l.P * s.ctiles;
  // About kRowChunk floats of one column tile per chunk: a shape-only rule.
  s.rows = std::max<int64_t>(1, kRowChunk / std::min(std::max<int64_t>(l.C, 1), kTile));
  s.chunks = (l.R + s.rows - 1) / s.rows;
  s.nred = static_cast<size_t>(k.verified().last_reduce - k.verified().first_reduce + 1);
  return s;
}

bool splits_rows(const Kernel& k, const Launch& l) {
  if (k.form() == Form::ColReduce) {
    const ColSplit s = col_split(k, l);
    return l.C >= kSplitColsMin && l.R > 2 * s.rows &&
           l.R * std::min(l.C, kTile) > kSplitRowMin;
  }
  return k.form() == Form::RowReduce && l.C > kSplitRowMin && l.P * l.R < kSplitRowsBelow;
}

}  // namespace dvm::vm
