// Ops composed from the primitive ones (var, std, argmax, argmin, clamp,
// silu, masked_fill, tril, triu): the fuser sees only their parts, so each
// fuses like them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string_view>
#include <string>
#include <vector>

#include "dvm/tensor.h"
#include "tracer/buffer_pool.h"
#include "tracer/capture.h"
#include "tracer/operands.h"
#include "tracer/shape_rules.h"
#include "tracer/trace.h"

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
Tensor variance_of(const Tensor& x, const std::vector<int>& axes, int64_t correction, bool keepdim, const char* op) {
  const detail::RecordTogether together;  // one flush for every op below
  need_floating(x, op);
  const std::vector<int> norm = detail::normalize_axes(op, axes, x.shape());
  int64_t count = 1;  // (norm lists every axis for an empty list; none for a 0-d x)
  for (int a : norm) count *= x.shape()[a];
  if (detail::CaptureHooks* g = detail::capture(); g && g->symbolic(count)) [[unlikely]]
    throw Error(std::string(op) + ": over axes whose extents are symbols, in a " + g->what() +
                ": not supported yet (its divisor, count - correction, is not a product of extents)");
  const Tensor xf = detail::widened(x);
  // At or below zero degrees of freedom the divide gives inf or NaN (torch).
  // (In double: count - correction overflows int64 for a correction near INT64_MIN.)
  const double dof = std::max(0.0, static_cast<double>(count) - static_cast<double>(correction));
  if (count == 0) {
    const Tensor d = xf - xf.mean(norm, true);
    return (d * d).sum(norm, keepdim) / static_cast<float>(dof);
  }
  // Values all equal take that value as their mean, exactly (as layer_norm
  // does): a mean a few ulps off made 70001 copies of 0.1f a negative
  // variance, and 1e30 ones overflow d * d.
  const Tensor hi = xf.max(norm, true), lo = xf.min(norm, true);
  const Tensor d = xf - where(eq(hi, lo), hi, xf.mean(norm, true));
  const Tensor squares = (d * d).sum(norm, keepdim);
  // The corrected two-pass form: the float32 mean is off by some e, which
  // adds n * e^2 to the squares; (sum of d)^2 / n takes it back out (values
  // of mean 1e6 lost three digits without it). Rounding can take the
  // difference below zero, which a variance never is; and squares that
  // overflow give inf, not inf - inf.
  const Tensor sum = d.sum(norm, keepdim);
  const Tensor corrected = maximum(squares - sum * sum / static_cast<float>(count), 0.0f);
  const float inf = std::numeric_limits<float>::infinity();
  return where(eq(squares, inf), squares, corrected) / static_cast<float>(dof);
}

// var and std: an error of the ops it is made of (the mean's count buffer
// past the memory limit) names var or std first.
Tensor variance(const Tensor& x, const std::vector<int>& axes, int64_t correction, bool keepdim, const char* op) {
  try {
    return variance_of(x, axes, correction, keepdim, op);
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with(op)) throw;
    throw Error(std::string(op) + ": " + e.what());
  }
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

namespace {

// x defined and not bool (torch has no argmax of bool either).
void need_arg_operand(const Tensor& x, const char* op) {
  detail::need(x, op);
  if (x.dtype() == Dtype::Bool)
    throw Error(std::string(op) + ": " + describe(x) + " is bool (expected a numeric type; torch's " + op +
                " is not implemented for bool either)");
}

// argmax (largest true) or argmin of x along one axis: the first index of the
// extreme value, NaN ranking beyond every number (torch's CPU rule: the
// first NaN wins both). Composed of a max (min) reduction and a min
// reduction of indices, so with the axis innermost both are phases of one
// row kernel: the first finds the extreme m, the second the first index
// where x reaches it (along another axis: two column kernels).
// start, start + 1, ..., start + n - 1 as a tensor [n] of type t. Tensors
// are immutable, so a few of them are kept per thread: four of at most
// kCachedRange elements and one of at most kCachedLongRange (a language
// model's vocabulary past 2^16: argmax in a decode loop fills nothing on
// the host).
constexpr int64_t kCachedRange = int64_t{1} << 16;
constexpr int64_t kCachedLongRange = int64_t{1} << 18;
struct RangeEntry {
  int64_t start = 0, n = -1;
  Dtype type = Dtype::I64;
  Tensor t;
};
// Whether this thread's range cache was made and not yet destroyed.
constinit thread_local bool t_ranges_live = false;
struct RangeCache {
  std::array<RangeEntry, 5> entries;  // the last: the long one
  RangeCache() { t_ranges_live = true; }
  ~RangeCache() { t_ranges_live = false; }
};
std::array<RangeEntry, 5>& range_cache() {
  (void)detail::Trace::current();  // constructed first, so it outlives the cache at thread exit
  thread_local RangeCache cache;
  return cache.entries;
}
Tensor range_of(int64_t start, int64_t n, Dtype type) {
  // Past a memory limit the thread's kept ranges, idle ones too, may be what
  // leaves no room: they are dropped and the range made once more.
  const auto make = [&] {
    const auto arange = [&] {
      return Tensor::arange(static_cast<double>(start), static_cast<double>(start + n), 1.0, type);
    };
    try {
      return arange();
    } catch (const Error&) {
      if (!t_ranges_live || detail::pool_limit() == 0) throw;
      detail::drop_cached_ranges();
      return arange();
    }
  };
  if (n > kCachedLongRange || detail::capture()) return make();
  std::array<RangeEntry, 5>& cache = range_cache();
  thread_local size_t next = 0;
  for (RangeEntry& e : cache)
    if (e.n == n && e.start == start && e.type == type) return e.t;
  RangeEntry& e = n > kCachedRange ? cache.back() : cache[next++ % (cache.size() - 1)];
  e = {};  // a long one's memory goes back before the next is made
  e = {start, n, type, make()};
  return e.t;
}
// range_of for op: a failure (past a memory limit) names the op. The ops
// make their ranges before they record anything, so a failure records
// nothing.
Tensor op_range(const char* op, int64_t start, int64_t n, Dtype type) {
  try {
    return range_of(start, n, type);
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}

Tensor arg_extreme(const Tensor& x, int axis, bool keepdim, bool largest, const char* op) {
  need_arg_operand(x, op);
  const Dtype t = x.dtype();
  const std::vector<int> norm = detail::normalize_axes(op, std::vector<int>{axis}, x.shape());
  if (norm.empty()) return Tensor::full(Shape{}, 0.0, Dtype::I64);  // a 0-d x: its one element
  const int a = norm[0];
  const int64_t n = x.shape()[a];
  if (n == 0)
    throw Error(std::string(op) + ": reduction over axis " + std::to_string(a) + " of " + describe(x) +
                ", which is empty (expected a non-empty axis: the " + op + " of no elements is undefined, as in torch)");

  // The indices 0 .. n-1 laid along axis a (extent 1 on the axes after it),
  // broadcasting over the others. They are a kernel input (a leaf filled
  // here, n elements each call), not constants: a new extent compiles
  // nothing (a graph fills them per run).
  Shape along;
  along.push_back(n);
  for (int i = a + 1; i < x.rank(); ++i) along.push_back(1);
  const bool float_lanes = is_floating(t) && detail::float_count_fits(n, a);
  const Tensor range = op_range(op, 0, n, float_lanes ? Dtype::F32 : Dtype::I64);  // before any op is recorded
  const Tensor m = largest ? x.max(a, true) : x.min(a, true);

  // Floats, along an axis whose indices float32 holds exactly: the kernel
  // computes in float32 lanes, which machine code runs. The max (min)
  // reduction propagates NaN (docs/MATH.md: RMAX, RMIN and the split
  // launches' MAX, MIN combine), so m is NaN in a row with a NaN, where
  // eq(x, m) holds nowhere and ne(x, x) at the NaNs: the least index that
  // either test picks is the first NaN if the row has one, else the first
  // extreme. Some element always passes, so inf never wins. Every op is
  // over x's shape, so all are phases of the reduction's kernel, and the
  // min is stored as int64.
  if (float_lanes) {
    const Tensor idx = range.reshape(along);
    const Tensor rank = where(eq(x, m) | ne(x, x), idx, std::numeric_limits<float>::infinity());
    return detail::float_count_reduce(detail::OpKind::Min, rank, a, a + 1, keepdim);
  }

  // Integers (exact only in their own lanes), and floats along an axis
  // past 2^24: int64 indices. `far` (2^61) lies past every index whatever
  // n is (n <= kMaxElements < 2^61), so no value depends on n but the
  // indices themselves.
  const Tensor idx = range.reshape(along);
  const Tensor far = Tensor::full(Shape{}, 0x1p61, Dtype::I64);
  if (!is_floating(t)) return where(eq(x, m), idx, far).min(a, keepdim);

  // Floats: each element's rank is its index where it is NaN, its index +
  // far where it equals the extreme m, else 2 far; the least rank is the
  // first NaN if the row has one, else the first extreme + far.
  const Tensor rank = where(ne(x, x), idx, where(eq(x, m), idx, far) + far);
  const Tensor r = rank.min(a, keepdim);
  return where(ge(r, far), r - far, r);
}

// The all-elements form: the index into x flattened (row-major). Up to
// kCachedLongRange elements, argmax of x flattened along its one axis. Past
// it the flat x is read as rows of kCachedRange (and a shorter tail) whose
// indices are row * kCachedRange + column, from two short ranges: no index
// buffer as large as x. Each piece's least rank (as in arg_extreme, against
// the extreme m of all pieces) is kept, and the least of those wins: the
// ranks hold global indices, so the first NaN, or else the first extreme,
// of x. Floats of at most 2^24 elements rank in float32 lanes (machine
// code; a piece with no candidate ranks 2^24, past every index); integers
// and longer floats in int64 lanes.
Tensor arg_extreme_all(const Tensor& x, bool largest, const char* op) {
  need_arg_operand(x, op);
  const int64_t n = x.numel();
  if (n == 0)
    throw Error(std::string(op) + ": " + describe(x) + " has no elements (expected a non-empty tensor: the " + op +
                " of no elements is undefined, as in torch)");
  // A graph fills its one range per run (a row count made of symbols could
  // not be sliced).
  if (n <= kCachedLongRange || detail::capture())
    return arg_extreme(x.rank() > 1 ? x.reshape(Shape{n}) : x, 0, false, largest, op);
  constexpr int64_t c = kCachedRange;
  const int64_t rows = n / c, tail = n % c;
  const bool floating = is_floating(x.dtype());
  const bool float_lanes = floating && n <= detail::kFloatExactCount;
  const Dtype it = float_lanes ? Dtype::F32 : Dtype::I64;
  // The ranges first: a failure to make one records nothing.
  const Tensor row_range = op_range(op, 0, rows, it), col_range = op_range(op, 0, c, it);
  const Tensor tail_range = tail > 0 ? op_range(op, rows * c, tail, it) : Tensor();
  const detail::RecordTogether together;  // one flush for every op below
  const Tensor flat = x.rank() > 1 ? x.reshape(Shape{n}) : x;
  struct Piece {
    Tensor values, idx;
  };
  std::vector<Piece> pieces;
  const Tensor row_start = float_lanes ? row_range.reshape({rows, 1}) * static_cast<float>(c)
                                       : row_range.reshape({rows, 1}) * Tensor(c);
  pieces.push_back({flat.narrow(0, 0, rows * c).reshape({rows, c}), row_start + col_range.reshape({1, c})});
  if (tail > 0) pieces.push_back({flat.narrow(0, rows * c, tail), tail_range});
  Tensor m;
  for (const Piece& p : pieces) {
    const Tensor e = largest ? p.values.max() : p.values.min();
    m = !m.defined() ? e : largest ? maximum(m, e) : minimum(m, e);  // NaN propagates
  }
  Tensor r;
  if (float_lanes) {
    // Every rank is a whole float32 (2^24, past every index, is exact too):
    // the least of each row, then of those, then converted once.
    const float none = static_cast<float>(detail::kFloatExactCount);
    for (const Piece& p : pieces) {
      const Tensor rank = where(eq(p.values, m) | ne(p.values, p.values), p.idx, none);
      const Tensor least = rank.rank() == 2 ? rank.min(1).min() : rank.min();
      r = r.defined() ? minimum(r, least) : least;
    }
    return r.to(Dtype::I64);
  }
  const Tensor far = Tensor::full(Shape{}, 0x1p61, Dtype::I64);
  for (const Piece& p : pieces) {
    const Tensor at_m = where(eq(p.values, m), p.idx, far);
    const Tensor rank = floating ? where(ne(p.values, p.values), p.idx, at_m + far) : at_m;
    const Tensor least = rank.min();
    r = r.defined() ? minimum(r, least) : least;
  }
  return floating ? where(ge(r, far), r - far, r) : r;
}

}  // namespace

void detail::drop_cached_ranges() {
  if (!t_ranges_live) return;  // never made, or destroyed at thread exit
  for (RangeEntry& e : range_cache()) e = {};
}

Tensor Tensor::argmax(int axis, bool keepdim) const { return arg_extreme(*this, axis, keepdim, true, "argmax"); }
Tensor Tensor::argmax() const { return arg_extreme_all(*this, true, "argmax"); }
Tensor Tensor::argmin(int axis, bool keepdim) const { return arg_extreme(*this, axis, keepdim, false, "argmin"); }
Tensor Tensor::argmin() const { return arg_extreme_all(*this, false, "argmin"); }

namespace {
// max(x, lo), then min(.., hi); an undefined bound is none. An operand's
// error (an integer bound x's type cannot hold) names op first.
Tensor clamp_between(const Tensor& x, const Tensor& lo, const Tensor& hi, const char* op) {
  checked(x, op);
  try {
    // torch promotes the three together: each operand converted to their
    // common type first, not x and lo, then that and hi (a uint8 x with an
    // int -7 bound and a float16 one is float16, the -7 no wrapped 249).
    const detail::Node* nodes[3] = {detail::need(x, op)};
    int k = 1;
    for (const Tensor* b : {&lo, &hi})
      if (b->defined()) nodes[k++] = detail::need(*b, op);
    const Dtype t = detail::result_type(nodes, k);
    auto in_type = [&](const Tensor& v) {
      return !v.defined() || v.dtype() == t || detail::wrapped_scalar(v.node()) ? v : v.to(t);
    };
    const Tensor xt = in_type(x), lt = in_type(lo), ht = in_type(hi);
    const Tensor y = lt.defined() ? maximum(xt, lt) : xt;
    return ht.defined() ? minimum(y, ht) : y;
  } catch (const Error& e) {
    throw Error(std::string(op) + ": " + e.what());
  }
}
}  // namespace

Tensor clamp(const Tensor& x, const Tensor& lo, const Tensor& hi) {
  if (!lo.defined() && !hi.defined())
    throw Error("clamp: " + describe(checked(x, "clamp")) +
                " with no bound (both are undefined): expected at least one of min and max, as torch");
  return clamp_between(x, lo, hi, "clamp");
}
Tensor clamp_min(const Tensor& x, const Tensor& lo) { return clamp_between(x, lo, Tensor(), "clamp_min"); }
Tensor clamp_max(const Tensor& x, const Tensor& hi) { return clamp_between(x, Tensor(), hi, "clamp_max"); }
Tensor clamp(const Tensor& x, float lo, float hi) { return minimum(maximum(checked(x, "clamp"), lo), hi); }
Tensor clamp_min(const Tensor& x, float lo) { return maximum(checked(x, "clamp_min"), lo); }
Tensor clamp_max(const Tensor& x, float hi) { return minimum(checked(x, "clamp_max"), hi); }

Tensor silu(const Tensor& x) {
  const detail::RecordTogether together;  // one flush for every op below
  need_floating(x, "silu");
  return x * sigmoid(x);
}

namespace {
// masked_fill's operands: a bool mask that broadcasts to x's shape.
void check_mask(const Tensor& x, const Tensor& mask) {
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
}
}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  check_mask(x, mask);
  detail::Node* v = detail::need(value, "masked_fill");
  if (v->shape.rank() != 0)
    throw Error("masked_fill: value " + describe(value) + " must be 0-d (one value, as torch)");
  if (is_floating(value.dtype())) return masked_fill(x, mask, value.item());
  // An integer (or bool) value: exact in x's integer type, within its range.
  const int64_t iv = value.dtype() == Dtype::Bool ? static_cast<int64_t>(value.item() != 0.0f)
                                                  : value.to(Dtype::I64).to_vector<int64_t>()[0];
  if (is_floating(x.dtype())) return masked_fill(x, mask, static_cast<float>(iv));
  Tensor fill;
  try {
    fill = x.dtype() == Dtype::Bool ? Tensor::full(Shape{}, iv != 0 ? 1.0 : 0.0, Dtype::Bool)
                                    : Tensor::full(Shape{}, iv, x.dtype());
  } catch (const Error& e) {
    throw Error("masked_fill: the value for " + describe(x) + " is out of its type's range (" + e.what() + ")");
  }
  return where(mask, fill, x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  check_mask(x, mask);
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
  // A graph's symbolic extent stands for any size during the capture: each
  // run's int32 indices are checked when filled.
  const detail::CaptureHooks* g = detail::capture();
  auto too_large = [&](int64_t e) { return e > kMax && !(g && g->symbolic(e)); };
  if (too_large(rows) || too_large(cols))
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

// bmm, then one row kernel (scale, mask, softmax), then bmm.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    bool is_causal, float scale) {
  const detail::RecordTogether together;  // one flush for every op below
  const char* op = "scaled_dot_product_attention";
  need_floating(q, op);
  need_floating(k, op);
  need_floating(v, op);
  const Shape &qs = q.shape(), &ks = k.shape(), &vs = v.shape();
  if (qs.rank() < 2 || ks.rank() < 2 || vs.rank() < 2)
    throw Error(std::string(op) + ": q " + describe(q) + ", k " + describe(k) + " and v " + describe(v) +
                " need at least 2 dimensions ([..., L, E], [..., S, E], [..., S, Ev])");
  const int64_t E = qs[qs.rank() - 1], S = ks[ks.rank() - 2], L = qs[qs.rank() - 2];
  if (ks[ks.rank() - 1] != E || vs[vs.rank() - 2] != S)
    throw Error(std::string(op) + ": q " + describe(q) + ", k " + describe(k) + " and v " + describe(v) +
                " do not fit (expected k [..., S, E] with q's E, and v [..., S, Ev] with k's S)");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype())
    throw Error(std::string(op) + ": q " + describe(q) + ", k " + describe(k) + " and v " + describe(v) +
                " are of different types (expected one floating type, as torch)");
  // The batch dimensions broadcast, and the mask to the scores [..., L, S]:
  // checked here so that the error names this op and the caller's shapes.
  auto batch = [](const Shape& s) { return Shape(std::vector<int64_t>(s.begin(), s.end() - 2)); };
  const Shape qb = batch(qs), kb = batch(ks), vb = batch(vs);
  if (!detail::broadcastable(qb, kb) || !detail::broadcastable(qb, vb) || !detail::broadcastable(kb, vb))
    throw Error(std::string(op) + ": the batch dimensions of q " + describe(q) + ", k " + describe(k) + " and v " +
                describe(v) + " do not broadcast (expected equal extents or 1)");
  Shape scores_shape = detail::broadcast_shapes(op, detail::broadcast_shapes(op, qb, kb), vb);
  scores_shape.push_back(L);
  scores_shape.push_back(S);
  if (attn_mask.defined() && is_causal)
    throw Error(std::string(op) + ": both attn_mask and is_causal given (torch refuses this too)");
  if (attn_mask.defined()) {
    detail::need(attn_mask, op);
    if (attn_mask.dtype() != Dtype::Bool && !is_floating(attn_mask.dtype()))
      throw Error(std::string(op) + ": attn_mask of type " + dtype_name(attn_mask.dtype()) +
                  "; expected bool (true takes part) or a floating type (added to the scores), as torch");
    // Each of the mask's extents equals the scores' or is 1 (it broadcasts to
    // the scores, never the scores to it).
    const Shape& ms = attn_mask.shape();
    bool fits = ms.rank() <= scores_shape.rank();
    for (int i = 1; fits && i <= ms.rank(); ++i)
      fits = ms[ms.rank() - i] == scores_shape[scores_shape.rank() - i] || ms[ms.rank() - i] == 1;
    if (!fits)
      throw Error(std::string(op) + ": attn_mask " + describe(attn_mask) + " does not broadcast to the scores " +
                  scores_shape.to_string() + " of q " + describe(q) + " and k " + describe(k) +
                  " (expected [..., L, S] extents or 1)");
  }
  if (detail::CaptureHooks* g = detail::capture(); g && scale <= 0.0f && g->symbolic(E)) [[unlikely]]
    throw Error(std::string(op) + ": the default scale 1/sqrt(E) of a symbolic E, in a " + g->what() +
                ": not supported yet (pass the scale)");
  // Only scale <= 0 asks for the default: a NaN scale gives NaN scores, as torch's.
  const float sc = scale <= 0.0f ? static_cast<float>(1.0 / std::sqrt(static_cast<double>(E))) : scale;
  // 16-bit operands: the scores and the probabilities stay float32 and only
  // the result is rounded (as torch's CPU kernel keeps them in float); the
  // products widen the operands exactly.
  if (q.dtype() != Dtype::F32 && q.dtype() == k.dtype() && q.dtype() == v.dtype())
    return scaled_dot_product_attention(q.to(Dtype::F32), k.to(Dtype::F32), v.to(Dtype::F32), attn_mask, is_causal, sc)
        .to(q.dtype());
  Tensor scores = matmul(q, k.transpose(-2, -1)) * sc;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  if (is_causal) {
    const Tensor r = Tensor::arange(0.0, static_cast<double>(L), 1.0, Dtype::I32).reshape(Shape{L, 1});
    const Tensor c = Tensor::arange(0.0, static_cast<double>(S), 1.0, Dtype::I32);
    scores = masked_fill(scores, gt(c, r), kMinusInf);
  } else if (attn_mask.defined()) {
    if (attn_mask.dtype() == Dtype::Bool) scores = masked_fill(scores, logical_not(attn_mask), kMinusInf);
    else scores = scores + attn_mask;
  }
  return matmul(softmax(scores, -1), v);
}

}  // namespace dvm
