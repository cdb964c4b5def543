// Shape rules of the tracer's ops: broadcasting, axis normalisation, view
// arithmetic. Each throws dvm::Error naming the op and the shapes.
#pragma once

#include <string>
#include <vector>

#include "dvm/shape.h"

namespace dvm::detail {

// Whether every extent is >= 0 and the product of the extents (size-0
// extents counted as 1) is at most kMaxElements: then the element count and
// every contiguous stride fit in int64.
bool extents_fit(const Shape& s);
// Throws dvm::Error naming op and s (with context appended after the shape)
// unless extents_fit(s).
void check_extents(const char* op, const Shape& s, const std::string& context = "");
// numpy broadcasting of two shapes.
Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b);
// Whether a and b broadcast (each pair of aligned extents equal, or one 1),
// whatever the size of the result.
bool broadcastable(const Shape& a, const Shape& b);
// Axis in [-rank, rank) to [0, rank). With scalar_ok a 0-d tensor takes axis
// 0 or -1 as torch does (it wraps axes as a shape [1] would) and gets 0.
int normalize_axis(const char* op, int axis, int rank, const Shape& shape, bool scalar_ok = false);
// Sorted, unique, normalized axes; an empty list means every axis. A 0-d
// tensor accepts axis 0 or -1 (not both) and has no axes to reduce.
std::vector<int> normalize_axes(const char* op, const std::vector<int>& axes, const Shape& shape);
// Resolves one -1 extent and checks the element count and check_extents.
Shape infer_reshape(const char* op, const Shape& from, const Shape& to);
// Strides that view `from` (with its strides) as `to` without copying, or
// false when the layout does not allow it.
bool reshape_strides(const Shape& from, const int64_t* from_strides, const Shape& to,
                     int64_t* to_strides);

}  // namespace dvm::detail
