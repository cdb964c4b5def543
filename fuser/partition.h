// Partition pass: groups a flushed trace into fused kernels.
//
// Elementwise ops of one shape chain into one group; a reduction joins the
// group that computes its input and turns it into a row (innermost axes) or
// column (outer axes) reduction with that prologue; ops on reduction results
// join as the epilogue; and in a row group ops on the full shape may read
// reduction results again (reduce -> broadcast back -> elementwise), which is
// how softmax and layer_norm become one multi-phase kernel. Groups merge when
// a node reads two of them and no other group sits between them. A row
// reduction's epilogue takes an op only while some split of the kept axes
// into P and R keeps every per-row operand linear (Group::row_splits); a
// group whose kernel is over the encoder's limits is split by the executor
// (split_group).
#pragma once

#include <vector>

#include "fuser/group.h"

namespace dvm::fuser {

// nodes: the pending nodes to compute, in record order (Views included; they
// join no group, and their input is stored unless the view is a product's
// operand read from its prologue in registers). Numbers them
// (Node::index = position in nodes); the plan's placement is indexed by it.
Plan partition(const std::vector<detail::Node*>& nodes);

// Splits live group gi of plan (one whose kernel is over the encoder's
// limits) into smaller groups: its members in record order cut in two,
// each half one group of the same form if it holds a reduction, otherwise
// elementwise groups over runs of one shape. Values one piece reads from
// another become outputs. Returns the new groups in execution order (gi is
// dead); a group of one member cannot be split and is returned as is.
std::vector<int> split_group(Plan& plan, int gi);

}  // namespace dvm::fuser
