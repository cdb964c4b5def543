// Random programs: generator, interval reference, runner on every tier and
// ISA, known-defect filter, shrinker and C++ reproducer (see the header).
#include "tests/random/random_program.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <sstream>

#include "dvm/dvm.h"

namespace dvm::random_programs {
namespace {

constexpr double kInfD = std::numeric_limits<double>::infinity();
constexpr int kMaxRankGen = 4;
constexpr int64_t kBig = std::numeric_limits<int64_t>::max();

// ---------------------------------------------------------------------------
// Seeded randomness, the same on every platform (std distributions are not).
// ---------------------------------------------------------------------------
uint64_t mix(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(mix(seed)) {}
  uint64_t next() { return mix(s += 0x9E3779B97F4A7C15ull); }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  bool chance(double p) { return unit() < p; }
  double range(double lo, double hi) { return lo + (hi - lo) * unit(); }
};

// ---------------------------------------------------------------------------
// Symbolic extents
// ---------------------------------------------------------------------------
int64_t slice_extent(int64_t n, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  return (end - start + step - 1) / step;
}

int64_t eval_dim(const Program& p, int id, const std::vector<int64_t>& sizes) {
  const DimExpr& d = p.dims[static_cast<size_t>(id)];
  switch (d.kind) {
    case DimExpr::Const: return d.c;
    case DimExpr::Var: return sizes[static_cast<size_t>(d.c)];
    case DimExpr::Mul: return eval_dim(p, d.a, sizes) * eval_dim(p, d.b, sizes);
    case DimExpr::Slice: return slice_extent(eval_dim(p, d.a, sizes), d.start, d.end, d.step);
  }
  return 0;
}

// Every extent is nondecreasing in the variables, and variables are >= 2.
int64_t min_dim(const Program& p, int id) {
  return eval_dim(p, id, std::vector<int64_t>(static_cast<size_t>(p.nvars), 2));
}

std::vector<int64_t> eval_shape(const Program& p, const std::vector<int>& s,
                                const std::vector<int64_t>& sizes) {
  std::vector<int64_t> r;
  for (int d : s) r.push_back(eval_dim(p, d, sizes));
  return r;
}

int64_t numel(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// ---------------------------------------------------------------------------
// Generator
// ---------------------------------------------------------------------------
// Leaf data profiles: 0-4 drawn per program and leaf (value()); this one for
// the divisors of floor_divide and remainder.
constexpr int kDivisorProfile = 5;

const float kScalars[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 2.0f, 3.0f, -2.5f, 1e-3f, 100.0f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e-40f, 3e38f, 0.75f};

class Gen {
 public:
  explicit Gen(uint64_t seed) : r_(seed), mm_(seed ^ 0x6d61746d756cull), lg_(seed ^ 0x6c6f676963ull) {
    p_.seed = seed;
    p_.nvars = 1 + r_.below(4);
    p_.dims.push_back({DimExpr::Const, 0});
    p_.dims.push_back({DimExpr::Const, 1});
    for (int v = 0; v < p_.nvars; ++v) p_.dims.push_back({DimExpr::Var, v});
    zeros_ = r_.chance(0.15);
    profile_ = r_.below(5);
  }

  Program run() {
    const int nleaves = 1 + r_.below(3);
    for (int i = 0; i < nleaves; ++i) leaf(random_shape(r_.chance(0.05) ? 0 : 1 + r_.below(kMaxRankGen)));
    const int nops = 1 + r_.below(30);
    for (int i = 0; i < nops; ++i) step();
    // The last value, and some others, are read back.
    p_.observed.push_back(static_cast<int>(p_.ops.size()) - 1);
    for (int i = 0; i + 1 < static_cast<int>(p_.ops.size()); ++i)
      if (p_.ops[static_cast<size_t>(i)].kind != OpK::Leaf && r_.chance(0.15)) p_.observed.push_back(i);
    return p_;
  }

 private:
  Rng r_;
  // Whether a step is a product draws from its own stream, so a program
  // without one is the same as before products were generated.
  Rng mm_;
  // Likewise whether a step is a bitwise / logical op.
  Rng lg_;
  Program p_;
  bool zeros_ = false;
  int profile_ = 0;

  const Op& op(int id) const { return p_.ops[static_cast<size_t>(id)]; }
  int add(Op o) {
    p_.ops.push_back(std::move(o));
    return static_cast<int>(p_.ops.size()) - 1;
  }

  int var() { return 2 + r_.below(p_.nvars); }
  int random_dim() {
    if (zeros_ && r_.chance(0.08)) return 0;
    return r_.chance(0.2) ? 1 : var();
  }
  std::vector<int> random_shape(int rank) {
    std::vector<int> s;
    for (int i = 0; i < rank; ++i) s.push_back(random_dim());
    return s;
  }

  int intern(const DimExpr& e) {
    for (size_t i = 0; i < p_.dims.size(); ++i) {
      const DimExpr& d = p_.dims[i];
      if (d.kind == e.kind && d.c == e.c && d.a == e.a && d.b == e.b && d.start == e.start && d.end == e.end &&
          d.step == e.step)
        return static_cast<int>(i);
    }
    p_.dims.push_back(e);
    return static_cast<int>(p_.dims.size()) - 1;
  }
  int mul_dim(int a, int b) {
    if (a == 0 || b == 0) return 0;
    if (a == 1) return b;
    if (b == 1) return a;
    DimExpr e{DimExpr::Mul, 0, std::min(a, b), std::max(a, b)};
    return intern(e);
  }

  int leaf(std::vector<int> shape) {
    Op o;
    o.kind = OpK::Leaf;
    o.shape = std::move(shape);
    // from_vector / from_blob; arange (rank 1), uniform, normal: creation ops
    // whose values the reference reads back (only their use is under test).
    o.form = r_.chance(0.85) ? r_.below(2) : o.shape.size() == 1 && r_.chance(0.4) ? 2 : 3 + r_.below(2);
    o.data = r_.chance(0.7) ? profile_ : r_.below(5);
    return add(o);
  }

  float scalar() { return kScalars[r_.below(static_cast<int>(std::size(kScalars)))]; }

  // A float value to operate on: mostly the newest, so chains form.
  int pick_float() {
    std::vector<int> c;
    for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
      if (!op(i).is_bool) c.push_back(i);
    if (c.empty()) return leaf(random_shape(1 + r_.below(kMaxRankGen)));
    if (r_.chance(0.5)) return c.back();
    return c[static_cast<size_t>(r_.below(static_cast<int>(c.size())))];
  }

  // Numpy broadcasting of symbolic shapes (equal ids, or one side 1).
  static bool broadcast(const std::vector<int>& a, const std::vector<int>& b, std::vector<int>* out) {
    const size_t r = std::max(a.size(), b.size());
    if (r > kMaxRankGen) return false;
    std::vector<int> o(r);
    for (size_t i = 0; i < r; ++i) {
      int da = i < r - a.size() ? 1 : a[i - (r - a.size())];
      int db = i < r - b.size() ? 1 : b[i - (r - b.size())];
      if (da == db || db == 1) o[i] = da;
      else if (da == 1) o[i] = db;
      else return false;
    }
    *out = o;
    return true;
  }

  // A tensor operand for a: an existing compatible value or a new leaf whose
  // shape broadcasts against a's.
  int partner(int a, bool want_bool = false) {
    std::vector<int> out;
    if (r_.chance(0.4)) {
      std::vector<int> c;
      for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
        if (op(i).is_bool == want_bool && broadcast(op(a).shape, op(i).shape, &out)) c.push_back(i);
      if (!c.empty()) return c[static_cast<size_t>(r_.below(static_cast<int>(c.size())))];
    }
    const std::vector<int>& s = op(a).shape;
    std::vector<int> t;
    size_t drop = r_.chance(0.3) ? static_cast<size_t>(r_.below(static_cast<int>(s.size()) + 1)) : 0;
    if (s.size() < kMaxRankGen && r_.chance(0.15)) t.push_back(r_.chance(0.5) ? 1 : var());
    for (size_t i = drop; i < s.size(); ++i) t.push_back(r_.chance(0.3) ? 1 : s[i]);
    return leaf(t);
  }

  int compare_of(int a) {
    Op o;
    o.kind = OpK::Compare;
    o.sub = r_.below(kNumCmp);
    o.a = a;
    o.is_bool = true;
    if (r_.chance(0.4)) {
      o.c = -1;  // a scalar: Tensor(float)
      o.s = scalar();
      o.shape = op(a).shape;
    } else {
      o.b = partner(a);
      if (!broadcast(op(a).shape, op(o.b).shape, &o.shape)) return -1;
    }
    return add(o);
  }

  bool reducible(const std::vector<int>& shape, const std::vector<int>& axes) const {
    if (axes.empty()) {
      for (int d : shape)
        if (min_dim(p_, d) < 1) return false;
      return true;
    }
    for (int a : axes)
      if (a < static_cast<int>(shape.size()) && min_dim(p_, shape[static_cast<size_t>(a)]) < 1) return false;
    return true;
  }

  void step() {
    if (mm_.chance(kMatMulRate)) {
      matmul();
      return;
    }
    if (lg_.chance(kLogicRate)) {
      logic();
      return;
    }
    const int w = r_.below(100);
    if (w < 24) {  // unary
      Op o;
      o.kind = OpK::Unary;
      o.sub = r_.below(kNumUnary);
      o.a = pick_float();
      o.shape = op(o.a).shape;
      add(o);
    } else if (w < 46) {  // binary, tensor or scalar operand
      Op o;
      o.a = pick_float();
      o.sub = r_.below(kNumBinary);
      const bool division = o.sub == kFloorDiv || o.sub == kRemainder;
      if (r_.chance(0.35)) {
        o.kind = OpK::Scalar;
        o.s = division && r_.chance(0.7) ? divisor_scalar() : scalar();
        o.pos = o.sub == kPow || r_.chance(0.6) ? 1 : 0;
        o.form = r_.below(2);  // operator or function with Tensor(float) / pow(x, float)
        o.shape = op(o.a).shape;
      } else {
        o.kind = OpK::Binary;
        // Python's division: mostly a divisor bounded away from 0, so the
        // quotient stays below 2^24, where the float ops are exact.
        if (division && r_.chance(0.7)) {
          const size_t before = p_.ops.size();
          o.b = partner(o.a);
          if (static_cast<size_t>(o.b) >= before) p_.ops[static_cast<size_t>(o.b)].data = kDivisorProfile;  // a new leaf
        } else {
          o.b = partner(o.a);
          if (r_.chance(0.5)) std::swap(o.a, o.b);
        }
        o.form = r_.below(2);
        if (!broadcast(op(o.a).shape, op(o.b).shape, &o.shape)) return;
      }
      add(o);
    } else if (w < 52) {
      compare_of(pick_float());
    } else if (w < 57) {  // where
      const int a = pick_float();
      int m = -1;
      std::vector<int> out;
      for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
        if (op(i).is_bool && broadcast(op(a).shape, op(i).shape, &out) && r_.chance(0.5)) m = i;
      if (m < 0) m = compare_of(r_.chance(0.7) ? a : pick_float());
      if (m < 0) return;
      Op o;
      o.kind = OpK::Where;
      o.a = m;
      o.b = a;
      if (r_.chance(0.4)) {
        o.c = -1;
        o.s = scalar();
      } else {
        o.c = partner(a);
      }
      std::vector<int> s1;
      if (!broadcast(op(m).shape, op(a).shape, &s1)) return;
      if (o.c >= 0 && !broadcast(s1, op(o.c).shape, &o.shape)) return;
      if (o.c < 0) o.shape = s1;
      o.form = r_.below(2);  // 1: c (or the scalar) is the "true" branch
      add(o);
    } else if (w < 69) {  // reductions
      Op o;
      o.kind = OpK::Reduce;
      o.sub = r_.below(kNumRed);
      o.a = pick_float();
      const std::vector<int>& s = op(o.a).shape;
      const int rank = static_cast<int>(s.size());
      if (rank > 0 && r_.chance(0.85)) {
        for (int i = 0; i < rank; ++i)
          if (r_.chance(0.4)) o.axes.push_back(i);
        if (o.axes.empty()) o.axes.push_back(r_.below(rank));
      } else if (rank == 0 && r_.chance(0.05)) {
        o.axes.push_back(0);
      }
      o.keepdim = r_.chance(0.5);
      o.form = r_.below(2);  // negative axes
      if ((o.sub == kMax || o.sub == kMin) && !reducible(s, o.axes)) o.sub = kSum;
      for (int i = 0; i < rank; ++i) {
        const bool red = o.axes.empty() || std::find(o.axes.begin(), o.axes.end(), i) != o.axes.end();
        if (!red) o.shape.push_back(s[static_cast<size_t>(i)]);
        else if (o.keepdim && !o.axes.empty()) o.shape.push_back(1);
      }
      if (rank > 0 && o.keepdim && o.axes.empty()) o.keepdim = false;  // sum() has no keepdim
      add(o);
    } else if (w < 74) {  // softmax / log_softmax
      Op o;
      o.kind = OpK::Softmax;
      o.sub = r_.below(2);
      o.a = pick_float();
      const int rank = static_cast<int>(op(o.a).shape.size());
      if (rank == 0 && !r_.chance(0.05)) return;
      o.axis = rank == 0 ? 0 : r_.below(rank);
      o.form = r_.below(2);
      o.shape = op(o.a).shape;
      add(o);
    } else if (w < 77) {  // layer_norm
      Op o;
      o.kind = OpK::LayerNorm;
      o.a = pick_float();
      const std::vector<int> s = op(o.a).shape;
      const int rank = static_cast<int>(s.size());
      if (rank == 0) return;
      o.axis = 1 + r_.below(std::min(rank, 2));
      std::vector<int> ns(s.end() - o.axis, s.end());
      o.b = r_.chance(0.5) ? leaf(ns) : -1;
      o.c = r_.chance(0.5) ? leaf(ns) : -1;
      o.s = r_.chance(0.8) ? 1e-5f : 0.1f;
      o.shape = s;
      add(o);
    } else if (w < 93) {
      view();
    } else if (w < 96) {
      Op o;
      o.kind = OpK::Sync;
      o.a = pick_float();
      o.shape = op(o.a).shape;
      add(o);
    } else {
      Op o;
      o.kind = OpK::Full;
      o.shape = random_shape(r_.below(kMaxRankGen + 1));
      o.s = scalar();
      add(o);
    }
  }

  // A scalar divisor for floor_divide / remainder: |s| >= 0.25.
  float divisor_scalar() {
    static const float kDivisors[] = {1.0f, -1.0f, 0.5f, 2.0f, 3.0f, -2.5f, 0.75f, -0.25f, 7.0f, 1.5f};
    return kDivisors[r_.below(static_cast<int>(std::size(kDivisors)))];
  }

  // ---- bitwise and logical ops, bool arithmetic ------------------------------
  static constexpr double kLogicRate = 0.04;

  // A bool value: an existing mask (mostly the newest) or a new comparison.
  int pick_bool() {
    std::vector<int> c;
    for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
      if (op(i).is_bool) c.push_back(i);
    if (c.empty() || r_.chance(0.3)) return compare_of(pick_float());
    if (r_.chance(0.5)) return c.back();
    return c[static_cast<size_t>(r_.below(static_cast<int>(c.size())))];
  }

  // A bool operand whose shape broadcasts against a's.
  int bool_partner(int a) {
    std::vector<int> out;
    if (r_.chance(0.5)) {
      std::vector<int> c;
      for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
        if (op(i).is_bool && broadcast(op(a).shape, op(i).shape, &out)) c.push_back(i);
      if (!c.empty()) return c[static_cast<size_t>(r_.below(static_cast<int>(c.size())))];
    }
    return compare_of(partner(a));
  }

  void logic() {
    Op o;
    o.kind = OpK::Logic;
    o.sub = r_.below(kNumLogic);
    o.is_bool = true;
    o.form = r_.below(2);
    const bool bool_only = o.sub < kLogAnd || o.sub >= kBoolAdd;
    const bool unary = o.sub == kBitNot || o.sub == kLogNot;
    o.a = bool_only || r_.chance(0.5) ? pick_bool() : pick_float();
    if (o.a < 0) return;
    if (unary) {
      o.shape = op(o.a).shape;
    } else {
      o.b = bool_only || r_.chance(0.5) ? bool_partner(o.a) : partner(o.a);
      if (o.b < 0 || !broadcast(op(o.a).shape, op(o.b).shape, &o.shape)) return;
      if (r_.chance(0.5)) std::swap(o.a, o.b);
    }
    add(o);
  }

  // ---- products ------------------------------------------------------------
  // Rare: a product costs M N K, and its sizes are capped in instantiate().
  static constexpr double kMatMulRate = 0.03;

  int slice_of(int a, int axis, int64_t start, int64_t end, int64_t step) {
    Op o;
    o.kind = OpK::Slice;
    o.a = a;
    o.axis = axis;
    o.start = start;
    o.end = end;
    o.step = step;
    o.shape = op(a).shape;
    const int d = o.shape[static_cast<size_t>(axis)];
    DimExpr e{DimExpr::Slice, 0, d, -1, start, end, step};
    o.shape[static_cast<size_t>(axis)] = d <= 1 && start == 0 ? d : intern(e);
    return add(o);
  }
  // Slice bounds for an extent d, as view() draws them.
  void slice_bounds(int d, int64_t* start, int64_t* end, int64_t* step) {
    *step = 1 + r_.below(3);
    *start = 0;
    *end = kBig;
    if (min_dim(p_, d) >= 2) {
      static const int64_t kStarts[] = {0, 1, -2};
      static const int64_t kEnds[] = {kBig, -1, 1 << 30};
      *start = kStarts[r_.below(3)];
      *end = *start == -2 ? kBig : kEnds[r_.below(3)];
    }
  }

  // A float operand of symbolic shape s: an existing value of that shape, a
  // new leaf, or the transpose of a new leaf (read through its strides).
  int mm_operand(const std::vector<int>& s) {
    if (r_.chance(0.3)) {
      std::vector<int> c;
      for (int i = 0; i < static_cast<int>(p_.ops.size()); ++i)
        if (!op(i).is_bool && op(i).shape == s) c.push_back(i);
      if (!c.empty()) return c[static_cast<size_t>(r_.below(static_cast<int>(c.size())))];
    }
    if (r_.chance(0.05)) {  // a constant: the product reads it from a buffer it makes
      Op o;
      o.kind = OpK::Full;
      o.shape = s;
      o.s = scalar();
      return add(o);
    }
    const size_t r = s.size();
    if (r >= 2 && r_.chance(0.35)) {
      std::vector<int> t = s;
      std::swap(t[r - 1], t[r - 2]);
      Op o;
      o.kind = OpK::Permute;
      o.form = 1;
      o.a = leaf(t);
      o.axes.resize(r);
      std::iota(o.axes.begin(), o.axes.end(), 0);
      std::swap(o.axes[r - 1], o.axes[r - 2]);
      o.shape = s;
      return add(o);
    }
    return leaf(s);
  }

  // Batch dims for b that broadcast against a's (numpy rules, aligned right).
  std::vector<int> partner_batch(const std::vector<int>& ba, int rank) {
    std::vector<int> bb(static_cast<size_t>(rank));
    for (int i = 0; i < rank; ++i) {
      const int j = static_cast<int>(ba.size()) - rank + i;  // a's dim aligned with bb[i]
      if (j >= 0) {
        const int d = ba[static_cast<size_t>(j)];
        bb[static_cast<size_t>(i)] = r_.chance(0.65) ? d : d == 1 ? var() : 1;
      } else {
        bb[static_cast<size_t>(i)] = r_.chance(0.3) ? 1 : var();
      }
    }
    return bb;
  }

  void matmul() {
    Op o;
    o.kind = OpK::MatMul;
    const int w = r_.below(10);
    o.form = w < 5 ? 0 : w < 6 ? 1 : w < 8 ? 2 : 3;
    if (o.form == 0) {
      // a: a value in the program or new operands of rank 1-4.
      // Mostly the newest value, at times an earlier product: products chain.
      int a = pick_float();
      if (r_.chance(0.3))
        for (int i = static_cast<int>(p_.ops.size()) - 1; i >= 0; --i)
          if (op(i).kind == OpK::MatMul) {
            a = i;
            break;
          }
      if (op(a).shape.empty() || r_.chance(0.4)) {
        std::vector<int> s = random_shape(r_.below(3));
        s.push_back(random_dim());
        if (s.size() == 1 && r_.chance(0.5)) s.push_back(random_dim());
        a = mm_operand(s);
      }
      const std::vector<int> sa = op(a).shape;
      const int ra = static_cast<int>(sa.size());
      const int K = sa.back();
      const std::vector<int> ba(sa.begin(), sa.end() - std::min(ra, 2));
      const int rb = r_.chance(0.15) ? 1 : 2 + r_.below(3);
      std::vector<int> sb = partner_batch(ba, rb - std::min(rb, 2));
      sb.push_back(K);
      if (rb >= 2) sb.push_back(random_dim());
      int b = mm_operand(sb);
      // A slice of the contracted dim, the same on both sides (one DimExpr).
      if (r_.chance(0.12)) {
        int64_t st, en, sp;
        slice_bounds(K, &st, &en, &sp);
        a = slice_of(a, ra - 1, st, en, sp);
        b = slice_of(b, rb == 1 ? 0 : rb - 2, st, en, sp);
      }
      // Strided rows of a.
      if (ra >= 2 && r_.chance(0.1)) {
        int64_t st, en, sp;
        slice_bounds(sa[static_cast<size_t>(ra - 2)], &st, &en, &sp);
        a = slice_of(a, ra - 2, st, en, sp);
      }
      o.a = a;
      o.b = b;
      const std::vector<int>& fa = op(a).shape;
      const std::vector<int>& fb = op(b).shape;
      const std::vector<int> bb(fb.begin(), fb.end() - std::min(rb, 2));
      if (!broadcast(ba, bb, &o.shape)) return;
      if (ra >= 2) o.shape.push_back(fa[static_cast<size_t>(ra - 2)]);
      if (rb >= 2) o.shape.push_back(fb.back());
    } else if (o.form == 1) {  // bmm: [B, M, K] x [B, K, N], B the same
      const int B = random_dim(), M = random_dim(), K = random_dim(), N = random_dim();
      o.a = mm_operand({B, M, K});
      o.b = mm_operand({B, K, N});
      o.shape = {B, M, N};
    } else if (o.form == 2) {  // linear: x [..., in], weight [out, in], bias [out]
      int x = pick_float();
      if (op(x).shape.empty()) x = mm_operand({random_dim()});
      const std::vector<int> sx = op(x).shape;
      const int out = random_dim();
      o.a = x;
      o.b = mm_operand({out, sx.back()});
      o.c = r_.chance(0.5) ? mm_operand({out}) : -1;
      o.shape.assign(sx.begin(), sx.end() - 1);
      o.shape.push_back(out);
    } else {  // addmm: beta * input + alpha * (a @ b), input broadcast to [M, N]
      const int M = random_dim(), K = random_dim(), N = random_dim();
      o.a = mm_operand({M, K});
      o.b = mm_operand({K, N});
      const int rc = r_.below(3);
      std::vector<int> sc;
      if (rc == 2) sc.push_back(r_.chance(0.7) ? M : 1);
      if (rc >= 1) sc.push_back(r_.chance(0.7) ? N : 1);
      o.c = mm_operand(sc);
      static const float kCoef[] = {1.0f, 1.0f, 0.0f, 0.5f, -1.0f, 2.0f};
      o.s = r_.chance(0.85) ? kCoef[r_.below(6)] : scalar();
      o.s2 = r_.chance(0.85) ? kCoef[r_.below(6)] : scalar();
      o.shape = {M, N};
    }
    add(o);
  }

  void view() {
    const int a = r_.chance(0.85) ? pick_float() : static_cast<int>(p_.ops.size()) - 1;
    const std::vector<int> s = op(a).shape;
    const int rank = static_cast<int>(s.size());
    Op o;
    o.a = a;
    o.is_bool = op(a).is_bool;
    const int w = r_.below(6);
    if (w == 0) {  // reshape
      o.kind = OpK::Reshape;
      std::vector<int> t = s;
      const int how = r_.below(5);
      if (how == 0) {
        int d = 1;
        for (int x : s) d = mul_dim(d, x);
        t = {d};
      } else if (how == 1 && rank >= 2) {
        const int i = r_.below(rank - 1);
        t[static_cast<size_t>(i)] = mul_dim(s[static_cast<size_t>(i)], s[static_cast<size_t>(i) + 1]);
        t.erase(t.begin() + i + 1);
      } else if (how == 2 && rank < kMaxRankGen) {
        t.insert(t.begin() + r_.below(rank + 1), 1);
      } else if (how == 3) {
        auto it = std::find(t.begin(), t.end(), 1);
        if (it == t.end()) return;
        t.erase(it);
      } else {
        int i = -1;
        for (int k = 0; k < rank; ++k)
          if (p_.dims[static_cast<size_t>(s[static_cast<size_t>(k)])].kind == DimExpr::Mul) i = k;
        if (i < 0 || rank >= kMaxRankGen) return;
        const DimExpr& d = p_.dims[static_cast<size_t>(s[static_cast<size_t>(i)])];
        t[static_cast<size_t>(i)] = d.a;
        t.insert(t.begin() + i + 1, d.b);
      }
      o.shape = t;
    } else if (w == 1) {  // permute / transpose
      if (rank < 2) return;
      o.kind = OpK::Permute;
      std::vector<int> perm(static_cast<size_t>(rank));
      std::iota(perm.begin(), perm.end(), 0);
      if (r_.chance(0.5)) {
        o.form = 1;
        const int i = r_.below(rank), j = r_.below(rank);
        std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(j)]);
      } else {
        for (int i = rank - 1; i > 0; --i) std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(r_.below(i + 1))]);
      }
      o.axes = perm;
      for (int x : perm) o.shape.push_back(s[static_cast<size_t>(x)]);
    } else if (w == 2) {  // slice
      if (rank < 1) return;
      o.kind = OpK::Slice;
      o.axis = r_.below(rank);
      const int d = s[static_cast<size_t>(o.axis)];
      o.step = 1 + r_.below(3);
      if (min_dim(p_, d) >= 2) {
        static const int64_t kStarts[] = {0, 1, -2};
        static const int64_t kEnds[] = {kBig, -1, 1 << 30};
        o.start = kStarts[r_.below(3)];
        o.end = o.start == -2 ? kBig : kEnds[r_.below(3)];
      } else {
        o.start = 0;
        o.end = kBig;
      }
      DimExpr e{DimExpr::Slice, 0, d, -1, o.start, o.end, o.step};
      o.shape = s;
      o.shape[static_cast<size_t>(o.axis)] = d <= 1 && o.start == 0 ? d : intern(e);
    } else if (w == 3) {  // expand
      o.kind = OpK::Expand;
      std::vector<int> t = s;
      bool changed = false;
      for (int& x : t)
        if (x == 1 && r_.chance(0.6)) x = var(), changed = true;
      if (rank < kMaxRankGen && r_.chance(0.3)) t.insert(t.begin(), var()), changed = true;
      if (!changed) return;
      o.form = r_.below(2);  // expand / broadcast_to
      o.shape = t;
    } else {
      o.kind = OpK::Contiguous;
      o.shape = s;
    }
    add(o);
  }
};

// ---------------------------------------------------------------------------
// Input data
// ---------------------------------------------------------------------------
float special(Rng& r) {
  switch (r.below(10)) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return std::numeric_limits<float>::infinity();
    case 3: return -std::numeric_limits<float>::infinity();
    case 4: return std::numeric_limits<float>::quiet_NaN();
    case 5: {  // a subnormal
      uint32_t bits = static_cast<uint32_t>(1 + r.below(0x7FFFFF)) | (r.chance(0.5) ? 0x80000000u : 0u);
      float f;
      std::memcpy(&f, &bits, sizeof f);
      return f;
    }
    case 6: return r.chance(0.5) ? 3e38f : -2e38f;
    case 7: return r.chance(0.5) ? 1e-38f : -3e-39f;
    case 8: return static_cast<float>(r.range(-100, 100));
    default: return static_cast<float>(r.chance(0.5) ? 88.5 : -103.5);
  }
}

float value(Rng& r, int profile) {
  switch (profile) {
    case 1: return static_cast<float>(r.range(0.05, 5));
    case 2: return r.chance(0.05) ? special(r) : static_cast<float>(r.range(-3, 3));
    case 3: return r.chance(0.3) ? special(r) : static_cast<float>(r.range(-6, 6));
    case 4: return static_cast<float>(r.below(17) - 8) * 0.5f;
    case kDivisorProfile: {  // |x| in [0.25, 8]: a divisor for floor_divide / remainder
      const float m = r.chance(0.3) ? static_cast<float>(1 + r.below(16)) * 0.5f : static_cast<float>(r.range(0.25, 8));
      return r.chance(0.5) ? m : -m;
    }
    default: return static_cast<float>(r.range(-3, 3));
  }
}

// Leaves of forms 2-4: arange, uniform, normal.
Tensor create(int form, const std::vector<int64_t>& shape, uint64_t seed) {
  if (form == 2) return Tensor::arange(-3.0f, -3.0f + 0.5f * static_cast<float>(shape[0]), 0.5f);
  if (form == 3) return Tensor::uniform(Shape(shape), seed, -3.0f, 3.0f);
  return Tensor::normal(Shape(shape), seed, 0.5f, 2.0f);
}

std::vector<std::vector<float>> make_data(const Program& p, const Instance& in) {
  std::vector<std::vector<float>> d(p.ops.size());
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (p.ops[i].kind != OpK::Leaf) continue;
    Rng r(in.data_seed * 1000003u + i);
    const std::vector<int64_t> shape = eval_shape(p, p.ops[i].shape, in.sizes);
    const int64_t n = numel(shape);
    if (p.ops[i].form >= 2) {
      d[i] = create(p.ops[i].form, shape, in.data_seed + i).to_vector();
      continue;
    }
    d[i].resize(static_cast<size_t>(n));
    for (float& f : d[i]) f = value(r, p.ops[i].data);
  }
  return d;
}

// ---------------------------------------------------------------------------
// The interval reference
// ---------------------------------------------------------------------------
// [lo, hi] holds every non-NaN result; lo > hi: none (the result is NaN).
// zs: for the point [0, 0], whether the zero's sign is known (signbit(lo)).
struct IV {
  double lo = 0, hi = 0;
  bool nan = false;
  bool zs = true;
};

IV point(double x) { return {x, x, false, true}; }
IV must_nan() { return {kInfD, -kInfD, true, false}; }
IV any() { return {-kInfD, kInfD, true, false}; }
bool empty(const IV& x) { return x.lo > x.hi; }
bool is_point(const IV& x) { return x.lo == x.hi; }
bool sign_known(const IV& x) { return x.lo != 0 || x.zs; }

// Round to the nearest float. Through a volatile: GCC 12 at -O1 and above
// dropped the narrowing of a quotient here (the result kept double bits).
double rn(double x) {
  volatile float f = static_cast<float>(x);
  return static_cast<double>(f);
}
// The float spacing at a reference value (docs/MATH.md's ULP).
double ulp_at(double y) {
  double a = std::fabs(y);
  if (std::isinf(a)) a = 0x1.0p128;
  if (a < 0x1.0p-126) return 0x1.0p-149;
  int e = 0;
  std::frexp(a, &e);
  return std::ldexp(1.0, e - 24);
}
double wlo(double y, double k) { return std::isfinite(y) ? rn(y - k * ulp_at(y)) : y; }
double whi(double y, double k) { return std::isfinite(y) ? rn(y + k * ulp_at(y)) : y; }

IV make(double lo, double hi, bool nan) {
  IV r{lo, hi, nan, false};
  return r;
}

// A monotone nondecreasing function with an error bound of k ULPs at the
// reference (k = 0: correctly rounded). exact0: f(±0) = ±0 exactly.
IV mono(const IV& x, double (*f)(double), double k, bool exact0 = false) {
  if (empty(x)) return must_nan();
  IV r;
  const double a = f(x.lo), b = f(x.hi);
  r.lo = (exact0 && a == 0) ? a : k == 0 ? rn(a) : wlo(a, k);
  r.hi = (exact0 && b == 0) ? b : k == 0 ? rn(b) : whi(b, k);
  r.nan = x.nan;
  r.zs = is_point(x) && x.zs && r.lo == r.hi;
  return r;
}

double sigmoid_d(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }
double gelu_erf_d(double x) { return x < -3 ? 0.5 * x * std::erfc(-x / std::sqrt(2.0)) : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_d(double x) {
  const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
  return x * sigmoid_d(2 * u);
}

// docs/MATH.md: 4 + 2 kappa(x) ULPs above -5.6, 4.5e-8 absolute below.
double gelu_tol(double (*f)(double), double x) {
  if (!std::isfinite(x)) return 0;
  if (x <= -5.6) return 4.5e-8 + ulp_at(f(x));
  const double y = f(x);
  double kappa = 1;
  if (x != 0 && y != 0) {
    const double h = 1e-6 * std::max(std::fabs(x), 1e-30);
    kappa = std::fabs((f(x + h) - f(x - h)) / (2 * h) * x / y);
  }
  return (4 + 2 * kappa) * ulp_at(y);
}

IV gelu_iv(const IV& x, double (*f)(double)) {
  if (empty(x)) return must_nan();
  IV r;
  r.nan = x.nan || x.lo == -kInfD;
  if (is_point(x)) {
    if (x.lo == kInfD) return point(kInfD);
    if (x.lo == -kInfD) return must_nan();
    const double y = f(x.lo), t = gelu_tol(f, x.lo);
    return make(rn(y - t), rn(y + t), false);
  }
  if (!std::isfinite(x.lo) || !std::isfinite(x.hi)) return make(-0.18, x.hi == kInfD ? kInfD : rn(std::max(f(x.hi), 0.0) + 1), r.nan);
  const double c = 0.5 * (x.lo + x.hi), h = 0.5 * (x.hi - x.lo);
  const double t = std::max({gelu_tol(f, x.lo), gelu_tol(f, x.hi), gelu_tol(f, c)});
  const double y = f(c);
  return make(rn(std::max(y - 1.13 * h - t, -0.1701)), rn(y + 1.13 * h + t), r.nan);
}

IV sincos_iv(const IV& x, bool is_cos) {
  if (empty(x)) return must_nan();
  const double m = std::max(std::fabs(x.lo), std::fabs(x.hi));
  if (std::isinf(m)) return is_point(x) ? must_nan() : make(-1, 1, true);
  if (m > 2e5) return make(-1, 1, x.nan);
  const double k = m <= 1e5 ? 2 : 3;
  if (is_point(x)) {
    const double y = is_cos ? std::cos(x.lo) : std::sin(x.lo);
    if (y == 0 && !is_cos) return IV{y, y, x.nan, x.zs};
    IV r = make(std::max(wlo(y, k), -1.0), std::min(whi(y, k), 1.0), x.nan);
    return r;
  }
  const double c = 0.5 * (x.lo + x.hi), h = 0.5 * (x.hi - x.lo);
  const double y = is_cos ? std::cos(c) : std::sin(c);
  const double t = k * ulp_at(std::fabs(y) + h);
  return make(std::max(rn(y - h - t), -1.0), std::min(rn(y + h + t), 1.0), x.nan);
}

IV recip_iv(const IV& x) {
  if (empty(x)) return must_nan();
  if (x.lo <= 0 && x.hi >= 0) {
    if (is_point(x) && x.zs) return IV{1 / x.lo, 1 / x.lo, x.nan, true};
    return make(-kInfD, kInfD, x.nan);
  }
  IV r = make(rn(1 / x.hi), rn(1 / x.lo), x.nan);
  r.zs = is_point(x);
  return r;
}

IV sqrt_iv(const IV& x) {
  if (empty(x) || x.hi < 0) return must_nan();
  IV y = x;
  if (y.lo < 0) {
    y.lo = 0;  // the negative part is NaN
    y.nan = true;
    y.zs = false;
  }
  return mono(y, [](double v) { return std::sqrt(v); }, 0, true);
}

IV unary_value(int op, const IV& x) {
  if (empty(x)) return must_nan();
  switch (op) {
    case kNeg: return IV{-x.hi, -x.lo, x.nan, x.zs};
    case kAbs:
      if (x.lo > 0) return x;
      if (x.lo == 0 && x.hi == 0) return IV{0, 0, x.nan, true};
      if (x.hi <= 0) return IV{-x.hi, -x.lo, x.nan, is_point(x)};
      return make(0, std::max(-x.lo, x.hi), x.nan);
    case kExp: return mono(x, [](double v) { return std::exp(v); }, 1.5);
    case kLog: {
      if (x.hi < 0) return must_nan();
      IV y = x;
      if (y.lo < 0) y.lo = 0, y.nan = true;
      return mono(y, [](double v) { return std::log(v); }, 1.5);
    }
    case kSqrt: return sqrt_iv(x);
    case kRsqrt: {
      IV s = sqrt_iv(x);
      if (!empty(s) && s.lo == 0 && !is_point(s)) return make(-kInfD, kInfD, s.nan);
      return recip_iv(s);
    }
    case kRecip: return recip_iv(x);
    case kTanh: return mono(x, [](double v) { return std::tanh(v); }, 2, true);
    case kSigmoid: return mono(x, sigmoid_d, 2.5);
    case kRelu: {
      if (is_point(x)) return x.lo < 0 ? IV{0, 0, x.nan, true} : x;
      return make(x.lo < 0 ? 0 : x.lo, x.hi < 0 ? 0 : x.hi, x.nan);
    }
    case kGeluTanh: return gelu_iv(x, gelu_tanh_d);
    case kGeluErf: return gelu_iv(x, gelu_erf_d);
    case kErf: return mono(x, [](double v) { return std::erf(v); }, 1.5, true);
    case kSin: return sincos_iv(x, false);
    case kCos: return sincos_iv(x, true);
    case kFloor: return mono(x, [](double v) { return std::floor(v); }, 0, true);
    case kCeil: return mono(x, [](double v) { return std::ceil(v); }, 0, true);
    case kRound: return mono(x, [](double v) { return std::nearbyint(v); }, 0, true);
  }
  return any();
}

// A NaN input gives NaN for every unary op.
IV unary_ref(int op, const IV& x) {
  IV r = unary_value(op, x);
  r.nan = r.nan || x.nan;
  return r;
}

// pow's bound (docs/MATH.md): 2 + 3|b ln|a|| ULPs; exact where the C99 /
// torch special cases give the result.
IV pow_point(double a, double b) {
  const double y = std::pow(a, b);
  if (std::isnan(y)) return must_nan();
  if (!std::isfinite(y) || y == 0 || b == 0 || a == 1 || !std::isfinite(a) || !std::isfinite(b))
    return IV{rn(y), rn(y), false, y != 0};
  const double k = 2 + 3 * std::fabs(b * std::log(std::fabs(a)));
  return make(wlo(y, k), whi(y, k), false);
}

IV binary_ref(int op, const IV& a, const IV& b);

// pow's NaN operands are not always NaN: pow(NaN, 0) = pow(1, NaN) = 1.
IV pow_ref(const IV& a, const IV& b) {
  IV r{kInfD, -kInfD, false, true};
  if (!empty(a) && !empty(b)) {
    IV x = a, y = b;
    x.nan = y.nan = false;
    r = binary_ref(kPow, x, y);
  }
  auto include_one = [&] {
    r.zs = r.zs && empty(r);
    r.lo = std::min(r.lo, 1.0);
    r.hi = std::max(r.hi, 1.0);
  };
  if (a.nan) {
    if (!empty(b) && b.lo <= 0 && b.hi >= 0) include_one();
    if (empty(b) || b.lo != 0 || b.hi != 0 || b.nan) r.nan = true;
  }
  if (b.nan) {
    if (!empty(a) && a.lo <= 1 && a.hi >= 1) include_one();
    if (empty(a) || a.lo != 1 || a.hi != 1 || a.nan) r.nan = true;
  }
  return r;
}

// Python's // and % of floats (docs/DTYPES.md): exact while |a / b| < 2^24;
// a zero, infinite or NaN operand as torch. Where the quotient may reach 2^24
// (the rounded quotient's error is documented, not bounded here), where a
// divisor interval holds 0 and for x // inf (undocumented): any value.
// Zero quotients have either sign (torch's copysign rule is not documented);
// a zero remainder has a's sign (fmod's). Called on non-empty operands; the
// caller adds the operands' NaN.
IV division_ref(bool rem, const IV& a, const IV& b) {
  if (is_point(a) && is_point(b)) {
    const double x = a.lo, y = b.lo;
    if (y == 0) {  // x // 0 is x / 0 (inf // 0 too), x % 0 NaN
      if (rem || x == 0) return must_nan();
      if (!b.zs) return make(-kInfD, kInfD, false);  // x / ±0
      return point(x / y);
    }
    if (std::isinf(x)) return must_nan();  // inf // y and inf % y
    if (std::isinf(y)) {
      if (!rem) return any();
      if (x == 0) return IV{x, x, false, a.zs};
      return point(std::signbit(x) == std::signbit(y) ? x : y);
    }
    const double q = x / y;
    if (std::fabs(q) >= 0x1.0p24) return any();
    if (!rem) {
      const double f = std::floor(q);
      return IV{f, f, false, f != 0};
    }
    double r = std::fmod(x, y);
    if (r == 0) return IV{r, r, false, a.zs};
    if (std::signbit(r) != std::signbit(y)) r = rn(r + y);
    return point(r);
  }
  for (double v : {a.lo, a.hi, b.lo, b.hi})
    if (std::isinf(v)) return any();
  if (b.lo <= 0 && b.hi >= 0) return any();
  const double ma = std::max(std::fabs(a.lo), std::fabs(a.hi)), mb = std::min(std::fabs(b.lo), std::fabs(b.hi));
  if (ma >= mb * 0x1.0p23) return any();
  const double c[4] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
  const double qlo = std::floor(*std::min_element(c, c + 4)), qhi = std::floor(*std::max_element(c, c + 4));
  if (!rem) return make(qlo, qhi, false);
  // The remainder has b's sign (or is a zero), and is at most |b| (r + b rounds).
  double lo = b.lo > 0 ? 0 : b.lo, hi = b.lo > 0 ? b.hi : 0;
  if (qlo == qhi) {  // one quotient n over the box: a - n b, monotone in a and b
    const double r[4] = {a.lo - qlo * b.lo, a.lo - qlo * b.hi, a.hi - qlo * b.lo, a.hi - qlo * b.hi};
    lo = std::max(lo, wlo(*std::min_element(r, r + 4), 1));
    hi = std::min(hi, whi(*std::max_element(r, r + 4), 1));
  }
  return make(lo, hi, false);
}

IV binary_ref(int op, const IV& a, const IV& b) {
  if (op == kPow && (a.nan || b.nan)) return pow_ref(a, b);
  if (empty(a) || empty(b)) return must_nan();
  const bool nan = a.nan || b.nan;
  const bool points = is_point(a) && is_point(b);
  const bool zs = sign_known(a) && sign_known(b);
  auto finish = [&](IV r) {
    r.nan = r.nan || nan;
    return r;
  };
  auto exact = [&](double y) {
    if (std::isnan(y)) return finish(must_nan());
    return finish(IV{rn(y), rn(y), false, zs});
  };
  switch (op) {
    case kAdd:
    case kSub: {
      const IV bb = op == kSub ? IV{-b.hi, -b.lo, b.nan, b.zs} : b;
      if (points) return exact(a.lo + bb.lo);
      const bool n = (a.hi == kInfD && bb.lo == -kInfD) || (a.lo == -kInfD && bb.hi == kInfD);
      double lo = a.lo + bb.lo, hi = a.hi + bb.hi;
      if (std::isnan(lo)) lo = -kInfD;
      if (std::isnan(hi)) hi = kInfD;
      return finish(make(rn(lo), rn(hi), n));
    }
    case kMul: {
      if (points) return exact(a.lo * b.lo);
      const double c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
      for (double v : c)
        if (std::isnan(v)) return finish(any());
      // 0 * inf inside the box, where no corner shows it.
      auto has0 = [](const IV& x) { return x.lo <= 0 && x.hi >= 0; };
      auto hasinf = [](const IV& x) { return std::isinf(x.lo) || std::isinf(x.hi); };
      const bool n = (has0(a) && hasinf(b)) || (has0(b) && hasinf(a));
      return finish(make(rn(*std::min_element(c, c + 4)), rn(*std::max_element(c, c + 4)), n));
    }
    case kDiv: {
      if (points && (b.lo != 0 || b.zs)) return exact(a.lo / b.lo);
      if (b.lo <= 0 && b.hi >= 0) return finish(any());
      const double c[4] = {a.lo / b.lo, a.lo / b.hi, a.hi / b.lo, a.hi / b.hi};
      for (double v : c)
        if (std::isnan(v)) return finish(any());
      return finish(make(rn(*std::min_element(c, c + 4)), rn(*std::max_element(c, c + 4)), false));
    }
    case kMaximum:
    case kMinimum: {
      const bool mx = op == kMaximum;
      IV r = make(mx ? std::max(a.lo, b.lo) : std::min(a.lo, b.lo), mx ? std::max(a.hi, b.hi) : std::min(a.hi, b.hi),
                  false);
      if (points) {
        r.zs = zs;
        if (a.lo == 0 && b.lo == 0) {
          if (std::signbit(a.lo) != std::signbit(b.lo)) r.zs = false;  // a tie of zeros: either sign
          else r.lo = r.hi = a.lo;
        } else {
          r.lo = r.hi = mx ? (a.lo > b.lo ? a.lo : b.lo) : (a.lo < b.lo ? a.lo : b.lo);
        }
      }
      return finish(r);
    }
    case kPow: {
      if (points && zs) return finish(pow_point(a.lo, b.lo));
      if (!(a.lo > 0) || !std::isfinite(a.hi) || !std::isfinite(b.lo) || !std::isfinite(b.hi)) return finish(any());
      double lo = kInfD, hi = -kInfD;
      for (double x : {a.lo, a.hi})
        for (double y : {b.lo, b.hi}) {
          const IV c = pow_point(x, y);
          lo = std::min(lo, c.lo);
          hi = std::max(hi, c.hi);
        }
      return finish(make(lo, hi, false));
    }
    case kFloorDiv:
    case kRemainder: return finish(division_ref(op == kRemainder, a, b));
  }
  return any();
}

// The bool ops' operands: 0 false, 1 true, 2 either (nonzero and NaN are true).
int truth(const IV& x) {
  if (empty(x)) return 1;
  const bool can0 = x.lo <= 0 && x.hi >= 0;
  if (!can0) return 1;
  if (is_point(x) && !x.nan) return 0;
  return 2;
}

IV logic_ref(int op, const IV& a, const IV& b) {
  const int x = truth(a), y = op == kBitNot || op == kLogNot ? 0 : truth(b);
  int r = 2;
  switch (op) {
    case kBitAnd:
    case kLogAnd:
    case kBoolMul: r = x == 0 || y == 0 ? 0 : x == 1 && y == 1 ? 1 : 2; break;
    case kBitOr:
    case kLogOr:
    case kBoolAdd: r = x == 1 || y == 1 ? 1 : x == 0 && y == 0 ? 0 : 2; break;
    case kBitXor:
    case kLogXor: r = x == 2 || y == 2 ? 2 : x ^ y; break;
    default: r = x == 2 ? 2 : 1 - x; break;  // not
  }
  return r == 2 ? make(0, 1, false) : point(r);
}

IV compare_ref(int op, const IV& a, const IV& b) {
  // The result without NaNs: 0, 1 or either.
  int res = 2;  // 0, 1, 2 = either
  const bool a_nan = empty(a), b_nan = empty(b);
  if (!a_nan && !b_nan) {
    switch (op) {
      case kEq:
      case kNe:
        if (is_point(a) && is_point(b)) res = a.lo == b.lo;
        else if (a.hi < b.lo || b.hi < a.lo) res = 0;
        if (op == kNe && res != 2) res = 1 - res;
        break;
      case kLt: res = a.hi < b.lo ? 1 : a.lo >= b.hi ? 0 : 2; break;
      case kLe: res = a.hi <= b.lo ? 1 : a.lo > b.hi ? 0 : 2; break;
      case kGt: res = a.lo > b.hi ? 1 : a.hi <= b.lo ? 0 : 2; break;
      case kGe: res = a.lo >= b.hi ? 1 : a.hi < b.lo ? 0 : 2; break;
    }
  }
  const int with_nan = op == kNe ? 1 : 0;  // what a NaN operand gives
  if (a_nan || b_nan) res = with_nan;
  else if ((a.nan || b.nan) && res != with_nan) res = 2;
  if (res == 2) return make(0, 1, false);
  return point(res);
}

IV where_ref(const IV& m, const IV& a, const IV& b) {
  if (is_point(m) && m.lo == 1) return a;
  if (is_point(m) && m.lo == 0) return b;
  IV r;
  r.lo = std::min(a.lo, b.lo);
  r.hi = std::max(a.hi, b.hi);
  r.nan = a.nan || b.nan;
  r.zs = a.zs && b.zs && is_point(a) && is_point(b) && a.lo == b.lo && std::signbit(a.lo) == std::signbit(b.lo);
  if (r.zs) r.lo = r.hi = a.lo;
  return r;
}

// ---------------------------------------------------------------------------
// Reference arrays
// ---------------------------------------------------------------------------
struct RV {
  std::vector<int64_t> shape;
  std::vector<IV> v;
};

std::vector<int64_t> strides_of(const std::vector<int64_t>& s) {
  std::vector<int64_t> st(s.size());
  int64_t k = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = k;
    k *= s[i];
  }
  return st;
}

// For each element of `out`, the index of the element of an operand of
// shape `in` that numpy broadcasting reads.
std::vector<int64_t> bcast_map(const std::vector<int64_t>& out, const std::vector<int64_t>& in) {
  const size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> ist = strides_of(in), st(r, 0);
  for (size_t i = lead; i < r; ++i)
    if (in[i - lead] != 1) st[i] = ist[i - lead];
  const int64_t n = numel(out);
  std::vector<int64_t> m(static_cast<size_t>(n));
  std::vector<int64_t> idx(r, 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = 0;
    for (size_t i = 0; i < r; ++i) o += idx[i] * st[i];
    m[static_cast<size_t>(e)] = o;
    for (size_t i = r; i-- > 0;)
      if (++idx[i] < out[i]) break;
      else idx[i] = 0;
  }
  return m;
}

std::vector<int64_t> bshape(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> o(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    o[i] = da == 1 ? db : da;
  }
  return o;
}

RV map1(const RV& x, const std::function<IV(const IV&)>& f) {
  RV r{x.shape, {}};
  r.v.reserve(x.v.size());
  for (const IV& e : x.v) r.v.push_back(f(e));
  return r;
}

RV map2(const RV& a, const RV& b, const std::function<IV(const IV&, const IV&)>& f) {
  RV r;
  r.shape = bshape(a.shape, b.shape);
  const std::vector<int64_t> ma = bcast_map(r.shape, a.shape), mb = bcast_map(r.shape, b.shape);
  r.v.resize(ma.size());
  for (size_t i = 0; i < ma.size(); ++i) r.v[i] = f(a.v[static_cast<size_t>(ma[i])], b.v[static_cast<size_t>(mb[i])]);
  return r;
}

RV scalar_rv(double s) { return RV{{}, {point(s)}}; }

// A reduction over `axes` (sorted; empty: all), as the tracer records it.
RV reduce_rv(int op, const RV& x, std::vector<int> axes, bool keepdim) {
  const size_t rank = x.shape.size();
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i) axes.push_back(static_cast<int>(i));
  std::vector<bool> red(rank, false);
  for (int a : axes) red[static_cast<size_t>(a)] = true;
  std::vector<int64_t> kshape;
  RV r;
  for (size_t i = 0; i < rank; ++i) {
    kshape.push_back(red[i] ? 1 : x.shape[i]);
    if (!red[i]) r.shape.push_back(x.shape[i]);
    else if (keepdim) r.shape.push_back(1);
  }
  const int64_t nout = numel(kshape), nin = numel(x.shape);
  const int64_t count = nout == 0 ? 0 : nin / std::max<int64_t>(nout, 1);
  std::vector<int64_t> m = bcast_map(x.shape, kshape);  // input element -> output element
  struct Acc {
    double lo = 0, hi = 0, mag = 0;
    bool nan = false, must_nan = false, pinf = false, ninf = false, pinf_must = false, ninf_must = false;
    double mlo = -kInfD, mhi = -kInfD;  // max; min uses negation
  };
  std::vector<Acc> acc(static_cast<size_t>(nout));
  const bool is_min = op == kMin;
  for (int64_t e = 0; e < nin; ++e) {
    const IV& v = x.v[static_cast<size_t>(e)];
    Acc& a = acc[static_cast<size_t>(m[static_cast<size_t>(e)])];
    a.nan = a.nan || v.nan;
    if (empty(v)) {
      a.must_nan = true;
      continue;
    }
    if (op == kSum) {
      a.pinf = a.pinf || v.hi == kInfD;
      a.ninf = a.ninf || v.lo == -kInfD;
      a.pinf_must = a.pinf_must || v.lo == kInfD;
      a.ninf_must = a.ninf_must || v.hi == -kInfD;
      if (std::isfinite(v.lo)) a.lo += v.lo;
      if (std::isfinite(v.hi)) a.hi += v.hi;
      const double mg = std::max(std::isfinite(v.lo) ? std::fabs(v.lo) : 0.0, std::isfinite(v.hi) ? std::fabs(v.hi) : 0.0);
      a.mag += mg;
    } else {
      const double lo = is_min ? -v.hi : v.lo, hi = is_min ? -v.lo : v.hi;
      a.mlo = std::max(a.mlo, lo);
      a.mhi = std::max(a.mhi, hi);
    }
  }
  r.v.resize(static_cast<size_t>(nout));
  for (int64_t o = 0; o < nout; ++o) {
    const Acc& a = acc[static_cast<size_t>(o)];
    IV& y = r.v[static_cast<size_t>(o)];
    if (a.must_nan) {
      y = must_nan();
      continue;
    }
    if (op != kSum) {
      y = is_min ? make(-a.mhi, -a.mlo, a.nan) : make(a.mlo, a.mhi, a.nan);
      continue;
    }
    if (a.pinf_must && a.ninf_must) {
      y = must_nan();
      continue;
    }
    // Any summation order: |error| <= (n-1) u sum|x_i| (first order; 1.1
    // covers the higher-order terms for n u < 0.1). Past FLT_MAX a partial
    // sum may overflow, and opposite overflows give NaN.
    if (a.mag >= 0x1.fffffep127) {
      y = any();
      continue;
    }
    const double err = 1.1 * static_cast<double>(std::max<int64_t>(count - 1, 0)) * 0x1.0p-24 * a.mag;
    y = make(a.ninf ? -kInfD : rn(a.lo - err), a.pinf ? kInfD : rn(a.hi + err), a.nan || (a.pinf && a.ninf));
    if (a.pinf_must) y.lo = kInfD;
    if (a.ninf_must) y.hi = -kInfD;
    if (y.lo > y.hi) y = must_nan();
  }
  return r;
}

RV permute_rv(const RV& x, const std::vector<int>& perm) {
  RV r;
  const std::vector<int64_t> st = strides_of(x.shape);
  std::vector<int64_t> pst;
  for (int a : perm) {
    r.shape.push_back(x.shape[static_cast<size_t>(a)]);
    pst.push_back(st[static_cast<size_t>(a)]);
  }
  const int64_t n = numel(r.shape);
  std::vector<int64_t> idx(r.shape.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t o = 0;
    for (size_t i = 0; i < idx.size(); ++i) o += idx[i] * pst[i];
    r.v.push_back(x.v[static_cast<size_t>(o)]);
    for (size_t i = idx.size(); i-- > 0;)
      if (++idx[i] < r.shape[i]) break;
      else idx[i] = 0;
  }
  return r;
}

RV slice_rv(const RV& x, int axis, int64_t start, int64_t end, int64_t step) {
  const int64_t n = x.shape[static_cast<size_t>(axis)];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  RV r;
  r.shape = x.shape;
  r.shape[static_cast<size_t>(axis)] = (end - start + step - 1) / step;
  const std::vector<int64_t> st = strides_of(x.shape);
  const int64_t total = numel(r.shape);
  std::vector<int64_t> idx(r.shape.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t o = 0;
    for (size_t i = 0; i < idx.size(); ++i)
      o += (static_cast<int>(i) == axis ? start + idx[i] * step : idx[i]) * st[i];
    r.v.push_back(x.v[static_cast<size_t>(o)]);
    for (size_t i = idx.size(); i-- > 0;)
      if (++idx[i] < r.shape[i]) break;
      else idx[i] = 0;
  }
  return r;
}

RV expand_rv(const RV& x, const std::vector<int64_t>& to) {
  RV r{to, {}};
  for (int64_t i : bcast_map(to, x.shape)) r.v.push_back(x.v[static_cast<size_t>(i)]);
  return r;
}

// One element of a product: sum over k of x[k xs] * y[k ys]. The exact sum
// of the interval products, widened by the rounding of any order of K fused
// or unfused multiply-adds from +0: |error| <= K u sum_k |x_k y_k| (1.1
// covers the higher-order terms for K u < 0.1, and this sum's own double
// roundings), plus 2^-150 per step where a result underflows. Infinite
// terms as reduce_rv's sum; 0 * inf gives NaN.
IV dot_iv(const IV* x, int64_t xs, const IV* y, int64_t ys, int64_t K) {
  if (K == 0) return point(0.0);
  double lo = 0, hi = 0, mag = 0;
  bool nan = false, pinf = false, ninf = false, pinf_must = false, ninf_must = false;
  auto has0 = [](const IV& v) { return v.lo <= 0 && v.hi >= 0; };
  auto hasinf = [](const IV& v) { return std::isinf(v.lo) || std::isinf(v.hi); };
  for (int64_t k = 0; k < K; ++k) {
    const IV& a = x[k * xs];
    const IV& b = y[k * ys];
    if (empty(a) || empty(b)) return must_nan();  // NaN in any term: NaN
    nan = nan || a.nan || b.nan;
    const double c[4] = {a.lo * b.lo, a.lo * b.hi, a.hi * b.lo, a.hi * b.hi};
    bool corner_nan = false;
    for (double v : c) corner_nan = corner_nan || std::isnan(v);
    if (corner_nan) {
      if (is_point(a) && is_point(b)) return must_nan();  // 0 * inf
      return any();
    }
    nan = nan || (has0(a) && hasinf(b)) || (has0(b) && hasinf(a));
    const double plo = *std::min_element(c, c + 4), phi = *std::max_element(c, c + 4);
    pinf = pinf || phi == kInfD;
    ninf = ninf || plo == -kInfD;
    pinf_must = pinf_must || plo == kInfD;
    ninf_must = ninf_must || phi == -kInfD;
    if (std::isfinite(plo)) lo += plo;
    if (std::isfinite(phi)) hi += phi;
    mag += std::max(std::isfinite(plo) ? std::fabs(plo) : 0.0, std::isfinite(phi) ? std::fabs(phi) : 0.0);
  }
  if (pinf_must && ninf_must) return must_nan();
  const double kd = static_cast<double>(K);
  // A partial sum past FLT_MAX overflows, and opposite overflows give NaN.
  if (mag * (1 + 2 * kd * 0x1.0p-24) >= 0x1.fffffep127) return any();
  const double err = 1.1 * kd * 0x1.0p-24 * mag + kd * 0x1.0p-149;
  IV r = make(ninf ? -kInfD : rn(lo - err), pinf ? kInfD : rn(hi + err), nan || (pinf && ninf));
  if (pinf_must) r.lo = kInfD;
  if (ninf_must) r.hi = -kInfD;
  if (r.lo > r.hi) return must_nan();
  return r;
}

// torch.matmul: 1-D operands promoted (a to [1, K], b to [K, 1]) and the
// added dim dropped; batch dims broadcast.
RV matmul_rv(const RV& a, const RV& b) {
  const bool a1 = a.shape.size() == 1, b1 = b.shape.size() == 1;
  const std::vector<int64_t> sa = a1 ? std::vector<int64_t>{1, a.shape[0]} : a.shape;
  const std::vector<int64_t> sb = b1 ? std::vector<int64_t>{b.shape[0], 1} : b.shape;
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  const std::vector<int64_t> ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2);
  RV r;
  r.shape = bshape(ba, bb);
  const std::vector<int64_t> ma = bcast_map(r.shape, ba), mb = bcast_map(r.shape, bb);
  if (!a1) r.shape.push_back(M);
  if (!b1) r.shape.push_back(N);
  r.v.resize(ma.size() * static_cast<size_t>(M * N));
  size_t e = 0;
  for (size_t q = 0; q < ma.size(); ++q)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        r.v[e++] = dot_iv(a.v.data() + ma[q] * M * K + m * K, 1, b.v.data() + mb[q] * K * N + n, N, K);
  return r;
}

RV transpose2_rv(const RV& x) { return permute_rv(x, {1, 0}); }

std::vector<int> sorted_axes(const Op& o) {
  std::vector<int> a = o.axes;
  std::sort(a.begin(), a.end());
  return a;
}

std::vector<RV> reference(const Program& p, const Instance& in, const std::vector<std::vector<float>>& data) {
  std::vector<RV> v(p.ops.size());
  auto sub = [&](const RV& a, const RV& b) { return map2(a, b, [](const IV& x, const IV& y) { return binary_ref(kSub, x, y); }); };
  auto mul = [&](const RV& a, const RV& b) { return map2(a, b, [](const IV& x, const IV& y) { return binary_ref(kMul, x, y); }); };
  auto un = [&](int op, const RV& a) { return map1(a, [op](const IV& x) { return unary_ref(op, x); }); };
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    const std::vector<int64_t> shape = eval_shape(p, o.shape, in.sizes);
    auto val = [&](int id) -> const RV& { return v[static_cast<size_t>(id)]; };
    RV& r = v[i];
    switch (o.kind) {
      case OpK::Leaf:
        r.shape = shape;
        for (float f : data[i]) r.v.push_back(std::isnan(f) ? must_nan() : point(f));
        break;
      case OpK::Full:
        r.shape = shape;
        r.v.assign(static_cast<size_t>(numel(shape)), std::isnan(o.s) ? must_nan() : point(o.s));
        break;
      case OpK::Unary: r = un(o.sub, val(o.a)); break;
      case OpK::Binary: {
        const int op = o.sub;
        r = map2(val(o.a), val(o.b), [op](const IV& x, const IV& y) { return binary_ref(op, x, y); });
        break;
      }
      case OpK::Scalar: {
        const int op = o.sub;
        const RV s{{}, {std::isnan(o.s) ? must_nan() : point(o.s)}};
        // A tensor to these float exponents is another op, as torch's scalar
        // pow; a 0-d tensor exponent (form 1, Tensor::scalar) is a tensor's.
        if (op == kPow && o.pos == 1 && o.form == 0 && (o.s == 2.0f || o.s == 3.0f || o.s == -1.0f || o.s == -2.0f ||
                                         o.s == 0.5f || o.s == -0.5f)) {
          const RV x = val(o.a);
          const RV one = scalar_rv(1);
          const RV x2 = mul(x, x);
          if (o.s == 2.0f) r = x2;
          else if (o.s == 3.0f) r = mul(x2, x);
          else if (o.s == 0.5f) r = un(kSqrt, x);
          else if (o.s == -0.5f) r = un(kRsqrt, x);
          else r = map2(one, o.s == -1.0f ? x : x2, [](const IV& p, const IV& q) { return binary_ref(kDiv, p, q); });
          r.shape = x.shape;
          break;
        }
        r = o.pos == 1 ? map2(val(o.a), s, [op](const IV& x, const IV& y) { return binary_ref(op, x, y); })
                       : map2(s, val(o.a), [op](const IV& x, const IV& y) { return binary_ref(op, x, y); });
        r.shape = val(o.a).shape;
        break;
      }
      case OpK::Compare: {
        const int op = o.sub;
        const RV b = o.b >= 0 ? val(o.b) : RV{{}, {std::isnan(o.s) ? must_nan() : point(o.s)}};
        r = map2(val(o.a), b, [op](const IV& x, const IV& y) { return compare_ref(op, x, y); });
        break;
      }
      case OpK::Logic: {
        const int op = o.sub;
        r = o.b >= 0 ? map2(val(o.a), val(o.b), [op](const IV& x, const IV& y) { return logic_ref(op, x, y); })
                     : map1(val(o.a), [op](const IV& x) { return logic_ref(op, x, x); });
        break;
      }
      case OpK::Where: {
        const RV sc{{}, {std::isnan(o.s) ? must_nan() : point(o.s)}};
        const RV& b = val(o.b);
        const RV& c = o.c >= 0 ? val(o.c) : sc;
        const RV& x = o.form == 1 ? c : b;  // form 1: c (or the scalar) goes first
        const RV& y = o.form == 1 ? b : c;
        const RV& m = val(o.a);
        r.shape = bshape(bshape(m.shape, x.shape), y.shape);
        const std::vector<int64_t> mm = bcast_map(r.shape, m.shape), mx = bcast_map(r.shape, x.shape),
                                   my = bcast_map(r.shape, y.shape);
        for (size_t k = 0; k < mm.size(); ++k)
          r.v.push_back(where_ref(m.v[static_cast<size_t>(mm[k])], x.v[static_cast<size_t>(mx[k])],
                                  y.v[static_cast<size_t>(my[k])]));
        break;
      }
      case OpK::Reduce: {
        const RV& x = val(o.a);
        if (x.shape.empty()) {
          r = x;  // a scalar reduces to itself
          if (o.sub == kMean) r = map2(r, scalar_rv(1), [](const IV& a, const IV& b) { return binary_ref(kDiv, a, b); });
          break;
        }
        const std::vector<int> axes = sorted_axes(o);
        const bool single = axes.empty() || axes.back() - axes.front() + 1 == static_cast<int>(axes.size());
        r = reduce_rv(o.sub == kMean ? kSum : o.sub, x, axes, o.keepdim || !single);
        if (!o.keepdim && !single) r.shape = shape;
        if (o.sub == kMean) {
          int64_t count = 1;
          if (axes.empty()) count = numel(x.shape);
          for (int a : axes) count *= x.shape[static_cast<size_t>(a)];
          r = map2(r, scalar_rv(rn(static_cast<double>(count))),
                   [](const IV& a, const IV& b) { return binary_ref(kDiv, a, b); });
        }
        r.shape = shape;
        break;
      }
      case OpK::Softmax: {
        const RV& x = val(o.a);
        if (!x.shape.empty() && x.shape[static_cast<size_t>(o.axis)] == 0) {
          r = x;
          break;
        }
        // A 0-d tensor is its own one-element row (axis 0 or -1, as torch).
        const std::vector<int> ax = x.shape.empty() ? std::vector<int>{} : std::vector<int>{o.axis};
        const RV mx = reduce_rv(kMax, x, ax, true);
        if (o.sub == 0) {
          const RV e = un(kExp, sub(x, mx));
          r = mul(e, un(kRecip, reduce_rv(kSum, e, ax, true)));
        } else {
          const RV sh = sub(x, mx);
          r = sub(sh, un(kLog, reduce_rv(kSum, un(kExp, sh), ax, true)));
        }
        break;
      }
      case OpK::LayerNorm: {
        const RV& x = val(o.a);
        const int rank = static_cast<int>(x.shape.size());
        std::vector<int> axes;
        int64_t n = 1;
        for (int k = rank - o.axis; k < rank; ++k) axes.push_back(k), n *= x.shape[static_cast<size_t>(k)];
        const RV inv = scalar_rv(rn(1.0 / static_cast<double>(n)));
        const RV xc = sub(x, mul(reduce_rv(kSum, x, axes, true), inv));
        const RV var = mul(reduce_rv(kSum, mul(xc, xc), axes, true), inv);
        const RV ve = map2(var, scalar_rv(o.s), [](const IV& a, const IV& b) { return binary_ref(kAdd, a, b); });
        r = mul(xc, un(kRsqrt, ve));
        if (o.b >= 0) r = mul(r, val(o.b));
        if (o.c >= 0) r = map2(r, val(o.c), [](const IV& a, const IV& b) { return binary_ref(kAdd, a, b); });
        break;
      }
      case OpK::Reshape:
        r = val(o.a);
        r.shape = shape;
        break;
      case OpK::Permute: r = permute_rv(val(o.a), o.axes); break;
      case OpK::Slice: r = slice_rv(val(o.a), o.axis, o.start, o.end, o.step); break;
      case OpK::Expand: r = expand_rv(val(o.a), shape); break;
      case OpK::Contiguous:
      case OpK::Sync: r = val(o.a); break;
      case OpK::MatMul: {
        auto add = [](const RV& x, const RV& y) {
          return map2(x, y, [](const IV& p, const IV& q) { return binary_ref(kAdd, p, q); });
        };
        auto scale = [&](const RV& x, float f) { return mul(x, RV{{}, {std::isnan(f) ? must_nan() : point(f)}}); };
        if (o.form == 2) {  // linear: x @ weight^T (+ bias)
          r = matmul_rv(val(o.a), transpose2_rv(val(o.b)));
          if (o.c >= 0) r = add(r, val(o.c));
        } else if (o.form == 3) {  // addmm, as tensor.cpp spells it
          r = matmul_rv(val(o.a), val(o.b));
          if (o.s2 == 0.0f) {
            // alpha 0 ignores the product, infinities too: the result is
            // beta * input, which -0 + beta * input is, signs of zero
            // included (and +0 when beta is 0 too).
            for (IV& e : r.v) e = point(o.s == 0.0f ? 0.0 : -0.0);
          } else if (o.s2 != 1.0f) {
            r = scale(r, o.s2);
          }
          if (o.s != 0.0f) r = add(r, o.s == 1.0f ? val(o.c) : scale(val(o.c), o.s));
        } else {
          r = matmul_rv(val(o.a), val(o.b));
        }
        r.shape = shape;
        break;
      }
    }
  }
  return v;
}

// ---------------------------------------------------------------------------
// Running on dvm
// ---------------------------------------------------------------------------
Tensor scalar_tensor(float s, int form) { return form == 0 ? Tensor(s) : Tensor::scalar(s); }

Tensor apply_unary(int op, const Tensor& x) {
  switch (op) {
    case kNeg: return -x;
    case kAbs: return dvm::abs(x);
    case kExp: return dvm::exp(x);
    case kLog: return dvm::log(x);
    case kSqrt: return dvm::sqrt(x);
    case kRsqrt: return dvm::rsqrt(x);
    case kRecip: return dvm::reciprocal(x);
    case kTanh: return dvm::tanh(x);
    case kSigmoid: return dvm::sigmoid(x);
    case kRelu: return dvm::relu(x);
    case kGeluTanh: return dvm::gelu(x, GeluApprox::Tanh);
    case kGeluErf: return dvm::gelu(x);
    case kErf: return dvm::erf(x);
    case kSin: return dvm::sin(x);
    case kCos: return dvm::cos(x);
    case kFloor: return dvm::floor(x);
    case kCeil: return dvm::ceil(x);
    default: return dvm::round(x);
  }
}

Tensor apply_binary(int op, const Tensor& a, const Tensor& b, bool oper) {
  switch (op) {
    case kAdd: return oper ? a + b : dvm::add(a, b);
    case kSub: return oper ? a - b : dvm::sub(a, b);
    case kMul: return oper ? a * b : dvm::mul(a, b);
    case kDiv: return oper ? a / b : dvm::div(a, b);
    case kMaximum: return dvm::maximum(a, b);
    case kMinimum: return dvm::minimum(a, b);
    case kFloorDiv: return dvm::floor_divide(a, b);
    case kRemainder: return dvm::remainder(a, b);
    default: return dvm::pow(a, b);
  }
}

Tensor apply_logic(const Op& o, const Tensor& a, const Tensor& b) {
  const bool oper = o.form == 1;
  switch (o.sub) {
    case kBitAnd: return oper ? a & b : dvm::bitwise_and(a, b);
    case kBitOr: return oper ? a | b : dvm::bitwise_or(a, b);
    case kBitXor: return oper ? a ^ b : dvm::bitwise_xor(a, b);
    case kBitNot: return oper ? ~a : dvm::bitwise_not(a);
    case kLogAnd: return dvm::logical_and(a, b);
    case kLogOr: return dvm::logical_or(a, b);
    case kLogXor: return dvm::logical_xor(a, b);
    case kLogNot: return dvm::logical_not(a);
    case kBoolAdd: return oper ? a + b : dvm::add(a, b);
    default: return oper ? a * b : dvm::mul(a, b);
  }
}

Tensor apply_scalar(const Op& o, const Tensor& x) {
  if (o.form == 0) {
    switch (o.sub) {
      case kAdd: return o.pos ? x + o.s : o.s + x;
      case kSub: return o.pos ? x - o.s : o.s - x;
      case kMul: return o.pos ? x * o.s : o.s * x;
      case kDiv: return o.pos ? x / o.s : o.s / x;
      case kPow: return dvm::pow(x, o.s);
      default: break;
    }
  }
  const Tensor s = scalar_tensor(o.s, o.form == 0 ? 0 : 1);
  return o.pos ? apply_binary(o.sub, x, s, false) : apply_binary(o.sub, s, x, false);
}

Tensor apply_compare(int op, const Tensor& a, const Tensor& b) {
  switch (op) {
    case kEq: return dvm::eq(a, b);
    case kNe: return dvm::ne(a, b);
    case kLt: return dvm::lt(a, b);
    case kLe: return dvm::le(a, b);
    case kGt: return dvm::gt(a, b);
    default: return dvm::ge(a, b);
  }
}

int signed_axis(int a, size_t rank, bool negative) { return negative ? a - static_cast<int>(rank) : a; }

Tensor apply_reduce(const Op& o, const Tensor& x) {
  const size_t rank = static_cast<size_t>(x.rank());
  std::vector<int> ax;
  for (int a : o.axes) ax.push_back(signed_axis(a, std::max<size_t>(rank, 1), o.form == 1));
  auto call = [&](auto&& f0, auto&& f) -> Tensor {
    switch (ax.size()) {
      case 0: return f0();
      case 1: return f({ax[0]});
      case 2: return f({ax[0], ax[1]});
      case 3: return f({ax[0], ax[1], ax[2]});
      default: return f({ax[0], ax[1], ax[2], ax[3]});
    }
  };
  switch (o.sub) {
    case kSum: return call([&] { return x.sum(); }, [&](std::initializer_list<int> l) { return x.sum(l, o.keepdim); });
    case kMax: return call([&] { return x.max(); }, [&](std::initializer_list<int> l) { return x.max(l, o.keepdim); });
    case kMin: return call([&] { return x.min(); }, [&](std::initializer_list<int> l) { return x.min(l, o.keepdim); });
    default: return call([&] { return x.mean(); }, [&](std::initializer_list<int> l) { return x.mean(l, o.keepdim); });
  }
}

Shape to_shape(const std::vector<int64_t>& s) { return Shape(s); }

// The two axes a permutation of form 1 swaps (a swap of an axis with itself: both the same).
std::pair<int, int> transposed_pair(const std::vector<int>& perm) {
  int x = -1, y = -1;
  for (int k = 0; k < static_cast<int>(perm.size()); ++k)
    if (perm[static_cast<size_t>(k)] != k) (x < 0 ? x : y) = k;
  return {x < 0 ? 0 : x, y < 0 ? (x < 0 ? 0 : x) : y};
}

struct RunOut {
  std::vector<std::vector<float>> values;  // per observed
  std::string error;
};

RunOut run_dvm(const Program& p, const Instance& in, const std::vector<std::vector<float>>& data) {
  RunOut out;
  try {
    std::vector<Tensor> t(p.ops.size());
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const Op& o = p.ops[i];
      auto val = [&](int id) -> const Tensor& { return t[static_cast<size_t>(id)]; };
      const std::vector<int64_t> shape = eval_shape(p, o.shape, in.sizes);
      switch (o.kind) {
        case OpK::Leaf:
          t[i] = o.form == 0   ? Tensor::from_vector(data[i], to_shape(shape))
                 : o.form == 1 ? Tensor::from_blob(data[i].data(), to_shape(shape))
                               : create(o.form, shape, in.data_seed + i);
          break;
        case OpK::Full: t[i] = Tensor::full(to_shape(shape), o.s); break;
        case OpK::Unary: t[i] = apply_unary(o.sub, val(o.a)); break;
        case OpK::Binary: t[i] = apply_binary(o.sub, val(o.a), val(o.b), o.form == 0); break;
        case OpK::Scalar: t[i] = apply_scalar(o, val(o.a)); break;
        case OpK::Compare: t[i] = apply_compare(o.sub, val(o.a), o.b >= 0 ? val(o.b) : Tensor(o.s)); break;
        case OpK::Logic: t[i] = apply_logic(o, val(o.a), o.b >= 0 ? val(o.b) : Tensor()); break;
        case OpK::Where: {
          const Tensor c = o.c >= 0 ? val(o.c) : Tensor(o.s);
          t[i] = o.form == 1 ? dvm::where(val(o.a), c, val(o.b)) : dvm::where(val(o.a), val(o.b), c);
          break;
        }
        case OpK::Reduce: t[i] = apply_reduce(o, val(o.a)); break;
        case OpK::Softmax: {
          const int ax = signed_axis(o.axis, std::max<size_t>(o.shape.size(), 1), o.form == 1);
          t[i] = o.sub == 0 ? dvm::softmax(val(o.a), ax) : dvm::log_softmax(val(o.a), ax);
          break;
        }
        case OpK::LayerNorm: {
          std::vector<int64_t> ns(shape.end() - o.axis, shape.end());
          t[i] = dvm::layer_norm(val(o.a), to_shape(ns), o.b >= 0 ? val(o.b) : Tensor(), o.c >= 0 ? val(o.c) : Tensor(), o.s);
          break;
        }
        case OpK::Reshape: t[i] = val(o.a).reshape(to_shape(shape)); break;
        case OpK::Permute: {
          if (o.form == 1) {
            const auto [x, y] = transposed_pair(o.axes);
            t[i] = val(o.a).transpose(x, y);
          } else {
            t[i] = val(o.a).permute(o.axes);
          }
          break;
        }
        case OpK::Slice: t[i] = val(o.a).slice(o.axis, o.start, o.end, o.step); break;
        case OpK::Expand:
          t[i] = o.form == 0 ? val(o.a).expand(to_shape(shape)) : val(o.a).broadcast_to(to_shape(shape));
          break;
        case OpK::Contiguous: t[i] = val(o.a).contiguous(); break;
        case OpK::Sync:
          t[i] = val(o.a);
          t[i].sync();
          break;
        case OpK::MatMul:
          switch (o.form) {
            case 0: t[i] = dvm::matmul(val(o.a), val(o.b)); break;
            case 1: t[i] = dvm::bmm(val(o.a), val(o.b)); break;
            case 2: t[i] = dvm::linear(val(o.a), val(o.b), o.c >= 0 ? val(o.c) : Tensor()); break;
            default: t[i] = dvm::addmm(val(o.c), val(o.a), val(o.b), o.s, o.s2); break;
          }
          break;
      }
    }
    for (int id : p.observed) out.values.push_back(t[static_cast<size_t>(id)].to_vector());
  } catch (const dvm::Error& e) {
    out.error = std::string("dvm::Error: ") + e.what();
  } catch (const std::exception& e) {
    out.error = std::string("std::exception (not dvm::Error): ") + e.what();
  }
  return out;
}

// ---------------------------------------------------------------------------
// Known defects of issue 14 that other changes are fixing. Programs that hit
// one are skipped and counted; delete an item's case once its fix is merged.
// `error` is empty for the check before running, else the dvm::Error a run
// threw (a case there matches the error's text and the program's pattern).
// ---------------------------------------------------------------------------
int known_defect(const Program& p, const std::string& error) {
  (void)p;
  (void)error;
  // Defects known before a run (a program pattern, error empty) or by the
  // error a run throws go here, each with its issue item; items 1, 2, 4 and 9
  // were, until their fixes.
  return 0;
}

int known_defect_logged(const Program& p, const std::string& error) {
  const int item = known_defect(p, error);
  if (item && !error.empty() && std::getenv("DVM_RANDOM_VERBOSE"))
    std::fprintf(stderr, "seed %llu: known defect (item %d): %s\n", static_cast<unsigned long long>(p.seed), item,
                 error.c_str());
  return item;
}

// ---------------------------------------------------------------------------
// Checking
// ---------------------------------------------------------------------------
bool same_bits(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  uint32_t x, y;
  std::memcpy(&x, &a, 4);
  std::memcpy(&y, &b, 4);
  return x == y;
}

bool inside(float f, const IV& r) {
  if (std::isnan(f)) return r.nan;
  if (!(r.lo <= f && f <= r.hi)) return false;
  if (r.lo == 0 && r.hi == 0 && r.zs) return std::signbit(f) == std::signbit(r.lo);
  return true;
}

std::string fmt(double x) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", x);
  return b;
}

std::string describe(const IV& r) {
  if (empty(r)) return "NaN";
  std::string s = "[" + fmt(r.lo) + ", " + fmt(r.hi) + "]";
  if (r.nan) s += " or NaN";
  return s;
}

std::string index_text(const std::vector<int64_t>& shape, int64_t e) {
  std::string s;
  std::vector<int64_t> idx(shape.size());
  for (size_t i = shape.size(); i-- > 0;) {
    idx[i] = e % shape[i];
    e /= shape[i];
  }
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return "[" + s + "]";
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t;
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return "{" + t + "}";
}

}  // namespace

// ---------------------------------------------------------------------------
// Public entry points
// ---------------------------------------------------------------------------
Program generate(uint64_t seed) { return Gen(seed).run(); }

constexpr int64_t kMaxContracted = 300;

Instance instantiate(const Program& p, int twin) {
  static const int64_t kSizes[] = {2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1000, 1025};
  Rng r(p.seed * 7919u + static_cast<uint64_t>(twin) * 104729u + 1);
  Instance in;
  in.data_seed = mix(p.seed ^ (static_cast<uint64_t>(twin) << 48));
  // Mostly small sizes; a few programs get large ones (parallel launches).
  const int64_t budget = Rng(p.seed + 17).chance(0.01) ? 140000 : 6000;
  for (int v = 0; v < p.nvars; ++v) {
    const int top = r.chance(0.6) ? 12 : static_cast<int>(std::size(kSizes));
    in.sizes.push_back(kSizes[r.below(top)]);
  }
  for (int guard = 0; guard < 200; ++guard) {
    int64_t worst = 0;
    bool products_fit = true;
    for (const Op& o : p.ops) {
      // Zero extents count as 1: the reference's intermediates (a
      // layer_norm's row statistics over an empty trailing dim) keep the
      // others.
      int64_t n = 1;
      for (int64_t d : eval_shape(p, o.shape, in.sizes)) n *= std::max<int64_t>(d, 1);
      worst = std::max(worst, n);
      // A product's M N K (each output element a K-term sum here and on
      // every tier): K at most a few hundred, the work within 32 budgets.
      if (o.kind == OpK::MatMul) {
        const int64_t K = eval_dim(p, p.ops[static_cast<size_t>(o.a)].shape.back(), in.sizes);
        products_fit = products_fit && K <= kMaxContracted && n * K <= 32 * budget;
      }
    }
    if (worst <= budget && products_fit) break;
    auto it = std::max_element(in.sizes.begin(), in.sizes.end());
    *it = std::max<int64_t>(2, *it / 2);
  }
  return in;
}

std::vector<std::string> available_isas() {
  const std::string before = dvm::isa();
  std::vector<std::string> r;
  for (const char* name : {"portable", "avx2", "avx512"}) {
    dvm::set_isa(name);
    if (dvm::isa() == name) r.push_back(name);
  }
  dvm::set_isa(before);
  return r;
}

std::array<int64_t, 5>& tightness() {
  static std::array<int64_t, 5> counts{};
  return counts;
}

Outcome check(const Program& p, const Instance& in, const CheckOptions& opts) {
  Outcome res;
  res.known_defect = known_defect(p, "");
  if (res.known_defect) return res;
  const std::vector<std::vector<float>> data = make_data(p, in);
  const std::vector<RV> ref = reference(p, in, data);
  for (const std::string& isa : opts.isas) {
    dvm::set_isa(isa);
    std::vector<RunOut> tiers;
    const char* names[2] = {"interpreter", "jit"};
    for (int tier = 0; tier < (opts.jit ? 2 : 1); ++tier) {
      dvm::set_tier_mode(tier == 0 ? TierMode::Off : TierMode::Eager);
      RunOut o = run_dvm(p, in, data);
      const std::string where = std::string(names[tier]) + " on " + isa;
      if (!o.error.empty()) {
        res.known_defect = known_defect_logged(p, o.error);
        if (!res.known_defect) res.failure = "exception: " + where + ": " + o.error;
        return res;
      }
      for (size_t k = 0; k < p.observed.size(); ++k) {
        const RV& want = ref[static_cast<size_t>(p.observed[k])];
        const std::vector<float>& got = o.values[k];
        if (got.size() != want.v.size()) {
          res.failure = "mismatch: " + where + ": value v" + std::to_string(p.observed[k]) + " has " +
                        std::to_string(got.size()) + " elements, expected " + std::to_string(want.v.size());
          return res;
        }
        if (tier == 0 && &isa == &opts.isas.front())
          for (const IV& r : want.v) {
            int c = 4;  // wider (e.g. unbounded)
            if (empty(r)) c = 0;
            else if (is_point(r)) c = 1;
            else if (std::isfinite(r.lo) && std::isfinite(r.hi) && r.hi - r.lo <= 16 * ulp_at(std::max(std::fabs(r.lo), std::fabs(r.hi)))) c = 2;
            else if (std::isfinite(r.lo) && std::isfinite(r.hi)) c = 3;
            ++tightness()[static_cast<size_t>(c)];
          }
        for (size_t e = 0; e < got.size(); ++e)
          if (!inside(got[e], want.v[e])) {
            if (std::getenv("DVM_RANDOM_DUMP"))
              for (size_t q = 0; q < ref.size(); ++q)
                for (size_t x : {size_t{0}, e, e % 64})
                  if (x < ref[q].v.size())
                  std::fprintf(stderr, "v%zu[%zu] = %s\n", q, x, describe(ref[q].v[x]).c_str());
            res.failure = "mismatch: " + where + ": v" + std::to_string(p.observed[k]) + shape_text(want.shape) +
                          " element " + index_text(want.shape, static_cast<int64_t>(e)) + " (flat " + std::to_string(e) +
                          ") is " + fmt(got[e]) + (got[e] == 0 && std::signbit(got[e]) ? " (-0)" : "") +
                          ", expected " + describe(want.v[e]);
            return res;
          }
      }
      tiers.push_back(std::move(o));
    }
    // Launches of 64K elements and more split across threads: one thread
    // must give the same bits.
    int64_t biggest = 0;
    for (const RV& r : ref) biggest = std::max<int64_t>(biggest, static_cast<int64_t>(r.v.size()));
    if (biggest >= 65536) {
      const int threads = dvm::num_threads();
      dvm::set_tier_mode(TierMode::Off);
      dvm::set_num_threads(1);
      RunOut one = run_dvm(p, in, data);
      dvm::set_num_threads(threads);
      if (!one.error.empty()) {
        res.failure = "exception: interpreter on " + isa + " on one thread: " + one.error;
        return res;
      }
      for (size_t k = 0; k < p.observed.size(); ++k)
        for (size_t e = 0; e < one.values[k].size(); ++e)
          if (!same_bits(tiers[0].values[k][e], one.values[k][e])) {
            res.failure = "threads differ: on " + isa + ": v" + std::to_string(p.observed[k]) + " flat element " +
                          std::to_string(e) + ": default threads " + fmt(tiers[0].values[k][e]) + ", one thread " +
                          fmt(one.values[k][e]);
            return res;
          }
    }
    if (tiers.size() == 2)
      for (size_t k = 0; k < p.observed.size(); ++k)
        for (size_t e = 0; e < tiers[0].values[k].size(); ++e)
          if (!same_bits(tiers[0].values[k][e], tiers[1].values[k][e])) {
            res.failure = "tiers differ: on " + isa + ": v" + std::to_string(p.observed[k]) + " flat element " +
                          std::to_string(e) + ": interpreter " + fmt(tiers[0].values[k][e]) + ", jit " +
                          fmt(tiers[1].values[k][e]);
            return res;
          }
  }
  return res;
}

namespace {

std::string failure_class(const std::string& f) { return f.substr(0, f.find(':')); }

// Removes the ops no observed value needs (renumbering the rest).
Program dce(const Program& p) {
  std::vector<bool> live(p.ops.size(), false);
  for (int id : p.observed) live[static_cast<size_t>(id)] = true;
  for (size_t i = p.ops.size(); i-- > 0;) {
    if (!live[i]) continue;
    const Op& o = p.ops[i];
    for (int x : {o.a, o.b, o.c})
      if (x >= 0) live[static_cast<size_t>(x)] = true;
  }
  std::vector<int> remap(p.ops.size(), -1);
  Program q = p;
  q.ops.clear();
  for (size_t i = 0; i < p.ops.size(); ++i) {
    if (!live[i]) continue;
    Op o = p.ops[i];
    for (int* x : {&o.a, &o.b, &o.c})
      if (*x >= 0) *x = remap[static_cast<size_t>(*x)];
    remap[i] = static_cast<int>(q.ops.size());
    q.ops.push_back(o);
  }
  for (int& id : q.observed) id = remap[static_cast<size_t>(id)];
  return q;
}

// Replaces every use of op i by its operand x (same symbolic shape and dtype).
bool bypass(Program& p, int i, int x) {
  const Op& o = p.ops[static_cast<size_t>(i)];
  const Op& src = p.ops[static_cast<size_t>(x)];
  if (src.shape != o.shape || src.is_bool != o.is_bool) return false;
  for (Op& u : p.ops)
    for (int* y : {&u.a, &u.b, &u.c})
      if (*y == i) *y = x;
  for (int& id : p.observed)
    if (id == i) id = x;
  std::sort(p.observed.begin(), p.observed.end());
  p.observed.erase(std::unique(p.observed.begin(), p.observed.end()), p.observed.end());
  return true;
}

}  // namespace

std::string shrink_and_reproduce(Program p, Instance in, const CheckOptions& opts, const std::string& failure) {
  const std::string cls = failure_class(failure);
  std::string last = failure;
  int budget = 400;
  auto fails = [&](const Program& q, const Instance& qi) {
    if (budget-- <= 0) return false;
    Outcome o = check(q, qi, opts);
    if (!o.failure.empty() && failure_class(o.failure) == cls) {
      last = o.failure;
      return true;
    }
    return false;
  };
  bool progress = true;
  while (progress && budget > 0) {
    progress = false;
    for (size_t k = 0; p.observed.size() > 1 && k < p.observed.size(); ++k) {
      Program q = p;
      q.observed.erase(q.observed.begin() + static_cast<long>(k));
      q = dce(q);
      if (fails(q, in)) p = q, progress = true, --k;
    }
    {
      Program q = dce(p);
      if (q.ops.size() < p.ops.size() && fails(q, in)) p = q, progress = true;
    }
    for (int i = static_cast<int>(p.ops.size()) - 1; i >= 0; --i) {
      if (i >= static_cast<int>(p.ops.size())) continue;
      const Op o = p.ops[static_cast<size_t>(i)];
      for (int x : {o.a, o.b, o.c}) {
        if (x < 0) continue;
        Program q = p;
        if (!bypass(q, i, x)) continue;
        q = dce(q);
        if (fails(q, in)) {
          p = q, progress = true;
          break;
        }
      }
    }
    // Products: linear without its bias, addmm with beta and alpha 1.
    for (size_t i = 0; i < p.ops.size(); ++i) {
      const Op& o = p.ops[i];
      if (o.kind != OpK::MatMul || (o.form == 2 && o.c < 0) || o.form < 2 || (o.form == 3 && o.s == 1 && o.s2 == 1))
        continue;
      Program q = p;
      Op& u = q.ops[i];
      if (u.form == 2) u.c = -1;
      else u.s = u.s2 = 1;
      q = dce(q);
      if (fails(q, in)) p = q, progress = true;
    }
    for (size_t v = 0; v < in.sizes.size(); ++v)
      for (int64_t s : {int64_t{2}, int64_t{3}, in.sizes[v] / 2}) {
        if (s < 2 || s >= in.sizes[v]) continue;
        Instance qi = in;
        qi.sizes[v] = s;
        if (fails(p, qi)) {
          in = qi, progress = true;
          break;
        }
      }
  }
  // The settings the failure needs, from its message ("<tier> on <isa>:" or "on <isa>:").
  std::string settings;
  for (const std::string& isa : opts.isas)
    if (last.find("on " + isa + ":") != std::string::npos) settings = "dvm::set_isa(\"" + isa + "\");\n";
  if (last.find(" interpreter on ") != std::string::npos) settings += "dvm::set_tier_mode(dvm::TierMode::Off);\n";
  else if (last.find(" jit on ") != std::string::npos) settings += "dvm::set_tier_mode(dvm::TierMode::Eager);\n";
  else settings += "// run once with dvm::TierMode::Off and once with dvm::TierMode::Eager\n";
  return "failure: " + last + "\nseed " + std::to_string(p.seed) + "; minimal reproducer:\n" + settings + to_cpp(p, in);
}

namespace {

std::string flit(float f) {
  if (std::isnan(f)) return "NAN";
  if (std::isinf(f)) return f > 0 ? "INFINITY" : "-INFINITY";
  char b[64];
  std::snprintf(b, sizeof b, "%af", static_cast<double>(f));
  return b;
}

const char* kUnaryCall[] = {"dvm::neg(",     "dvm::abs(",  "dvm::exp(",  "dvm::log(",   "dvm::sqrt(", "dvm::rsqrt(",
                            "dvm::reciprocal(", "dvm::tanh(", "dvm::sigmoid(", "dvm::relu(", "dvm::gelu(",
                            "dvm::gelu(",    "dvm::erf(",  "dvm::sin(",  "dvm::cos(",   "dvm::floor(", "dvm::ceil(",
                            "dvm::round("};
const char* kBinaryCall[] = {"dvm::add",     "dvm::sub", "dvm::mul",         "dvm::div",
                             "dvm::maximum", "dvm::minimum", "dvm::pow", "dvm::floor_divide", "dvm::remainder"};
const char* kLogicCall[] = {"dvm::bitwise_and", "dvm::bitwise_or",  "dvm::bitwise_xor", "dvm::bitwise_not",
                            "dvm::logical_and", "dvm::logical_or",  "dvm::logical_xor", "dvm::logical_not",
                            "dvm::add",         "dvm::mul"};
const char* kLogicOper[] = {" & ", " | ", " ^ ", "~", "", "", "", "", " + ", " * "};
const char* kBinaryOper[] = {" + ", " - ", " * ", " / "};
const char* kCmpCall[] = {"dvm::eq", "dvm::ne", "dvm::lt", "dvm::le", "dvm::gt", "dvm::ge"};
const char* kRedCall[] = {"sum", "max", "min", "mean"};

}  // namespace

std::string to_cpp(const Program& p, const Instance& in) {
  std::ostringstream s;
  const std::vector<std::vector<float>> data = make_data(p, in);
  s << "// seed " << p.seed << ", sizes";
  for (int64_t v : in.sizes) s << " " << v;
  s << "\n";
  auto v = [](int id) {
    std::string s = "v";
    s += std::to_string(id);
    return s;
  };
  for (size_t i = 0; i < p.ops.size(); ++i) {
    const Op& o = p.ops[i];
    const std::vector<int64_t> shape = eval_shape(p, o.shape, in.sizes);
    const std::string sh = shape_text(shape);
    s << "dvm::Tensor " << v(static_cast<int>(i)) << " = ";
    switch (o.kind) {
      case OpK::Leaf: {
        const std::vector<float>& d = data[i];
        bool same = !d.empty();
        for (float f : d) same = same && same_bits(f, d[0]);
        std::string vals;
        if (same && d.size() > 1) {
          vals = "std::vector<float>(" + std::to_string(d.size()) + ", " + flit(d[0]) + ")";
        } else {
          vals = "std::vector<float>{";
          for (size_t k = 0; k < d.size(); ++k) vals += (k ? ", " : "") + flit(d[k]);
          vals += "}";
        }
        if (o.form == 2)
          s << "dvm::Tensor::arange(-3.0f, " << flit(-3.0f + 0.5f * static_cast<float>(shape[0])) << ", 0.5f);";
        else if (o.form >= 3)
          s << "dvm::Tensor::" << (o.form == 3 ? "uniform(" : "normal(") << sh << ", " << in.data_seed + i
            << (o.form == 3 ? "u, -3.0f, 3.0f);" : "u, 0.5f, 2.0f);");
        else if (o.form == 1)  // the runner's blob: its data outlives the program
          s << "dvm::Tensor::from_blob([] { static const std::vector<float> d" << vals.substr(vals.find_first_of("({"))
            << "; return d.data(); }(), " << sh << ");";
        else
          s << "dvm::Tensor::from_vector(" << vals << ", " << sh << ");";
        break;
      }
      case OpK::Full: s << "dvm::Tensor::full(" << sh << ", " << flit(o.s) << ");"; break;
      case OpK::Unary:
        s << kUnaryCall[o.sub] << v(o.a) << (o.sub == kGeluTanh ? ", dvm::GeluApprox::Tanh" : "") << ");";
        break;
      case OpK::Binary:
        if (o.form == 0 && o.sub <= kDiv) s << v(o.a) << kBinaryOper[o.sub] << v(o.b) << ";";
        else s << kBinaryCall[o.sub] << "(" << v(o.a) << ", " << v(o.b) << ");";
        break;
      case OpK::Scalar: {
        const std::string sc = o.form == 0 ? flit(o.s) : "dvm::Tensor::scalar(" + flit(o.s) + ")";
        if (o.form == 0 && o.sub <= kDiv)
          s << (o.pos ? v(o.a) + kBinaryOper[o.sub] + sc : sc + kBinaryOper[o.sub] + v(o.a)) << ";";
        else if (o.form == 0 && o.sub == kPow)
          s << "dvm::pow(" << v(o.a) << ", " << sc << ");";
        else
          s << kBinaryCall[o.sub] << "(" << (o.pos ? v(o.a) + ", dvm::Tensor(" + sc + ")" : "dvm::Tensor(" + sc + "), " + v(o.a))
            << ");";
        break;
      }
      case OpK::Compare:
        s << kCmpCall[o.sub] << "(" << v(o.a) << ", " << (o.b >= 0 ? v(o.b) : "dvm::Tensor(" + flit(o.s) + ")") << ");";
        break;
      case OpK::Logic: {
        const bool unary = o.b < 0;
        if (o.form == 1 && *kLogicOper[o.sub]) s << (unary ? kLogicOper[o.sub] + v(o.a) : v(o.a) + kLogicOper[o.sub] + v(o.b)) << ";";
        else s << kLogicCall[o.sub] << "(" << v(o.a) << (unary ? "" : ", " + v(o.b)) << ");";
        break;
      }
      case OpK::Where: {
        const std::string c = o.c >= 0 ? v(o.c) : "dvm::Tensor(" + flit(o.s) + ")";
        s << "dvm::where(" << v(o.a) << ", " << (o.form == 1 ? c + ", " + v(o.b) : v(o.b) + ", " + c) << ");";
        break;
      }
      case OpK::Reduce: {
        const size_t rank = std::max<size_t>(p.ops[static_cast<size_t>(o.a)].shape.size(), 1);
        s << v(o.a) << "." << kRedCall[o.sub] << "(";
        if (!o.axes.empty()) {
          s << "{";
          for (size_t k = 0; k < o.axes.size(); ++k) s << (k ? ", " : "") << signed_axis(o.axes[k], rank, o.form == 1);
          s << "}, " << (o.keepdim ? "true" : "false");
        }
        s << ");";
        break;
      }
      case OpK::Softmax:
        s << (o.sub == 0 ? "dvm::softmax(" : "dvm::log_softmax(") << v(o.a) << ", "
          << signed_axis(o.axis, std::max<size_t>(o.shape.size(), 1), o.form == 1) << ");";
        break;
      case OpK::LayerNorm: {
        std::vector<int64_t> ns(shape.end() - o.axis, shape.end());
        s << "dvm::layer_norm(" << v(o.a) << ", " << shape_text(ns) << ", " << (o.b >= 0 ? v(o.b) : "dvm::Tensor()")
          << ", " << (o.c >= 0 ? v(o.c) : "dvm::Tensor()") << ", " << flit(o.s) << ");";
        break;
      }
      case OpK::Reshape: s << v(o.a) << ".reshape(" << sh << ");"; break;
      case OpK::Permute: {
        if (o.form == 1) {  // as run_dvm spells it
          const auto [x, y] = transposed_pair(o.axes);
          s << v(o.a) << ".transpose(" << x << ", " << y << ");";
          break;
        }
        s << v(o.a) << ".permute({";
        for (size_t k = 0; k < o.axes.size(); ++k) s << (k ? ", " : "") << o.axes[k];
        s << "});";
        break;
      }
      case OpK::Slice:
        s << v(o.a) << ".slice(" << o.axis << ", " << o.start << ", "
          << (o.end == kBig ? std::string("INT64_MAX") : std::to_string(o.end)) << ", " << o.step << ");";
        break;
      case OpK::Expand: s << v(o.a) << (o.form == 0 ? ".expand(" : ".broadcast_to(") << sh << ");"; break;
      case OpK::Contiguous: s << v(o.a) << ".contiguous();"; break;
      case OpK::Sync: s << v(o.a) << ";\n" << v(static_cast<int>(i)) << ".sync();"; break;
      case OpK::MatMul:
        if (o.form == 3)
          s << "dvm::addmm(" << v(o.c) << ", " << v(o.a) << ", " << v(o.b) << ", " << flit(o.s) << ", " << flit(o.s2)
            << ");";
        else
          s << (o.form == 0 ? "dvm::matmul(" : o.form == 1 ? "dvm::bmm(" : "dvm::linear(") << v(o.a) << ", " << v(o.b)
            << (o.form == 2 && o.c >= 0 ? ", " + v(o.c) : "") << ");";
        break;
    }
    s << "  // " << sh << (o.is_bool ? " bool" : "") << "\n";
  }
  for (int id : p.observed) s << "std::vector<float> out" << id << " = " << v(id) << ".to_vector();\n";
  return s.str();
}

}  // namespace dvm::random_programs
