// Ops that read elements at data-dependent positions: index_select,
// embedding and gather, as torch's. They copy on the host when recorded:
// the indices and the source are computed first (a flush, if either is
// pending), every index is checked against its extent (an out-of-range one
// is a dvm::Error naming the op, the index and the extent), and the result
// is a new tensor that later ops read like any other.
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "dvm/tensor.h"
#include "tracer/host_values.h"
#include "tracer/operands.h"
#include "tracer/shape_rules.h"
#include "tracer/trace.h"

namespace dvm {

using detail::Node;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

void need_index_type(const Node* n, const char* op) {
  if (n->dtype != Dtype::I64 && n->dtype != Dtype::I32)
    throw Error(std::string(op) + ": index " + detail::describe(n) + " must be int64 or int32");
}

// The values of an int32 or int64 index tensor, once computed.
std::vector<int64_t> index_values(const Tensor& index, const char* op) {
  Node* n = detail::need(index, op);
  need_index_type(n, op);
  detail::materialize(n);
  std::vector<int64_t> v;
  try {
    v.resize(static_cast<size_t>(n->shape.numel()));
    if (n->dtype == Dtype::I64) {
      detail::copy_values(n, v.data());
    } else {
      std::vector<int32_t> w(v.size());
      detail::copy_values(n, w.data());
      for (size_t i = 0; i < w.size(); ++i) v[i] = w[i];
    }
  } catch (const std::bad_alloc&) {
    throw Error("out of memory: " + std::string(op) + " reads the values of index " + detail::describe(n) +
                " into host memory (8 bytes each)");
  }
  return v;
}

// A bool result copied from a buffer holds 0 or 1 (a bool buffer of the
// user's may hold any nonzero byte for true: docs/DTYPES.md).
void canonical_bools(const Tensor& y) {
  if (y.dtype() == Dtype::Bool) detail::canonical_bools(static_cast<uint8_t*>(y.node()->storage->data), y.numel());
}

[[noreturn]] void out_of_range(const char* op, int64_t value, int64_t position, int axis, const Node* x) {
  throw Error(std::string(op) + ": index " + str(value) + " at position " + str(position) +
              " is out of range for axis " + str(axis) + " of " + detail::describe(x) + " (expected 0 <= index < " +
              str(x->shape[axis]) + ")");
}

// x, computed, with a buffer to read (a constant gets one of its own).
Node* source(const Tensor& x, const char* op, Tensor* keep) {
  Node* n = detail::need(x, op);
  detail::materialize(n);
  if (n->storage) return n;
  *keep = detail::new_leaf(n->shape, op, n->dtype);  // a constant, written out
  detail::copy_values(n, keep->node()->storage->data);
  return keep->node();
}

// The result's buffer, made before the indices are read into host memory:
// a result past the memory limit is refused before that copy is made.
Tensor result_leaf(const Shape& out, const char* op, Dtype t) { return detail::new_leaf(out, op, t); }

// y[o, j, i] = x[o, index[j], i] over x's axes before, at and after axis,
// reading x through its strides; y has x's shape with index.size() along axis.
Tensor select_rows(Node* x, int axis, const std::vector<int64_t>& index, Tensor y) {
  const Shape& out = y.shape();
  const size_t es = dtype_size(x->dtype);
  const int rank = x->shape.rank();
  const char* base = static_cast<const char*>(x->storage->at(x->offset));
  char* o = static_cast<char*>(y.node()->storage->data);
  const int64_t count = out.numel();
  // The innermost axis is copied as one run when x's elements along it are
  // contiguous.
  const int last = rank - 1;
  const bool run = last != axis && x->strides[last] == 1;
  const int64_t step = run ? out[last] : 1;
  int64_t idx[kMaxRank] = {};
  for (int64_t i = 0; i < count; i += step) {
    int64_t off = 0;
    for (int k = 0; k < rank; ++k) off += (k == axis ? index[static_cast<size_t>(idx[k])] : idx[k]) * x->strides[k];
    std::memcpy(o + static_cast<size_t>(i) * es, base + off * static_cast<int64_t>(es), es * static_cast<size_t>(step));
    for (int k = run ? last - 1 : last; k >= 0; --k) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
  canonical_bools(y);
  return y;
}

}  // namespace

Tensor index_select(const Tensor& x, int axis, const Tensor& index) {
  const char* op = "index_select";
  Node* xn = detail::need(x, op);
  Node* in = detail::need(index, op);
  if (in->shape.rank() > 1)
    throw Error(std::string(op) + ": index " + detail::describe(in) + " must be 1-D (or 0-d)");
  const int rank = xn->shape.rank();
  axis = detail::normalize_axis(op, axis, rank, xn->shape, true);
  need_index_type(in, op);
  Shape out = xn->shape;
  if (rank > 0) out[axis] = in->shape.numel();
  const Tensor y = rank > 0 ? result_leaf(out, op, xn->dtype) : Tensor();
  const std::vector<int64_t> v = index_values(index, op);
  Tensor keep;
  Node* src = source(x, op, &keep);
  if (rank == 0) {  // torch: a 0-d x takes one index, 0, and gives x (0-d)
    if (v.size() != 1)
      throw Error(std::string(op) + ": index " + detail::describe(in) + " holds " + str(static_cast<int64_t>(v.size())) +
                  " values for " + detail::describe(src) + " (expected exactly one, 0, for a 0-d tensor, as torch)");
    if (v[0] != 0)
      throw Error(std::string(op) + ": index " + str(v[0]) + " at position 0 is out of range for " +
                  detail::describe(src) + " (expected 0)");
    return x.contiguous();
  }
  for (size_t j = 0; j < v.size(); ++j)
    if (v[j] < 0 || v[j] >= src->shape[axis]) out_of_range(op, v[j], static_cast<int64_t>(j), axis, src);
  return select_rows(src, axis, v, y);
}

Tensor embedding(const Tensor& ids, const Tensor& weight) {
  const char* op = "embedding";
  Node* w = detail::need(weight, op);
  Node* in = detail::need(ids, op);
  if (w->shape.rank() != 2)
    throw Error(std::string(op) + ": weight " + detail::describe(w) + " must be 2-D [num_embeddings, embedding_dim]");
  if (in->dtype != Dtype::I64 && in->dtype != Dtype::I32)
    throw Error(std::string(op) + ": ids " + detail::describe(in) + " must be int64 or int32");
  if (in->shape.rank() >= kMaxRank)
    throw Error(std::string(op) + ": ids " + detail::describe(in) + " already have the most axes dvm supports (" +
                str(kMaxRank) + "); embedding adds one");
  Shape out = in->shape;
  out.push_back(w->shape[1]);
  const Tensor rows = result_leaf(Shape{in->shape.numel(), w->shape[1]}, op, w->dtype);
  const Tensor flat = in->shape.rank() == 1 ? ids : ids.reshape(Shape{in->shape.numel()});
  const std::vector<int64_t> v = index_values(flat, op);
  Tensor keep;
  Node* src = source(weight, op, &keep);
  for (size_t j = 0; j < v.size(); ++j)
    if (v[j] < 0 || v[j] >= src->shape[0]) out_of_range(op, v[j], static_cast<int64_t>(j), 0, src);
  select_rows(src, 0, v, rows);
  return out == rows.shape() ? rows : rows.reshape(out);
}

Tensor gather(const Tensor& x, int axis, const Tensor& index) {
  const char* op = "gather";
  Node* xn = detail::need(x, op);
  Node* in = detail::need(index, op);
  const int rank = xn->shape.rank();
  axis = detail::normalize_axis(op, axis, rank, xn->shape, true);
  const Shape& is = in->shape;
  bool fits = is.rank() == rank || (rank == 0 && is.rank() <= 1);
  for (int k = 0; k < is.rank() && fits && rank > 0; ++k) fits = k == axis || is[k] <= xn->shape[k];
  if (!fits)
    throw Error(std::string(op) + ": index " + detail::describe(in) + " does not fit " + detail::describe(xn) +
                " along axis " + str(axis) + " (expected the same rank and index extents no larger than the input's, except along axis)");
  need_index_type(in, op);
  Tensor y = result_leaf(is, op, xn->dtype);
  const std::vector<int64_t> v = index_values(index, op);
  Tensor keep;
  Node* src = source(x, op, &keep);
  const int64_t extent = rank == 0 ? 1 : src->shape[axis];
  for (size_t j = 0; j < v.size(); ++j)
    if (v[j] < 0 || v[j] >= extent) {
      if (rank == 0)
        throw Error(std::string(op) + ": index " + str(v[j]) + " at position " + str(static_cast<int64_t>(j)) +
                    " is out of range for " + detail::describe(src) + " (expected 0)");
      out_of_range(op, v[j], static_cast<int64_t>(j), axis, src);
    }
  const size_t es = dtype_size(src->dtype);
  const char* base = static_cast<const char*>(src->storage->at(src->offset));
  char* o = static_cast<char*>(y.node()->storage->data);
  int64_t idx[kMaxRank] = {};
  for (size_t i = 0; i < v.size(); ++i) {
    int64_t off = 0;
    for (int k = 0; k < rank; ++k) off += (k == axis ? v[i] : idx[k]) * src->strides[k];
    std::memcpy(o + i * es, base + off * static_cast<int64_t>(es), es);
    for (int k = is.rank() - 1; k >= 0; --k) {
      if (++idx[k] < is[k]) break;
      idx[k] = 0;
    }
  }
  canonical_bools(y);
  return y;
}

}  // namespace dvm
