// Host-side access to computed values, for the ops that read them at record
// time (tracer/index_ops.cpp).
#pragma once

#include "dvm/tensor.h"
#include "tracer/node.h"

namespace dvm::detail {

// n's values (computed, or a constant) copied densely in n's own type.
void copy_values(const Node* n, void* out);
// A new materialized leaf with a fresh contiguous buffer (op names it in errors).
Tensor new_leaf(const Shape& shape, const char* op, Dtype dtype);

}  // namespace dvm::detail
