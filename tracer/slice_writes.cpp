// Ops that write into slices of a dvm-owned buffer (Node::target): cat,
// stack and KVCache::append. Each piece is a write node, a kernel that
// stores its values into its slice; the result is a view of the buffer
// that reads the last write, and each write's order-only input is the one
// before it, so the view runs after all of them.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "dvm/error.h"
#include "dvm/tensor.h"
#include "tracer/capture.h"
#include "tracer/host_values.h"
#include "tracer/node.h"
#include "tracer/operands.h"
#include "tracer/row_copies.h"
#include "tracer/shape_rules.h"

namespace dvm {

using detail::Node;
using detail::NodeKind;
using detail::OpKind;
using detail::Storage;

namespace {

std::string str(int64_t v) { return std::to_string(v); }

// Records a write of src, converted to dtype, into buf at element `offset`
// with the buffer's `strides`, after `prev` (the last write into buf, or
// undefined); `disjoint`: it overlaps none of the writes before it.
Tensor write(Node* src, Storage* buf, Dtype dtype, int64_t offset, const int64_t* strides, const Tensor& prev,
             bool disjoint) {
  Node* n = detail::new_node(NodeKind::Copy, OpKind::None, dtype, src->shape);
  n->disjoint_write = disjoint;
  detail::set_input(n, 0, src);
  if (prev.defined()) detail::set_input(n, 1, prev.node());
  buf->retain();
  n->target = buf;
  n->offset = offset;
  std::copy(strides, strides + src->shape.rank(), n->strides);
  return detail::record(n);
}

// A view of buf's first elements (shape, with the buffer's strides) that
// reads the last write into it.
Tensor view_of_buffer(const Tensor& last, Storage* buf, const Shape& shape, const int64_t* strides) {
  Node* w = last.node();
  Node* v = detail::new_node(NodeKind::View, OpKind::None, w->dtype, shape);
  std::copy(strides, strides + shape.rank(), v->strides);
  if (w->storage) {  // the write has run (a flush came between): a plain view
    buf->retain();
    v->storage = buf;
    v->offset = 0;
    return Tensor(v);
  }
  // A pending view's offset is relative to its input's; the write's is its
  // slice's offset in the buffer (resolve_view adds it back).
  v->offset = -w->offset;
  detail::set_input(v, 0, w);
  return detail::record(v);
}

// A graph cannot write into buffers yet: refused when recorded, before a
// buffer is allocated at the capture's sizes (numbers above 40000 per symbol).
void refuse_in_capture(const char* op) {
  if (const detail::CaptureHooks* g = detail::capture()) [[unlikely]]
    throw Error(std::string(op) + ": in a " + g->what() +
                ": writes into a buffer (cat, stack, KVCache::append) are not supported in a graph yet");
}

}  // namespace

namespace {
// cat, for `op` (cat or stack) in the error of a buffer it cannot allocate.
// An undefined piece of a list, named by its position.
void need_defined_pieces(const char* op, const std::vector<Tensor>& tensors) {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (!tensors[i].defined())
      throw Error(std::string(op) + ": tensor " + std::to_string(i) + " of the list is undefined (default-constructed)");
}

Tensor cat_for(const char* op, const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw Error("cat: expected a non-empty list of tensors");
  need_defined_pieces("cat", tensors);
  std::vector<Node*> in;
  in.reserve(tensors.size());
  for (const Tensor& t : tensors) in.push_back(detail::need(t, "cat"));
  const Shape& first = in[0]->shape;
  const int rank = first.rank();
  if (rank == 0) throw Error("cat: zero-dimensional tensor " + detail::describe(in[0]) + " cannot be concatenated");
  axis = detail::normalize_axis("cat", axis, rank, first);
  Dtype dtype = in[0]->dtype;
  Shape out = first;
  out[axis] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& s = in[i]->shape;
    bool fits = s.rank() == rank;
    for (int k = 0; k < rank && fits; ++k) fits = k == axis || s[k] == first[k];
    if (!fits)
      throw Error("cat: tensor " + str(static_cast<int64_t>(i)) + " " + detail::describe(in[i]) +
                  " does not match tensor 0 " + detail::describe(in[0]) + " (expected rank " + str(rank) +
                  " and the same extents except along axis " + str(axis) + ")");
    out[axis] += s[axis];
    dtype = promote_types(dtype, in[i]->dtype);
  }
  detail::check_extents("cat", out);
  if (in.size() == 1) return tensors[0].to(dtype);
  refuse_in_capture(op);
  int64_t strides[kMaxRank];
  detail::contiguous_strides(out, strides);
  Storage* buf = detail::allocate_result(op, out, dtype);
  Tensor last;
  try {
    int64_t at = 0;
    for (Node* x : in) {
      if (x->shape.numel() > 0) last = write(x, buf, dtype, at * strides[axis], strides, last, true);
      at += x->shape[axis];
    }
  } catch (...) {
    buf->release();
    throw;
  }
  if (!last.defined()) {  // nothing to write: no elements
    buf->release();
    return Tensor::full(out, 0.0, dtype);
  }
  Tensor r = view_of_buffer(last, buf, out, strides);
  buf->release();
  return r;
}
}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int axis) { return cat_for("cat", tensors, axis); }

Tensor stack(const std::vector<Tensor>& tensors, int axis) {
  if (tensors.empty()) throw Error("stack: expected a non-empty list of tensors");
  need_defined_pieces("stack", tensors);
  const Shape& first = detail::need(tensors[0], "stack")->shape;
  if (first.rank() >= kMaxRank)
    throw Error("stack: tensors of shape " + first.to_string() + " already have the most axes dvm supports (" +
                str(static_cast<int64_t>(kMaxRank)) + "); stacking adds one");
  axis = detail::normalize_axis("stack", axis, first.rank() + 1, first, true);
  std::vector<Tensor> pieces;
  pieces.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Node* x = detail::need(tensors[i], "stack");
    if (!(x->shape == first))
      throw Error("stack: tensor " + str(static_cast<int64_t>(i)) + " " + detail::describe(x) +
                  " does not match tensor 0 " + detail::describe(tensors[0].node()) + " (expected equal shapes)");
    pieces.push_back(tensors[i].unsqueeze(axis));
  }
  return cat_for("stack", pieces, axis);
}

// ---- KVCache --------------------------------------------------------------------

KVCache::KVCache(Shape capacity_shape, int axis, Dtype dtype) : shape_(capacity_shape), dtype_(dtype) {
  if (shape_.rank() == 0) throw Error("KVCache: the capacity shape " + shape_.to_string() + " has no axis to grow along");
  axis_ = detail::normalize_axis("KVCache", axis, shape_.rank(), shape_);
  for (int k = 0; k < shape_.rank(); ++k)
    if (shape_[k] < 0) throw Error("KVCache: negative extent in the capacity shape " + shape_.to_string());
  detail::check_extents("KVCache", shape_);
  detail::check_dtype("KVCache", dtype_);
}

KVCache::~KVCache() {
  if (buffer_) buffer_->release();
}

KVCache::KVCache(KVCache&& o) noexcept
    : buffer_(std::exchange(o.buffer_, nullptr)),
      shape_(o.shape_),
      axis_(o.axis_),
      dtype_(o.dtype_),
      size_(std::exchange(o.size_, 0)),
      last_write_(std::move(o.last_write_)),
      values_(std::move(o.values_)) {}

KVCache& KVCache::operator=(KVCache&& o) noexcept {
  if (this != &o) {
    if (buffer_) buffer_->release();
    buffer_ = std::exchange(o.buffer_, nullptr);
    shape_ = o.shape_;
    axis_ = o.axis_;
    dtype_ = o.dtype_;
    size_ = std::exchange(o.size_, 0);
    last_write_ = std::move(o.last_write_);
    values_ = std::move(o.values_);
  }
  return *this;
}

Tensor KVCache::append(const Tensor& rows) {
  Node* x = detail::need(rows, "KVCache::append");
  // First: in a capture the rows' extents are the numbers symbols stand for,
  // which no capacity check should judge.
  refuse_in_capture("KVCache::append");
  const Shape& s = x->shape;
  bool fits = s.rank() == shape_.rank();
  for (int k = 0; k < shape_.rank() && fits; ++k) fits = k == axis_ || s[k] == shape_[k];
  if (!fits)
    throw Error("KVCache::append: rows " + detail::describe(x) + " do not fit the cache " + dtype_name(dtype_) +
                shape_.to_string() + " (expected rank " + str(shape_.rank()) + " and the same extents except along axis " +
                str(axis_) + ")");
  if (s[axis_] > capacity() - size_)
    throw Error("KVCache::append: " + str(s[axis_]) + " rows " + detail::describe(x) + " do not fit: the cache holds " +
                str(size_) + " of its capacity " + str(capacity()) + " along axis " + str(axis_));
  if (last_write_.defined() && last_write_.node()->failed)
    throw Error("KVCache::append: the flush that should have written earlier rows failed (" +
                detail::failure_message(last_write_.node()) + "); clear() the cache");
  // The new write follows the last one: pending on another thread, that
  // one cannot be ordered before it (the rows it writes would be read unwritten).
  if (last_write_.defined()) (void)detail::need(last_write_, "KVCache::append");
  if (s[axis_] == 0) return values();
  if (!buffer_) buffer_ = detail::allocate_result("KVCache::append", shape_, dtype_);
  int64_t strides[kMaxRank];
  detail::contiguous_strides(shape_, strides);
  last_write_ = write(x, buffer_, dtype_, size_ * strides[axis_], strides, last_write_, false);
  size_ += s[axis_];
  Shape now = shape_;
  now[axis_] = size_;
  values_ = view_of_buffer(last_write_, buffer_, now, strides);
  return values_;
}

Tensor KVCache::values() const {
  if (last_write_.defined() && last_write_.node()->failed)
    throw Error("KVCache::values: the flush that should have written its rows failed (" +
                detail::failure_message(last_write_.node()) + "); clear() the cache");
  if (values_.defined()) return values_;
  Shape empty = shape_;
  empty[axis_] = 0;
  return Tensor::full(empty, 0.0, dtype_);
}

void KVCache::clear() {
  size_ = 0;
  last_write_ = Tensor();
  values_ = Tensor();
  // Rows an earlier result can still see (or a pending write will write)
  // must not be written over: start in a new buffer then.
  if (buffer_ && buffer_->refs.load(std::memory_order_acquire) > 1) {
    buffer_->release();
    buffer_ = nullptr;
  } else if (buffer_) {
    // Its rows will change: row-major copies of them would go stale.
    detail::free_row_copies(buffer_);
  }
}

}  // namespace dvm
