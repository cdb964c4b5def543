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

// Calls f(v, count) with the values of an int32 or int64 index tensor, once
// computed, as `const int32_t*` or `const int64_t*`: read where its buffer
// holds them in order, else copied into host memory first.
template <class F>
void with_index_values(const Tensor& index, const char* op, F&& f) {
  Node* n = detail::need(index, op);
  need_index_type(n, op);
  detail::materialize(n);
  const size_t count = static_cast<size_t>(n->shape.numel());
  const bool wide = n->dtype == Dtype::I64;
  if (n->storage && n->is_contiguous()) {
    const void* p = n->storage->at(n->offset);
    if (wide) f(static_cast<const int64_t*>(p), count);
    else f(static_cast<const int32_t*>(p), count);
    return;
  }
  auto copied = [&](auto zero) {
    std::vector<decltype(zero)> v;
    try {
      v.resize(count);
    } catch (const std::bad_alloc&) {
      throw Error("out of memory: " + std::string(op) + " reads the values of index " + detail::describe(n) +
                  " into host memory (" + std::to_string(sizeof zero) + " bytes each)");
    }
    detail::copy_values(n, v.data());
    f(static_cast<const decltype(zero)*>(v.data()), count);
  };
  if (wide) copied(int64_t{0});
  else copied(int32_t{0});
}

// The position of the first index outside [0, extent), or count. The scan
// for any is branch-free (it vectorizes); only a failing one looks for which.
template <class T>
size_t first_out_of_range(const T* v, size_t count, int64_t extent) {
  const auto outside = [extent](T e) { return static_cast<uint64_t>(static_cast<int64_t>(e)) >= static_cast<uint64_t>(extent); };
  bool any = false;
  for (size_t j = 0; j < count; ++j) any |= outside(v[j]);
  if (!any) return count;
  size_t j = 0;
  while (!outside(v[j])) ++j;
  return j;
}

// Copies one element of `bytes` bytes; a fixed size is a load and a store.
template <size_t kBytes>
inline void copy_element(char* dst, const char* src) {
  std::memcpy(dst, src, kBytes);
}

// Calls f with copy_element<n> for an element size n (1, 2, 4 or 8).
template <class F>
void with_element_size(size_t es, F&& f) {
  switch (es) {
    case 1: return f(copy_element<1>);
    case 2: return f(copy_element<2>);
    case 4: return f(copy_element<4>);
    default: return f(copy_element<8>);
  }
}

// Copies a run of `bytes` bytes; the short runs of narrow rows (an
// embedding's) in 16- and 4-byte pieces instead of a call to memcpy.
inline void copy_run(char* dst, const char* src, size_t bytes) {
  if (bytes > 64) {
    std::memcpy(dst, src, bytes);
    return;
  }
  size_t i = 0;
  for (; i + 16 <= bytes; i += 16) std::memcpy(dst + i, src + i, 16);
  for (; i + 4 <= bytes; i += 4) std::memcpy(dst + i, src + i, 4);
  for (; i < bytes; ++i) dst[i] = src[i];
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
// Copies runs of `step` elements (whole innermost rows, or single elements).
template <class T, class Copy>
void select_loop(const Node* x, int axis, const T* index, const Shape& out, char* o, int64_t step, Copy copy) {
  const size_t es = dtype_size(x->dtype);
  const int rank = x->shape.rank();
  const char* base = static_cast<const char*>(x->storage->at(x->offset));
  const int64_t count = out.numel();
  const int inner = step > 1 ? rank - 2 : rank - 1;  // the innermost axis the loop steps
  int64_t idx[kMaxRank] = {};
  for (int64_t i = 0; i < count; i += step) {
    int64_t off = 0;
    for (int k = 0; k < rank; ++k)
      off += (k == axis ? static_cast<int64_t>(index[idx[k]]) : idx[k]) * x->strides[k];
    copy(o + static_cast<size_t>(i) * es, base + off * static_cast<int64_t>(es));
    for (int k = inner; k >= 0; --k) {
      if (++idx[k] < out[k]) break;
      idx[k] = 0;
    }
  }
}

template <class T>
Tensor select_rows(Node* x, int axis, const T* index, Tensor y) {
  const Shape& out = y.shape();
  const int rank = x->shape.rank();
  const size_t es = dtype_size(x->dtype);
  char* o = static_cast<char*>(y.node()->storage->data);
  // The elements after `axis` of one selected index, and whether x holds
  // them as one contiguous run (an embedding's rows).
  int64_t inner = 1;
  bool run = true;
  for (int k = rank - 1; k > axis; --k) {
    if (out[k] != 1 && x->strides[k] != inner) run = false;
    inner *= out[k];
  }
  if (run && inner > 1) {
    const char* base = static_cast<const char*>(x->storage->at(x->offset));
    const size_t bytes = es * static_cast<size_t>(inner);
    const int64_t along = x->strides[axis] * static_cast<int64_t>(es);
    int64_t outer = 1;
    for (int k = 0; k < axis; ++k) outer *= out[k];
    int64_t idx[kMaxRank] = {};
    for (int64_t i = 0; i < outer; ++i) {
      int64_t off = 0;
      for (int k = 0; k < axis; ++k) off += idx[k] * x->strides[k];
      const char* from = base + off * static_cast<int64_t>(es);
      for (int64_t j = 0; j < out[axis]; ++j, o += bytes) copy_run(o, from + static_cast<int64_t>(index[j]) * along, bytes);
      for (int k = axis - 1; k >= 0; --k) {
        if (++idx[k] < out[k]) break;
        idx[k] = 0;
      }
    }
  } else if (const int last = rank - 1; last != axis && x->strides[last] == 1 && out[last] > 1) {
    // The innermost axis is copied as one run when x's elements along it are
    // contiguous.
    const size_t bytes = es * static_cast<size_t>(out[last]);
    select_loop(x, axis, index, out, o, out[last], [bytes](char* d, const char* s) { copy_run(d, s, bytes); });
  } else {
    with_element_size(es, [&](auto copy) { select_loop(x, axis, index, out, o, 1, copy); });
  }
  canonical_bools(y);
  return y;
}

// y[i] = x[i with index[i] along axis], for every position i of the index
// (whose rank is x's, or x is 0-d and every index is 0).
template <class T, class Copy>
void gather_loop(const Node* src, int axis, const Shape& is, const T* v, char* o, Copy copy) {
  const int64_t es = static_cast<int64_t>(dtype_size(src->dtype));
  const char* base = static_cast<const char*>(src->storage->at(src->offset));
  const int64_t count = is.numel();
  const int rank = src->shape.rank();
  if (rank == 0) {
    for (int64_t i = 0; i < count; ++i) copy(o + i * es, base);
    return;
  }
  if (count == 0) return;
  const int last = rank - 1;
  const int64_t cols = is[last];
  const int64_t along = src->strides[axis] * es, across = src->strides[last] * es;
  int64_t idx[kMaxRank] = {};
  for (int64_t i = 0; i < count; i += cols) {
    int64_t row = 0;
    for (int k = 0; k < last; ++k)
      if (k != axis) row += idx[k] * src->strides[k];
    const char* r = base + row * es;
    const T* vi = v + i;
    char* oi = o + i * es;
    if (axis == last) {
      for (int64_t j = 0; j < cols; ++j) copy(oi + j * es, r + static_cast<int64_t>(vi[j]) * along);
    } else {
      for (int64_t j = 0; j < cols; ++j) copy(oi + j * es, r + j * across + static_cast<int64_t>(vi[j]) * along);
    }
    for (int k = last - 1; k >= 0; --k) {
      if (++idx[k] < is[k]) break;
      idx[k] = 0;
    }
  }
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
  Tensor result;
  with_index_values(index, op, [&](const auto* v, size_t count) {
    Tensor keep;
    Node* src = source(x, op, &keep);
    if (rank == 0) {  // torch: a 0-d x takes one index, 0, and gives x (0-d)
      if (count != 1)
        throw Error(std::string(op) + ": index " + detail::describe(in) + " holds " + str(static_cast<int64_t>(count)) +
                    " values for " + detail::describe(src) + " (expected exactly one, 0, for a 0-d tensor, as torch)");
      if (v[0] != 0)
        throw Error(std::string(op) + ": index " + str(v[0]) + " at position 0 is out of range for " +
                    detail::describe(src) + " (expected 0)");
      result = x.contiguous();
      return;
    }
    if (const size_t j = first_out_of_range(v, count, src->shape[axis]); j < count)
      out_of_range(op, v[j], static_cast<int64_t>(j), axis, src);
    result = select_rows(src, axis, v, y);
  });
  return result;
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
  with_index_values(flat, op, [&](const auto* v, size_t count) {
    Tensor keep;
    Node* src = source(weight, op, &keep);
    if (const size_t j = first_out_of_range(v, count, src->shape[0]); j < count)
      out_of_range(op, v[j], static_cast<int64_t>(j), 0, src);
    select_rows(src, 0, v, rows);
  });
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
  with_index_values(index, op, [&](const auto* v, size_t count) {
    Tensor keep;
    Node* src = source(x, op, &keep);
    const int64_t extent = rank == 0 ? 1 : src->shape[axis];
    if (const size_t j = first_out_of_range(v, count, extent); j < count) {
      if (rank == 0)
        throw Error(std::string(op) + ": index " + str(v[j]) + " at position " + str(static_cast<int64_t>(j)) +
                    " is out of range for " + detail::describe(src) + " (expected 0)");
      out_of_range(op, v[j], static_cast<int64_t>(j), axis, src);
    }
    char* o = static_cast<char*>(y.node()->storage->data);
    with_element_size(dtype_size(src->dtype), [&](auto copy) { gather_loop(src, axis, is, v, o, copy); });
  });
  canonical_bools(y);
  return y;
}

}  // namespace dvm
