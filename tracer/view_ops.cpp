// torch's view helpers (squeeze, unsqueeze, flatten, narrow, chunk, split),
// each built on reshape or slice: no copy until a kernel reads the view.
#include <algorithm>
#include <string>
#include <new>
#include <stdexcept>
#include <vector>

#include "dvm/tensor.h"
#include "tracer/capture.h"
#include "tracer/operands.h"
#include "tracer/shape_rules.h"

namespace dvm {

namespace {

const Shape& shape_of(const Tensor& t, const char* op) { return detail::need(t, op)->shape; }

std::string str(int64_t v) { return std::to_string(v); }

// A graph being captured keeps an axis of symbolic extent, which each run
// then checks is not 1 (where the lazy path would drop it).
void keep_axis(const Shape& s, int axis) {
  if (detail::CaptureHooks* g = detail::capture(); g && g->symbolic(s[axis])) [[unlikely]]
    g->kept_axis(s[axis], axis);
}

}  // namespace

Tensor Tensor::squeeze() const {
  const Shape& s = shape_of(*this, "squeeze");
  Shape to;
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] != 1) {
      to.push_back(s[i]);
      keep_axis(s, i);
    }
  return to == s ? *this : reshape(to);
}

Tensor Tensor::squeeze(int axis) const {
  const Shape& s = shape_of(*this, "squeeze");
  axis = detail::normalize_axis("squeeze", axis, s.rank(), s, true);
  if (s.rank() > 0 && s[axis] != 1) keep_axis(s, axis);
  if (s.rank() == 0 || s[axis] != 1) return *this;  // torch: only an extent of 1 goes
  Shape to;
  for (int i = 0; i < s.rank(); ++i)
    if (i != axis) to.push_back(s[i]);
  return reshape(to);
}

Tensor Tensor::unsqueeze(int axis) const {
  const Shape& s = shape_of(*this, "unsqueeze");
  const int rank = s.rank();
  if (axis < -rank - 1 || axis > rank)
    throw Error("unsqueeze: axis " + str(axis) + " is out of range for shape " + s.to_string() + " (expected " +
                str(-rank - 1) + " <= axis <= " + str(rank) + ")");
  if (rank == kMaxRank)
    throw Error("unsqueeze: shape " + s.to_string() + " already has the most axes dvm supports (" + str(kMaxRank) + ")");
  if (axis < 0) axis += rank + 1;
  Shape to;
  for (int i = 0; i < rank; ++i) {
    if (i == axis) to.push_back(1);
    to.push_back(s[i]);
  }
  if (axis == rank) to.push_back(1);
  return reshape(to);
}

Tensor Tensor::flatten(int start_axis, int end_axis) const {
  const Shape& s = shape_of(*this, "flatten");
  if (s.rank() == 0) {
    detail::normalize_axis("flatten", start_axis, 0, s, true);
    detail::normalize_axis("flatten", end_axis, 0, s, true);
    return reshape(Shape{1});
  }
  const int a = detail::normalize_axis("flatten", start_axis, s.rank(), s);
  const int b = detail::normalize_axis("flatten", end_axis, s.rank(), s);
  if (a > b)
    throw Error("flatten: start axis " + str(start_axis) + " comes after end axis " + str(end_axis) + " of shape " +
                s.to_string());
  Shape to;
  int64_t merged = 1;
  for (int i = 0; i < s.rank(); ++i) {
    if (i < a || i > b) {
      to.push_back(s[i]);
      continue;
    }
    merged *= s[i];  // the element count fits in int64 (Shape's extents do)
    if (i == b) to.push_back(merged);
  }
  return reshape(to);
}

Tensor Tensor::narrow(int axis, int64_t start, int64_t length) const {
  const Shape& s = shape_of(*this, "narrow");
  if (s.rank() == 0) throw Error("narrow: a 0-d tensor has no axis to narrow (expected at least one dimension)");
  axis = detail::normalize_axis("narrow", axis, s.rank(), s);
  const int64_t n = s[axis];
  // (In a graph being captured, a symbolic start or length is checked by each run.)
  const detail::CaptureHooks* g = detail::capture();
  if (start < -n || (start > n && !(g && g->symbolic(start))))
    throw Error("narrow: start " + str(start) + " is out of range for axis " + str(axis) + " of shape " +
                s.to_string() + " (expected " + str(-n) + " <= start <= " + str(n) + ")");
  if (start < 0) start += n;
  if (length < 0 || (length > n - start && !(g && (g->symbolic(length) || g->symbolic(start)))))
    throw Error("narrow: length " + str(length) + " from start " + str(start) + " does not fit axis " + str(axis) +
                " of shape " + s.to_string() + " (expected 0 <= length <= " + str(n - start) + ")");
  return slice(axis, start, start + length);
}

namespace {
// Pieces that no std::vector can hold (or no memory): a dvm::Error, not
// std::bad_alloc or std::length_error.
template <class F>
std::vector<Tensor> pieces_or_error(const char* op, const Shape& s, int64_t count, F&& make) {
  try {
    return make();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw Error("out of memory: " + std::string(op) + " of shape " + s.to_string() + " into " + str(count) +
              " pieces (each a tensor)");
}
}  // namespace

std::vector<Tensor> Tensor::chunk(int64_t chunks, int axis) const {
  const Shape& s = shape_of(*this, "chunk");
  if (s.rank() == 0) throw Error("chunk: a 0-d tensor has no axis to chunk (expected at least one dimension)");
  if (chunks <= 0) throw Error("chunk: chunks must be at least 1, got " + str(chunks) + " for shape " + s.to_string());
  axis = detail::normalize_axis("chunk", axis, s.rank(), s);
  const int64_t n = s[axis];
  // torch: an empty axis gives `chunks` empty pieces.
  if (n == 0)
    return pieces_or_error("chunk", s, chunks,
                           [&] { return split(std::vector<int64_t>(static_cast<size_t>(chunks), 0), axis); });
  return split(n / chunks + (n % chunks != 0), axis);
}

std::vector<Tensor> Tensor::split(int64_t size, int axis) const {
  const Shape& s = shape_of(*this, "split");
  if (s.rank() == 0) throw Error("split: a 0-d tensor has no axis to split (expected at least one dimension)");
  axis = detail::normalize_axis("split", axis, s.rank(), s);
  const int64_t n = s[axis];
  if (size < 0 || (size == 0 && n != 0))
    throw Error("split: size " + str(size) + " for axis " + str(axis) + " of shape " + s.to_string() +
                " (expected a positive size, or 0 for an empty axis)");
  if (n == 0) return {slice(axis, 0, 0)};
  return pieces_or_error("split", s, n / size + (n % size != 0), [&] {
    std::vector<Tensor> pieces;
    pieces.reserve(static_cast<size_t>(n / size + 1));
    for (int64_t start = 0; start < n; start += size)
      pieces.push_back(slice(axis, start, start + std::min(size, n - start)));
    return pieces;
  });
}

std::vector<Tensor> Tensor::split(const std::vector<int64_t>& sizes, int axis) const {
  const Shape& s = shape_of(*this, "split");
  if (s.rank() == 0) throw Error("split: a 0-d tensor has no axis to split (expected at least one dimension)");
  axis = detail::normalize_axis("split", axis, s.rank(), s);
  const int64_t n = s[axis];
  int64_t total = 0;
  bool ok = true;
  for (int64_t k : sizes) {
    ok = k >= 0 && k <= n - total;  // (never overflows)
    if (!ok) break;
    total += k;
  }
  if (!ok || total != n) {
    std::string list;
    for (int64_t v : sizes) list += (list.empty() ? "" : ", ") + str(v);
    throw Error("split: sizes [" + list + "] do not add up to " + str(n) + ", the extent of axis " + str(axis) +
                " of shape " + s.to_string() + " (expected non-negative sizes with that sum)");
  }
  std::vector<Tensor> pieces;
  pieces.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t k : sizes) {
    pieces.push_back(slice(axis, start, start + k));
    start += k;
  }
  return pieces;
}

}  // namespace dvm
