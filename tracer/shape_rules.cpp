// Shape rules: broadcasting, axes, reshape.
#include "tracer/shape_rules.h"

#include <algorithm>

#include "dvm/error.h"
#include "tracer/capture.h"

namespace dvm {

Shape::Shape(std::initializer_list<int64_t> dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw Error("Shape: rank " + std::to_string(dims.size()) + " exceeds the maximum " +
                std::to_string(kMaxRank));
  for (int64_t d : dims) push_back(d);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  if (dims.size() > static_cast<size_t>(kMaxRank))
    throw Error("Shape: rank " + std::to_string(dims.size()) + " exceeds the maximum " +
                std::to_string(kMaxRank));
  for (int64_t d : dims) push_back(d);
}

void Shape::push_back(int64_t v) {
  if (rank_ >= kMaxRank)
    throw Error("Shape: rank exceeds the maximum " + std::to_string(kMaxRank));
  d_[rank_++] = v;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i)
    if (__builtin_mul_overflow(n, d_[i], &n))
      throw Error("Shape::numel: the element count of " + to_string() + " overflows int64");
  return n;
}

std::string Shape::to_string() const {
  // While a graph is captured, its symbols' extents read as the symbols.
  const detail::CaptureHooks* g = detail::capture();
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    const std::string name = g ? g->extent_text(d_[i]) : std::string();
    s += name.empty() ? std::to_string(d_[i]) : name;
  }
  return s + "]";
}

}  // namespace dvm

namespace dvm::detail {

bool extents_fit(const Shape& s) {
  int64_t p = 1;
  for (int i = 0; i < s.rank(); ++i) {
    if (s[i] < 0) return false;
    if (__builtin_mul_overflow(p, std::max<int64_t>(s[i], 1), &p) || p > kMaxElements) return false;
  }
  return true;
}

void check_extents(const char* op, const Shape& s, const std::string& context) {
  for (int i = 0; i < s.rank(); ++i)
    if (s[i] < 0)
      throw Error(std::string(op) + ": negative extent " + std::to_string(s[i]) + " at axis " +
                  std::to_string(i) + " of shape " + s.to_string() + context + " (expected extents >= 0)");
  if (!extents_fit(s))
    throw Error(std::string(op) + ": shape " + s.to_string() + context +
                " has too many elements (expected the product of its extents, size-0 extents counted "
                "as 1, to be at most " + std::to_string(kMaxElements) + ")" +
                (detail::capture() ? std::string("; a graph's capture gives each symbol a number above 40000, so one "
                                                 "tensor's extents may multiply at most three symbols: make one of "
                                                 "them a constant")
                                   : std::string()));
}

bool broadcastable(const Shape& a, const Shape& b) {
  for (int ia = a.rank() - 1, ib = b.rank() - 1; ia >= 0 && ib >= 0; --ia, --ib)
    if (a[ia] != b[ib] && a[ia] != 1 && b[ib] != 1) return false;
  return true;
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  if (a == b) return a;  // the common case; a's extents were checked when it was made
  const int rank = std::max(a.rank(), b.rank());
  Shape out;
  bool is_a = a.rank() == rank, is_b = b.rank() == rank;  // out equals a (b) so far
  for (int k = 0; k < rank; ++k) {
    int ia = k - (rank - a.rank()), ib = k - (rank - b.rank());
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      throw Error(std::string(op) + ": shapes " + a.to_string() + " and " + b.to_string() +
                  " do not broadcast (axis " + std::to_string(k) + ": " + std::to_string(da) +
                  " vs " + std::to_string(db) + "; expected equal extents or 1)");
    const int64_t d = da == 1 ? db : da;
    is_a &= d == da;
    is_b &= d == db;
    out.push_back(d);
  }
  // A result equal to an operand has that operand's checked extents; the
  // context string only on failure: broadcasting is on the recording path.
  if (!is_a && !is_b && !extents_fit(out))
    check_extents(op, out, " (broadcasting " + a.to_string() + " and " + b.to_string() + ")");
  return out;
}

int normalize_axis(const char* op, int axis, int rank, const Shape& shape, bool scalar_ok) {
  if (rank == 0 && scalar_ok) {
    if (axis == 0 || axis == -1) return 0;
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                shape.to_string() + " (expected -1 <= axis <= 0 for a 0-d tensor)");
  }
  if (rank == 0)
    throw Error(std::string(op) + ": a 0-d tensor has no axis " + std::to_string(axis) +
                " (expected at least one dimension)");
  if (axis < -rank || axis >= rank)
    throw Error(std::string(op) + ": axis " + std::to_string(axis) + " is out of range for shape " +
                shape.to_string() + " (expected -" + std::to_string(rank) + " <= axis < " +
                std::to_string(rank) + ")");
  return axis < 0 ? axis + rank : axis;
}

std::vector<int> normalize_axes(const char* op, const std::vector<int>& axes, const Shape& shape) {
  std::vector<int> out;
  if (axes.empty()) {
    for (int i = 0; i < shape.rank(); ++i) out.push_back(i);
    return out;
  }
  for (int a : axes) out.push_back(normalize_axis(op, a, shape.rank(), shape, true));
  std::sort(out.begin(), out.end());
  for (size_t i = 1; i < out.size(); ++i)
    if (out[i] == out[i - 1])
      throw Error(std::string(op) + ": axis " + std::to_string(out[i]) + " is listed twice for shape " +
                  shape.to_string());
  // A 0-d tensor's axis 0 names no axis of it: the reduction covers nothing.
  if (shape.rank() == 0) out.clear();
  return out;
}

Shape infer_reshape(const char* op, const Shape& from, const Shape& to) {
  Shape out = to;
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < to.rank(); ++i) {
    if (to[i] == -1) {
      if (infer >= 0)
        throw Error(std::string(op) + ": more than one -1 in " + to.to_string() + " reshaping " +
                    from.to_string() + " (expected at most one inferred extent)");
      infer = i;
    } else if (to[i] < 0) {
      throw Error(std::string(op) + ": negative extent in " + to.to_string() + " reshaping " +
                  from.to_string() + " (expected extents >= 0, or one -1)");
    } else if (__builtin_mul_overflow(known, to[i], &known)) {
      throw Error(std::string(op) + ": the element count of " + to.to_string() + " overflows int64 reshaping " +
                  from.to_string());
    }
  }
  if (infer >= 0) {
    if (known == 0 || from.numel() % known != 0)
      throw Error(std::string(op) + ": cannot infer -1 when reshaping " + from.to_string() + " to " +
                  to.to_string());
    out[infer] = from.numel() / known;
  }
  if (!extents_fit(out)) check_extents(op, out, " (reshaping " + from.to_string() + ")");
  if (out.numel() != from.numel())
    throw Error(std::string(op) + ": cannot reshape " + from.to_string() + " (" +
                std::to_string(from.numel()) + " elements) to " + out.to_string() + " (" +
                std::to_string(out.numel()) + " elements)");
  return out;
}

bool reshape_strides(const Shape& from, const int64_t* fs, const Shape& to, int64_t* ts) {
  // Walk both shapes in chunks of equal element count; inside a chunk the
  // source dims must be mergeable (each stride = next stride * next size).
  int i = 0, j = 0;
  const int fr = from.rank(), tr = to.rank();
  if (from.numel() == 0) {
    int64_t s = 1;
    for (int k = tr - 1; k >= 0; --k) {
      ts[k] = s;
      s *= std::max<int64_t>(to[k], 1);
    }
    return true;
  }
  while (i < fr || j < tr) {
    // Skip size-1 dims on either side.
    if (j < tr && to[j] == 1) {
      ts[j++] = 0;
      continue;
    }
    if (i < fr && from[i] == 1) {
      ++i;
      continue;
    }
    if (i >= fr || j >= tr) return false;
    int i0 = i, j0 = j;
    int64_t nf = from[i++], nt = to[j++];
    while (nf != nt) {
      if (nf < nt) {
        if (i >= fr) return false;
        nf *= from[i++];
      } else {
        if (j >= tr) return false;
        nt *= to[j++];
      }
    }
    // Source dims [i0, i) must form one linear block (size-1 dims aside).
    int prev = -1;
    for (int k = i0; k < i; ++k) {
      if (from[k] == 1) continue;
      if (prev >= 0 && fs[prev] != fs[k] * from[k]) return false;
      prev = k;
    }
    int last = i - 1;
    while (last > i0 && from[last] == 1) --last;
    int64_t s = fs[last];
    for (int k = j - 1; k >= j0; --k) {
      ts[k] = s;
      s *= to[k];
    }
  }
  return true;
}

}  // namespace dvm::detail
