// Ops composed from the primitive ones (var, std, clamp, silu, masked_fill,
// tril, triu): the fuser sees only their parts, so each fuses like them.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dvm/tensor.h"
#include "tracer/operands.h"
#include "tracer/shape_rules.h"

namespace dvm {

namespace {

// t, once detail::need has checked it (for ops that hand t on).
const Tensor& checked(const Tensor& t, const char* op) {
  detail::need(t, op);
  return t;
}

std::string describe(const Tensor& t) { return detail::describe(t.node()); }

void need_floating(const Tensor& t, const char* op) {
  detail::need(t, op);
  if (!is_floating(t.dtype()))
    throw Error(std::string(op) + ": " + describe(t) + " is not of a floating type (expected float32, float16 or bfloat16)");
}

// var over normalized axes: the mean taken out first (two passes over the
// values; in one row kernel when the axes are the innermost), in float32.
Tensor variance(const Tensor& x, const std::vector<int>& axes, int64_t correction, bool keepdim, const char* op) {
  need_floating(x, op);
  const std::vector<int> norm = detail::normalize_axes(op, axes, x.shape());
  int64_t count = 1;  // (norm lists every axis for an empty list; none for a 0-d x)
  for (int a : norm) count *= x.shape()[a];
  const Tensor xf = x.dtype() == Dtype::F32 ? x : x.to(Dtype::F32);
  const Tensor d = xf - xf.mean(norm, true);
  // At or below zero degrees of freedom the divide gives inf or NaN (torch).
  const double dof = static_cast<double>(std::max<int64_t>(0, count - correction));
  return (d * d).sum(norm, keepdim) / static_cast<float>(dof);
}

}  // namespace

Tensor Tensor::var(const std::vector<int>& axes, int64_t correction, bool keepdim) const {
  const Tensor v = variance(*this, axes, correction, keepdim, "var");
  return v.dtype() == dtype() ? v : v.to(dtype());
}
Tensor Tensor::var() const { return var(std::vector<int>{}, 1, false); }

Tensor Tensor::std(const std::vector<int>& axes, int64_t correction, bool keepdim) const {
  const Tensor s = sqrt(variance(*this, axes, correction, keepdim, "std"));
  return s.dtype() == dtype() ? s : s.to(dtype());
}
Tensor Tensor::std() const { return std(std::vector<int>{}, 1, false); }

Tensor clamp(const Tensor& x, float lo, float hi) { return minimum(maximum(checked(x, "clamp"), lo), hi); }
Tensor clamp_min(const Tensor& x, float lo) { return maximum(checked(x, "clamp_min"), lo); }
Tensor clamp_max(const Tensor& x, float hi) { return minimum(checked(x, "clamp_max"), hi); }

Tensor silu(const Tensor& x) {
  need_floating(x, "silu");
  return x * sigmoid(x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  detail::need(x, "masked_fill");
  detail::need(mask, "masked_fill");
  if (mask.dtype() != Dtype::Bool)
    throw Error("masked_fill: mask " + describe(mask) + " must be bool (a comparison result such as lt(x, y))");
  bool fits = false;
  try {
    fits = detail::broadcast_shapes("masked_fill", mask.shape(), x.shape()) == x.shape();
  } catch (const Error&) {
  }
  if (!fits)
    throw Error("masked_fill: mask " + describe(mask) + " does not broadcast to the shape of " + describe(x) +
                " (expected the mask's extents to equal x's or be 1)");
  // The value in x's type (a scalar parameter for float32, so that a new
  // value compiles nothing; a 0-d tensor of the type otherwise).
  Tensor v;
  try {
    v = x.dtype() == Dtype::F32 ? Tensor(value) : Tensor::full(Shape{}, static_cast<double>(value), x.dtype());
  } catch (const Error& e) {
    throw Error("masked_fill: the value for " + describe(x) + " is out of its type's range (" + e.what() + ")");
  }
  return where(mask, v, x);
}

namespace {

// x where column - row (of its last two axes) is <= diagonal (lower) or
// >= diagonal, else 0. The indices compare in int32 lanes: exact.
Tensor triangle(const Tensor& x, int64_t diagonal, bool lower, const char* op) {
  detail::need(x, op);
  const Shape& s = x.shape();
  if (s.rank() < 2) throw Error(std::string(op) + ": " + describe(x) + " has fewer than 2 dimensions (expected a matrix or a batch of them)");
  const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  if (rows > kMax || cols > kMax)
    throw Error(std::string(op) + ": " + describe(x) + " has a matrix extent above 2^31 - 1");
  // column - row lies in [1 - rows, cols - 1]: a diagonal beyond that keeps
  // everything or nothing, and fits int32 once clamped.
  diagonal = std::clamp<int64_t>(diagonal, -rows, cols);
  const Tensor r = Tensor::arange(0.0, static_cast<double>(rows), 1.0, Dtype::I32).reshape(Shape{rows, 1});
  const Tensor c = Tensor::arange(0.0, static_cast<double>(cols), 1.0, Dtype::I32);
  const Tensor d = Tensor::full(Shape{}, static_cast<double>(diagonal), Dtype::I32);
  const Tensor keep = lower ? le(c - r, d) : ge(c - r, d);
  return where(keep, x, Tensor::full(Shape{}, 0.0, x.dtype()));
}

}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, true, "tril"); }
Tensor triu(const Tensor& x, int64_t diagonal) { return triangle(x, diagonal, false, "triu"); }

}  // namespace dvm
