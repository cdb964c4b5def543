// Shape rules of the tracer's ops: broadcasting, axis normalisation, view
// arithmetic. Each throws dvm::Error naming the op and the shapes.
#pragma once

#include <string>
#include <vector>

#include "dvm/shape.h"

namespace dvm::detail {

// numpy broadcasting of two shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Axis in [-rank, rank) to [0, rank).
int normalize_axis(const char* op, int axis, int rank, const Shape& shape);
// Sorted, unique, normalized axes; an empty list means every axis.
std::vector<int> normalize_axes(const char* op, const std::vector<int>& axes, const Shape& shape);
// Resolves one -1 extent and checks the element count.
Shape infer_reshape(const char* op, const Shape& from, const Shape& to);
// Strides that view `from` (with its strides) as `to` without copying, or
// false when the layout does not allow it.
bool reshape_strides(const Shape& from, const int64_t* from_strides, const Shape& to,
                     int64_t* to_strides);

}  // namespace dvm::detail
